// fleet-demo-site: a demo site without its controllers (docs/ha.md, deploy/quickstart/ha-demo.sh,
// fleet_scale_bench). Starts what `fleetd --demo` starts — the emulated switches of the Gen1
// inventory (or of --site FILE), one emulated agent per host and chassis, the throwaway PKI —
// and a local etcd cluster (none with --etcd-members 0: then one plain fleetd), and writes one
// fleetd config file per replica, so that the controllers run as separate processes that can
// be killed and restarted while the switches keep their cross-connects. Runs until SIGTERM or
// SIGINT, then stops everything it started.
#include <signal.h>
#include <sys/prctl.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/flags.h"
#include "common/free_ports.h"
#include "common/mutex_checks.h"
#include "common/shutdown_signals.h"
#include "controller/fleetd/config.h"
#include "controller/fleetd/demo.h"

namespace {

using fleet::fleetd::FleetdConfig;

// `text` as a single-quoted YAML scalar: a path may hold ": " or "#".
std::string Quoted(const std::string& text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "''"}}), "'");
}

// Whether SIGTERM or SIGINT came (they are blocked, so they wait): stop starting things.
bool StopAsked() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
}

// Replica `index`'s config file: the site's shared settings, its own state directory and port.
// Without etcd (`site.etcd` empty) the one fleetd of a plain site.
std::string ReplicaConfig(const FleetdConfig& site, int index, int port, int lease_seconds) {
  std::string text =
      absl::StrCat("# Replica ", index, " of the demo site, written by fleet-demo-site: ",
                   "fleetd --config <this file>.\n", "state_dir: ", site.state_dir, "/replica-",
                   index, "\n", "grpc_port: ", port, "\nmetrics_port: 0\n");
  std::vector<std::pair<const char*, std::string>> keys = {
      {"inventory", site.inventory},       {"switch_credentials", site.switch_credentials},
      {"tls_ca_file", site.tls_ca_file},   {"tls_cert_file", site.tls_cert_file},
      {"tls_key_file", site.tls_key_file}, {"policy_file", site.policy_file}};
  if (site.etcd.empty()) {
    for (const auto& [key, value] : keys) absl::StrAppend(&text, key, ": ", Quoted(value), "\n");
    return text;
  }
  keys.insert(keys.end(), {{"etcd", site.etcd},
                           {"etcd_ca_file", site.etcd_ca_file},
                           {"etcd_cert_file", site.etcd_cert_file},
                           {"etcd_key_file", site.etcd_key_file}});
  absl::StrAppend(&text, "advertise: 127.0.0.1:", port, "\n");
  for (const auto& [key, value] : keys) absl::StrAppend(&text, key, ": ", Quoted(value), "\n");
  // A quarter of the lease: the leader stops acting that long before its lease can end.
  absl::StrAppend(&text, "leader_lease_seconds: ", lease_seconds,
                  "\nleader_margin_ms: ", lease_seconds * 250, "\n");
  return text;
}

int Run(int argc, char** argv) {
  std::string state_dir, site_file;
  int64_t replicas = 3, etcd_members = 3, lease_seconds = 2;
  fleet::fleetd::DemoOptions options;
  int64_t switch_ms = options.switch_ms, training_ms = options.training_ms,
          monitor_ms = options.monitor_interval_ms;
  fleet::FlagSet set(
      "fleet-demo-site --state-dir DIR [flags]",
      "A demo site: emulated switches and agents, a local etcd cluster, and one fleetd\n"
      "config file per replica (DIR/fleetd-N.yaml). Prints what to dial, then runs until\n"
      "SIGTERM or SIGINT. deploy/quickstart/ha-demo.sh and fleet_scale_bench drive it.");
  set.String("state-dir", &state_dir, "the site's directory (created; required)");
  set.String("site", &site_file, "the site's inventory YAML (default: the Gen1 site)");
  set.Int("replicas", &replicas, "fleetd replicas to write a config file for (1..9)");
  set.Int("etcd-members", &etcd_members,
          "etcd members to start (1, 3 or 5; 0: none, one fleetd without replication)");
  set.Int("leader-lease-seconds", &lease_seconds, "the replicas' leader lease");
  set.Int("switch-ms", &switch_ms, "the emulated switches' time per command");
  set.Int("training-ms", &training_ms, "the emulated agents' link training time");
  set.Int("monitor-interval-ms", &monitor_ms,
          "how often the emulated agents read their up ports (a big site's many agents on one "
          "machine take its cores at 1 s)");
  absl::StatusOr<std::vector<std::string>> positional =
      set.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!positional.ok()) {
    std::cerr << "fleet-demo-site: " << positional.status().message() << "\n";
    return 2;
  }
  if (set.help_requested()) {
    std::cout << set.Help();
    return 0;
  }
  if (!positional->empty() || state_dir.empty()) {
    std::cerr << "fleet-demo-site: --state-dir DIR is required, and nothing else; see --help\n";
    return 2;
  }
  if (lease_seconds < 2 || lease_seconds > 3600) {
    std::cerr << "fleet-demo-site: --leader-lease-seconds " << lease_seconds
              << " is not in 2..3600 (etcd grants leases of 2 s and more)\n";
    return 2;
  }
  for (const auto& [flag, ms] :
       {std::pair<const char*, int64_t>{"switch-ms", switch_ms}, {"training-ms", training_ms}}) {
    if (ms < 0 || ms > 60000) {
      std::cerr << "fleet-demo-site: --" << flag << " " << ms << " is not in 0..60000\n";
      return 2;
    }
  }
  if (std::filesystem::exists(std::filesystem::path(state_dir) / "etcd-m0")) {
    // Its etcd members and replicas hold an earlier site's membership and log.
    std::cerr << "fleet-demo-site: --state-dir " << state_dir
              << " holds an earlier replicated demo; give a new directory\n";
    return 2;
  }
  if (replicas < 1 || replicas > 9) {
    std::cerr << "fleet-demo-site: --replicas " << replicas << " is not in 1..9\n";
    return 2;
  }
  if (etcd_members != 0 && etcd_members != 1 && etcd_members != 3 && etcd_members != 5) {
    std::cerr << "fleet-demo-site: --etcd-members " << etcd_members
              << " is not 0, 1, 3 or 5 (none, or an odd quorum)\n";
    return 2;
  }
  if (etcd_members == 0 && replicas != 1) {
    std::cerr << "fleet-demo-site: --replicas " << replicas
              << " without etcd (--etcd-members 0): replicas share state only through etcd\n";
    return 2;
  }
  if (!site_file.empty()) {
    std::ifstream file(site_file);
    std::stringstream text;
    text << file.rdbuf();
    if (!file || text.str().empty()) {
      std::cerr << "fleet-demo-site: cannot read --site " << site_file << "\n";
      return 2;
    }
    options.inventory = text.str();
  }
  options.switch_ms = static_cast<int>(switch_ms);
  options.training_ms = static_cast<int>(training_ms);
  if (monitor_ms < 1 || monitor_ms > 3'600'000) {
    std::cerr << "fleet-demo-site: --monitor-interval-ms " << monitor_ms
              << " must be between 1 and 3600000\n";
    return 2;
  }
  options.monitor_interval_ms = static_cast<int>(monitor_ms);

  // Children die with the thread that started them (PR_SET_PDEATHSIG): this one, to the end.
  // And this program stops with whoever started it (the demo script), killed or not.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  const fleet::ShutdownSignals shutdown = fleet::ShutdownSignals::Block();
  FleetdConfig site;
  site.state_dir = std::filesystem::absolute(state_dir).string();
  const std::string binary_dir =
      std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  absl::StatusOr<std::unique_ptr<fleet::fleetd::Demo>> demo =
      fleet::fleetd::Demo::Prepare(site, binary_dir, options);
  absl::Status started = demo.status();
  if (started.ok() && StopAsked()) started = absl::CancelledError("stopped while starting");
  if (started.ok() && etcd_members > 0) {
    started = (*demo)->StartEtcd(static_cast<int>(etcd_members), site);
  }
  if (started.ok() && StopAsked()) started = absl::CancelledError("stopped while starting");
  absl::StatusOr<std::vector<int>> ports = fleet::FreeLoopbackPorts(static_cast<int>(replicas));
  if (started.ok()) started = ports.status();
  if (!started.ok()) {
    std::cerr << "fleet-demo-site: cannot start: " << started.message() << "\n";
    return 1;
  }
  std::vector<std::string> addresses;
  for (int i = 0; i < replicas; ++i) {
    const std::string path = absl::StrCat(site.state_dir, "/fleetd-", i + 1, ".yaml");
    std::ofstream(path) << ReplicaConfig(site, i + 1, (*ports)[i], static_cast<int>(lease_seconds));
    addresses.push_back(absl::StrCat("127.0.0.1:", (*ports)[i]));
    std::cout << "replica: " << addresses.back() << " " << path << "\n";
  }
  const std::string all = absl::StrJoin(addresses, ",");
  // The agents dial every replica and keep to the leader; until one leads they retry.
  started = (*demo)->StartAgents(all);
  absl::StatusOr<std::string> fleetctl_config = (*demo)->WriteFleetctlConfig(all);
  if (started.ok()) started = fleetctl_config.status();
  if (!started.ok()) {
    std::cerr << "fleet-demo-site: cannot start: " << started.message() << "\n";
    return 1;
  }
  if (!site.etcd.empty()) std::cout << "etcd: " << site.etcd << "\n";
  for (const fleet::fleetd::DemoSwitch& sw : (*demo)->switches()) {
    std::cout << "switch: " << sw.id << " tl1 " << sw.tl1 << " rest " << sw.rest << "\n";
  }
  std::cout << "fleetctl-config: " << *fleetctl_config << "\n"
            << "state: " << site.state_dir << "\n"
            << "ready" << std::endl;
  shutdown.Wait();
  return 0;  // The demo stops its agents, emulators and etcd members as it goes.
}

}  // namespace

int main(int argc, char** argv) {
  fleet::ConfigureMutexChecks();
  return Run(argc, argv);
}
