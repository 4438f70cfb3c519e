#include "controller/fleetd/switch_drivers.h"

#include <sys/stat.h>

#include <memory>

#include "common/log.h"
#include "common/status_macros.h"
#include "switch_adapters/polatis/polatis_switch.h"

namespace fleet::fleetd {
namespace {

switch_registry::SwitchRegistry::DriverFactory PolatisDriver(polatis::Protocol protocol) {
  return [protocol](const v1::Switch& sw, const switch_registry::SwitchCredentials& credentials,
                    const switch_adapters::ChangeGate& before_change)
             -> absl::StatusOr<std::unique_ptr<switch_adapters::OpticalSwitch>> {
    polatis::PolatisSwitchOptions options;
    options.name = sw.id();
    options.protocol = protocol;
    options.host = sw.address();
    options.port = static_cast<uint16_t>(sw.management_port());
    options.credentials = {credentials.user, credentials.password};
    options.ca_bundle = sw.ca_bundle();
    options.insecure_http = sw.insecure_http();
    options.before_change = before_change;
    return polatis::NewPolatisSwitch(options);
  };
}

}  // namespace

void RegisterSwitchDrivers(switch_registry::SwitchRegistry& registry) {
  registry.RegisterDriver(v1::SWITCH_PROTOCOL_TL1, PolatisDriver(polatis::Protocol::kTl1));
  // A stored switch whose protocol is unknown (an older or hand-edited row) speaks TL1, as
  // it always has.
  registry.RegisterDriver(v1::SWITCH_PROTOCOL_UNSPECIFIED, PolatisDriver(polatis::Protocol::kTl1));
  registry.RegisterDriver(v1::SWITCH_PROTOCOL_REST, PolatisDriver(polatis::Protocol::kRest));
}

absl::StatusOr<std::map<std::string, switch_registry::SwitchCredentials>> ReadSwitchCredentials(
    const std::string& path) {
  std::map<std::string, switch_registry::SwitchCredentials> credentials;
  if (path.empty()) return credentials;
  ASSIGN_OR_RETURN(auto read, polatis::ReadCredentialsFile(path));
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO))) {
    FLEET_LOG(WARNING) << "switch credentials file " << path
                       << " is readable by group or others; chmod 600 it";
  }
  for (auto& [id, login] : read) {
    credentials[id] = {std::move(login.user), std::move(login.password)};
  }
  return credentials;
}

}  // namespace fleet::fleetd
