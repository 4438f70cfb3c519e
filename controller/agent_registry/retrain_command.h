// The command asking an agent to retrain one O-NIC port: the one way fleetd builds it.
#ifndef FLEET_CONTROLLER_AGENT_REGISTRY_RETRAIN_COMMAND_H_
#define FLEET_CONTROLLER_AGENT_REGISTRY_RETRAIN_COMMAND_H_

#include <cstdint>
#include <string>

#include "fleet/v1/agent.pb.h"

namespace fleet::agent_registry {

// Retrains port `port` of the O-NIC with serial `onic_serial`, expecting the light of port
// `peer_port` of the O-NIC with serial `peer_serial`: the source of the circuit arriving on
// that port. An empty `peer_serial` expects any peer.
inline v1::Command RetrainCommand(const std::string& onic_serial, uint32_t port,
                                  const std::string& peer_serial = "", uint32_t peer_port = 0) {
  v1::Command command;
  v1::RetrainPort* retrain = command.mutable_retrain();
  retrain->set_onic_serial(onic_serial);
  retrain->set_port(port);
  if (!peer_serial.empty()) {
    retrain->mutable_expected_peer()->set_onic_serial(peer_serial);
    retrain->mutable_expected_peer()->set_port(peer_port);
  }
  return command;
}

}  // namespace fleet::agent_registry

#endif  // FLEET_CONTROLLER_AGENT_REGISTRY_RETRAIN_COMMAND_H_
