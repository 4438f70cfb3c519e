// fleet-onic-agent: the per-host O-NIC agent. Dials out to fleetd, registers this host's
// O-NICs and serves quiesce/retrain/read/blink commands through its backend until SIGTERM.
#include <signal.h>

#include <functional>
#include <iostream>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flags.h"
#include "common/grpc_tls.h"
#include "common/log.h"
#include "common/metrics_endpoint.h"
#include "common/mutex_checks.h"
#include "common/shutdown_signals.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "onic_agent/agent.h"
#include "onic_agent/bring_up.h"
#include "onic_agent/config.h"
#include "onic_agent/make_backend.h"

namespace {

using fleet::onic_agent::AgentConfig;
using Configure = std::function<absl::StatusOr<AgentConfig>(const std::string& file)>;

fleet::ClientTlsFiles TlsOf(const AgentConfig& config) {
  return {config.tls_ca_file, config.tls_cert_file, config.tls_key_file, config.insecure};
}

// What a config needs to serve fleetd; a usage error naming what is missing otherwise.
absl::Status CheckServing(const AgentConfig& config) {
  if (config.controller.empty() || config.host.empty() || config.backend.empty()) {
    return absl::InvalidArgumentError(
        "--controller, --host and --backend are required (flags or config); see --help");
  }
  RETURN_IF_ERROR(fleet::onic_agent::CheckAgentTls(config));
  // Read once now, so a missing file stops the agent at start instead of in a retry loop.
  return fleet::ClientCredentials(TlsOf(config)).status();
}

fleet::onic_agent::AgentOptions OptionsOf(const AgentConfig& config,
                                          fleet::onic_agent::AgentMetrics* metrics) {
  fleet::onic_agent::AgentOptions options;
  options.metrics = metrics;
  options.controller = config.controller;
  options.tls = TlsOf(config);
  options.host = config.host;
  options.software_version = fleet::kVersion;
  options.monitor_interval = absl::Milliseconds(config.monitor_interval_ms);
  return options;
}

// Several emulated agents in this process, one per file, until SIGTERM: each its own
// backend, identity, stream and heartbeat, as if each ran alone. Prints `agents: N` once
// every one is started (not yet connected).
int RunMany(const std::vector<std::string>& files, const Configure& configure) {
  std::vector<AgentConfig> configs;
  std::set<std::string> hosts;
  for (const std::string& file : files) {
    absl::StatusOr<AgentConfig> config = configure(file);
    absl::Status usable = config.status();
    if (usable.ok() && config->backend != "emulated") {
      usable = absl::InvalidArgumentError(absl::StrCat(
          "backend '", config->backend, "': several agents share a process only emulated"));
    }
    if (usable.ok() && !config->host.empty() && !hosts.insert(config->host).second) {
      // Two streams for one host would replace each other for ever.
      usable = absl::InvalidArgumentError(
          absl::StrCat("host '", config->host, "' is named by an earlier file too"));
    }
    if (usable.ok()) usable = CheckServing(*config);
    if (!usable.ok()) {
      std::cerr << "fleet-onic-agent: " << file << ": " << usable.message() << "\n";
      return 2;
    }
    configs.push_back(*std::move(config));
  }
  const fleet::ShutdownSignals shutdown = fleet::ShutdownSignals::Block();
  std::vector<std::unique_ptr<fleet::onic_agent::OnicBackend>> backends;
  for (const AgentConfig& config : configs) {
    absl::StatusOr<std::unique_ptr<fleet::onic_agent::OnicBackend>> made =
        fleet::onic_agent::MakeBackend(config);
    if (!made.ok()) {
      std::cerr << "fleet-onic-agent: host " << config.host << ": " << made.status().message()
                << "\n";
      return 1;
    }
    backends.push_back(*std::move(made));
  }
  std::vector<std::unique_ptr<fleet::onic_agent::Agent>> agents;  // Stopped before the backends.
  std::vector<std::thread> runners;
  for (size_t i = 0; i < configs.size(); ++i) {
    agents.push_back(std::make_unique<fleet::onic_agent::Agent>(OptionsOf(configs[i], nullptr),
                                                                backends[i].get()));
    runners.emplace_back([agent = agents.back().get()] { agent->Run(); });
  }
  std::cout << "agents: " << agents.size() << std::endl;
  FLEET_LOG(INFO) << "fleet-onic-agent " << fleet::kVersion << ": " << agents.size()
                  << " emulated agents, controller " << configs.front().controller;
  const int signal_number = shutdown.Wait();
  FLEET_LOG(INFO) << "signal " << signal_number << ": stopping " << agents.size() << " agents";
  for (auto& agent : agents) agent->Stop();
  for (std::thread& runner : runners) runner.join();
  return 0;
}

int Run(int argc, char** argv) {
  std::string config_file, controller, host, backend, simulator, metrics_address, tls_ca_file,
      tls_cert_file, tls_key_file, log_level = "info";
  fleet::onic_agent::ExpectedDeviceText expect;
  bool insecure = false;
  int64_t training_ms = -1, metrics_port = -2, monitor_interval_ms = 0;
  fleet::FlagSet flags(
      "fleet-onic-agent --controller ADDR --host NAME --backend pcie-sysfs|emulated "
      "[--config FILE]\n"
      "       fleet-onic-agent --config FILE --backend B discover | read|quiesce|retrain SERIAL "
      "PORT | -",
      "The per-host O-NIC agent: dials out to fleetd and quiesces, retrains and verifies\n"
      "this host's optical links on its command. Flags override the config file.\n"
      "With a verb it does not dial fleetd: it runs that one backend call on this host's\n"
      "O-NICs, prints the answer as JSON and exits 0 when it succeeded (bringing up a host);\n"
      "with `-` it runs such verbs read from stdin, one a line.");
  flags.String("config", &config_file,
               "YAML config file with this host's O-NICs; several, comma-separated: one agent "
               "per file in this process, each its own host, identity, stream and heartbeat "
               "(emulated backend only, no /metrics: a bench's or a demo's many hosts)");
  flags.String("controller", &controller,
               "fleetd's gRPC address, HOST:PORT; several, comma-separated, for a replicated "
               "fleetd (the agent finds the leader)");
  flags.String("tls-ca-file", &tls_ca_file, "the site CA fleetd's certificate must chain to, PEM");
  flags.String("tls-cert-file", &tls_cert_file,
               "this agent's certificate (spiffe://SITE/agent/HOST), PEM");
  flags.String("tls-key-file", &tls_key_file, "its private key, PEM");
  flags.Bool("insecure", &insecure,
             "dial fleetd in plaintext, without TLS: only for a fleetd started with --insecure");
  flags.String("host", &host, "this host's name in inventory");
  flags.String("backend", &backend, "pcie-sysfs or emulated");
  flags.String("simulator", &simulator, "emulated: polatis-emu's REST address, HOST:PORT");
  flags.Int("training-ms", &training_ms, "emulated: simulated link training time");
  flags.Int("monitor-interval-ms", &monitor_interval_ms,
            "how often up ports are read for link changes nobody asked about, 1..3600000; "
            "overrides the config's monitor_interval_ms (1000 unless set)");
  flags.String("metrics-address", &metrics_address,
               "address to serve Prometheus /metrics on (default 127.0.0.1)");
  flags.Int("metrics-port", &metrics_port,
            "Prometheus /metrics port (default 9465); 0 picks a free one, -1 serves none");
  flags.String("log-level", &log_level, "debug, info, warning or error");
  fleet::onic_agent::DeclareExpectFlags(flags, &expect);
  absl::StatusOr<std::vector<std::string>> rest =
      flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!rest.ok()) {
    std::cerr << "fleet-onic-agent: " << rest.status().message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return 0;
  }
  // One config: the file's (if any) with the flags over it. Errors are usage errors.
  auto configure = [&](const std::string& file) -> absl::StatusOr<fleet::onic_agent::AgentConfig> {
    fleet::onic_agent::AgentConfig config;
    if (!file.empty()) {
      ASSIGN_OR_RETURN(config, fleet::onic_agent::ReadAgentConfigFile(file));
    }
    if (!controller.empty()) config.controller = controller;
    // Flags override the file's way of dialing as a whole: a file's TLS and a flag's plaintext
    // (or the other way round) do not mix.
    if (!tls_ca_file.empty() || !tls_cert_file.empty() || !tls_key_file.empty()) {
      config.insecure = false;
      if (!tls_ca_file.empty()) config.tls_ca_file = tls_ca_file;
      if (!tls_cert_file.empty()) config.tls_cert_file = tls_cert_file;
      if (!tls_key_file.empty()) config.tls_key_file = tls_key_file;
    }
    if (flags.IsSet("insecure")) {
      if (insecure && (!tls_ca_file.empty() || !tls_cert_file.empty() || !tls_key_file.empty())) {
        return absl::InvalidArgumentError(
            "--insecure with --tls-*-file: plaintext or TLS, not both");
      }
      config.insecure = insecure;
      if (insecure) config.tls_ca_file = config.tls_cert_file = config.tls_key_file = "";
    }
    if (!host.empty()) config.host = host;
    if (!backend.empty()) config.backend = backend;
    if (!simulator.empty()) config.simulator = simulator;
    if (training_ms >= 0) config.training_ms = static_cast<int>(training_ms);
    if (flags.IsSet("monitor-interval-ms")) {
      if (monitor_interval_ms <= 0 || monitor_interval_ms > 3'600'000) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--monitor-interval-ms ", monitor_interval_ms, " must be between 1 and 3600000"));
      }
      config.monitor_interval_ms = static_cast<int>(monitor_interval_ms);
    }
    if (!metrics_address.empty()) config.metrics_address = metrics_address;
    if (metrics_port != -2) {
      if (metrics_port < -1 || metrics_port > 65535) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--metrics-port ", metrics_port, " is not a port (0 picks one, -1 serves none)"));
      }
      config.metrics_port = static_cast<int>(metrics_port);
    }
    return config;
  };
  if (log_level == "debug") fleet::SetMinLogLevel(fleet::LogLevel::kDebug);
  if (log_level == "warning") fleet::SetMinLogLevel(fleet::LogLevel::kWarning);
  if (log_level == "error") fleet::SetMinLogLevel(fleet::LogLevel::kError);
  const std::vector<std::string> config_files = absl::StrSplit(config_file, ',', absl::SkipEmpty());
  if (config_files.size() > 1) {
    if (!rest->empty() || !host.empty() || (metrics_port != -2 && metrics_port != -1) ||
        !expect.vendor.empty() || !expect.device.empty() || !expect.dsn.empty()) {
      std::cerr << "fleet-onic-agent: several --config files run one agent each: no verb, no "
                   "--expect-*, no --host (each file names its own) and no --metrics-port (the "
                   "agents of one process would export one another's series; run one per "
                   "process to scrape them)\n";
      return 2;
    }
    return RunMany(config_files, configure);
  }
  absl::StatusOr<fleet::onic_agent::AgentConfig> configured =
      configure(config_files.empty() ? "" : config_files.front());
  if (!configured.ok()) {
    std::cerr << "fleet-onic-agent: " << configured.status().message() << "\n";
    return 2;
  }
  fleet::onic_agent::AgentConfig& config = *configured;
  if (!rest->empty()) {
    const bool session = *rest == std::vector<std::string>{"-"};
    absl::StatusOr<fleet::onic_agent::BringUpCommand> command =
        session ? fleet::onic_agent::BringUpCommand{}
                : fleet::onic_agent::ParseBringUpCommand(*rest, expect);
    if (!command.ok()) {
      std::cerr << "fleet-onic-agent: " << command.status().message() << "\n";
      return 2;
    }
    if (session && (!expect.vendor.empty() || !expect.device.empty() || !expect.dsn.empty())) {
      std::cerr << "fleet-onic-agent: with `-`, --expect-* goes on each retrain line of stdin\n";
      return 2;
    }
    if (config.backend.empty()) {
      std::cerr << "fleet-onic-agent: --backend is required (flag or config); see --help\n";
      return 2;
    }
    absl::StatusOr<std::unique_ptr<fleet::onic_agent::OnicBackend>> made =
        fleet::onic_agent::MakeBackend(config);
    if (!made.ok()) {
      std::cerr << "fleet-onic-agent: " << made.status().message() << "\n";
      return 2;
    }
    return session ? fleet::onic_agent::RunBringUpSession(**made, std::cin, std::cout)
                   : fleet::onic_agent::RunBringUpCommand(**made, *command, std::cout);
  }
  if (!expect.vendor.empty() || !expect.device.empty() || !expect.dsn.empty()) {
    std::cerr << "fleet-onic-agent: --expect-* goes with the retrain verb; fleetd says what "
                 "to expect when it runs the agent\n";
    return 2;
  }
  if (absl::Status serving = CheckServing(config); !serving.ok()) {
    std::cerr << "fleet-onic-agent: " << serving.message() << "\n";
    return 2;
  }

  // No work in signal handlers: shutdown signals are taken synchronously below.
  const fleet::ShutdownSignals shutdown = fleet::ShutdownSignals::Block();

  absl::StatusOr<std::unique_ptr<fleet::onic_agent::OnicBackend>> made =
      fleet::onic_agent::MakeBackend(config);
  if (!made.ok()) {
    std::cerr << "fleet-onic-agent: " << made.status().message() << "\n";
    return 1;
  }
  auto registry = std::make_shared<prometheus::Registry>();
  fleet::onic_agent::AgentMetrics metrics(*registry, fleet::kVersion);
  std::unique_ptr<fleet::metrics::MetricsEndpoint> endpoint;
  if (config.metrics_port >= 0) {
    absl::StatusOr<std::unique_ptr<fleet::metrics::MetricsEndpoint>> started =
        fleet::metrics::MetricsEndpoint::Start(config.metrics_address, config.metrics_port,
                                               {registry});
    if (started.ok()) {
      endpoint = std::move(*started);
      // On its own line, so whoever started the agent can point Prometheus at it.
      std::cout << "metrics: " << endpoint->address() << std::endl;
    } else {
      // The links matter more than their metrics: the agent serves fleetd without them.
      FLEET_LOG(WARNING) << started.status().message() << "; serving fleetd without metrics";
    }
  }

  fleet::onic_agent::Agent agent(OptionsOf(config, &metrics), made->get());
  std::thread runner([&agent] { agent.Run(); });
  FLEET_LOG(INFO) << "fleet-onic-agent " << fleet::kVersion << " for host " << config.host << " ("
                  << config.backend << ", "
                  << (config.onic_discovery ? std::string("O-NICs found on PCIe")
                                            : absl::StrCat(config.onics.size(), " O-NICs"))
                  << "), controller " << config.controller
                  << (config.insecure ? " (plaintext)" : " (mutual TLS)");
  const int signal_number = shutdown.Wait();
  FLEET_LOG(INFO) << "signal " << signal_number << ": stopping";
  agent.Stop();
  runner.join();
  endpoint.reset();  // Before the metrics it serves.
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  fleet::ConfigureMutexChecks();
  return Run(argc, argv);
}
