// fleet-onic-agent: the per-host O-NIC agent. Dials out to fleetd, registers this host's
// O-NICs and serves quiesce/retrain/read/blink commands through its backend until SIGTERM.
#include <signal.h>

#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/grpc_tls.h"
#include "common/log.h"
#include "common/metrics_endpoint.h"
#include "common/shutdown_signals.h"
#include "common/version.h"
#include "onic_agent/agent.h"
#include "onic_agent/bring_up.h"
#include "onic_agent/config.h"
#include "onic_agent/make_backend.h"

namespace {

int Run(int argc, char** argv) {
  std::string config_file, controller, host, backend, simulator, metrics_address, tls_ca_file,
      tls_cert_file, tls_key_file, log_level = "info";
  fleet::onic_agent::ExpectedDeviceText expect;
  bool insecure = false;
  int64_t training_ms = -1, metrics_port = -2;
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
  flags.String("config", &config_file, "YAML config file with this host's O-NICs");
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
  fleet::onic_agent::AgentConfig config;
  if (!config_file.empty()) {
    absl::StatusOr<fleet::onic_agent::AgentConfig> loaded =
        fleet::onic_agent::ReadAgentConfigFile(config_file);
    if (!loaded.ok()) {
      std::cerr << "fleet-onic-agent: " << loaded.status().message() << "\n";
      return 2;
    }
    config = *loaded;
  }
  if (!controller.empty()) config.controller = controller;
  // Flags override the file's way of dialing as a whole: a file's TLS and a flag's plaintext (or
  // the other way round) do not mix.
  if (!tls_ca_file.empty() || !tls_cert_file.empty() || !tls_key_file.empty()) {
    config.insecure = false;
    if (!tls_ca_file.empty()) config.tls_ca_file = tls_ca_file;
    if (!tls_cert_file.empty()) config.tls_cert_file = tls_cert_file;
    if (!tls_key_file.empty()) config.tls_key_file = tls_key_file;
  }
  if (flags.IsSet("insecure")) {
    if (insecure && (!tls_ca_file.empty() || !tls_cert_file.empty() || !tls_key_file.empty())) {
      std::cerr << "fleet-onic-agent: --insecure with --tls-*-file: plaintext or TLS, not both\n";
      return 2;
    }
    config.insecure = insecure;
    if (insecure) config.tls_ca_file = config.tls_cert_file = config.tls_key_file = "";
  }
  if (!host.empty()) config.host = host;
  if (!backend.empty()) config.backend = backend;
  if (!simulator.empty()) config.simulator = simulator;
  if (training_ms >= 0) config.training_ms = static_cast<int>(training_ms);
  if (!metrics_address.empty()) config.metrics_address = metrics_address;
  if (metrics_port != -2) {
    if (metrics_port < -1 || metrics_port > 65535) {
      std::cerr << "fleet-onic-agent: --metrics-port " << metrics_port
                << " is not a port (0 picks one, -1 serves none)\n";
      return 2;
    }
    config.metrics_port = static_cast<int>(metrics_port);
  }
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
  if (config.controller.empty() || config.host.empty() || config.backend.empty()) {
    std::cerr << "fleet-onic-agent: --controller, --host and --backend are required (flags or "
                 "config); see --help\n";
    return 2;
  }
  if (absl::Status tls = fleet::onic_agent::CheckAgentTls(config); !tls.ok()) {
    std::cerr << "fleet-onic-agent: " << tls.message() << "\n";
    return 2;
  }
  fleet::ClientTlsFiles tls{config.tls_ca_file, config.tls_cert_file, config.tls_key_file,
                            config.insecure};
  // Read once now, so a missing file stops the agent at start instead of in a retry loop.
  if (absl::Status readable = fleet::ClientCredentials(tls).status(); !readable.ok()) {
    std::cerr << "fleet-onic-agent: " << readable.message() << "\n";
    return 2;
  }
  if (log_level == "debug") fleet::SetMinLogLevel(fleet::LogLevel::kDebug);
  if (log_level == "warning") fleet::SetMinLogLevel(fleet::LogLevel::kWarning);
  if (log_level == "error") fleet::SetMinLogLevel(fleet::LogLevel::kError);

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

  fleet::onic_agent::AgentOptions options;
  options.metrics = &metrics;
  options.controller = config.controller;
  options.tls = tls;
  options.host = config.host;
  options.software_version = fleet::kVersion;
  fleet::onic_agent::Agent agent(options, made->get());
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

int main(int argc, char** argv) { return Run(argc, argv); }
