// fleetd: the FLEET controller daemon. Reads flags and the config file, starts the daemon,
// prints the addresses it serves (one per line: `grpc: HOST:PORT`, `metrics: HOST:PORT`) and
// runs until SIGTERM or SIGINT, then shuts down within the grace period. SIGHUP re-reads the
// CA bundle and the access policy.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "common/flags.h"
#include "common/log.h"
#include "common/shutdown_signals.h"
#include "controller/fleetd/config.h"
#include "controller/fleetd/daemon.h"
#include "controller/fleetd/demo.h"

namespace {

int Run(int argc, char** argv) {
  using fleet::fleetd::FleetdConfig;
  std::string config_file;
  FleetdConfig flags;
  int64_t grpc_port = flags.grpc_port;
  int64_t metrics_port = flags.metrics_port;
  int64_t grace_seconds = absl::ToInt64Seconds(flags.shutdown_grace);
  int64_t heartbeat_ms = absl::ToInt64Milliseconds(flags.agent_heartbeat);
  int64_t events_max_age_days = absl::ToInt64Hours(flags.retention.events.max_age) / 24;
  int64_t events_max_count = flags.retention.events.max_count;
  int64_t ended_max_age_days = absl::ToInt64Hours(flags.retention.ended_allocations.max_age) / 24;
  int64_t ended_max_count = flags.retention.ended_allocations.max_count;
  int64_t retention_interval_seconds = absl::ToInt64Seconds(flags.retention.interval);
  bool version = false;
  bool demo_mode = false;
  std::string demo_site;
  fleet::FlagSet set("fleetd [--config FILE] [flags]",
                     "The FLEET controller: serves the fleet.v1 API, keeps inventory and circuits\n"
                     "in SQLite, and exports Prometheus metrics. Flags override the config file.");
  set.String("config", &config_file, "YAML config file (see deploy/config/fleetd.yaml)");
  set.String("listen-address", &flags.listen_address, "address to serve gRPC on");
  set.String("metrics-address", &flags.metrics_listen_address,
             "address to serve Prometheus /metrics on (unauthenticated; default loopback)");
  set.String("tls-ca", &flags.tls_ca_file,
             "CA bundle that client certificates must chain to (mutual TLS)");
  set.String("tls-cert", &flags.tls_cert_file, "fleetd's certificate (PEM, may hold a chain)");
  set.String("tls-key", &flags.tls_key_file, "fleetd's private key (PEM)");
  set.String("policy", &flags.policy_file,
             "access policy: identities to roles and tenants (see deploy/config/policy.yaml)");
  int64_t tls_reload_seconds = absl::ToInt64Seconds(flags.tls_reload_interval);
  set.Int("tls-reload-interval-seconds", &tls_reload_seconds,
          "how often the TLS files and the policy are checked for a change");
  set.Bool("insecure", &flags.insecure,
           "serve plaintext gRPC and believe the x-fleet-principal metadata: for development "
           "only, anyone who reaches the port may do anything");
  set.Int("grpc-port", &grpc_port, "gRPC port; 0 picks a free one");
  set.Int("metrics-port", &metrics_port, "Prometheus /metrics port; 0 picks a free one");
  set.String("state-dir", &flags.state_dir, "directory of the state database fleet.db");
  set.String("inventory", &flags.inventory, "inventory file to apply at start");
  set.String("switch-credentials", &flags.switch_credentials,
             "switch credentials file (mode 0600)");
  set.Int("shutdown-grace", &grace_seconds, "seconds running RPCs get to finish on shutdown");
  set.Int("agent-heartbeat-ms", &heartbeat_ms,
          "heartbeat interval with agents; three missed ones drop an agent");
  set.String("log-level", &flags.log_level, "debug, info, warning or error");
  set.String("unknown-cross-connects", &flags.unknown_cross_connects,
             "what reconciliation does with cross-connects nobody asked for: report, adopt or "
             "remove");
  set.Int("events-max-age-days", &events_max_age_days,
          "events older than this many days are pruned; 0: no limit by age");
  set.Int("events-max-count", &events_max_count,
          "events beyond the newest this many are pruned; 0: no limit by count");
  set.Int(
      "ended-allocations-max-age-days", &ended_max_age_days,
      "released and failed allocations that ended more than this many days ago are pruned; 0: no "
      "limit");
  set.Int("ended-allocations-max-count", &ended_max_count,
          "released and failed allocations beyond the newest this many are pruned; 0: no limit");
  set.Int("retention-interval", &retention_interval_seconds,
          "seconds between two pruning passes of the state database; 0: no pruning");
  set.String("crash-at", &flags.crash_at,
             "testing only: SIGKILL fleetd itself at this reconfiguration point (persisted, "
             "quiesced, programmed, training, trained, ready, releasing, removed)");
  set.Bool("demo", &demo_mode,
           "run the embedded default: polatis-emu, the FLEET Gen1 inventory and one emulated "
           "agent per host and device chassis (state in a fresh /tmp directory unless --state-dir "
           "is given)");
  set.String("demo-site", &demo_site,
             "with --demo: the inventory file to emulate instead of the built-in Gen1 one, one "
             "polatis-emu per switch with their trunks joined (e.g. "
             "deploy/inventory/fleet-2cluster.yaml)");
  set.Bool("version", &version, "print the version and exit");

  absl::StatusOr<std::vector<std::string>> positional =
      set.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!positional.ok()) {
    std::cerr << "fleetd: " << positional.status().message() << "\n";
    return 2;
  }
  if (set.help_requested()) {
    std::cout << set.Help();
    return 0;
  }
  if (version) {
    std::cout << "fleetd " << fleet::fleetd::FleetVersion() << "\n";
    return 0;
  }
  if (!positional->empty()) {
    std::cerr << "fleetd: unexpected argument '" << positional->front() << "'; see --help\n";
    return 2;
  }

  FleetdConfig config;
  if (!config_file.empty()) {
    absl::StatusOr<FleetdConfig> loaded = fleet::fleetd::ReadFleetdConfigFile(config_file);
    if (!loaded.ok()) {
      std::cerr << "fleetd: " << loaded.status().message() << "\n";
      return 2;
    }
    config = *loaded;
  }
  if (set.IsSet("listen-address")) config.listen_address = flags.listen_address;
  if (set.IsSet("metrics-address")) config.metrics_listen_address = flags.metrics_listen_address;
  if (set.IsSet("tls-ca")) config.tls_ca_file = flags.tls_ca_file;
  if (set.IsSet("tls-cert")) config.tls_cert_file = flags.tls_cert_file;
  if (set.IsSet("tls-key")) config.tls_key_file = flags.tls_key_file;
  if (set.IsSet("policy")) config.policy_file = flags.policy_file;
  config.insecure = flags.insecure;
  if (set.IsSet("tls-reload-interval-seconds")) {
    config.tls_reload_interval = absl::Seconds(tls_reload_seconds);
  }
  if (set.IsSet("grpc-port")) config.grpc_port = static_cast<int>(grpc_port);
  if (set.IsSet("metrics-port")) config.metrics_port = static_cast<int>(metrics_port);
  if (set.IsSet("state-dir")) config.state_dir = flags.state_dir;
  if (set.IsSet("inventory")) config.inventory = flags.inventory;
  if (set.IsSet("switch-credentials")) config.switch_credentials = flags.switch_credentials;
  if (set.IsSet("shutdown-grace")) config.shutdown_grace = absl::Seconds(grace_seconds);
  if (set.IsSet("agent-heartbeat-ms")) config.agent_heartbeat = absl::Milliseconds(heartbeat_ms);
  if (set.IsSet("log-level")) config.log_level = flags.log_level;
  if (set.IsSet("unknown-cross-connects")) {
    config.unknown_cross_connects = flags.unknown_cross_connects;
  }
  fleet::store::RetentionPolicy& retention = config.retention;
  if (set.IsSet("events-max-age-days")) {
    retention.events.max_age = absl::Hours(24) * events_max_age_days;
  }
  if (set.IsSet("events-max-count")) retention.events.max_count = events_max_count;
  if (set.IsSet("ended-allocations-max-age-days")) {
    retention.ended_allocations.max_age = absl::Hours(24) * ended_max_age_days;
  }
  if (set.IsSet("ended-allocations-max-count")) {
    retention.ended_allocations.max_count = ended_max_count;
  }
  if (set.IsSet("retention-interval")) {
    retention.interval = absl::Seconds(retention_interval_seconds);
  }
  config.crash_at = flags.crash_at;

  static const std::map<std::string, fleet::LogLevel> kLevels = {
      {"debug", fleet::LogLevel::kDebug},
      {"info", fleet::LogLevel::kInfo},
      {"warning", fleet::LogLevel::kWarning},
      {"error", fleet::LogLevel::kError}};
  if (auto it = kLevels.find(config.log_level); it != kLevels.end()) {
    fleet::SetMinLogLevel(it->second);
  }

  // No work in signal handlers: shutdown signals are taken synchronously below.
  const fleet::ShutdownSignals shutdown = fleet::ShutdownSignals::Block();

  std::unique_ptr<fleet::fleetd::Demo> demo;
  if (!demo_site.empty() && !demo_mode) {
    std::cerr << "fleetd: --demo-site needs --demo\n";
    return 2;
  }
  if (demo_mode) {
    fleet::fleetd::DemoOptions demo_options;
    if (!demo_site.empty()) {
      std::ifstream file(demo_site);
      if (!file) {
        std::cerr << "fleetd: cannot read --demo-site " << demo_site << "\n";
        return 2;
      }
      demo_options.inventory.assign(std::istreambuf_iterator<char>(file), {});
    }
    if (!set.IsSet("state-dir")) config.state_dir.clear();
    const std::string binary_dir =
        std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
    absl::StatusOr<std::unique_ptr<fleet::fleetd::Demo>> prepared =
        fleet::fleetd::Demo::Prepare(config, binary_dir, demo_options);
    if (!prepared.ok()) {
      std::cerr << "fleetd: cannot start the demo: " << prepared.status().message() << "\n";
      return 1;
    }
    demo = std::move(*prepared);
  }

  fleet::SystemClock clock;
  absl::StatusOr<std::unique_ptr<fleet::fleetd::Fleetd>> daemon =
      fleet::fleetd::Fleetd::Start(config, &clock);
  if (!daemon.ok()) {
    std::cerr << "fleetd: cannot start: " << daemon.status().message() << "\n";
    return 1;
  }
  std::cout << "grpc: " << (*daemon)->grpc_address() << "\n"
            << "metrics: " << (*daemon)->metrics_address() << "\n";
  if (demo != nullptr) {
    if (absl::Status agents = demo->StartAgents((*daemon)->grpc_address()); !agents.ok()) {
      std::cerr << "fleetd: cannot start the demo's agents: " << agents.message() << "\n";
      return 1;
    }
    // One tl1: and rest: line per switch; with several, each names its switch.
    const bool several = demo->switches().size() > 1;
    for (const fleet::fleetd::DemoSwitch& sw : demo->switches()) {
      const std::string which = several ? " " + sw.id : "";
      std::cout << "tl1: " << sw.tl1 << which << "\n"
                << "rest: " << sw.rest << which << "\n";
    }
    absl::StatusOr<std::string> fleetctl_config =
        demo->WriteFleetctlConfig((*daemon)->grpc_address());
    if (!fleetctl_config.ok()) {
      std::cerr << "fleetd: cannot write the demo's fleetctl config: "
                << fleetctl_config.status().message() << "\n";
      return 1;
    }
    // fleetctl and the Python client find the demo's certificates through it.
    if (!fleetctl_config->empty()) std::cout << "fleetctl-config: " << *fleetctl_config << "\n";
    std::cout << "state: " << config.state_dir << "\n";
    for (const auto& [place, address] : demo->agent_metrics()) {
      std::cout << "agent-metrics: " << address << " " << place << "\n";
    }
  }
  std::cout << std::flush;
  FLEET_LOG(INFO) << "fleetd " << fleet::fleetd::FleetVersion() << " serving gRPC on "
                  << (*daemon)->grpc_address() << ", metrics on " << (*daemon)->metrics_address();

  int signal_number = shutdown.Wait();
  for (; signal_number == SIGHUP; signal_number = shutdown.Wait()) {
    FLEET_LOG(INFO) << "SIGHUP: reloading the CA bundle and the access policy";
    (void)(*daemon)->ReloadSecurity();
  }
  FLEET_LOG(INFO) << "signal " << signal_number << ": shutting down (grace "
                  << absl::FormatDuration(config.shutdown_grace) << ")";
  demo.reset();  // Agents and the emulator first: nothing left to reconnect.
  (*daemon)->Shutdown(config.shutdown_grace);
  daemon->reset();
  FLEET_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
