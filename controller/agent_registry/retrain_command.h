// The command asking an agent to retrain one O-NIC port: the one way fleetd builds it.
#ifndef FLEET_CONTROLLER_AGENT_REGISTRY_RETRAIN_COMMAND_H_
#define FLEET_CONTROLLER_AGENT_REGISTRY_RETRAIN_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>

#include "fleet/v1/agent.pb.h"
#include "fleet/v1/inventory.pb.h"

namespace fleet::agent_registry {

// The O-NIC port whose light a retrained port must see: the source of the circuit arriving
// on it; and what its device shows on PCIe (inventory's `pcie:`), which an agent whose backend
// sees PCIe (pcie-sysfs) checks against what enumerated behind the port.
struct ExpectedPeer {
  std::string onic_serial;
  uint32_t port = 0;
  v1::PcieIdentity device;
};

// What a retrained port of device `at` should find enumerated behind it when the circuit
// arriving on it comes from device `from`: `from`'s PCIe identity when `at` is a CPU (a host's
// downstream port enumerates the far device); nothing otherwise (a device's own O-NIC
// enumerates nothing of the host).
inline v1::PcieIdentity EnumeratedBehind(const v1::Device& at, const v1::Device& from) {
  return at.kind() == v1::DEVICE_KIND_CPU ? from.pcie() : v1::PcieIdentity();
}

// Retrains port `port` of the O-NIC with serial `onic_serial`, expecting `peer`; without
// one, any peer will do.
inline v1::Command RetrainCommand(const std::string& onic_serial, uint32_t port,
                                  const std::optional<ExpectedPeer>& peer = std::nullopt) {
  v1::Command command;
  v1::RetrainPort* retrain = command.mutable_retrain();
  retrain->set_onic_serial(onic_serial);
  retrain->set_port(port);
  if (peer.has_value()) {
    retrain->mutable_expected_peer()->set_onic_serial(peer->onic_serial);
    retrain->mutable_expected_peer()->set_port(peer->port);
    retrain->mutable_expected_peer()->set_pcie_vendor_id(peer->device.vendor());
    retrain->mutable_expected_peer()->set_pcie_device_id(peer->device.device());
    retrain->mutable_expected_peer()->set_device_serial_number(peer->device.dsn());
  }
  return command;
}

}  // namespace fleet::agent_registry

#endif  // FLEET_CONTROLLER_AGENT_REGISTRY_RETRAIN_COMMAND_H_
