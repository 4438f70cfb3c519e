// Rules of an allocation's lifecycle, not of its storage. The store still enforces them in
// UpdateAllocation, with these texts; they belong to the engine, which decides the
// transitions, and can call these before it writes.
#ifndef FLEET_CONTROLLER_STORE_ALLOCATION_LIFECYCLE_H_
#define FLEET_CONTROLLER_STORE_ALLOCATION_LIFECYCLE_H_

#include <string>

#include "absl/status/status.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::store {

// A release ends RELEASED or FAILED: INVALID_ARGUMENT for any other `end`.
absl::Status CheckReleaseEnd(const std::string& allocation_id, v1::AllocationState end);

// A RELEASED allocation's history is not rewritten: FAILED_PRECONDITION when `current` is
// RELEASED.
absl::Status CheckNotReleased(const std::string& allocation_id, v1::AllocationState current);

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_ALLOCATION_LIFECYCLE_H_
