// `fleetctl completion bash|zsh`: the shell's completion script for this fleetctl.
#ifndef FLEET_CONTROLLER_CLI_COMPLETION_VERB_H_
#define FLEET_CONTROLLER_CLI_COMPLETION_VERB_H_

#include <string>

#include "controller/cli/session.h"
#include "controller/cli/verb.h"

namespace fleet::cli {

// `completion bash|zsh`: the shell's completion script, generated from FleetctlCommandLine().
int Completion(const Session& session, const std::string& shell);

Verb CompletionVerb();

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_COMPLETION_VERB_H_
