// The agent's config file (YAML; deploy/config/fleet-onic-agent.yaml is the annotated
// example). Flags given to fleet-onic-agent override the settings they name.
//
//   controller: 10.0.0.5:50051
//   tls_ca_file: /etc/fleet/pki/ca.pem       # mutual TLS to fleetd: the site CA,
//   tls_cert_file: /etc/fleet/pki/agent.pem  # this agent's certificate
//   tls_key_file: /etc/fleet/pki/agent.key   # (spiffe://SITE/agent/HOST) and its key;
//   # insecure: true                         # or plaintext, for a fleetd started with --insecure
//   host: server1
//   backend: pcie-sysfs          # or emulated
//   sysfs_root: /sys             # pcie-sysfs
//   slot_power: true             # pcie-sysfs: turn pciehp slots off/on (pcie_sysfs_backend.h)
//   simulator: 127.0.0.1:8008    # emulated: polatis-emu's REST address
//   training_ms: 100             # emulated
//   min_rx_power_dbm: -20        # emulated
//   monitor_interval_ms: 1000    # how often up ports are read for changes nobody asked about
//   metrics_address: 0.0.0.0     # Prometheus /metrics (default 127.0.0.1)
//   metrics_port: 9465           # 0 picks a free port, -1 serves none
//   onics:                       # this host's O-NICs by hand, or found by onic_discovery
//     - serial: FLT-S1C0-N0
//       pcie: "0000:17:00.0"
//       ports:                   # port 1, then port 2
//         - {downstream: "0000:18:00.0", tx_ingress: 1, rx_egress: 385}
//         - {downstream: "0000:19:00.0", tx_ingress: 2, rx_egress: 386}
//   # onic_discovery:            # pcie-sysfs: find them (onic_agent/onic_discovery.h)
//   #   match: ["10ee:9038"]     # vendor:device of an O-NIC's upstream port ("10ee:*": any)
//   #   serial: "FLT-{dsn}"      # default "{dsn}"; also {host}, {index}, {bdf}
#ifndef FLEET_ONIC_AGENT_CONFIG_H_
#define FLEET_ONIC_AGENT_CONFIG_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "onic_agent/onic_discovery.h"

namespace fleet::onic_agent {

struct AgentPortConfig {
  std::string downstream;   // pcie-sysfs: the PCIe downstream port's BDF.
  uint32_t tx_ingress = 0;  // emulated: the switch ingress the tx fiber enters.
  uint32_t rx_egress = 0;   // emulated: the switch egress the rx fiber leaves.
};

struct AgentOnicConfig {
  std::string serial;
  std::string pcie_address;
  std::array<AgentPortConfig, 2> ports;
};

struct AgentConfig {
  std::string controller;
  // Relative paths are relative to the config file's folder.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  bool insecure = false;
  std::string host;
  std::string backend;
  std::string sysfs_root = "/sys";
  bool slot_power = true;
  std::string simulator;
  int training_ms = 100;
  double min_rx_power_dbm = -20.0;
  // How often up ports are read for link changes nobody asked about (the others every tenth
  // time); 1 ms to 1 h.
  int monitor_interval_ms = 1000;
  // Prometheus /metrics: 0 picks a free port, -1 serves none.
  std::string metrics_address = "127.0.0.1";
  int metrics_port = 9465;
  std::vector<AgentOnicConfig> onics;
  // pcie-sysfs only, and not with `onics`.
  std::optional<OnicDiscovery> onic_discovery;
};

// Every problem is listed, "FILE:LINE: ...": among them `insecure: true` with a tls_* file, and
// some but not all of the three tls_* files (a file without either is left to CheckAgentTls,
// as flags may complete it).
absl::StatusOr<AgentConfig> ParseAgentConfig(absl::string_view text, absl::string_view file_name);
// Also resolves the tls_* files against the file's folder.
absl::StatusOr<AgentConfig> ReadAgentConfigFile(const std::string& path);

// The config (flags applied) says how to dial fleetd: `insecure` and no tls_* file, or all three
// tls_* files. INVALID_ARGUMENT naming the keys and the rule.
absl::Status CheckAgentTls(const AgentConfig& config);

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_CONFIG_H_
