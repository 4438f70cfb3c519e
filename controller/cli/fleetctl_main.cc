// fleetctl: the operators' command line for fleetd. The only place that reads argv and the
// environment and opens the gRPC channel; everything else is in the fleet::cli library.
#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/grpc_tls.h"
#include "controller/cli/commands.h"
#include "controller/cli/leader_endpoint.h"

namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

// SIGINT and SIGTERM are taken by a thread of their own: a verb following a stream is told to
// stop (and ends cleanly, exit 0); any other verb is ended by the signal as usual. The
// StopSignal is never freed: the thread may still hold it while the process exits.
fleet::cli::StopSignal* HandleStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // Blocked before any other thread starts, so every thread inherits the mask and only the
  // waiting thread receives them.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto* stop = new fleet::cli::StopSignal;
  std::thread([signals, stop] {
    int received = 0;
    while (sigwait(&signals, &received) == 0) {
      if (stop->Stop()) continue;
      ::signal(received, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, received);
      pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      raise(received);
    }
  }).detach();
  return stop;
}

}  // namespace

int main(int argc, char** argv) {
  fleet::SystemClock clock;
  fleet::cli::Environment env;
  env.variables.server = EnvOr("FLEET_SERVER", "");
  env.variables.ca = EnvOr("FLEET_CA", "");
  env.variables.cert = EnvOr("FLEET_CERT", "");
  env.variables.key = EnvOr("FLEET_KEY", "");
  env.variables.context = EnvOr("FLEET_CONTEXT", "");
  env.variables.config = EnvOr("FLEET_CONFIG", "");
  env.variables.insecure = EnvOr("FLEET_INSECURE", "");
  env.variables.xdg_config_home = EnvOr("XDG_CONFIG_HOME", "");
  env.variables.home = EnvOr("HOME", "");
  env.principal = absl::StrCat("operator:", EnvOr("USER", "unknown"));
  env.clock = &clock;
  // https://no-color.org: set and not empty means no colour.
  env.color_terminal = isatty(STDOUT_FILENO) == 1 && EnvOr("NO_COLOR", "").empty();
  env.stop = HandleStopSignals();

  auto connect = [](const std::string& address,
                    const fleet::ClientTlsFiles& tls) -> absl::StatusOr<fleet::cli::ServerStubs> {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        fleet::ClientCredentials(tls);
    if (!credentials.ok()) return credentials.status();
    // Several endpoints (a replicated fleetd): the leader's, found by its health check.
    const std::string endpoint = fleet::cli::ChooseEndpoint(fleet::cli::SplitEndpoints(address),
                                                            *credentials, absl::Seconds(1));
    return fleet::cli::NewServerStubs(grpc::CreateChannel(endpoint, *credentials));
  };
  // gRPC is started here and stopped, blocking, before main returns. Otherwise its last
  // channel may be torn down on one of its own threads, which then frees the connection's TLS
  // state on a detached thread while the process exits: a leak to LeakSanitizer, and work
  // cut short.
  grpc_init();
  const int code = fleet::cli::RunFleetctl(std::vector<std::string>(argv + 1, argv + argc), env,
                                           connect, std::cout, std::cerr);
  grpc_shutdown_blocking();
  return code;
}
