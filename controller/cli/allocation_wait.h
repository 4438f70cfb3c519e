// Following an allocation until it settles, for the verbs with --wait (topology request,
// phase, detach, release; allocation replace).
#ifndef FLEET_CONTROLLER_CLI_ALLOCATION_WAIT_H_
#define FLEET_CONTROLLER_CLI_ALLOCATION_WAIT_H_

#include <utility>

#include "absl/time/time.h"
#include "controller/cli/descriptions.h"
#include "controller/cli/output.h"
#include "controller/cli/printing.h"
#include "controller/cli/session.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::cli {

// Follows `*allocation` (as last seen) with WatchAllocation until it is Settled or `deadline`
// passes, printing a line each time its state or reason changes; leaves the last version seen
// in `*allocation`. The stream starts with the current state, so a change between the call
// that returned `*allocation` and the watch is not missed.
int WaitForAllocation(const Session& s, v1::AllocationState done, absl::Time deadline,
                      v1::Allocation* allocation);

// --wait of request, phase and replace: follows the response's allocation until READY, then
// prints the response with the allocation as it ended (-o json|yaml) or the allocation.
template <typename Response>
int WaitUntilReady(const Session& s, absl::Time deadline, Response& response) {
  v1::Allocation allocation = response.allocation();
  int code = WaitForAllocation(s, v1::ALLOCATION_STATE_READY, deadline, &allocation);
  if (code != kExitOk) return code;
  if (s.format != OutputFormat::kTable) {
    *response.mutable_allocation() = std::move(allocation);
    return PrintMessage(s, response);
  }
  *s.out << AllocationText(allocation);
  return kExitOk;
}

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_ALLOCATION_WAIT_H_
