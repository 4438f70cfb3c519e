#include "onic_agent/make_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "onic_agent/emulated_backend.h"
#include "onic_agent/onic_discovery.h"
#include "onic_agent/pcie_sysfs_backend.h"

namespace fleet::onic_agent {

absl::StatusOr<std::unique_ptr<OnicBackend>> MakeBackend(const AgentConfig& config) {
  if (config.onic_discovery.has_value() && config.backend != "pcie-sysfs") {
    return absl::InvalidArgumentError(absl::StrCat(
        "onic_discovery finds O-NICs on the PCI tree, for the pcie-sysfs backend; the ",
        config.backend, " backend needs its O-NICs listed in onics"));
  }
  if (config.backend == "emulated") {
    if (config.simulator.empty()) {
      return absl::InvalidArgumentError("the emulated backend needs --simulator HOST:PORT");
    }
    EmulatedBackend::Options options;
    options.training_time = absl::Milliseconds(config.training_ms);
    options.min_rx_power_dbm = config.min_rx_power_dbm;
    for (const AgentOnicConfig& onic : config.onics) {
      options.onics.push_back({onic.serial,
                               onic.pcie_address,
                               {onic.ports[0].tx_ingress, onic.ports[1].tx_ingress},
                               {onic.ports[0].rx_egress, onic.ports[1].rx_egress}});
    }
    absl::StatusOr<std::unique_ptr<EmulatedBackend>> backend =
        EmulatedBackend::Create(options, NewHttpLightSimulator(config.simulator));
    if (!backend.ok()) return backend.status();
    return std::unique_ptr<OnicBackend>(std::move(*backend));
  }
  if (config.backend == "pcie-sysfs") {
    PcieSysfsBackend::Options options;
    options.sysfs_root = config.sysfs_root;
    options.slot_power = config.slot_power;
    for (const AgentOnicConfig& onic : config.onics) {
      options.onics.push_back(
          {onic.serial, {onic.ports[0].downstream, onic.ports[1].downstream}, onic.pcie_address});
    }
    if (config.onic_discovery.has_value()) {
      PosixSysfsFiles files;
      absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> found =
          FindOnics(files, config.sysfs_root, *config.onic_discovery, config.host);
      if (!found.ok()) return found.status();
      if (found->empty()) {
        FLEET_LOG(WARNING) << "onic_discovery found no O-NIC on this host";
      }
      for (const PcieSysfsBackend::OnicConfig& onic : *found) {
        FLEET_LOG(INFO) << "found O-NIC " << onic.serial << " at " << onic.pcie_address
                        << ": port 1 " << onic.port_bdfs[0] << ", port 2 " << onic.port_bdfs[1];
      }
      options.onics = std::move(*found);
    }
    absl::StatusOr<std::unique_ptr<PcieSysfsBackend>> backend = PcieSysfsBackend::Create(options);
    if (!backend.ok()) return backend.status();
    return std::unique_ptr<OnicBackend>(std::move(*backend));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend '", config.backend, "' is not pcie-sysfs or emulated"));
}

}  // namespace fleet::onic_agent
