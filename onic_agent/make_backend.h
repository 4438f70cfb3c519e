// The O-NIC backend an agent's config asks for (`backend`, with its O-NICs listed in `onics` or,
// for pcie-sysfs, found by `onic_discovery` on the PCI tree under `sysfs_root`, once, now).
// Used by the agent serving fleetd and by its bring-up verbs alike.
#ifndef FLEET_ONIC_AGENT_MAKE_BACKEND_H_
#define FLEET_ONIC_AGENT_MAKE_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "onic_agent/backend.h"
#include "onic_agent/config.h"

namespace fleet::onic_agent {

// INVALID_ARGUMENT for an unknown backend, an emulated one without its simulator, or
// onic_discovery with another backend than pcie-sysfs; the backend's own validation and
// discovery's errors as they are.
absl::StatusOr<std::unique_ptr<OnicBackend>> MakeBackend(const AgentConfig& config);

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_MAKE_BACKEND_H_
