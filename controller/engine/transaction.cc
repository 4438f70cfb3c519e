#include "controller/engine/transaction.h"

#include <set>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/proto_time.h"
#include "common/wording.h"
#include "controller/engine/circuits.h"
#include "controller/engine/failure_policy.h"
#include "controller/engine/stage_timing.h"

namespace fleet::engine {

Transaction::Transaction(const TransactionParts& parts, std::string id,
                         std::vector<v1::StageTiming> admitted, PhaseSwitch phase_switch)
    : p_(parts),
      id_(std::move(id)),
      phase_switch_(std::move(phase_switch)),
      resumed_(admitted.empty()),
      timings_(std::move(admitted)) {}

void Transaction::Run(const v1::Allocation* stored) {
  if (!Load(stored) || !Quiesce()) return;
  p_.ctx.Fault("quiesced");
  if (!Programmed(Program())) return;
  p_.ctx.Fault("programmed");
  if (!Train()) return;
  p_.ctx.Fault("trained");
  Finish();
}

bool Transaction::Load(const v1::Allocation* stored) {
  absl::StatusOr<v1::Allocation> loaded = stored != nullptr
                                              ? absl::StatusOr<v1::Allocation>(*stored)
                                              : p_.ctx.store->GetAllocation(id_);
  if (!loaded.ok()) {
    FLEET_LOG(ERROR) << "allocation " << id_ << " vanished: " << loaded.status();
    return false;
  }
  loaded_ = std::move(*loaded);
  // ACTIVE desired circuits are on the switch with trained links (kept across a phase
  // switch): they are not touched. The rest are made and retrained.
  for (v1::Circuit& c : LiveCircuits(loaded_)) {
    if (c.state() != v1::CIRCUIT_STATE_ACTIVE) circuits_.push_back(std::move(c));
  }
  if (resumed_) {
    for (const v1::StageTiming& t : loaded_.stage_timings()) {
      if (t.stage() == "plan" || t.stage() == "persist") timings_.push_back(t);
    }
  }
  // A resumed run's plan was counted by the run that made it.
  first_timed_here_ = resumed_ ? timings_.size() : 0;
  std::set<std::string> switch_ids;
  for (const v1::Circuit& c : circuits_) {
    for (const v1::CrossConnect& x : c.cross_connects()) switch_ids.insert(x.switch_id());
  }
  programming_.id = id_;
  programming_.state = v1::ALLOCATION_STATE_PROGRAMMING;
  programming_.reason = "";
  programming_.event_message = absl::StrCat(
      "allocation ", id_, " PROGRAMMING: quiescing ports and programming ",
      Counted(circuits_.size(), "circuit"), " on ",
      switch_ids.size() == 1 ? "switch " : "switches ", absl::StrJoin(switch_ids, ", "));
  return true;
}

// PROGRAMMING is committed on another worker while the agents quiesce (if any port must be)
// or the switch moves: a restart resumes PENDING and PROGRAMMING alike, and quiescing or
// programming again is harmless, so a crash before it lands loses nothing. Every later state
// waits for it, so states are never stored out of order.
void Transaction::CommitProgramming() {
  recorded_ = p_.ctx.Update(programming_, "fleetd").ok();
  programming_done_.Notify();
}

void Transaction::StartProgramming() {
  absl::call_once(programming_started_, [this] {
    if (!p_.pool.SpawnAwaited([this] { CommitProgramming(); })) CommitProgramming();
  });
}

bool Transaction::ProgrammingRecorded() {
  StartProgramming();
  programming_done_.WaitForNotification();
  return recorded_;
}

bool Transaction::Quiesce() {
  // The intent must outlive a power loss of the host before any device acts on it, as it
  // outlives a crash of fleetd: a switch holding cross-connects of an intent the database
  // lost would hold ports that planning believes free.
  if (absl::Status synced = p_.ctx.store->Sync(); !synced.ok()) {
    // Nothing was touched, and the stored state is left as it is: the disk refused the sync,
    // which does not fix itself (Store::Sync), so the next start resumes the transaction.
    p_.ctx.Record("allocation.sync_failed", "allocation", id_, v1::EVENT_SEVERITY_ALARM, "fleetd",
                  absl::StrCat("allocation ", id_,
                               ": not programmed, its intent is not durable: ", synced.message()));
    return false;
  }
  const absl::Time start = p_.ctx.clock->Now();
  std::vector<v1::Circuit> touched = phase_switch_.removes;
  touched.insert(touched.end(), circuits_.begin(), circuits_.end());
  const absl::Status quiesced = p_.trainer.Quiesce(touched, id_, [this] { StartProgramming(); });
  timings_.push_back(StageTiming("quiesce", start, p_.ctx.clock->Now() - start));
  if (!quiesced.ok()) {
    if (ProgrammingRecorded()) Fail(quiesced, "quiesce");
    return false;
  }
  return true;
}

// Armed, and then PROGRAMMING committed (unless a quiesce started that already), on one
// other worker as the batch goes to the switch: the work it wakes for does not hold up the
// batch (on a busy host a woken thread takes the core from the one sending), and a batch
// queued behind another is not armed 25 ms early. A retrain that arrives after its light
// (a fast switch) trains at once.
void Transaction::Arm() {
  absl::call_once(arming_started_, [this] {
    // Notifies last: once it has, this transaction may end, and the object with it.
    auto arm = [this] {
      armed_ = p_.trainer.StartRetrain(armable_, /*armed=*/true, &unarmed_);
      absl::call_once(programming_started_, [this] { CommitProgramming(); });
      arming_done_.Notify();
    };
    if (!p_.pool.SpawnAwaited(arm)) arm();
  });
}

absl::Status Transaction::Program() {
  // Agents that can see light arrive get their retrains now, as the switch moves: each
  // link starts training as its beam settles, while fleetd still hears from the switch and
  // reads it back. The others retrain once the switch is verified. READY needs both.
  // Not armed: a link whose peer reaches it now over a path this batch takes away (a phase
  // switch between two paths of one pair), as the wait could not tell the old light from
  // the new.
  for (const v1::Circuit& c : circuits_) {
    const bool moves = absl::c_any_of(phase_switch_.removes, [&](const v1::Circuit& r) {
      return SameEnd(r.source(), c.source()) && SameEnd(r.destination(), c.destination());
    });
    (moves ? unarmed_ : armable_).push_back(&c);
  }
  const absl::Time start = p_.ctx.clock->Now();
  absl::Duration program_time, verify_time;
  absl::Status programmed = p_.programmers.Program(phase_switch_.removes, circuits_, &program_time,
                                                   &verify_time, &retried_, [this] { Arm(); });
  // Never sent (no switch to send to): nothing was armed; the links retrain once the switch
  // is verified, as unarmed ones do.
  absl::call_once(arming_started_, [this] {
    for (const v1::Circuit* c : armable_) unarmed_.push_back(c);
    arming_done_.Notify();
  });
  arming_done_.WaitForNotification();
  timings_.push_back(StageTiming("program", start, program_time));
  timings_.push_back(StageTiming("verify", start + program_time, verify_time));
  return programmed;
}

// After the batch: false if the transaction ends here (failed, or PROGRAMMING not stored).
bool Transaction::Programmed(const absl::Status& programmed) {
  if (!programmed.ok() || !ProgrammingRecorded()) p_.trainer.Disarm(std::move(armed_));
  if (!ProgrammingRecorded()) return false;
  if (programmed.ok() && (!phase_switch_.removes.empty() || resumed_)) {
    // A member change's removals are off the switch (or were before a crash let a resumed
    // run find none): nothing is left for a restart to undo.
    if (absl::Status cleared = p_.ctx.store->ClearPendingRemovals(id_); !cleared.ok()) {
      FLEET_LOG(WARNING) << "allocation " << id_ << ": " << cleared;
    }
  }
  if (!programmed.ok()) {
    Fail(programmed, "program");
    return false;
  }
  return true;
}

bool Transaction::Train() {
  store::AllocationUpdate training;
  training.id = id_;
  training.state = v1::ALLOCATION_STATE_TRAINING;
  training.stage_timings = timings_;
  for (const v1::Circuit& c : circuits_) {
    training.circuits[c.id()] = {v1::CIRCUIT_STATE_PROGRAMMED, ""};
  }
  training.event_message =
      absl::StrCat("allocation ", id_, " TRAINING: switch programmed and verified");
  // TRAINING is committed while the agents retrain (the commands go first, so the links start
  // training at once): a restart finds the switch programmed either way and retrains what is
  // not up.
  const absl::Time start = p_.ctx.clock->Now();
  LinkTrainer::Training rest = p_.trainer.StartRetrain(unarmed_, /*armed=*/false);
  p_.trainer.AwaitWritten(rest, kLetCommandsLeave);
  const bool trained = p_.ctx.Update(training, "fleetd").ok();
  if (trained) p_.ctx.Fault("training");
  // An armed link whose wait may have judged light the switch then changed is retrained
  // again, now that the switch is verified: its answer failed (its wait ran out before the
  // beam settled, say), or the batch went out twice (undone after another request's part
  // failed, so its light came and went). Its first answer is not counted then.
  LinkTrainer::Failures armed_failed;
  const std::vector<const v1::Circuit*> armed_circuits = armed_.circuits;
  using Counted = LinkTrainer::Counted;
  p_.trainer.FinishRetrain(std::move(armed_), armed_failed,
                           !trained   ? Counted::kEvery
                           : retried_ ? Counted::kNone
                                      : Counted::kTrainedOnly);
  std::vector<const v1::Circuit*> again;
  for (const v1::Circuit* c : armed_circuits) {
    if (trained && (retried_ || armed_failed.why.contains(c->id()))) again.push_back(c);
  }
  LinkTrainer::Training redo = p_.trainer.StartRetrain(again, /*armed=*/false);
  p_.trainer.FinishRetrain(std::move(rest), failed_);
  p_.trainer.FinishRetrain(std::move(redo), failed_);
  if (!trained) return false;
  // From the switch's answer: an armed link may have finished training before it.
  timings_.push_back(StageTiming("retrain", start, p_.ctx.clock->Now() - start));
  return true;
}

void Transaction::Finish() {
  store::AllocationUpdate done;
  done.id = id_;
  done.stage_timings = timings_;
  std::vector<std::string> reasons = RecordRetrain(circuits_, failed_.why, done);
  // A member whose device or own switch port has failed keeps it DEGRADED (failure_policy.h).
  if (absl::StatusOr<std::shared_ptr<const CachedInventory>> inventory = p_.inventory.Current();
      inventory.ok()) {
    for (FailedPart& part : FailedParts(loaded_, **inventory)) {
      reasons.push_back(std::move(part.reason));
    }
  }
  absl::Duration total;
  for (const v1::StageTiming& t : timings_) {
    total += FromProtoDuration(t.duration());
  }
  if (reasons.empty()) {
    done.state = v1::ALLOCATION_STATE_READY;
    done.reason = "";
    done.event_message =
        absl::StrCat("allocation ", id_, " READY: ", circuits_.size(),
                     " circuits active (stages took ", absl::FormatDuration(total), ")");
  } else {
    done.state = v1::ALLOCATION_STATE_DEGRADED;
    done.reason = absl::StrJoin(reasons, "; ");
    done.severity = v1::EVENT_SEVERITY_WARNING;
    done.event_message = absl::StrCat("allocation ", id_, " DEGRADED: ", *done.reason);
  }
  if (!p_.ctx.Update(done, "fleetd").ok()) return;
  Count(reasons.empty() ? "ready" : "degraded");
  // READY: no retry is left over from before (the one that started a heal, say).
  if (reasons.empty()) p_.syncs.Forget(id_);
  if (!reasons.empty()) {
    p_.syncs.RetryLater(id_);
    // A failure policy's `within` counts from now, the allocation's turn to DEGRADED.
    p_.syncs.DueBy(id_, HealDue(loaded_, p_.ctx.clock->Now()));
  }
  p_.ctx.Fault("ready");
}

void Transaction::Fail(const absl::Status& why, const std::string& stage) {
  store::AllocationUpdate u;
  u.id = id_;
  u.state = v1::ALLOCATION_STATE_FAILED;
  u.reason = absl::StrCat(stage, " failed: ", why.message());
  u.stage_timings = timings_;
  u.remove_circuits = true;
  u.severity = v1::EVENT_SEVERITY_WARNING;
  u.event_message = absl::StrCat("allocation ", id_, " FAILED: ", *u.reason);
  const std::string& from = phase_switch_.from;
  if (from.empty()) {
    if (p_.ctx.Update(u, "fleetd").ok()) Count("failed");
    return;
  }
  // The switch was rolled back: the old phase's circuits are there, quiesced. Go back to
  // that phase, DEGRADED, and let the retry retrain its links.
  u.state = v1::ALLOCATION_STATE_DEGRADED;
  u.reason =
      absl::StrCat("phase ", loaded_.active_phase(), ": ", *u.reason, "; back on phase ", from);
  u.remove_circuits = false;
  u.active_phase = from;
  for (const v1::Circuit& c : loaded_.circuits()) {
    u.circuits[c.id()] =
        c.phase() == from ? store::AllocationUpdate::CircuitChange{v1::CIRCUIT_STATE_DEGRADED,
                                                                   "phase switch failed"}
                          : store::AllocationUpdate::CircuitChange{v1::CIRCUIT_STATE_INACTIVE, ""};
  }
  u.event_message = absl::StrCat("allocation ", id_, " DEGRADED: ", *u.reason);
  if (p_.ctx.Update(u, "fleetd").ok()) {
    Count("failed");
    p_.syncs.RetryLater(id_);
  }
}

void Transaction::Count(const std::string& outcome) {
  // The duration runs from the plan's start, the request's acceptance.
  for (size_t i = first_timed_here_; i < timings_.size(); ++i) {
    const absl::Duration took = FromProtoDuration(timings_[i].duration());
    p_.ctx.metrics.StageTook(timings_[i].stage(), took);
    // What a change costs when it works: a failed one's stage may be a timeout, and so may a
    // degraded one's retrain.
    if (outcome == "ready" || (outcome == "degraded" && timings_[i].stage() != "retrain")) {
      p_.costs.Record(timings_[i].stage(), took);
    }
  }
  const absl::Time accepted =
      timings_.empty() ? p_.ctx.clock->Now() : FromProtoTime(timings_[0].started());
  p_.ctx.metrics.ReconfigurationFinished(outcome, p_.ctx.clock->Now() - accepted);
}

}  // namespace fleet::engine
