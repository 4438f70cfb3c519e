// `fleetctl certs init-ca|issue|show`: a site's CA and the certificates it issues (fleetd's
// server certificate; operators', viewers', jobs' and agents' client certificates), made with
// common/pki.h on this machine. These verbs never dial the server; docs/security.md says which
// identity each role's certificate carries.
#ifndef FLEET_CONTROLLER_CLI_CERTS_VERBS_H_
#define FLEET_CONTROLLER_CLI_CERTS_VERBS_H_

#include "controller/cli/verb.h"

namespace fleet::cli {

Verb CertsVerb();

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_CERTS_VERBS_H_
