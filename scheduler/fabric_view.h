// The fabric as a job's own planner sees it (GetFabric): the devices' O-NIC ports as the
// caller may use them, which ordered pairs of them one circuit could join now and over which
// switches. A runtime that plans its phases itself (a Legion mapper, FlexFlow's search) asks
// this before it asks for the phases. Pure; deterministic for a given snapshot.
#ifndef FLEET_SCHEDULER_FABRIC_VIEW_H_
#define FLEET_SCHEDULER_FABRIC_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/fabric_snapshot.h"

namespace fleet::scheduler {

// A GetFabric answers for at most this many devices: its pairs grow with their square.
inline constexpr size_t kMaxFabricDevices = 128;
// And its answer is at most this many bytes, under gRPC's default 4 MiB a client receives
// (long names and long paths could take 128 devices' 16,256 pairs past it).
inline constexpr size_t kMaxFabricAnswerBytes = 3 << 20;

struct FabricQuery {
  // The tenants the caller acts for; empty: it sees every tenant's (an operator or a viewer).
  // A caller scoped to tenants sees a holder only when it is an allocation of one of them:
  // another tenant's is "another tenant", an operator's manual circuit "a manual circuit";
  // and it may not ask about a device another tenant holds a port of, unless the allocation
  // asked about holds one too (a host's CPU that two tenants' attach allocations share).
  // The snapshot must know every holder's tenant: one it does not know counts as another's.
  std::vector<std::string> tenants;
  // Ports and trunks this allocation's circuits hold count as the caller's own (OWN).
  std::string own_allocation;
  std::vector<std::string> devices;  // `field` names them: "devices[i]".
  std::string field = "devices";
  uint32_t max_switch_hops = 0;  // 0 means kDefaultMaxSwitchHops.
};

// INVALID_ARGUMENT naming `field` for no device or more than kMaxFabricDevices: checked
// before the names are even copied.
absl::Status CheckFabricDeviceCount(size_t devices, const std::string& field);

// The devices and pairs of a GetFabricResponse (its change costs are fleetd's to add).
//
// A port is UNUSABLE when drained or failed (whoever holds it), else FREE when no circuit
// holds either side, OWN when only `own_allocation`'s do, else HELD. A pair is joinable when
// some port of the source with tx FREE or OWN and some port of the destination with rx FREE
// or OWN are joined by a route TrunkRouter would take, alone (pairs are judged one at a time:
// two may need one trunk); the fewest trunk hops win, then the ports in order.
//
// Errors name the field and the value:
//   INVALID_ARGUMENT   no device, more than kMaxFabricDevices, a device named twice or named
//                      past kMaxNameBytes, a hop bound past kMaxSwitchHops (or the site's
//                      switches when it has more)
//   RESOURCE_EXHAUSTED an answer past kMaxFabricAnswerBytes (ask about fewer devices)
//   NOT_FOUND          an unknown device
//   PERMISSION_DENIED  a device another tenant holds a port of, for a caller scoped to tenants
absl::StatusOr<v1::GetFabricResponse> DescribeFabric(const FabricSnapshot& snapshot,
                                                     const FabricQuery& query);

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_FABRIC_VIEW_H_
