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
//           every member (n ≥ 3; two members linked both ways): rank 0 is member 0, then
//           round the cycle toward member 1 when it is a neighbour (else toward the
//           lower-indexed neighbour), unless the light runs all the way round only the other
//           way;
//   CHAIN   they form one path through every member: rank 0 at the lower-indexed end, unless
//           the light runs all along it only from the other end;
//   TORUS   the phase is a torus template over every member in member order: member order,
//           each rank's coordinates x, y[, z] with x varying fastest, as the planner lays them
//           out (a phase's torus over some members is ranked by its circuits instead);
//   MEMBERS anything else (a star or tree that is not a path, a mesh, several components):
//           member order; and every attach: its attached devices in member order, without the
//           host's own devices (the CPUs whose O-NIC ports the circuits land on: they run no
//           rank of the job's), every rank on the attach's host.
// Width > 1 and duplex links count once. Each rank's host is its device's own host (a CPU),
// else the host of the first attach allocation in `attaches` (the same tenant's; this one
// included; FAILED and releasing ones skipped) holding it, whose O-NIC at the other end of its
// circuit gives the PCIe address; else, in an attach, the attach's host (no address before its
// circuits are stored); else empty. Hosts are numbered in order of their lowest rank.
// `site` must hold the allocation's devices and O-NICs (an O-NIC or device it does not know
// is skipped: its circuits do not order, its rank has no host).
// NOT_FOUND for a phase the allocation does not have, naming the phases it has;
// FAILED_PRECONDITION for a FAILED or RELEASED allocation (it holds no circuits).
absl::StatusOr<v1::GetRanksResponse> RankOrder(const v1::Allocation& allocation,
                                               const std::string& phase, const v1::Inventory& site,
                                               const std::vector<v1::Allocation>& attaches);

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_RANKS_H_
