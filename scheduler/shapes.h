// The logical shapes of topologies: which member sends to which, before any port is chosen.
// Members are indices into the request's ordered member list. Pure arithmetic on the member
// count and the template's parameters; the planner maps the arcs onto ports.
#ifndef FLEET_SCHEDULER_SHAPES_H_
#define FLEET_SCHEDULER_SHAPES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::scheduler {

// One circuit between members: `from`'s tx to `to`'s rx. A duplex link is the arcs a→b and
// b→a.
struct Arc {
  int from = 0;
  int to = 0;
  bool operator==(const Arc&) const = default;
};

// The arcs of template `t` over `members` members, every logical link `width` times. `hub` is
// the star's hub (an index into the members; ignored by the other kinds).
//   ring, unidirectional   i→i+1 (mod n)
//   ring, bidirectional    i↔i+1 (mod n); of two members, a double link
//   chain                  i→i+1 (`reverse`: i+1→i), `duplex`: i↔i+1
//   star                   hub→leaf (`reverse`: leaf→hub), `duplex`: hub↔leaf
//   tree                   parent (i-1)/fanout → child i (`reverse`: child→parent), `duplex`
//   torus 2-D / 3-D        member i at coordinates (i mod x, i/x mod y, i/(xy)): a duplex link
//                          to the next member in each dimension, wrapping around; a dimension
//                          of size 2 is one link, of size 1 none
//   full mesh              i↔j for every pair
// Directed arcs come before the reverse arc of a duplex link; the order is deterministic.
// INVALID_ARGUMENT names the field: too few members, a torus whose `dimensions` do not
// multiply to the member count, an unset kind.
absl::StatusOr<std::vector<Arc>> TemplateArcs(const v1::TemplateSpec& t, int members, int hub);

// A schedule of all-to-all rounds over `members` members, each member using at most `ports`
// ports per round (one tx and one rx each): round r holds the arcs i→i+s (mod n) for its
// shifts s. The shifts 1..n-1 are taken in the order 1, n-1, 2, n-2, …, so a round that holds
// shift s mostly holds n-s too and a member's port both sends to and hears the same peer.
// ceil((n-1)/ports) rounds, which is optimal: a member must send to n-1 others, at most
// `ports` per round. Requires members >= 2 and ports >= 1.
std::vector<std::vector<Arc>> AllToAllRounds(int members, int ports);

// How a member's arcs share its ports: each slot is one O-NIC port carrying at most one
// outgoing arc (its tx) and one incoming arc (its rx). An outgoing arc shares a port with an
// incoming arc from the same peer where there is one (a duplex link, as PCIe training
// wants), else with the next unpaired incoming arc (as a unidirectional ring does).
struct PortSlot {
  int out = -1;  // Index into the arcs, or -1 when the port's tx is unused.
  int in = -1;   // Likewise for its rx.
};
std::vector<std::vector<PortSlot>> MemberSlots(int members, const std::vector<Arc>& arcs);

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_SHAPES_H_
