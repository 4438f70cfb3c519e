// `fleetctl config view|get-contexts|use-context|set-context`: the client config file's
// contexts (client_config.h), read and written locally; these verbs never dial the server.
#ifndef FLEET_CONTROLLER_CLI_CONFIG_VERBS_H_
#define FLEET_CONTROLLER_CLI_CONFIG_VERBS_H_

#include "controller/cli/verb.h"

namespace fleet::cli {

Verb ConfigVerb();

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_CONFIG_VERBS_H_
