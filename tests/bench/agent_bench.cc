// fleet_agent_bench: command round-trip latency between fleetd's agent registry and an
// agent over a real loopback gRPC stream: 1,000 ReadPort commands one after another, with a
// backend that answers at once, so the figure is the control plane's own cost. Prints the
// median and p99; then the same for commands each sent after the processes sat idle
// (--idle-ms, 100 by default, as a retrain's answer comes after the link trained), which is
// what a hop costs on the way to READY: an idle host's cores and caches wake up first.
//
//   fleet_agent_bench [--commands 1000] [--idle-commands 50] [--idle-ms 100]
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/mutex_checks.h"
#include "controller/agent_registry/agent_registry.h"
#include "controller/service/agent_service.h"
#include "controller/store/store.h"
#include "onic_agent/agent.h"
#include "testing/fake_clock.h"

namespace {

// Answers every call at once: the benchmark measures the path, not the hardware.
class InstantBackend : public fleet::onic_agent::OnicBackend {
 public:
  std::string name() const override { return "instant"; }
  absl::StatusOr<std::vector<fleet::v1::AgentOnic>> Discover() override {
    fleet::v1::AgentOnic onic;
    onic.set_serial("S1");
    return std::vector<fleet::v1::AgentOnic>{onic};
  }
  fleet::onic_agent::CommandOutcome Quiesce(const std::string&, uint32_t, absl::Time) override {
    return {};
  }
  fleet::onic_agent::CommandOutcome Retrain(const std::string&, uint32_t,
                                            const fleet::v1::PeerIdentity&, absl::Time) override {
    return {};
  }
  fleet::onic_agent::CommandOutcome ReadPort(const std::string& serial, uint32_t port) override {
    fleet::onic_agent::CommandOutcome outcome;
    outcome.link.set_onic_serial(serial);
    outcome.link.set_port(port);
    outcome.link.set_status(fleet::v1::LINK_STATUS_UP);
    return outcome;
  }
  absl::Status Blink(const std::string&, absl::Duration) override { return absl::OkStatus(); }
};

}  // namespace

int main(int argc, char** argv) {
  fleet::ConfigureMutexChecks();  // As the daemons run (common/mutex_checks.h).
  int64_t commands = 1000;
  int64_t idle_commands = 50;
  int64_t idle_ms = 100;
  fleet::FlagSet flags("fleet_agent_bench [--commands N] [--idle-commands N] [--idle-ms MS]",
                       "Command round trips, fleetd's registry to an agent, over loopback gRPC.");
  flags.Int("commands", &commands, "commands to time, one after another");
  flags.Int("idle-commands", &idle_commands, "commands to time after an idle wait each");
  flags.Int("idle-ms", &idle_ms, "the idle wait before each of those");
  absl::StatusOr<std::vector<std::string>> rest =
      flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!rest.ok() || flags.help_requested() || commands < 1 || idle_commands < 0 || idle_ms < 0) {
    std::cerr << (rest.ok() ? flags.Help() : std::string(rest.status().message())) << "\n";
    return rest.ok() ? 0 : 2;
  }
  fleet::SetMinLogLevel(fleet::LogLevel::kWarning);
  fleet::testing::FakeClock clock;
  std::unique_ptr<fleet::store::Store> store = *fleet::store::OpenSqliteStore({":memory:", &clock});
  fleet::agent_registry::AgentRegistry registry({}, store.get(), store.get(), &clock);
  fleet::service::AgentServiceImpl service(&registry, /*grants=*/nullptr);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();

  InstantBackend backend;
  fleet::onic_agent::AgentOptions options;
  options.controller = absl::StrCat("127.0.0.1:", port);
  options.host = "bench";
  options.tls.insecure = true;  // The bench's server is plaintext.
  options.monitor_interval = absl::Hours(1);
  fleet::onic_agent::Agent agent(options, &backend);
  std::thread runner([&] { agent.Run(); });
  while (registry.ListAgents().empty() || !registry.ListAgents()[0].connected()) {
    absl::SleepFor(absl::Milliseconds(1));
  }

  // Times `count` round trips, each after `idle` without traffic, after `warmup` untimed.
  auto time = [&](int64_t count, int64_t warmup, absl::Duration idle,
                  const std::string& what) -> bool {
    std::vector<double> us;
    for (int64_t i = 0; i < count + warmup; ++i) {
      fleet::v1::Command read;
      read.mutable_read_port()->set_onic_serial("S1");
      read.mutable_read_port()->set_port(1);
      absl::SleepFor(idle);
      const absl::Time start = absl::Now();
      absl::StatusOr<fleet::v1::CommandResult> result =
          registry.SendCommand("S1", read, absl::Now() + absl::Seconds(10));
      const double elapsed = absl::ToDoubleMicroseconds(absl::Now() - start);
      if (!result.ok()) {
        std::cerr << "command failed: " << result.status() << "\n";
        return false;
      }
      if (i >= warmup) us.push_back(elapsed);
    }
    if (us.empty()) return true;
    std::sort(us.begin(), us.end());
    std::printf("agent command round trip over loopback gRPC, %s: %zu commands\n", what.c_str(),
                us.size());
    std::printf("  median %8.1f us\n", us[us.size() / 2]);
    std::printf("  p99    %8.1f us\n", us[us.size() * 99 / 100]);
    std::printf("  max    %8.1f us\n", us.back());
    std::fflush(stdout);
    return true;
  };
  // The first 50 warm the connection up.
  const bool timed = time(commands, 50, absl::ZeroDuration(), "one after another") &&
                     time(idle_commands, 0, absl::Milliseconds(idle_ms),
                          absl::StrCat("each after ", idle_ms, " ms idle"));
  agent.Stop();
  runner.join();
  registry.Shutdown();
  server->Shutdown();
  return timed ? 0 : 1;
}
