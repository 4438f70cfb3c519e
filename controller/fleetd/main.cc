// fleetd: the FLEET controller daemon. Reads flags and the config file, starts the daemon,
// prints the addresses it serves (one per line: `grpc: HOST:PORT`, `metrics: HOST:PORT`) and
// runs until SIGTERM or SIGINT, then shuts down within the grace period. SIGHUP re-reads the
// CA bundle and the access policy. A replica that lost the leadership, or fetched the log's
// snapshot to load, stops the same way and exits 75 (kExitRestart), for its supervisor to
// start it again.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/mutex_checks.h"
#include "common/shutdown_signals.h"
#include "controller/fleetd/config.h"
#include "controller/fleetd/daemon.h"
#include "controller/fleetd/demo.h"

namespace {

using fleet::fleetd::FleetdConfig;

// Every agent holds a connection, and every switch a session or two: a site of 2,048 agents
// needs more descriptors than the usual soft limit of 1,024 (started from a shell; the
// systemd unit sets LimitNOFILE). The soft limit is raised to the hard one, as far as it goes.
void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t was = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (limit.rlim_max == RLIM_INFINITY) {
    // Unlimited is refused above the kernel's ceiling for one process.
    std::ifstream nr_open("/proc/sys/fs/nr_open");
    rlim_t ceiling = 0;
    if (nr_open >> ceiling && ceiling > was) limit.rlim_cur = limit.rlim_max = ceiling;
  }
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    FLEET_LOG(WARNING) << "open files limited to " << was << " (cannot raise it to "
                       << limit.rlim_max << "): a site of many agents may not connect them all";
  }
}

// The command line: every flag bound to a variable of its own, so that only the flags given
// override the config file (ApplyFlags).
struct CommandLine {
  std::string config_file;
  FleetdConfig flags;
  int64_t grpc_port = flags.grpc_port;
  int64_t metrics_port = flags.metrics_port;
  int64_t grace_seconds = absl::ToInt64Seconds(flags.shutdown_grace);
  int64_t heartbeat_ms = absl::ToInt64Milliseconds(flags.agent_heartbeat);
  int64_t heartbeats_per_second = flags.agent_heartbeats_per_second;
  int64_t monitor_interval_ms = absl::ToInt64Milliseconds(flags.monitor_interval);
  int64_t tls_reload_seconds = absl::ToInt64Seconds(flags.tls_reload_interval);
  int64_t events_max_age_days = absl::ToInt64Hours(flags.retention.events.max_age) / 24;
  int64_t events_max_count = flags.retention.events.max_count;
  int64_t ended_max_age_days = absl::ToInt64Hours(flags.retention.ended_allocations.max_age) / 24;
  int64_t ended_max_count = flags.retention.ended_allocations.max_count;
  int64_t retention_interval_seconds = absl::ToInt64Seconds(flags.retention.interval);
  int64_t leader_lease_seconds = absl::ToInt64Seconds(flags.leader_lease);
  int64_t leader_margin_ms = absl::ToInt64Milliseconds(flags.leader_margin);
  bool version = false;
  bool demo = false;
  std::string demo_site;
};

void DeclareFlags(fleet::FlagSet& set, CommandLine& c) {
  FleetdConfig& f = c.flags;
  set.String("config", &c.config_file, "YAML config file (see deploy/config/fleetd.yaml)");
  set.String("listen-address", &f.listen_address, "address to serve gRPC on");
  set.String("metrics-address", &f.metrics_listen_address,
             "address to serve Prometheus /metrics on (unauthenticated; default loopback)");
  set.String("tls-ca", &f.tls_ca_file,
             "CA bundle that client certificates must chain to (mutual TLS)");
  set.String("tls-cert", &f.tls_cert_file, "fleetd's certificate (PEM, may hold a chain)");
  set.String("tls-key", &f.tls_key_file, "fleetd's private key (PEM)");
  set.String("policy", &f.policy_file,
             "access policy: identities to roles and tenants (see deploy/config/policy.yaml)");
  set.Int("tls-reload-interval-seconds", &c.tls_reload_seconds,
          "how often the TLS files and the policy are checked for a change");
  set.Bool("insecure", &f.insecure,
           "serve plaintext gRPC and believe the x-fleet-principal metadata: for development "
           "only, anyone who reaches the port may do anything");
  set.Int("grpc-port", &c.grpc_port, "gRPC port; 0 picks a free one");
  set.Int("metrics-port", &c.metrics_port, "Prometheus /metrics port; 0 picks a free one");
  set.String("state-dir", &f.state_dir, "directory of the state database fleet.db");
  set.String("inventory", &f.inventory, "inventory file to apply at start");
  set.String("switch-credentials", &f.switch_credentials, "switch credentials file (mode 0600)");
  set.Int("shutdown-grace", &c.grace_seconds, "seconds running RPCs get to finish on shutdown");
  set.Int("agent-heartbeat-ms", &c.heartbeat_ms,
          "heartbeat interval with agents; three missed ones drop an agent");
  set.Int("agent-heartbeats-per-second", &c.heartbeats_per_second,
          "above this many heartbeats a second from all agents the interval lengthens; 0: never");
  set.Int("monitor-interval-ms", &c.monitor_interval_ms,
          "how often the switch monitor reads port status and power; 0: never");
  set.String("log-level", &f.log_level, "debug, info, warning or error");
  set.String("unknown-cross-connects", &f.unknown_cross_connects,
             "what reconciliation does with cross-connects nobody asked for: report, adopt or "
             "remove");
  set.Int("events-max-age-days", &c.events_max_age_days,
          "events older than this many days are pruned; 0: no limit by age");
  set.Int("events-max-count", &c.events_max_count,
          "events beyond the newest this many are pruned; 0: no limit by count");
  set.Int(
      "ended-allocations-max-age-days", &c.ended_max_age_days,
      "released and failed allocations that ended more than this many days ago are pruned; 0: no "
      "limit");
  set.Int("ended-allocations-max-count", &c.ended_max_count,
          "released and failed allocations beyond the newest this many are pruned; 0: no limit");
  set.Int("retention-interval", &c.retention_interval_seconds,
          "seconds between two pruning passes of the state database; 0: no pruning");
  set.String("etcd", &f.etcd,
             "replicate over these etcd members (URL[,URL...]): this fleetd is one replica of "
             "several, the leader acts and the others follow (docs/ha.md)");
  set.String("etcd-ca", &f.etcd_ca_file, "CA bundle the etcd members' certificates chain to");
  set.String("etcd-cert", &f.etcd_cert_file, "this replica's client certificate for etcd (PEM)");
  set.String("etcd-key", &f.etcd_key_file, "this replica's client key for etcd (PEM)");
  set.String("advertise", &f.advertise,
             "with --etcd: the HOST:PORT clients and agents dial this replica at");
  set.String("etcd-prefix", &f.etcd_prefix, "with --etcd: the prefix of this site's keys");
  set.Int("leader-lease-seconds", &c.leader_lease_seconds,
          "with --etcd: the leader's lease; a lost leader is replaced within about this long");
  set.Int("leader-margin-ms", &c.leader_margin_ms,
          "with --etcd: how long before its lease could run out a leader stops acting");
  set.Int("log-snapshot-every", &f.log_snapshot_every,
          "with --etcd: the leader snapshots its store into the log every this many entries "
          "and trims the log (0: never)");
  set.Int("log-keep-entries", &f.log_keep_entries,
          "with --etcd: entries a trim keeps before the newest snapshot");
  set.String("crash-at", &f.crash_at,
             "testing only: SIGKILL fleetd itself at this reconfiguration point (persisted, "
             "quiesced, programmed, training, trained, ready, releasing, removed)");
  set.Bool("demo", &c.demo,
           "run the embedded default: polatis-emu, the FLEET Gen1 inventory and one emulated "
           "agent per host and device chassis (state in a fresh /tmp directory unless --state-dir "
           "is given)");
  set.String("demo-site", &c.demo_site,
             "with --demo: the inventory file to emulate instead of the built-in Gen1 one, one "
             "polatis-emu per switch with their trunks joined (e.g. "
             "deploy/inventory/fleet-2cluster.yaml)");
  set.Bool("version", &c.version, "print the version and exit");
}

// The flags given on the command line override what the config file said.
void ApplyFlags(const fleet::FlagSet& set, const CommandLine& c, FleetdConfig& config) {
  const FleetdConfig& f = c.flags;
  if (set.IsSet("listen-address")) config.listen_address = f.listen_address;
  if (set.IsSet("metrics-address")) config.metrics_listen_address = f.metrics_listen_address;
  if (set.IsSet("tls-ca")) config.tls_ca_file = f.tls_ca_file;
  if (set.IsSet("tls-cert")) config.tls_cert_file = f.tls_cert_file;
  if (set.IsSet("tls-key")) config.tls_key_file = f.tls_key_file;
  if (set.IsSet("policy")) config.policy_file = f.policy_file;
  config.insecure = f.insecure;  // A flag only, never a config key.
  if (set.IsSet("tls-reload-interval-seconds")) {
    config.tls_reload_interval = absl::Seconds(c.tls_reload_seconds);
  }
  if (set.IsSet("grpc-port")) config.grpc_port = static_cast<int>(c.grpc_port);
  if (set.IsSet("metrics-port")) config.metrics_port = static_cast<int>(c.metrics_port);
  if (set.IsSet("state-dir")) config.state_dir = f.state_dir;
  if (set.IsSet("inventory")) config.inventory = f.inventory;
  if (set.IsSet("switch-credentials")) config.switch_credentials = f.switch_credentials;
  if (set.IsSet("shutdown-grace")) config.shutdown_grace = absl::Seconds(c.grace_seconds);
  if (set.IsSet("agent-heartbeat-ms")) config.agent_heartbeat = absl::Milliseconds(c.heartbeat_ms);
  if (set.IsSet("agent-heartbeats-per-second")) {
    config.agent_heartbeats_per_second = c.heartbeats_per_second;
  }
  if (set.IsSet("monitor-interval-ms")) {
    config.monitor_interval = absl::Milliseconds(c.monitor_interval_ms);
  }
  if (set.IsSet("log-level")) config.log_level = f.log_level;
  if (set.IsSet("unknown-cross-connects")) {
    config.unknown_cross_connects = f.unknown_cross_connects;
  }
  fleet::store::RetentionPolicy& retention = config.retention;
  if (set.IsSet("events-max-age-days")) {
    retention.events.max_age = absl::Hours(24) * c.events_max_age_days;
  }
  if (set.IsSet("events-max-count")) retention.events.max_count = c.events_max_count;
  if (set.IsSet("ended-allocations-max-age-days")) {
    retention.ended_allocations.max_age = absl::Hours(24) * c.ended_max_age_days;
  }
  if (set.IsSet("ended-allocations-max-count")) {
    retention.ended_allocations.max_count = c.ended_max_count;
  }
  if (set.IsSet("retention-interval")) {
    retention.interval = absl::Seconds(c.retention_interval_seconds);
  }
  if (set.IsSet("etcd")) config.etcd = f.etcd;
  if (set.IsSet("etcd-ca")) config.etcd_ca_file = f.etcd_ca_file;
  if (set.IsSet("etcd-cert")) config.etcd_cert_file = f.etcd_cert_file;
  if (set.IsSet("etcd-key")) config.etcd_key_file = f.etcd_key_file;
  if (set.IsSet("advertise")) config.advertise = f.advertise;
  if (set.IsSet("etcd-prefix")) config.etcd_prefix = f.etcd_prefix;
  if (set.IsSet("leader-lease-seconds")) {
    config.leader_lease = absl::Seconds(c.leader_lease_seconds);
  }
  if (set.IsSet("leader-margin-ms")) {
    config.leader_margin = absl::Milliseconds(c.leader_margin_ms);
  }
  if (set.IsSet("log-snapshot-every")) config.log_snapshot_every = f.log_snapshot_every;
  if (set.IsSet("log-keep-entries")) config.log_keep_entries = f.log_keep_entries;
  config.crash_at = f.crash_at;
}

void SetLogLevel(const std::string& level) {
  static const std::map<std::string, fleet::LogLevel> kLevels = {
      {"debug", fleet::LogLevel::kDebug},
      {"info", fleet::LogLevel::kInfo},
      {"warning", fleet::LogLevel::kWarning},
      {"error", fleet::LogLevel::kError}};
  if (auto it = kLevels.find(level); it != kLevels.end()) fleet::SetMinLogLevel(it->second);
}

// The demo's emulators and PKI, prepared before fleetd starts (it changes `config`). Exit code
// 2 for a --demo-site that cannot be read, 1 when the demo cannot start.
int PrepareDemo(const fleet::FlagSet& set, const CommandLine& c, FleetdConfig& config,
                std::unique_ptr<fleet::fleetd::Demo>& demo) {
  fleet::fleetd::DemoOptions options;
  if (!c.demo_site.empty()) {
    std::ifstream file(c.demo_site);
    if (!file) {
      std::cerr << "fleetd: cannot read --demo-site " << c.demo_site << "\n";
      return 2;
    }
    options.inventory.assign(std::istreambuf_iterator<char>(file), {});
  }
  if (!set.IsSet("state-dir")) config.state_dir.clear();
  const std::string binary_dir =
      std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  absl::StatusOr<std::unique_ptr<fleet::fleetd::Demo>> prepared =
      fleet::fleetd::Demo::Prepare(config, binary_dir, options);
  if (!prepared.ok()) {
    std::cerr << "fleetd: cannot start the demo: " << prepared.status().message() << "\n";
    return 1;
  }
  demo = std::move(*prepared);
  return 0;
}

// Starts the demo's agents and prints what a user dials: the switches, the fleetctl contexts,
// the state directory and the agents' metrics, one per line.
absl::Status StartDemo(fleet::fleetd::Demo& demo, const fleet::fleetd::Fleetd& daemon,
                       const FleetdConfig& config) {
  if (absl::Status agents = demo.StartAgents(daemon.grpc_address()); !agents.ok()) {
    return absl::Status(agents.code(),
                        absl::StrCat("cannot start the demo's agents: ", agents.message()));
  }
  // One tl1: and rest: line per switch; with several, each names its switch.
  const bool several = demo.switches().size() > 1;
  for (const fleet::fleetd::DemoSwitch& sw : demo.switches()) {
    const std::string which = several ? " " + sw.id : "";
    std::cout << "tl1: " << sw.tl1 << which << "\n"
              << "rest: " << sw.rest << which << "\n";
  }
  absl::StatusOr<std::string> fleetctl_config = demo.WriteFleetctlConfig(daemon.grpc_address());
  if (!fleetctl_config.ok()) {
    return absl::Status(fleetctl_config.status().code(),
                        absl::StrCat("cannot write the demo's fleetctl config: ",
                                     fleetctl_config.status().message()));
  }
  // fleetctl and the Python client find the demo's certificates through it.
  if (!fleetctl_config->empty()) std::cout << "fleetctl-config: " << *fleetctl_config << "\n";
  std::cout << "state: " << config.state_dir << "\n";
  for (const auto& [place, address] : demo.agent_metrics()) {
    std::cout << "agent-metrics: " << address << " " << place << "\n";
  }
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  CommandLine c;
  fleet::FlagSet set("fleetd [--config FILE] [flags]",
                     "The FLEET controller: serves the fleet.v1 API, keeps inventory and circuits\n"
                     "in SQLite, and exports Prometheus metrics. Flags override the config file.");
  DeclareFlags(set, c);
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
  if (c.version) {
    std::cout << "fleetd " << fleet::fleetd::FleetVersion() << "\n";
    return 0;
  }
  if (!positional->empty()) {
    std::cerr << "fleetd: unexpected argument '" << positional->front() << "'; see --help\n";
    return 2;
  }

  FleetdConfig config;
  if (!c.config_file.empty()) {
    absl::StatusOr<FleetdConfig> loaded = fleet::fleetd::ReadFleetdConfigFile(c.config_file);
    if (!loaded.ok()) {
      std::cerr << "fleetd: " << loaded.status().message() << "\n";
      return 2;
    }
    config = *loaded;
  }
  ApplyFlags(set, c, config);
  SetLogLevel(config.log_level);
  RaiseFileLimit();

  // No work in signal handlers: shutdown signals are taken synchronously below.
  const fleet::ShutdownSignals shutdown = fleet::ShutdownSignals::Block();

  std::unique_ptr<fleet::fleetd::Demo> demo;
  if (!c.demo_site.empty() && !c.demo) {
    std::cerr << "fleetd: --demo-site needs --demo\n";
    return 2;
  }
  if (c.demo) {
    if (int failed = PrepareDemo(set, c, config, demo); failed != 0) return failed;
  }

  fleet::SystemClock clock;
  absl::StatusOr<std::unique_ptr<fleet::fleetd::Fleetd>> daemon =
      fleet::fleetd::Fleetd::Start(config, &clock, [] {
        ::kill(::getpid(), SIGTERM);  // The signal wait below ends; exit kExitRestart.
      });
  if (!daemon.ok()) {
    std::cerr << "fleetd: cannot start: " << daemon.status().message() << "\n";
    return 1;
  }
  std::cout << "grpc: " << (*daemon)->grpc_address() << "\n"
            << "metrics: " << (*daemon)->metrics_address() << "\n";
  if (demo != nullptr) {
    if (absl::Status started = StartDemo(*demo, **daemon, config); !started.ok()) {
      std::cerr << "fleetd: " << started.message() << "\n";
      return 1;
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
  const bool restart = (*daemon)->restart_requested();
  daemon->reset();
  FLEET_LOG(INFO) << "stopped";
  return restart ? fleet::fleetd::kExitRestart : 0;
}

}  // namespace

int main(int argc, char** argv) {
  fleet::ConfigureMutexChecks();
  return Run(argc, argv);
}
