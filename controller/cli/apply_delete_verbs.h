// fleetctl's inventory changes: `apply -f FILE` creates and updates from an inventory file,
// `delete KIND NAME` removes one object.
#ifndef FLEET_CONTROLLER_CLI_APPLY_DELETE_VERBS_H_
#define FLEET_CONTROLLER_CLI_APPLY_DELETE_VERBS_H_

#include <string>

#include "controller/cli/session.h"
#include "controller/cli/verb.h"

namespace fleet::cli {

// `apply -f FILE`: read and parse the inventory file, then ApplyInventory.
struct ApplyArgs {
  std::string file;
  bool dry_run = false;
};
int Apply(const Session& session, const ApplyArgs& args);

// `delete KIND NAME`.
int Delete(const Session& session, const std::string& kind, const std::string& name);

Verb ApplyVerb();
Verb DeleteVerb();

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_APPLY_DELETE_VERBS_H_
