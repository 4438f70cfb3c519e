// `fleetctl device`: an operator's word on a device's health, through AdminService.
#ifndef FLEET_CONTROLLER_CLI_DEVICE_VERBS_H_
#define FLEET_CONTROLLER_CLI_DEVICE_VERBS_H_

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

Verb DeviceVerb();

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_DEVICE_VERBS_H_
