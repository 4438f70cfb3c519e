// The switch drivers fleetd speaks: Polatis Series 7000 over TL1 and over REST, and the
// site's switch credentials file they log in with.
#ifndef FLEET_CONTROLLER_FLEETD_SWITCH_DRIVERS_H_
#define FLEET_CONTROLLER_FLEETD_SWITCH_DRIVERS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "controller/switch_registry/switch_registry.h"

namespace fleet::fleetd {

// Registers the Polatis TL1 and REST drivers with `registry`.
void RegisterSwitchDrivers(switch_registry::SwitchRegistry& registry);

// Reads the switch credentials file at `path` (none when it is empty), warning when others
// may read it.
absl::StatusOr<std::map<std::string, switch_registry::SwitchCredentials>> ReadSwitchCredentials(
    const std::string& path);

}  // namespace fleet::fleetd

#endif  // FLEET_CONTROLLER_FLEETD_SWITCH_DRIVERS_H_
