// `fleetctl allocation`: operators' changes to one allocation (replace a failed member).
#ifndef FLEET_CONTROLLER_CLI_ALLOCATION_VERBS_H_
#define FLEET_CONTROLLER_CLI_ALLOCATION_VERBS_H_

#include <string>

#include "controller/cli/session.h"
#include "controller/cli/verb.h"

namespace fleet::cli {

// `allocation replace ID MEMBER [--spare DEVICE] [--dry-run] [--wait]`: substitutes a spare
// for a failed member and prints the spare and the cross-connects removed and added; with
// `wait`, each state change until READY (exit 0, then the allocation), FAILED or RELEASED, or
// the timeout (exit 1).
struct ReplaceMemberArgs {
  std::string id;
  std::string member;
  std::string spare;  // Empty: the scheduler picks one.
  bool dry_run = false;
  bool wait = false;
};
int ReplaceMember(const Session& session, const ReplaceMemberArgs& args);

Verb AllocationVerb();

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_ALLOCATION_VERBS_H_
