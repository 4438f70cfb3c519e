// Reconciliation: the switches compared with the desired circuits (docs/engine.md), and the
// transactions a crash interrupted resumed.
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
// changes anything: only the read. A READY allocation whose cross-connect was repaired is
// DEGRADED and retrained.
//
// Resume (resume.cc): every allocation left PENDING, PROGRAMMING, TRAINING or RELEASING
// with no transaction of this process is claimed before the comparison (which leaves its
// ports alone) and run to its end after it, through the same idempotent steps.
#ifndef FLEET_CONTROLLER_ENGINE_RECONCILER_H_
#define FLEET_CONTROLLER_ENGINE_RECONCILER_H_

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/engine/caller.h"
#include "controller/engine/engine_parts.h"
#include "controller/engine/healer.h"
#include "controller/engine/release.h"
#include "fleet/v1/admin.pb.h"

namespace fleet::engine {

// A cross-connect as switch, ingress, egress.
using CrossConnectKey = std::tuple<std::string, uint32_t, uint32_t>;

class Reconciler {
 public:
  // `healer` hears of the allocations whose cross-connects a pass made again
  // (Healer::CrossConnectsSeen).
  Reconciler(const EngineParts& parts, Releaser* releaser, Healer* healer)
      : p_(parts), releaser_(releaser), healer_(healer) {}

  // An operator's reconciliation (operators only; the options' policy when unspecified).
  absl::StatusOr<v1::ReconcileResponse> Reconcile(const v1::ReconcileRequest& request,
                                                  const Caller& caller);
  // Reconciles switch `switch_id` (every switch when empty) and resumes the interrupted
  // transactions. With `wait_for_resumed`, waits for them to end and counts those rolled
  // back (an operator's request; start-up and periodic passes do not wait). `trigger`
  // labels the pass in metrics.
  absl::StatusOr<v1::ReconcileResponse> ReconcileSwitches(
      const std::string& switch_id, v1::UnknownCrossConnectPolicy unknown, bool dry_run,
      const std::string& principal, const std::string& trigger, bool wait_for_resumed = false);

  // What allocation `a`'s retry (which holds its claim) finds on the switches: the
  // cross-connects of its live circuits, compared with each switch they cross, read with the
  // switch to itself. One that is absent is made again (MISSING), and whatever holds its
  // ingress or egress instead is taken off first (WRONG, or UNKNOWN "removed"): its ports are
  // the allocation's alone, as the store admits none into two circuits. Each is recorded as a
  // reconciliation pass records it (a `drift.KIND` event, the drift metric), so a link gets
  // its light back before anyone judges the link's members. `verified`: every switch was read
  // and now holds every such cross-connect; otherwise `why_not` names the switch that could
  // not be read or refused the repair.
  struct HeldCheck {
    bool verified = true;
    int remade = 0;  // The allocation's cross-connects made again.
    std::string why_not;
  };
  HeldCheck RepairHeld(const v1::Allocation& a, const std::string& principal);

 private:
  // Compares one switch, read through `driver` while the caller holds it exclusively.
  absl::Status ReconcileOne(const v1::Switch& sw, switch_adapters::OpticalSwitch& driver,
                            v1::UnknownCrossConnectPolicy unknown, bool dry_run,
                            const std::string& principal, v1::ReconcileResponse& response,
                            std::set<std::string>& affected);
  struct Comparison;
  // What the switch should hold, from the circuits of allocations not in a transaction.
  absl::Status Desired(const v1::Switch& sw, Comparison& cmp);
  // The drift between `cmp`'s desired and actual cross-connects, and the repair it takes.
  absl::Status FindDrift(const v1::Switch& sw, v1::UnknownCrossConnectPolicy unknown, bool dry_run,
                         Comparison& cmp, std::set<std::string>& affected);
  // Adopts and repairs as `cmp` says; on a failed repair the drift is reported and the error
  // returned.
  absl::Status Repair(switch_adapters::OpticalSwitch& driver, const std::string& principal,
                      Comparison& cmp, v1::ReconcileResponse& response);
  // Records drift `d` of switch `switch_id` as an event (`drift.KIND`).
  void RecordDrift(const std::string& switch_id, const v1::Drift& d, const std::string& principal);
  // Counts a pass that acted, and its drift, in the metrics.
  void CountDrift(const std::string& trigger, const v1::ReconcileResponse& response);
  // The READY or DEGRADED allocations of `affected` become DEGRADED and are retried now.
  void RetrainRepaired(const std::set<std::string>& affected, const std::string& principal);

  // --- Resume (resume.cc) ---
  // Claims every allocation a crash left mid-transaction (no thread of this process runs it).
  std::vector<std::string> ClaimInterrupted();
  // Runs the claimed interrupted transactions to their end, each on its own worker.
  void Resume(const std::vector<std::string>& ids);
  // What an interrupted transaction of `a` left on the switch, as reconciliation last saw
  // it: the circuits of its inactive phases no desired circuit uses (a phase switch), and
  // the cross-connects a member change took out of it (Store::PendingRemovals) that nothing
  // desires now, as circuits whose O-NIC ends come from the fibers' wiring.
  std::vector<v1::Circuit> LeftBehind(const v1::Allocation& a);
  // The cross-connects of `pending` (a member change's removals) still to take off, given
  // what the switches hold (`observed`) and `a` desires: as circuits, appended to `left`.
  void PendingLeft(const v1::Allocation& a, const std::vector<v1::CrossConnect>& pending,
                   const std::set<CrossConnectKey>& observed,
                   const std::set<CrossConnectKey>& desired, std::vector<v1::Circuit>& left);
  // The phase an interrupted phase switch of `a` was from, given what it `left` behind: the
  // one phase of the left circuits, when the switch holds all of that phase and nothing the
  // new phase adds, so a refusal can go back to it. Empty otherwise (a refusal then fails).
  std::string InterruptedSwitchFrom(const v1::Allocation& a, const std::vector<v1::Circuit>& left);

  const EngineParts p_;
  Releaser* const releaser_;
  Healer* const healer_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_RECONCILER_H_
