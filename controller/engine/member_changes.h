// Changes of a READY or DEGRADED allocation's members and phases (engine.h gives each RPC's
// contract): ActivatePhase (a phase switch), ReplaceMember, DetachDevices. Each claims the
// allocation (waiting for a change that just stored READY to let go), plans under admission,
// persists the handover in one store transaction (PROGRAMMING), and runs the switch work as
// a Transaction in the background: the old circuits come off in the same batch, before the
// new ones go on. Activating a prepared phase (make before break) stores only the new active
// phase: its circuits are on the switch already.
#ifndef FLEET_CONTROLLER_ENGINE_MEMBER_CHANGES_H_
#define FLEET_CONTROLLER_ENGINE_MEMBER_CHANGES_H_

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/engine/caller.h"
#include "controller/engine/engine_parts.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/circuit_diff.h"

namespace fleet::engine {

class MemberChanges {
 public:
  explicit MemberChanges(const EngineParts& parts) : p_(parts) {}

  absl::StatusOr<v1::ActivatePhaseResponse> ActivatePhase(const v1::ActivatePhaseRequest& request,
                                                          const Caller& caller);
  absl::StatusOr<v1::ReplaceMemberResponse> ReplaceMember(const v1::ReplaceMemberRequest& request,
                                                          const Caller& caller);
  absl::StatusOr<v1::DetachDevicesResponse> DetachDevices(const v1::DetachDevicesRequest& request,
                                                          const Caller& caller);

  // A member to replace because a part of it failed or was drained.
  struct FailedMember {
    std::string member;
    std::string reason;             // Recorded with the replacement.
    bool same_switch_only = false;  // The spare must be on the member's switch.
    absl::Duration degraded_for;    // How long the allocation was DEGRADED (heals).
    // Only while the allocation is DEGRADED (a heal): one READY again is left alone
    // (FAILED_PRECONDITION).
    bool only_if_degraded = false;
  };
  // A heal (healer.h) or an eviction (drain.h): replaces `failed.member` of allocation `id`
  // as ReplaceMember does, by `caller` (fleetd for a heal), recorded with the reason.
  // `ended` (if set) is called with the allocation as its transaction left it (READY,
  // DEGRADED or FAILED), unless it could not be read. Errors as ReplaceMember's.
  absl::Status ReplaceFailed(const std::string& id, const FailedMember& failed,
                             const Caller& caller,
                             std::function<void(const v1::Allocation&)> ended = nullptr);

  // How long a caller's change waits for a claim to be let go. Every holder lets go within
  // its own timeouts, well inside it.
  static constexpr absl::Duration kClaimWait = absl::Seconds(60);

 private:
  // Claims `id` for a change a caller asks for. While the allocation is READY or DEGRADED
  // and the claim is held (a transaction's last steps after storing its outcome, a retry, a
  // lease check, reconciliation), waits for it, up to kClaimWait or the caller's
  // deadline, whichever comes first (Caller::GiveUp): a caller acting on READY is not refused for a
  // claim it cannot see. False when the allocation is in another change (another state), when
  // fleetd is stopping, or past the wait.
  bool ClaimSettled(const std::string& id, const Caller& caller);

  // --- Phase switch (phase_switch.cc) ---
  // With the claim held on `a` (READY or DEGRADED): stores the handover to `phase` and
  // starts its transaction.
  absl::StatusOr<v1::ActivatePhaseResponse> SwitchPhase(v1::Allocation a, const std::string& phase,
                                                        const Caller& caller,
                                                        absl::Time plan_start);
  // Whether a phase's `circuits` are all on the switch while it is not active: a phase
  // prepared by make before break (RequestTopologyRequest.prepare_next_phase).
  static bool Prepared(const std::vector<v1::Circuit>& circuits);
  // With the claim held on `a`: activates prepared `phase` (its circuits `target`) by storing
  // it as the active phase, nothing else changed, and lets the claim go. No switch command,
  // no retrain: the allocation stays READY (or DEGRADED, with its reason).
  absl::StatusOr<v1::ActivatePhaseResponse> ActivatePrepared(v1::Allocation a,
                                                             const std::string& phase,
                                                             const std::vector<v1::Circuit>& target,
                                                             const Caller& caller,
                                                             absl::Time plan_start);
  // FAILED_PRECONDITION naming each circuit of `adds` (a phase's circuits to put on the
  // switch) whose O-NIC port or trunk is drained or failed now; else the inventory version
  // that was checked, which the handover's commit is conditioned on.
  absl::StatusOr<uint64_t> PhaseUsable(const std::string& phase,
                                       const std::vector<v1::Circuit>& adds);

  // --- Member changes (member_changes.cc) ---
  // What a member change (ReplaceMember, DetachDevices) stores and takes off the switch.
  struct MemberChange {
    store::CircuitReplacement replacement;  // Circuits removed and added, members after.
    std::vector<v1::Circuit> removes;       // The active phase's circuits it deletes.
  };
  using Planner = std::function<absl::Status(const v1::Allocation&, MemberChange&)>;
  // The frame of a member change: claims allocation `id` (ABORTED, naming `seen`, while
  // another change of it runs); under admission, FAILED_PRECONDITION unless it is READY or
  // DEGRADED ("`what` only when ..."), then `plan` plans the change on the stored allocation;
  // unless `dry_run`, the change is stored in one transaction (PROGRAMMING, `caller`'s) and
  // ReconfigureMembers starts its switch work. `after`: the allocation as stored after it (as
  // it was, for a dry run). `on_end` as ReplaceFailed's `ended`.
  using OnEnd = std::function<void(const v1::Allocation&)>;
  absl::Status ChangeMembers(const std::string& id, v1::AllocationState seen, bool dry_run,
                             const std::string& what, const std::string& event,
                             const Caller& caller, const Planner& plan, v1::Allocation* after,
                             OnEnd on_end = {});
  // Runs a member change's transaction in the background: `removes` (the active phase's
  // circuits it deleted) come off the switch, the new circuits go on. If it fails, the
  // circuits from before (`on_switch`) are taken off too; `what` names the change in events.
  void ReconfigureMembers(const std::string& id, std::vector<v1::StageTiming> admitted,
                          std::vector<v1::Circuit> removes, std::vector<v1::Circuit> on_switch,
                          const std::string& what, OnEnd on_end);
  // Under admission. `record` is stored with the change, its failed, spare and position
  // filled in here.
  absl::Status PlanReplacement(const v1::ReplaceMemberRequest& request, bool same_switch_only,
                               v1::MemberReplacement record, const v1::Allocation& stored,
                               MemberChange& change, v1::ReplaceMemberResponse& response);
  absl::Status PlanDetach(const v1::DetachDevicesRequest& request, const v1::Allocation& stored,
                          MemberChange& change, v1::DetachDevicesResponse& response);

  const EngineParts p_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_MEMBER_CHANGES_H_
