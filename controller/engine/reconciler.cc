// Reconciliation: the switches compared with the desired circuits (docs/engine.md).
//
// Each switch is read with the switch to itself (no batch in flight), and compared with the
// desired cross-connects of circuits whose allocation is not in a transaction now:
//   MISSING  desired, absent             → made again (repaired)
//   WRONG    the ingress goes elsewhere  → the wrong one removed, the desired one made
//   UNKNOWN  on the switch, desired by nobody → the policy: report (alarm, left alone),
//            adopt (recorded as an operator's manual circuit) or remove
// An unknown cross-connect holding the egress a desired one needs is removed whatever the
// policy, since the desired circuit wins. Cross-connects touching the ports of an allocation
// in a transaction are left to that transaction. A switch that agrees gets no command that
// changes anything: only the read.
#include <google/protobuf/util/time_util.h>

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "controller/engine/engine.h"
#include "fleet/v1/names.h"

namespace fleet::engine {
namespace {

v1::Drift MakeDrift(v1::Drift::Kind kind, const std::string& switch_id, uint32_t ingress,
                    uint32_t egress, const std::string& circuit, const std::string& action) {
  v1::Drift d;
  d.set_kind(kind);
  d.mutable_cross_connect()->set_switch_id(switch_id);
  d.mutable_cross_connect()->set_ingress(ingress);
  d.mutable_cross_connect()->set_egress(egress);
  d.set_circuit_id(circuit);
  d.set_action(action);
  return d;
}

const char* KindWord(v1::Drift::Kind kind) {
  switch (kind) {
    case v1::Drift::KIND_MISSING:
      return "missing";
    case v1::Drift::KIND_WRONG:
      return "wrong";
    case v1::Drift::KIND_UNKNOWN:
      return "unknown";
    default:
      return "drift";
  }
}

}  // namespace

std::vector<std::string> Engine::ClaimInterrupted() {
  std::vector<std::string> ids;
  absl::StatusOr<std::vector<v1::Allocation>> live = store_->ListAllocations({});
  if (!live.ok()) return ids;
  for (const v1::Allocation& a : *live) {
    const v1::AllocationState s = a.state();
    if (s != v1::ALLOCATION_STATE_PENDING && s != v1::ALLOCATION_STATE_PROGRAMMING &&
        s != v1::ALLOCATION_STATE_TRAINING && s != v1::ALLOCATION_STATE_RELEASING) {
      continue;
    }
    if (Claim(a.id())) ids.push_back(a.id());
  }
  return ids;
}

void Engine::Resume(const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    Spawn(id, [this, id] {
      absl::StatusOr<v1::Allocation> a = store_->GetAllocation(id);
      if (!a.ok()) return;
      Record("allocation.resumed", "allocation", id, v1::EVENT_SEVERITY_INFO, "fleetd",
             absl::StrCat("allocation ", id, " was interrupted in ", v1::Name(a->state()),
                          "; resuming"));
      if (a->state() == v1::ALLOCATION_STATE_RELEASING) {
        // Ends as the intent stored when it started says (Release reads it); an allocation
        // from before intents were stored ends RELEASED with its reason.
        Release(id, "fleetd", v1::ALLOCATION_STATE_RELEASED, a->reason());
      } else {
        // A phase switch a crash interrupted may have left the old phase's cross-connects.
        std::vector<v1::Circuit> left = LeftBehind(*a);
        std::string from = InterruptedSwitchFrom(*a, left);
        Reconfigure(id, {}, {std::move(from), std::move(left)});
      }
    });
  }
}

std::string Engine::InterruptedSwitchFrom(const v1::Allocation& a,
                                          const std::vector<v1::Circuit>& left) {
  std::set<std::string> phases, left_ids;
  for (const v1::Circuit& c : left) {
    left_ids.insert(c.id());
    if (!c.phase().empty() && c.phase() != a.active_phase()) phases.insert(c.phase());
  }
  if (phases.size() != 1) return "";
  const std::string& from = *phases.begin();
  using Key = std::tuple<std::string, uint32_t, uint32_t>;
  std::set<Key> desired, old;
  std::set<std::string> switch_ids;
  for (const v1::Circuit& c : a.circuits()) {
    for (const v1::CrossConnect& x : c.cross_connects()) {
      switch_ids.insert(x.switch_id());
      if (c.state() != v1::CIRCUIT_STATE_INACTIVE)
        desired.insert({x.switch_id(), x.ingress(), x.egress()});
      if (c.phase() == from) old.insert({x.switch_id(), x.ingress(), x.egress()});
    }
  }
  // Going back is sound only if the switch is as the handover found it: every circuit of the
  // old phase is there (those the new phase shares count as there: LeftBehind leaves them
  // out), and nothing the new phase adds has been made.
  for (const v1::Circuit& c : a.circuits()) {
    if (c.phase() != from || left_ids.contains(c.id())) continue;
    for (const v1::CrossConnect& x : c.cross_connects()) {
      if (!desired.contains({x.switch_id(), x.ingress(), x.egress()})) return "";
    }
  }
  for (const std::string& sw : switch_ids) {
    absl::StatusOr<std::vector<v1::CrossConnect>> seen = store_->ListObservedCrossConnects(sw);
    if (!seen.ok()) return "";
    for (const v1::CrossConnect& x : *seen) {
      const Key key{sw, x.ingress(), x.egress()};
      if (desired.contains(key) && !old.contains(key)) return "";
    }
  }
  return from;
}

absl::StatusOr<v1::ReconcileResponse> Engine::Reconcile(const v1::ReconcileRequest& request,
                                                        const Caller& caller) {
  if (!caller.operator_role()) {
    return absl::PermissionDeniedError("reconcile is for operators, not jobs");
  }
  v1::UnknownCrossConnectPolicy policy = request.unknown();
  if (policy == v1::UNKNOWN_CROSS_CONNECT_POLICY_UNSPECIFIED) policy = options_.unknown_policy;
  return ReconcileSwitches(request.switch_id(), policy, request.dry_run(), caller.principal,
                           "operator", /*wait_for_resumed=*/true);
}

absl::StatusOr<v1::ReconcileResponse> Engine::ReconcileSwitches(
    const std::string& switch_id, v1::UnknownCrossConnectPolicy unknown, bool dry_run,
    const std::string& principal, const std::string& trigger, bool wait_for_resumed) {
  std::vector<v1::Switch> targets;
  if (switch_id.empty()) {
    ASSIGN_OR_RETURN(targets, store_->ListSwitches());
  } else {
    ASSIGN_OR_RETURN(v1::Switch sw, store_->GetSwitch(switch_id));
    targets.push_back(std::move(sw));
  }
  // Interrupted transactions are claimed first, so the comparison leaves their ports alone;
  // they are resumed after it, through the same idempotent steps as a fresh request.
  std::vector<std::string> interrupted;
  if (!dry_run) interrupted = ClaimInterrupted();

  v1::ReconcileResponse response;
  std::set<std::string> affected;  // Allocations whose cross-connects were repaired.
  std::vector<std::string> errors;
  for (const v1::Switch& sw : targets) {
    absl::StatusOr<SwitchProgrammer*> programmer = Programmer(sw.id());
    absl::Status status = programmer.status();
    if (programmer.ok()) {
      (*programmer)->Exclusive([&](switches::OpticalSwitch& driver) {
        status = ReconcileOne(sw, driver, unknown, dry_run, principal, response, affected);
      });
    }
    if (!status.ok()) {
      errors.push_back(absl::StrCat("switch ", sw.id(), ": ", status.message()));
      Record("reconcile.failed", "switch", sw.id(), v1::EVENT_SEVERITY_ALARM, principal,
             absl::StrCat("cannot reconcile switch ", sw.id(), ": ", status.message()));
    }
  }
  if (!dry_run) {
    // A dry run asks what would happen; only passes that act count as having seen the drift.
    metrics_.ReconcileRun(trigger);
    std::map<std::string, std::pair<int, int>> drift;  // Kind → found, repaired.
    for (const v1::Drift& d : response.drift()) {
      auto& [found, repaired] = drift[KindWord(d.kind())];
      ++found;
      repaired += d.action() == "repaired" || d.action() == "removed" || d.action() == "adopted";
    }
    for (const auto& [kind, counts] : drift) metrics_.Drift(kind, counts.first, counts.second);
  }
  // A repaired cross-connect carried no light for a while: its links are retrained.
  for (const std::string& id : affected) {
    absl::StatusOr<v1::Allocation> a = store_->GetAllocation(id);
    if (!a.ok() ||
        (a->state() != v1::ALLOCATION_STATE_READY && a->state() != v1::ALLOCATION_STATE_DEGRADED)) {
      continue;
    }
    store::AllocationUpdate u;
    u.id = id;
    u.state = v1::ALLOCATION_STATE_DEGRADED;
    u.reason = "a cross-connect was missing on the switch and was repaired; retraining";
    u.severity = v1::EVENT_SEVERITY_WARNING;
    for (const v1::Circuit& c : a->circuits()) {
      if (c.state() == v1::CIRCUIT_STATE_ACTIVE) {
        u.circuits[c.id()] = {v1::CIRCUIT_STATE_DEGRADED, *u.reason};
      }
    }
    u.event_message = absl::StrCat("allocation ", id, " DEGRADED: ", *u.reason);
    if (!Update(u, principal).ok()) continue;
    absl::MutexLock lock(&mu_);
    retries_[id] = Retry{.due = clock_->Now(), .backoff = options_.retry_initial};
  }
  response.set_resumed_transactions(static_cast<uint32_t>(interrupted.size()));
  Resume(interrupted);
  if (wait_for_resumed && !interrupted.empty()) {
    // An operator's reconcile reports how the resumed transactions ended: each finishes, or
    // is rolled back (FAILED), within its own timeouts.
    {
      absl::MutexLock lock(&mu_);
      const absl::Time give_up = absl::Now() + absl::Seconds(60);
      auto busy = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        for (const std::string& id : interrupted) {
          if (claimed_.contains(id)) return true;
        }
        return false;
      };
      while (busy() && !stopping_ && absl::Now() < give_up) {
        changed_.WaitWithDeadline(&mu_, give_up);
      }
    }
    uint32_t rolled_back = 0;
    for (const std::string& id : interrupted) {
      absl::StatusOr<v1::Allocation> a = store_->GetAllocation(id);
      rolled_back += a.ok() && a->state() == v1::ALLOCATION_STATE_FAILED;
    }
    response.set_rolled_back_transactions(rolled_back);
  }
  if (!errors.empty()) return absl::UnavailableError(absl::StrJoin(errors, "; "));
  return response;
}

absl::Status Engine::ReconcileOne(const v1::Switch& sw, switches::OpticalSwitch& driver,
                                  v1::UnknownCrossConnectPolicy unknown, bool dry_run,
                                  const std::string& principal, v1::ReconcileResponse& response,
                                  std::set<std::string>& affected) {
  ASSIGN_OR_RETURN(std::vector<switches::CrossConnect> actual, driver.ReadCrossConnects());
  // What the previous pass saw: an unknown cross-connect already reported is not alarmed again.
  std::set<std::pair<uint32_t, uint32_t>> seen_before;
  ASSIGN_OR_RETURN(std::vector<v1::CrossConnect> previous,
                   store_->ListObservedCrossConnects(sw.id()));
  for (const v1::CrossConnect& x : previous) seen_before.insert({x.ingress(), x.egress()});
  std::vector<v1::CrossConnect> observed;
  for (const switches::CrossConnect& x : actual) {
    v1::CrossConnect& o = observed.emplace_back();
    o.set_switch_id(sw.id());
    o.set_ingress(x.ingress);
    o.set_egress(x.egress);
  }
  RETURN_IF_ERROR(store_->RecordObservedCrossConnects(sw.id(), observed));
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, store_->ListCircuits({sw.id(), ""}));
  std::set<std::string> claimed;
  {
    absl::MutexLock lock(&mu_);
    claimed = claimed_;
  }

  struct Want {
    uint32_t egress;
    std::string circuit;
    std::string allocation;
  };
  std::map<uint32_t, Want> desired;                // By ingress.
  std::map<uint32_t, uint32_t> desired_by_egress;  // Egress → ingress.
  std::set<uint32_t> in_transaction;               // Ports of claimed allocations' circuits.
  for (const v1::Circuit& c : circuits) {
    for (const v1::CrossConnect& x : c.cross_connects()) {
      if (x.switch_id() != sw.id()) continue;
      if (!c.allocation_id().empty() && claimed.contains(c.allocation_id())) {
        in_transaction.insert(x.ingress());
        in_transaction.insert(x.egress());
        continue;
      }
      if (c.state() == v1::CIRCUIT_STATE_INACTIVE) continue;
      desired[x.ingress()] = {x.egress(), c.id(), c.allocation_id()};
      desired_by_egress[x.egress()] = x.ingress();
    }
  }
  // What a claimed member change took out of its allocation is its transaction's to remove
  // (Engine::LeftBehind): not drift to report or adopt.
  for (const std::string& id : claimed) {
    absl::StatusOr<std::vector<v1::CrossConnect>> pending = store_->PendingRemovals(id);
    if (!pending.ok()) continue;
    for (const v1::CrossConnect& x : *pending) {
      if (x.switch_id() != sw.id()) continue;
      in_transaction.insert(x.ingress());
      in_transaction.insert(x.egress());
    }
  }
  std::map<uint32_t, uint32_t> on_switch;  // Ingress → egress.
  for (const switches::CrossConnect& x : actual) on_switch[x.ingress] = x.egress;

  switches::CrossConnectBatch repair;
  std::vector<v1::Drift> drift;
  for (const auto& [ingress, want] : desired) {
    auto have = on_switch.find(ingress);
    if (have != on_switch.end() && have->second == want.egress) continue;
    const std::string action = dry_run ? "would repair" : "repaired";
    if (have != on_switch.end()) {
      drift.push_back(
          MakeDrift(v1::Drift::KIND_WRONG, sw.id(), ingress, have->second, want.circuit, action));
      repair.remove.push_back({ingress, have->second});
    } else {
      drift.push_back(
          MakeDrift(v1::Drift::KIND_MISSING, sw.id(), ingress, want.egress, want.circuit, action));
    }
    repair.add.push_back({ingress, want.egress});
    if (!want.allocation.empty()) affected.insert(want.allocation);
  }

  // Adoption needs the fibers: which O-NIC port's tx enters an ingress, whose rx leaves an
  // egress.
  std::map<uint32_t, v1::OnicPortRef> wired;
  if (unknown == v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT) {
    ASSIGN_OR_RETURN(std::vector<v1::SwitchPort> ports, store_->ListPorts(sw.id()));
    for (const v1::SwitchPort& p : ports) {
      if (p.wiring().has_onic_port()) wired[p.ref().port()] = p.wiring().onic_port();
    }
  }
  std::vector<v1::Circuit> adopt;
  for (const auto& [ingress, egress] : on_switch) {
    if (desired.contains(ingress)) continue;  // Handled above (right or wrong).
    if (in_transaction.contains(ingress) || in_transaction.contains(egress)) continue;
    std::string action;
    auto blocking = desired_by_egress.find(egress);
    if (blocking != desired_by_egress.end()) {
      // Holds the egress a desired circuit needs: the circuit wins.
      repair.remove.push_back({ingress, egress});
      action = dry_run ? "would remove" : "removed";
    } else if (unknown == v1::UNKNOWN_CROSS_CONNECT_POLICY_REMOVE) {
      repair.remove.push_back({ingress, egress});
      action = dry_run ? "would remove" : "removed";
    } else if (unknown == v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT) {
      auto from = wired.find(ingress);
      auto to = wired.find(egress);
      if (from == wired.end() || to == wired.end()) {
        action = "reported (not between O-NIC ports: cannot adopt)";
      } else {
        v1::Circuit& c = adopt.emplace_back();
        c.set_id(absl::StrCat("manual-", sw.id(), "-", ingress, "-", egress));
        c.set_manual(true);
        *c.mutable_source() = from->second;
        *c.mutable_destination() = to->second;
        v1::CrossConnect* x = c.add_cross_connects();
        x->set_switch_id(sw.id());
        x->set_ingress(ingress);
        x->set_egress(egress);
        c.set_state(v1::CIRCUIT_STATE_ACTIVE);
        action = dry_run ? "would adopt" : "adopted";
      }
    } else {
      action = "reported";
    }
    drift.push_back(MakeDrift(v1::Drift::KIND_UNKNOWN, sw.id(), ingress, egress, "", action));
  }

  if (!dry_run) {
    for (const v1::Circuit& c : adopt) {
      absl::Status adopted;
      {
        // Under admission, like any new circuit: idle-port quiescing sees it, or not yet.
        absl::MutexLock admit(&admit_mu_);
        adopted = store_->CreateManualCircuit(c, principal);
      }
      if (!adopted.ok()) {
        for (v1::Drift& d : drift) {
          if (d.kind() == v1::Drift::KIND_UNKNOWN &&
              d.cross_connect().ingress() == c.cross_connects(0).ingress()) {
            d.set_action(absl::StrCat("reported (cannot adopt: ", adopted.message(), ")"));
          }
        }
      }
    }
    if (!repair.add.empty() || !repair.remove.empty()) {
      switches::ApplyResult result = driver.Apply(repair);
      if (!result.status.ok()) {
        for (v1::Drift& d : drift) {
          if (d.action() == "repaired" || d.action() == "removed") d.set_action("repair failed");
        }
        for (const v1::Drift& d : drift) *response.add_drift() = d;
        return absl::Status(result.status.code(),
                            absl::StrCat("repair failed: ", result.status.message()));
      }
    }
  }
  for (const v1::Drift& d : drift) {
    if (d.kind() != v1::Drift::KIND_UNKNOWN && !dry_run) {
      response.set_repaired(response.repaired() + 1);
    }
    const bool repeated =
        d.action() == "reported" &&
        seen_before.contains({d.cross_connect().ingress(), d.cross_connect().egress()});
    if (!dry_run && !repeated) {
      Record(absl::StrCat("drift.", KindWord(d.kind())), "switch", sw.id(),
             absl::StartsWith(d.action(), "reported") ? v1::EVENT_SEVERITY_ALARM
                                                      : v1::EVENT_SEVERITY_WARNING,
             principal,
             absl::StrCat(
                 "switch ", sw.id(), ": cross-connect ", d.cross_connect().ingress(), "->",
                 d.cross_connect().egress(), " is ", KindWord(d.kind()),
                 d.circuit_id().empty() ? "" : absl::StrCat(" (circuit ", d.circuit_id(), ")"),
                 ": ", d.action()));
    }
    *response.add_drift() = d;
  }
  return absl::OkStatus();
}

}  // namespace fleet::engine
