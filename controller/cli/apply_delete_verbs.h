// fleetctl's inventory changes: `apply -f FILE` creates and updates from an inventory file,
// `diff -f FILE` shows what it would change field by field, `delete KIND NAME` removes one
// object.
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
  bool force = false;  // Repoint a switch that holds circuits.
};
int Apply(const Session& session, const ApplyArgs& args);

// `diff -f FILE`: what applying FILE would change, field by field, and whether the apply
// would be refused (on the error stream). Exit kExitOk when nothing would change,
// kExitDiffers when something would (taken or not), kExitUsage for a malformed command line,
// kExitDiffFailed when the diff itself failed (as kubectl diff: 0 same, 1 different, above 1
// an error).
inline constexpr int kExitDiffers = 1;
inline constexpr int kExitDiffFailed = 3;
int Diff(const Session& session, const std::string& file);

// `delete KIND NAME`.
int Delete(const Session& session, const std::string& kind, const std::string& name);

Verb ApplyVerb();
Verb DiffVerb();
Verb DeleteVerb();

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_APPLY_DELETE_VERBS_H_
