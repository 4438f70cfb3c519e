// Member replacement: substituting a free spare device for a failed member of an allocation
// with the fewest changed circuits. Pure, deterministic for a given snapshot; no I/O.
#ifndef FLEET_SCHEDULER_REPLACEMENT_H_
#define FLEET_SCHEDULER_REPLACEMENT_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/circuit_diff.h"
#include "scheduler/fabric_snapshot.h"

namespace fleet::scheduler {

// One phase of the allocation after the replacement ("" for a single-phase allocation).
struct ReplacedPhase {
  std::string name;
  // The phase's circuits after the replacement, in the allocation's order: circuits not
  // touching the failed member as they are (id, state), each circuit that touched it re-made
  // to the spare's port, without id and PLANNED.
  std::vector<v1::Circuit> circuits;
  // DiffCircuits(the phase's circuits before, `circuits`): `remove` is the failed member's
  // circuits, `add` their replacements, `kept` the rest.
  CircuitDiff diff;
};

struct Replacement {
  std::string failed;
  std::string spare;
  std::vector<std::string>
      members;  // The allocation's members, the spare in the failed one's place.
  std::vector<ReplacedPhase> phases;  // In the allocation's phase order.
  // What the allocation changes, for a response: `remove`/`add` the cross-connects of the
  // diffs of the phases on the switch (v1::PhaseOnSwitch: what the switch is told now),
  // `circuits` every phase's circuits after
  // the replacement, `ports_used` the spare's ports, `members` as above.
  v1::Plan plan;
};

// Plans the substitution of `failed_member` in every phase of `allocation` (its circuits as
// stored, every phase's). The spare is `spare` when named, else the best free device of the
// failed member's kind on the failed member's switch (on another switch only when none is,
// trunks join switches and `same_switch_only` is false), and of its host when it has one (a
// CPU: the job's processes run on that host) by member selection's preference
// (PickMembers with spares: healthy, spares first, fewest stranded ports, packing, light, id)
// that is not a member, not in `unreachable` (devices whose O-NICs' agents are away: no link
// of theirs could be trained),
// not drained, has no port in any allocation's desired circuit (a device another job uses is
// not a spare), and has as many free ports as the failed member uses over all phases. Each
// port of the failed member maps to the spare's port of the same index when that one is free,
// else to the spare's next free port; a circuit touching the failed member is re-made with the
// mapped port(s), routed as the planner routes (TrunkRouter: over trunks when its ends are on
// different switches, reusing the trunks of the circuits it replaces, within the
// max_switch_hops the request gave the phase). Every other circuit is kept as it is.
//
// Errors, naming why:
//   NOT_FOUND           the failed member is not a member of the allocation; an unknown spare
//   INVALID_ARGUMENT    a named spare that is already a member, or of another kind
//   RESOURCE_EXHAUSTED  no free spare of the failed member's kind on its switch (naming both);
//                       a re-made circuit whose trunk group is full;
//                       a named spare without enough free ports
//   FAILED_PRECONDITION a named spare drained, in use by an allocation, or on another switch
//                       of a site without trunks;
//                       a re-made circuit with no trunk path within the bound
absl::StatusOr<Replacement> PlanReplacement(const FabricSnapshot& snapshot,
                                            const v1::Allocation& allocation,
                                            const std::string& failed_member,
                                            const std::string& spare = "",
                                            bool same_switch_only = false,
                                            const std::set<std::string>& unreachable = {});

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_REPLACEMENT_H_
