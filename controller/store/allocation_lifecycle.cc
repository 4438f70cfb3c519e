#include "controller/store/allocation_lifecycle.h"

#include "absl/strings/str_cat.h"
#include "fleet/v1/names.h"

namespace fleet::store {

bool Ended(v1::AllocationState state) {
  return state == v1::ALLOCATION_STATE_RELEASED || state == v1::ALLOCATION_STATE_FAILED;
}

absl::Status CheckReleaseEnd(const std::string& allocation_id, v1::AllocationState end) {
  if (end == v1::ALLOCATION_STATE_RELEASED || end == v1::ALLOCATION_STATE_FAILED) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "allocation ", allocation_id, ": a release ends RELEASED or FAILED, not ", v1::Name(end)));
}

absl::Status CheckNotReleased(const std::string& allocation_id, v1::AllocationState current) {
  if (current != v1::ALLOCATION_STATE_RELEASED) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("allocation ", allocation_id,
                   " is released; a released allocation's history is not rewritten"));
}

}  // namespace fleet::store
