// The rank order of an allocation: the member order a collective library should number its
// ranks in so that each rank's ring or chain neighbours are the members its circuits reach,
// and the host that runs each rank (docs/ranks.md).
#ifndef FLEET_CONTROLLER_ENGINE_RANKS_H_
#define FLEET_CONTROLLER_ENGINE_RANKS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::engine {

// Orders `allocation`'s members by the circuits of `phase` (empty: the active phase):
//   RING    the circuits, taken as undirected links between members, form one cycle through
//           every member (n ≥ 3; two members linked both ways): rank 0 is member 0, rank 1
//           the neighbour its light goes to (a duplex ring: member 1 if it is a neighbour,
//           else the lower-indexed one), and so on round the cycle;
//   CHAIN   they form one path through every member: rank 0 at the end the light leaves
//           (every link one way), else the end with the lower member index;
//   TORUS   the phase is a torus template: member order, each rank's coordinates x, y[, z]
//           with x varying fastest, as the template lays them out;
//   MEMBERS anything else (star, tree, mesh, attach, several components): member order.
// Width > 1 and duplex links count once. Each rank's host is its device's own host (a CPU),
// else the host of an attach allocation in `attaches` (live attach allocations of the same
// tenant, this one included) holding it, whose O-NIC at the other end of its circuit gives the
// PCIe address; else empty. Hosts are numbered in order of their lowest rank.
// `site` must hold the allocation's devices and O-NICs (an O-NIC or device it does not know
// is skipped: its circuits do not order, its rank has no host).
// NOT_FOUND for a phase the allocation does not have, naming the phases it has;
// FAILED_PRECONDITION for a FAILED or RELEASED allocation (it holds no circuits).
absl::StatusOr<v1::GetRanksResponse> RankOrder(const v1::Allocation& allocation,
                                               const std::string& phase, const v1::Inventory& site,
                                               const std::vector<v1::Allocation>& attaches);

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_RANKS_H_
