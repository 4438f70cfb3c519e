// polatis-emu: a standalone Polatis Series 7000 emulator (docs/polatis-emulator.md). Reads its
// flags, starts the emulator, prints the addresses it serves (`tl1: HOST:PORT`,
// `rest: HOST:PORT`) and serves until SIGTERM or SIGINT.
#include <arpa/inet.h>
#include <signal.h>

#include <cmath>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/mutex_checks.h"
#include "common/shutdown_signals.h"
#include "switch_adapters/polatis/emulator/emulator.h"

namespace {

using fleet::polatis_emu::EmulatorOptions;

// Turns the flag values into options; a message naming the flag when one is out of range.
absl::StatusOr<EmulatorOptions> MakeOptions(const std::string& size, int64_t tl1_port,
                                            int64_t rest_port, const std::string& listen,
                                            int64_t switch_ms, int64_t session_timeout_s,
                                            const std::string& insertion_loss,
                                            const std::string& yang_revision) {
  EmulatorOptions options;
  absl::StatusOr<fleet::polatis_emu::SwitchSize> parsed = fleet::polatis_emu::ParseSwitchSize(size);
  if (!parsed.ok())
    return absl::InvalidArgumentError(absl::StrCat("--size: ", parsed.status().message()));
  options.size = *parsed;
  for (auto [name, port] :
       {std::pair{"--tl1-port", tl1_port}, std::pair{"--rest-port", rest_port}}) {
    if (port < 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(name, " ", port, " is not a port (0..65535)"));
    }
  }
  options.tl1_port = static_cast<int>(tl1_port);
  options.rest_port = static_cast<int>(rest_port);
  in_addr ignored;
  if (inet_pton(AF_INET, listen.c_str(), &ignored) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen '", listen, "' is not an IPv4 address"));
  }
  options.listen_address = listen;
  if (switch_ms < 0 || switch_ms > 60'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--switch-ms ", switch_ms, " must be between 0 and 60000"));
  }
  options.switch_time = absl::Milliseconds(switch_ms);
  if (session_timeout_s < 0 || session_timeout_s > 86'400) {
    return absl::InvalidArgumentError(absl::StrCat("--session-timeout-s ", session_timeout_s,
                                                   " must be between 0 (never) and 86400"));
  }
  options.session_timeout = absl::Seconds(session_timeout_s);
  if (!absl::SimpleAtod(insertion_loss, &options.insertion_loss_db) ||
      !std::isfinite(options.insertion_loss_db) || options.insertion_loss_db < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--insertion-loss-db '", insertion_loss, "' must be a number >= 0"));
  }
  if (yang_revision == "current") {
    options.yang_revision = fleet::polatis_emu::YangRevision::kCurrent;
  } else if (yang_revision == "legacy") {
    options.yang_revision = fleet::polatis_emu::YangRevision::kLegacy;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--yang-revision '", yang_revision, "' must be current or legacy"));
  }
  return options;
}

int Run(int argc, char** argv) {
  const EmulatorOptions defaults;
  std::string size = defaults.size.ToString();
  int64_t tl1_port = defaults.tl1_port;
  int64_t rest_port = defaults.rest_port;
  std::string listen = defaults.listen_address;
  std::string user = defaults.user;
  std::string password = defaults.password;
  int64_t switch_ms = absl::ToInt64Milliseconds(defaults.switch_time);
  std::string state;
  int64_t session_timeout_s = 0;
  std::string insertion_loss = "1.5";
  std::string sid = defaults.sid;
  std::string yang_revision = "current";
  std::string tls_cert;
  std::string tls_key;

  fleet::FlagSet flags(
      "polatis-emu [flags]",
      "Emulates a Polatis Series 7000 optical switch: TL1 over TCP and the REST API over\n"
      "HTTP on one switch model, plus a /sim/v1 side-channel on the REST port for emulated\n"
      "light and fault injection. Prints `tl1: HOST:PORT` and `rest: HOST:PORT`, then serves\n"
      "until SIGTERM or SIGINT. With --tls-cert and --tls-key the REST port (and /sim/v1 on\n"
      "it) serves HTTPS only. See docs/polatis-emulator.md.");
  flags.String("size", &size, "switch size NxM: ingress ports 1..N, egress N+1..N+M");
  flags.Int("tl1-port", &tl1_port, "TL1 port; 0 picks a free one");
  flags.Int("rest-port", &rest_port, "REST (and /sim/v1) port; 0 picks a free one");
  flags.String("listen", &listen, "IPv4 address to serve both ports on");
  flags.String("user", &user, "user name for TL1 ACT-USER and REST Basic auth");
  flags.String("password", &password, "password for TL1 ACT-USER and REST Basic auth");
  flags.Int("switch-ms", &switch_ms, "milliseconds a new cross-connect takes to carry light");
  flags.String("state", &state, "file keeping cross-connects and shutters across restarts");
  flags.Int("session-timeout-s", &session_timeout_s,
            "idle seconds before a TL1 session is logged out; 0 = never");
  flags.String("insertion-loss-db", &insertion_loss, "loss of light through a cross-connect");
  flags.String("sid", &sid, "system identifier shown in TL1 responses");
  flags.String("yang-revision", &yang_revision,
               "current, or legacy (the cross-connect list is named `pairs`)");
  flags.String("tls-cert", &tls_cert,
               "PEM certificate (chain) for HTTPS on the REST port; needs --tls-key");
  flags.String("tls-key", &tls_key, "PEM private key of --tls-cert");

  absl::StatusOr<std::vector<std::string>> positional =
      flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!positional.ok()) {
    std::cerr << "polatis-emu: " << positional.status().message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return 0;
  }
  if (!positional->empty()) {
    std::cerr << "polatis-emu: unexpected argument '" << positional->front() << "'; see --help\n";
    return 2;
  }
  absl::StatusOr<EmulatorOptions> options =
      MakeOptions(size, tl1_port, rest_port, listen, switch_ms, session_timeout_s, insertion_loss,
                  yang_revision);
  if (!options.ok()) {
    std::cerr << "polatis-emu: " << options.status().message() << "\n";
    return 2;
  }
  if (user.empty() || sid.empty()) {
    std::cerr << "polatis-emu: --user and --sid must not be empty\n";
    return 2;
  }
  options->user = user;
  options->password = password;
  options->state_file = state;
  options->sid = sid;
  if (tls_cert.empty() != tls_key.empty()) {
    std::cerr << "polatis-emu: --tls-cert and --tls-key go together\n";
    return 2;
  }
  options->tls_certificate_file = tls_cert;
  options->tls_key_file = tls_key;

  // No work in signal handlers: shutdown signals are taken synchronously below.
  const fleet::ShutdownSignals shutdown = fleet::ShutdownSignals::Block();

  fleet::SystemClock clock;
  absl::StatusOr<std::unique_ptr<fleet::polatis_emu::Emulator>> emulator =
      fleet::polatis_emu::Emulator::Start(*options, &clock);
  if (!emulator.ok()) {
    std::cerr << "polatis-emu: cannot start: " << emulator.status().message() << "\n";
    return 1;
  }
  std::cout << "tl1: " << (*emulator)->tl1_address() << "\n"
            << "rest: " << (*emulator)->rest_address() << "\n"
            << std::flush;
  FLEET_LOG(INFO) << "polatis-emu " << options->size.ToString() << " serving TL1 on "
                  << (*emulator)->tl1_address() << ", REST on " << (*emulator)->rest_address();

  const int signal_number = shutdown.Wait();
  FLEET_LOG(INFO) << "signal " << signal_number << ": shutting down";
  (*emulator)->Stop();
  emulator->reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  fleet::ConfigureMutexChecks();
  return Run(argc, argv);
}
