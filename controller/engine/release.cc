#include "controller/engine/release.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "common/wording.h"
#include "controller/engine/circuits.h"
#include "controller/engine/healer.h"
#include "controller/engine/tenancy.h"
#include "fleet/v1/names.h"

namespace fleet::engine {
namespace {

// The reason of a release the lease ran out for; metrics tell it from requested ones by it.
constexpr char kLeaseExpired[] = "lease expired";

}  // namespace

absl::Status Releaser::Release(const std::string& id, const std::string& principal,
                               v1::AllocationState final_state, std::string final_reason) {
  const EngineContext& ctx = p_.ctx;
  absl::StatusOr<v1::Allocation> a = ctx.store->GetAllocation(id);
  if (!a.ok()) return a.status();
  if (a->state() == v1::ALLOCATION_STATE_RELEASED) return absl::OkStatus();
  const std::vector<v1::Circuit> circuits = LiveCircuits(*a);
  if (a->state() == v1::ALLOCATION_STATE_RELEASING) {
    // A release already under way ends as it was meant to when it started, whoever
    // resumes or retries it (a restart, the retry loop, a second ReleaseTopology).
    absl::StatusOr<std::optional<store::AllocationUpdate::ReleaseIntent>> intent =
        ctx.store->ReleaseIntentOf(id);
    if (intent.ok() && intent->has_value()) {
      final_state = (*intent)->state;
      final_reason = (*intent)->reason;
    }
  } else if (!circuits.empty()) {
    RETURN_IF_ERROR(CommitReleasing(id, principal, circuits, final_state, final_reason));
  }
  // As for an intent: RELEASING outlives a power loss before the circuits come off, or the
  // allocation would come back READY without them and reconciliation would make them again.
  if (absl::Status synced = ctx.store->Sync(); !synced.ok()) {
    ctx.Record("allocation.sync_failed", "allocation", id, v1::EVENT_SEVERITY_ALARM, "fleetd",
               absl::StrCat("allocation ", id,
                            ": not released, RELEASING is not durable: ", synced.message()));
    return synced;
  }
  ctx.Fault("releasing");
  if (!circuits.empty() && !Remove(id, principal, circuits)) return absl::OkStatus();
  ctx.Fault("removed");
  store::AllocationUpdate done;
  done.id = id;
  done.state = final_state;
  done.reason = final_reason;
  done.remove_circuits = true;
  if (final_state == v1::ALLOCATION_STATE_FAILED) done.severity = v1::EVENT_SEVERITY_WARNING;
  done.event_message = absl::StrCat("allocation ", id, " ", v1::Name(final_state),
                                    final_reason.empty() ? "" : ": ", final_reason);
  if (absl::Status ended = ctx.Update(done, principal).status(); !ended.ok()) {
    // RELEASING (stored before, or committed above) keeps the release under way: it is
    // finished by a retry. Without it nothing was committed, and the caller is told.
    if (a->state() != v1::ALLOCATION_STATE_RELEASING && circuits.empty()) return ended;
    p_.syncs.RetryLater(id);
    return absl::OkStatus();
  }
  ctx.metrics.Released(final_state == v1::ALLOCATION_STATE_FAILED ? "evicted"
                       : final_reason == kLeaseExpired            ? "lease_expired"
                                                                  : "requested");
  p_.syncs.Forget(id);
  healer_->Forget(id);
  return absl::OkStatus();
}

absl::Status Releaser::CommitReleasing(const std::string& id, const std::string& principal,
                                       const std::vector<v1::Circuit>& circuits,
                                       v1::AllocationState final_state,
                                       const std::string& final_reason) {
  store::AllocationUpdate releasing;
  releasing.id = id;
  releasing.state = v1::ALLOCATION_STATE_RELEASING;
  releasing.release = store::AllocationUpdate::ReleaseIntent{final_state, final_reason};
  if (!final_reason.empty()) releasing.reason = final_reason;
  for (const v1::Circuit& c : circuits) {
    releasing.circuits[c.id()] = {v1::CIRCUIT_STATE_REMOVING, ""};
  }
  releasing.event_message =
      absl::StrCat("allocation ", id, " RELEASING: removing ", Counted(circuits.size(), "circuit"));
  return p_.ctx.Update(releasing, principal).status();
}

bool Releaser::Remove(const std::string& id, const std::string& principal,
                      const std::vector<v1::Circuit>& circuits) {
  if (absl::Status q = p_.trainer.Quiesce(circuits, id); !q.ok()) {
    // Releasing goes on: the job let go of these ports; record what the agent said.
    p_.ctx.Record("allocation.quiesce_refused", "allocation", id, v1::EVENT_SEVERITY_WARNING,
                  "fleetd", absl::StrCat("allocation ", id, ": ", q.message()));
  }
  absl::Status removed =
      p_.programmers.Program(/*removes=*/circuits, /*adds=*/{}, nullptr, nullptr);
  if (removed.ok()) return true;
  store::AllocationUpdate stuck;
  stuck.id = id;
  stuck.reason = absl::StrCat("removal failed, retrying: ", removed.message());
  stuck.severity = v1::EVENT_SEVERITY_WARNING;
  stuck.event_kind = "allocation.release_failed";
  stuck.event_message = absl::StrCat("allocation ", id, ": ", *stuck.reason);
  (void)p_.ctx.Update(stuck, principal);
  p_.syncs.RetryLater(id);
  return false;
}

absl::Status Releaser::ReleaseWhenFree(const std::string& id, const Caller& caller,
                                       absl::Time give_up, v1::AllocationState final_state,
                                       const std::string& reason, const std::string& busy,
                                       const std::string& stopping) {
  switch (p_.pool.WaitAndClaim(id, give_up)) {
    case WorkerPool::Claimed::kStopping:
      return absl::UnavailableError(stopping);
    case WorkerPool::Claimed::kBusy:
      return absl::UnavailableError(busy);
    case WorkerPool::Claimed::kClaimed:
      break;
  }
  absl::Status released = Release(id, caller.principal, final_state, reason);
  p_.pool.Unclaim(id);
  return released;
}

absl::StatusOr<absl::Time> Releaser::KeepAlive(const std::string& id, const Caller& caller) {
  ASSIGN_OR_RETURN(v1::Allocation a, Authorized(*p_.ctx.store, id, caller));
  if (Ended(a.state()) || a.state() == v1::ALLOCATION_STATE_RELEASING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "allocation ", id, " is ", v1::Name(a.state()), "; its lease cannot be renewed"));
  }
  absl::Duration lease = p_.ctx.options.default_lease;
  if (a.request().has_lease() && FromProtoDuration(a.request().lease()) > absl::ZeroDuration()) {
    lease = FromProtoDuration(a.request().lease());
  }
  store::AllocationUpdate u;
  u.id = id;
  u.lease_expires = p_.ctx.clock->Now() + lease;
  u.event_kind = "allocation.lease";
  u.event_message =
      absl::StrCat("allocation ", id, " lease renewed until ", absl::FormatTime(*u.lease_expires));
  RETURN_IF_ERROR(p_.ctx.store->UpdateAllocation(u, caller.principal).status());
  return *u.lease_expires;
}

void Releaser::ExpireLeases() {
  if (p_.pool.stopping()) return;
  absl::StatusOr<std::vector<std::string>> passed = p_.ctx.store->LeasesPassed(p_.ctx.clock->Now());
  if (!passed.ok()) return;
  for (const std::string& id : *passed) {
    if (!p_.pool.Claim(id)) continue;  // Mid-transaction: the next tick takes it.
    p_.pool.Spawn(id, [this, id] {
      // Failed: RELEASING not committed (still past its lease, the next tick tries again) or
      // not durable (its sync is retried).
      (void)Release(id, "fleetd/lease", v1::ALLOCATION_STATE_RELEASED, kLeaseExpired);
    });
  }
}

}  // namespace fleet::engine
