// `fleetd --demo`: the embedded default site. Starts one polatis-emu per switch of the site
// (the FLEET Gen1 inventory built into the binary unless another is given; 25 ms switching),
// joins the emulators' trunk fibers so light crosses between them, applies the inventory with
// each switch pointed at its emulator, and starts one emulated O-NIC agent per host and per
// chassis of pooled devices; the binaries are found next to fleetd's own. Everything it starts
// is stopped with it. Unless fleetd runs --insecure, it runs with mutual TLS on a throwaway
// PKI made in the state directory (demo_pki.h).
#ifndef FLEET_CONTROLLER_FLEETD_DEMO_H_
#define FLEET_CONTROLLER_FLEETD_DEMO_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/fleetd/config.h"
#include "controller/fleetd/demo_pki.h"

namespace fleet::fleetd {

// A child process whose stdout is read for its address lines; stopped with SIGTERM.
class ChildProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv,
                                                             const std::string& log_path);
  ~ChildProcess();  // SIGTERM, then SIGKILL if it lingers.
  // The rest of the first stdout line starting with `prefix`, waiting up to `timeout`.
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix, absl::Duration timeout);

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
};

// The Gen1 inventory file shipped in deploy/inventory/, as built into fleetd.
const char* EmbeddedGen1Inventory();

// How the demo site behaves; tests and benchmarks change the physics.
struct DemoOptions {
  std::string protocol = "tl1";    // How fleetd talks to the emulator: tl1 or rest.
  int switch_ms = 25;              // The emulator's switching time per command.
  int training_ms = 100;           // The emulated agents' link training time.
  int monitor_interval_ms = 1000;  // How often the emulated agents read their up ports.
  // The site, as inventory YAML; empty: the embedded Gen1 inventory. Each switch's address,
  // port and protocol are replaced by its emulator's.
  std::string inventory;
};

// One emulated switch of the demo site.
struct DemoSwitch {
  std::string id;
  std::string tl1;   // HOST:PORT of its TL1 port.
  std::string rest;  // HOST:PORT of its REST port (and /sim/v1 side channel).
};

class Demo {
 public:
  // Starts the emulators, joins their trunks, and points `config` at a demo state directory
  // (a fresh temp dir unless one was given), the demo inventory and the emulators'
  // credentials. INVALID_ARGUMENT when the site does not parse or a place's O-NICs reach
  // several switches (an emulated agent talks to one emulator).
  static absl::StatusOr<std::unique_ptr<Demo>> Prepare(FleetdConfig& config,
                                                       const std::string& binary_dir,
                                                       const DemoOptions& options = {});
  // For a replicated demo (fleet-demo-site): starts `members` etcd members (etcd_member.h) on
  // loopback ports chosen now, their data under STATE/etcd-mN/, their clients held to
  // certificates of the demo CA; waits until they have a leader; and points `config`'s etcd
  // settings at them with fleetd's client certificate. FAILED_PRECONDITION under --insecure or
  // where etcd is not installed.
  absl::Status StartEtcd(int members, FleetdConfig& config);
  // Agents share a process (fleet-onic-agent with several --config files) on a site of more
  // than this many places; on a smaller one each runs alone.
  static constexpr int kAgentsPerProcess = 64;
  // Starts one emulated agent per host and per chassis of the inventory, dialing
  // `grpc_address` (one fleetd, or replicas A,B,C) with a certificate of its own (plaintext under
  // --insecure).
  absl::Status StartAgents(const std::string& grpc_address);
  // Stops the agent of `place` (a host or chassis) as a crash would leave it: gone. NOT_FOUND
  // for a place without an agent; FAILED_PRECONDITION where agents share processes.
  absl::Status StopAgent(const std::string& place);
  // Starts the stopped agent of `place` again, as StartAgents did.
  absl::Status RestartAgent(const std::string& place);
  // Writes the fleetctl config file whose contexts reach `grpc_address` with the demo's
  // certificates (demo_pki.h) and returns its path; empty under --insecure.
  absl::StatusOr<std::string> WriteFleetctlConfig(const std::string& grpc_address);

  // In inventory order.
  const std::vector<DemoSwitch>& switches() const { return switches_; }
  int agents() const { return agent_places_; }
  // Each agent's host (or chassis) and the HOST:PORT of its /metrics; empty where agents
  // share processes (they serve none).
  const std::vector<std::pair<std::string, std::string>>& agent_metrics() const {
    return agent_metrics_;
  }

 private:
  Demo() = default;
  DemoOptions options_;
  std::string binary_dir_;
  std::string state_dir_;
  std::string inventory_path_;
  std::vector<DemoSwitch> switches_;
  std::optional<DemoPki> pki_;  // Unset under --insecure.
  std::vector<std::unique_ptr<ChildProcess>> etcd_members_;
  std::vector<std::unique_ptr<ChildProcess>> emulators_;
  absl::Status SharedAgentProcesses() const;
  // Agent processes, one per place unless grouped_; null while stopped (StopAgent).
  std::vector<std::unique_ptr<ChildProcess>> agents_;
  int agent_places_ = 0;
  bool grouped_ = false;
  std::vector<std::pair<std::string, std::string>> agent_metrics_;
  std::vector<std::vector<std::string>> agent_argv_;  // How each agent was started.
};

}  // namespace fleet::fleetd

#endif  // FLEET_CONTROLLER_FLEETD_DEMO_H_
