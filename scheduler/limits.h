// Bounds on every number and name a topology request carries, from what the site's inventory
// can possibly hold. Checked before anything is planned, so that a request no site could
// satisfy (a ring of width 1,000,000, 4,000,000,000 GPUs, a 5-D torus) is refused in
// microseconds naming the field, its value and the limit, and so that the planner's cost is
// bounded by the inventory's size rather than by the caller's numbers. Pure; no I/O.
//
// Codes: RESOURCE_EXHAUSTED when the request asks for more than the site has (members,
// widths, circuits a shape makes, torus sizes, more all-to-all rounds than phases);
// INVALID_ARGUMENT when a value is malformed (too many phases or dimensions, an over-long name, a
// switch-hop bound past kMaxSwitchHops, a tree fanout past the site's devices, a traffic matrix
// longer than its member pairs).
#ifndef FLEET_SCHEDULER_LIMITS_H_
#define FLEET_SCHEDULER_LIMITS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/fabric_snapshot.h"

namespace fleet::scheduler {

// A request may name at most this many phases: each holds its members' ports and is stored
// whole at admission.
inline constexpr size_t kMaxPhases = 64;
// max_switch_hops may be at most this, or the site's switch count when it has more.
inline constexpr size_t kMaxSwitchHops = 64;
// Tenants, allocation and phase names, request ids and the names a request gives (devices,
// hosts, O-NICs) are at most this many bytes.
inline constexpr size_t kMaxNameBytes = 128;

// INVALID_ARGUMENT naming `field` when `max_switch_hops` is past kMaxSwitchHops and the site's
// switch count.
absl::Status CheckSwitchHops(const FabricSnapshot& snapshot, uint32_t max_switch_hops,
                             const std::string& field);

// `topology`'s numbers against `snapshot.limits()`. `field` prefixes every field named
// ("topology", or "phases[2].topology").
absl::Status CheckTopologyLimits(const FabricSnapshot& snapshot, const v1::TopologySpec& topology,
                                 const std::string& field = "topology");

// A failure policy's `within` may be at most this (24 h).
inline constexpr int64_t kMaxHealWithinSeconds = 24 * 3600;
// `policy` (INVALID_ARGUMENT naming the field): `within` from 0 to 24 h, `max_replacements`
// at most the site's devices, a known spare scope.
absl::Status CheckFailurePolicy(const FabricSnapshot& snapshot, const v1::FailurePolicy& policy);

// The whole request: its names, the number of phases, its failure policy, and every phase's
// topology.
absl::Status CheckRequestLimits(const FabricSnapshot& snapshot,
                                const v1::RequestTopologyRequest& request);

// INVALID_ARGUMENT naming `field` when `value` is longer than kMaxNameBytes.
absl::Status CheckName(const std::string& field, const std::string& value);

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_LIMITS_H_
