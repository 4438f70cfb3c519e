// The two lifecycle rules the store keeps, because only the store can keep them: the
// `release_state` column holds only a release's end (RELEASED or FAILED), and an ended
// allocation's record is checked not to be rewritten inside the writing transaction, which
// no caller could do without a race. Every other transition rule is the engine's.
#ifndef FLEET_CONTROLLER_STORE_ALLOCATION_LIFECYCLE_H_
#define FLEET_CONTROLLER_STORE_ALLOCATION_LIFECYCLE_H_

#include <string>

#include "absl/status/status.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::store {

// RELEASED or FAILED: an allocation that has ended, whose record is history and which holds
// no circuits (invariant 2; every write of the store refuses to leave one holding any).
bool Ended(v1::AllocationState state);

// A release ends RELEASED or FAILED: INVALID_ARGUMENT for any other `end`.
absl::Status CheckReleaseEnd(const std::string& allocation_id, v1::AllocationState end);

// A RELEASED allocation's history is not rewritten: FAILED_PRECONDITION when `current` is
// RELEASED.
absl::Status CheckNotReleased(const std::string& allocation_id, v1::AllocationState current);

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_ALLOCATION_LIFECYCLE_H_
