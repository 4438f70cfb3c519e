// Planning an allocation's circuits: pure, deterministic, no I/O. A snapshot and a
// request in; the circuits and cross-connects to make, or the reason why not, out.
// docs/scheduler.md explains the algorithms and their cost.
//
// Forms planned by PlanTopology (a circuit between switches runs over trunks, routed by
// TrunkRouter within `max_switch_hops`; see trunk_routing.h):
//   links      between named O-NIC ports or named devices, directed or duplex, `width`
//              parallel circuits between devices.
//   template   every TemplateKind over a MemberSet (shapes in shapes.h), `width` parallel
//              circuits per logical link.
//   attach     each pooled device gets `width` duplex links to free O-NIC ports of the host.
//   traffic    duplex links chosen by max-weight b-matching on the traffic matrix (b = each
//              member's free ports); the plan's `direct_traffic_share` is the share of the
//              matrix's bytes whose member pair has a direct link. Only pairs with traffic are
//              linked. Duplex links, because a PCIe link trains over both directions.
//   all_to_all is several phases, which one Plan cannot hold: PlanTopology answers
//              UNIMPLEMENTED and PlanAllToAllRounds plans the rounds.
//
// Members (MemberSet): the named devices, then devices picked for each count; see
// member_selection.h for how they are picked. Templates, attach and traffic list the
// members in `members` in that order (attach: the pooled devices, then the host's devices
// whose ports it uses); links list devices in the order they are first used.
//
// Port choice: a device endpoint takes its first port (O-NICs by id, port 1 then 2; ports in
// PlanRequest::avoid_ports after all the others) that is usable and has the sides it needs free: tx
// for a circuit's source, rx for its destination, both for a duplex link. A port needed for one
// side only prefers a port whose other side is already taken, so whole ports stay whole. In
// templates and all-to-all rounds a member's circuits share ports as MemberSlots (shapes.h) pairs
// them: tx toward a peer and rx from the same peer on one port where the shape has both (a duplex
// link), else the next outgoing and incoming circuits (a unidirectional ring member hears its
// predecessor on the port that sends to its successor). An attach spreads a host's links over its
// O-NICs (port 1 of each O-NIC before any port 2) so that each device gets an O-NIC's bandwidth.
//
// Errors name the field and the reason; nothing is planned:
//   INVALID_ARGUMENT    a malformed request (empty tenant, a link from a port to itself, torus
//                       dimensions that do not multiply to the member count, ...)
//   NOT_FOUND           an unknown device, host, O-NIC or port
//   FAILED_PRECONDITION a named port that is drained, failed, in a circuit, or another
//                       tenant's; a circuit between switches no trunk path within the bound
//                       joins
//   RESOURCE_EXHAUSTED  a member without enough free ports, naming the member, the ports the
//                       shape needs of it and why each of its other ports is not free; too few
//                       devices for a count; a full trunk group, naming it and its holders
#ifndef FLEET_SCHEDULER_PLANNER_H_
#define FLEET_SCHEDULER_PLANNER_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/fabric_snapshot.h"

namespace fleet::scheduler {

struct PlanRequest {
  std::string tenant;
  v1::TopologySpec topology;
  // O-NIC ports (onic, port) that another phase of the request keeps on the switch: a device
  // endpoint takes one only when no other port of the device will do (make before break,
  // request_plan.h). Named O-NIC ports are taken as named.
  std::set<std::pair<std::string, uint32_t>> avoid_ports = {};
};

// The plan's circuits have no ids and are PLANNED; `add` lists their cross-connects (a new
// allocation removes nothing), `ports_used` every O-NIC port involved, `members` the
// devices as described above.
absl::StatusOr<v1::Plan> PlanTopology(const FabricSnapshot& snapshot, const PlanRequest& request);

// One phase of a multi-phase plan: its name and what it programs when active.
struct PlannedPhase {
  std::string name;
  v1::Plan plan;  // Its circuits carry `phase` = name.
  // On the switch while another phase is active, so that activating it is a state change
  // (prepare_next_phase; request_plan.h).
  bool prepared = false;
};

// All-to-all over degree-limited members as rounds `round-1`, `round-2`, …: each round is a
// legal plan on its own against the snapshot (rounds are active one at a time, so they reuse
// the members' ports), and together the rounds have a circuit from every member to every
// other. With p = the fewest ports any member has with tx and rx free, each round gives every
// member at most p outgoing and p incoming circuits, and there are ceil((n-1)/p) rounds, the
// fewest possible for that member (schedule in shapes.h, AllToAllRounds). Counted members
// must be wholly free devices. Every round lists all members. Errors as PlanTopology; a
// member with no free port is RESOURCE_EXHAUSTED naming it.
absl::StatusOr<std::vector<PlannedPhase>> PlanAllToAllRounds(const FabricSnapshot& snapshot,
                                                             const std::string& tenant,
                                                             const v1::AllToAllSpec& spec,
                                                             uint32_t max_switch_hops = 0);

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_PLANNER_H_
