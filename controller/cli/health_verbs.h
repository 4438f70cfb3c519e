// fleetctl's verbs about failures, through AdminService: `device fail|heal` (an operator's
// word on a device's health) and `what-if fail` (a dry run of a failure).
#ifndef FLEET_CONTROLLER_CLI_HEALTH_VERBS_H_
#define FLEET_CONTROLLER_CLI_HEALTH_VERBS_H_

#include <string>

#include "controller/cli/session.h"
#include "controller/cli/verb.h"

namespace fleet::cli {

// `device fail ID --reason TEXT`: the device gets no new circuits, and the allocations using
// it turn DEGRADED and heal under their failure policy. `device heal ID [--reason TEXT]`:
// healthy again (clears fleetd's SUSPECT too). Prints the device's health as stored.
struct DeviceHealthArgs {
  std::string id;
  bool failed = false;
  std::string reason;
};
int SetDeviceHealth(const Session& session, const DeviceHealthArgs& args);

// `what-if fail (port SWITCH/PORT | onic ID | device ID | switch ID)`: the allocations the
// failure would hurt and, for each, whether and how it would heal. Nothing is touched.
int WhatIfFail(const Session& session, const std::string& kind, const std::string& name);

Verb DeviceVerb();
Verb WhatIfVerb();

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_HEALTH_VERBS_H_
