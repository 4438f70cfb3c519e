// The agent over a real loopback gRPC stream to fleetd's agent registry (the registry's own
// tests are in tests/agent_registry/).
#include "onic_agent/agent.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "controller/agent_registry/agent_registry.h"
#include "fleet/v1/names.h"
#include "onic_agent/config.h"
#include "onic_agent/make_backend.h"
#include "tests/eventually.h"
#include "tests/onic_agent/agent_fixture.h"
#include "tests/onic_agent/fake_pcie_sysfs.h"

namespace fleet::onic_agent {
namespace {

using ::fleet::testing::Eventually;
using ::testing::HasSubstr;

// A retrain sent before the circuit is made: it waits up to `await_light` for PEER/1's light.
v1::Command ArmedRetrain(const std::string& serial, uint32_t port, absl::Duration await_light) {
  v1::Command command = Retrain(serial, port);
  command.mutable_retrain()->mutable_expected_peer()->set_onic_serial("PEER");
  command.mutable_retrain()->mutable_expected_peer()->set_port(1);
  *command.mutable_retrain()->mutable_await_light() =
      google::protobuf::util::TimeUtil::NanosecondsToDuration(
          absl::ToInt64Nanoseconds(await_light));
  return command;
}

v1::Command Quiesce(const std::string& serial, uint32_t port) {
  v1::Command command;
  command.mutable_quiesce()->set_onic_serial(serial);
  command.mutable_quiesce()->set_port(port);
  return command;
}

// One command handed over with Send, collected later.
std::unique_ptr<agent_registry::SentCommands> SendOne(agent_registry::AgentRegistry& registry,
                                                      v1::Command command, absl::Time deadline) {
  std::vector<agent_registry::AddressedCommand> commands(1);
  commands[0].onic_serial = command.has_retrain() ? command.retrain().onic_serial() : "";
  commands[0].command = std::move(command);
  return registry.Send(std::move(commands), deadline);
}

TEST(AgentTest, RegistersAndIsListed) {
  Controller controller;
  FakeBackend backend({"S1"});
  RunningAgent agent(controller.address(), "h1", &backend);
  ASSERT_TRUE(Eventually([&] {
    std::optional<v1::Agent> a = controller.Agent("h1");
    return a && a->connected();
  }));
  v1::Agent listed = *controller.Agent("h1");
  EXPECT_EQ(listed.backend(), "fake");
  EXPECT_EQ(listed.software_version(), "test");
  EXPECT_THAT(listed.onic_serials(), ::testing::ElementsAre("S1"));
  EXPECT_TRUE(listed.inventory_mismatches().empty());
  // Its backend cannot see light arrive, so it is never sent a retrain before its circuit.
  EXPECT_TRUE(listed.capabilities().empty());
  EXPECT_FALSE(controller.registry().ArmsRetrains("S1"));
}

// A fleetd side that registers the agent with heartbeat interval `interval`, then sends
// `beats` heartbeats `interval` apart, and counts the heartbeats the agent sends.
class ScriptedFleetd final : public v1::AgentService::Service {
 public:
  // Says `interval` in `registered`, then sends `beats` heartbeats that far apart, each
  // naming `announced` as the interval from then on when it is set.
  ScriptedFleetd(absl::Duration interval, int beats,
                 std::optional<absl::Duration> announced = std::nullopt)
      : interval_(interval), beats_(beats), announced_(announced) {}

  grpc::Status Connect(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::ControllerMessage, v1::AgentMessage>* stream) override {
    v1::AgentMessage message;
    if (!stream->Read(&message) || !message.has_register_()) return grpc::Status::CANCELLED;
    {
      absl::MutexLock lock(&mu_);
      ++connections_;
    }
    std::thread writer([&] {
      v1::ControllerMessage registered;
      *registered.mutable_registered()->mutable_heartbeat_interval() =
          google::protobuf::util::TimeUtil::MillisecondsToDuration(
              absl::ToInt64Milliseconds(interval_));
      stream->Write(registered);
      for (int i = 1; i <= beats_; ++i) {
        v1::ControllerMessage beat;
        beat.mutable_heartbeat()->set_sequence(i);
        if (announced_) {
          *beat.mutable_heartbeat()->mutable_interval() =
              google::protobuf::util::TimeUtil::MillisecondsToDuration(
                  absl::ToInt64Milliseconds(*announced_));
        }
        if (!stream->Write(beat)) break;
        if (i < beats_) absl::SleepFor(interval_);
      }
      absl::MutexLock lock(&mu_);
      answered_when_done_ = answered_;
    });
    while (stream->Read(&message)) {
      absl::MutexLock lock(&mu_);
      answered_ += message.has_heartbeat() ? 1 : 0;
    }
    writer.join();
    return grpc::Status::OK;
  }
  int answered() {
    absl::MutexLock lock(&mu_);
    return answered_;
  }
  int connections() {
    absl::MutexLock lock(&mu_);
    return connections_;
  }
  // The agent's heartbeats when the last of ours had been sent; -1 before.
  int answered_when_done() {
    absl::MutexLock lock(&mu_);
    return answered_when_done_;
  }

 private:
  const absl::Duration interval_;
  const int beats_;
  const std::optional<absl::Duration> announced_;
  absl::Mutex mu_;
  int connections_ ABSL_GUARDED_BY(mu_) = 0;
  int answered_ ABSL_GUARDED_BY(mu_) = 0;
  int answered_when_done_ ABSL_GUARDED_BY(mu_) = -1;
};

// Serves `fleetd` on a loopback port while an agent runs against it; `check` runs meanwhile.
void WithAgentOf(ScriptedFleetd& fleetd, const std::function<void()>& check) {
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&fleetd);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  FakeBackend backend({"S1"});
  {
    RunningAgent agent(absl::StrCat("127.0.0.1:", port), "h1", &backend);
    check();
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

// The agent answers fleetd's heartbeat at once, not at its own next beat (an hour and a half
// away here): fleetd sends every agent's together, and the answers arriving together cost
// fleetd a few wakeups, not one per agent.
TEST(AgentTest, AnswersFleetdsHeartbeatAtOnce) {
  ScriptedFleetd fleetd(absl::Hours(1), 1);
  WithAgentOf(fleetd, [&] { EXPECT_TRUE(Eventually([&] { return fleetd.answered() == 1; })); });
}

// While fleetd's heartbeats come every interval, the agent only answers them: its own beat,
// due an interval and a half after its last, never races fleetd's next into two per interval.
TEST(AgentTest, SendsOneHeartbeatPerFleetdHeartbeat) {
  // 150 ms apart: a fleetd beat late by less than half an interval (a loaded machine, the
  // sanitizers) adds no beat of the agent's own; with its own beat due after one interval, as
  // fleetd's next, about every other interval had two.
  constexpr int kBeats = 10;
  ScriptedFleetd fleetd(absl::Milliseconds(150), kBeats);
  WithAgentOf(fleetd, [&] {
    ASSERT_TRUE(Eventually([&] { return fleetd.answered_when_done() >= 0; }));
    const int answered = fleetd.answered_when_done();
    EXPECT_GE(answered, kBeats - 2);  // The last answer may still be on its way.
    EXPECT_LE(answered, kBeats + 2);
  });
}

// fleetd lengthens its interval as a site's agents connect, and says so in each heartbeat:
// the agent then waits that long for fleetd's next, neither beating on its own nor
// reconnecting at three of the interval `registered` gave (200 ms here; 1.2 s are waited).
TEST(AgentTest, WaitsForFleetdsHeartbeatsAtTheIntervalTheyName) {
  ScriptedFleetd fleetd(absl::Milliseconds(200), 1, absl::Hours(1));
  WithAgentOf(fleetd, [&] {
    ASSERT_TRUE(Eventually([&] { return fleetd.answered() == 1; }));
    absl::SleepFor(absl::Milliseconds(1200));  // Six of the first interval: nothing is due.
    EXPECT_EQ(fleetd.answered(), 1);
    EXPECT_EQ(fleetd.connections(), 1);
  });
}

// An agent whose config asks it to find its O-NICs (onic_discovery) on a host with two of them:
// the one inventory knows (S1) is taken, the other (S0) is an alarm, as for a hand list.
TEST(AgentTest, OnicsItFindsOnPcieAreRegisteredAndCheckedAgainstInventory) {
  std::string root = std::filesystem::temp_directory_path() / "fleet-agent-sysfs-XXXXXX";
  ASSERT_NE(mkdtemp(root.data()), nullptr);
  const std::unique_ptr<std::string, void (*)(std::string*)> removed(
      &root, [](std::string* dir) { std::filesystem::remove_all(*dir); });
  fleet::testing::FakeClock clock;
  testing::FakePcieSysfs sysfs(root, &clock);
  for (const auto& [upstream, ports] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"0000:17:00.0", {"0000:18:00.0", "0000:18:01.0"}},
           {"0000:81:00.0", {"0000:82:00.0", "0000:82:01.0"}}}) {
    for (const std::string& port : ports) {
      testing::FakePortSpec spec;
      spec.bdf = port;
      spec.port_type = 6;
      sysfs.AddPort(spec);
    }
    testing::FakeFunction onic;
    onic.bdf = upstream;
    onic.vendor = 0x10ee;
    onic.device = 0x9038;
    sysfs.AddUpstreamPort(onic, ports);
  }
  absl::StatusOr<AgentConfig> config = ParseAgentConfig(
      absl::StrCat("host: h1\nbackend: pcie-sysfs\nsysfs_root: ", root,
                   "\nonic_discovery:\n  match: [\"10ee:9038\"]\n  serial: \"S{index}\"\n"),
      "agent.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<OnicBackend>> backend = MakeBackend(*config);
  ASSERT_TRUE(backend.ok()) << backend.status();

  Controller controller;
  {
    RunningAgent agent(controller.address(), "h1", backend->get());
    ASSERT_TRUE(Eventually([&] { return controller.AgentConnected("h1"); }));
    v1::Agent listed = *controller.Agent("h1");
    EXPECT_EQ(listed.backend(), "pcie-sysfs");
    EXPECT_THAT(listed.onic_serials(), ::testing::ElementsAre("S0", "S1"));
    EXPECT_THAT(listed.inventory_mismatches(),
                ::testing::ElementsAre(HasSubstr("O-NIC serial S0 is not in inventory")));
    absl::StatusOr<std::vector<v1::Event>> events = controller.store().ListEvents({});
    ASSERT_TRUE(events.ok()) << events.status();
    bool alarmed = false;
    for (const v1::Event& e : *events) {
      alarmed |= e.kind() == "agent.inventory_mismatch" &&
                 e.severity() == v1::EVENT_SEVERITY_ALARM &&
                 absl::StrContains(e.message(), "S0 is not in inventory");
    }
    EXPECT_TRUE(alarmed);
  }
}

// An agent whose backend sees light arrive, connected to fleetd's registry in-process.
class ArmedRetrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_.SeeLightArrive();
    agent_ = std::make_unique<RunningAgent>(controller_->address(), "h1", &backend_);
    ASSERT_TRUE(Eventually([&] { return controller_->AgentConnected("h1"); }));
  }
  agent_registry::AgentRegistry& registry() { return controller_->registry(); }
  // fleetd dies (`while_down` runs then) and comes back on its port; the agent reconnects.
  void RestartFleetd(const std::function<void()>& while_down = nullptr) {
    const int port = controller_->port();
    controller_.reset();
    if (while_down) while_down();
    controller_ = std::make_unique<Controller>(port);
    ASSERT_NE(controller_->port(), 0) << "could not listen on the same port again";
    ASSERT_TRUE(Eventually([&] { return controller_->AgentConnected("h1"); }));
  }
  // The new fleetd's retrain of S1/1 is answered OK within its 10 s.
  void ExpectARetrainAnswered() {
    absl::StatusOr<v1::CommandResult> retrained =
        registry().SendCommand("S1", Retrain("S1", 1), absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(retrained.ok()) << retrained.status();
    EXPECT_EQ(retrained->code(), 0) << retrained->message();
  }

  std::unique_ptr<Controller> controller_ = std::make_unique<Controller>();
  FakeBackend backend_{{"S1"}};
  std::unique_ptr<RunningAgent> agent_;
};

TEST_F(ArmedRetrainTest, AnArmedRetrainWaitsForItsLightThenTrains) {
  EXPECT_THAT(controller_->Agent("h1")->capabilities(), ::testing::ElementsAre("armed-retrain"));
  EXPECT_TRUE(registry().ArmsRetrains("S1"));
  std::unique_ptr<agent_registry::SentCommands> armed = SendOne(
      registry(), ArmedRetrain("S1", 1, absl::Seconds(30)), absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(Eventually([&] { return backend_.awaiting() == 1; }));
  EXPECT_THAT(backend_.calls(), ::testing::ElementsAre("await light S1/1"));
  backend_.Light("S1", 1);  // The switch made the circuit.
  std::vector<absl::StatusOr<v1::CommandResult>> results = registry().Await(std::move(armed));
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_EQ(results[0]->code(), 0) << results[0]->message();
  EXPECT_EQ(results[0]->link().status(), v1::LINK_STATUS_UP);
  EXPECT_THAT(backend_.calls(), ::testing::ElementsAre("await light S1/1", "retrain S1/1"));
}

TEST_F(ArmedRetrainTest, AQuiesceEndsAnArmedRetrainsWaitAndTheRetrainIsCancelled) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::unique_ptr<agent_registry::SentCommands> armed =
      SendOne(registry(), ArmedRetrain("S1", 1, absl::Seconds(60)), deadline);
  ASSERT_TRUE(Eventually([&] { return backend_.awaiting() == 1; }));
  // The switch refused the batch; fleetd quiesces the port. Without the cancel the quiesce
  // would wait out the minute behind the armed retrain and miss its 10 s deadline.
  absl::StatusOr<v1::CommandResult> quiesced =
      registry().SendCommand("S1", Quiesce("S1", 1), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(quiesced.ok()) << quiesced.status();
  EXPECT_EQ(quiesced->link().status(), v1::LINK_STATUS_QUIESCED);
  std::vector<absl::StatusOr<v1::CommandResult>> results = registry().Await(std::move(armed));
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_EQ(results[0]->code(), static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_THAT(backend_.calls(), ::testing::ElementsAre("await light S1/1", "quiesce S1/1"));
  EXPECT_TRUE(registry().KnownQuiesced("S1", 1));
}

TEST_F(ArmedRetrainTest, AnArmedRetrainWhoseLightNeverComesIsNotTrained) {
  // The port may still hear its old circuit: fleetd retrains it once the switch is verified.
  absl::StatusOr<v1::CommandResult> result = registry().SendCommand(
      "S1", ArmedRetrain("S1", 2, absl::Milliseconds(20)), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_THAT(result->message(), HasSubstr("not trained"));
  EXPECT_THAT(backend_.calls(), ::testing::ElementsAre("await light S1/2"));
}

TEST_F(ArmedRetrainTest, AnArmedRetrainWithoutAnExpectedPeerIsRefused) {
  v1::Command any_peer = ArmedRetrain("S1", 1, absl::Seconds(30));
  any_peer.mutable_retrain()->clear_expected_peer();
  absl::StatusOr<v1::CommandResult> result =
      registry().SendCommand("S1", any_peer, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(result->message(), HasSubstr("expected peer"));
  EXPECT_TRUE(backend_.calls().empty());
}

TEST_F(ArmedRetrainTest, AnArmedRetrainStillQueuedWhenItsStreamEndsIsCancelledAsItStarts) {
  absl::Notification gate;
  backend_.HoldRetrainsOn(1, &gate);
  std::unique_ptr<agent_registry::SentCommands> held =
      SendOne(registry(), Retrain("S1", 1), absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(Eventually([&] { return backend_.held() == 1; }));
  std::unique_ptr<agent_registry::SentCommands> armed = SendOne(
      registry(), ArmedRetrain("S1", 1, absl::Seconds(60)), absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(Eventually([&] { return (*agent_)->commands_queued() == 1; }));
  held.reset();
  armed.reset();
  // fleetd dies with the armed retrain queued behind the held one, which finishes once the
  // agent has seen the stream end: the armed retrain starts with its stream gone.
  RestartFleetd([&] {
    ASSERT_TRUE(Eventually([&] { return !(*agent_)->connected(); }));
    gate.Notify();
  });
  // A retrain (a quiesce would cancel the wait itself) is answered within its 10 s, not
  // after the minute the dead fleetd's armed retrain would have waited.
  ExpectARetrainAnswered();
}

TEST_F(ArmedRetrainTest, ARestartedFleetdIsNotKeptWaitingByTheLastRunsArmedRetrain) {
  {
    std::unique_ptr<agent_registry::SentCommands> armed = SendOne(
        registry(), ArmedRetrain("S1", 1, absl::Seconds(60)), absl::Now() + absl::Seconds(60));
    ASSERT_TRUE(Eventually([&] { return backend_.awaiting() == 1; }));
  }
  // fleetd dies with the retrain armed. The stream's end cancels the wait: nobody is left to
  // collect its answer.
  RestartFleetd([&] { ASSERT_TRUE(Eventually([&] { return backend_.awaiting() == 0; })); });
  ExpectARetrainAnswered();
  EXPECT_THAT(backend_.calls(), ::testing::ElementsAre("await light S1/1", "retrain S1/1"));
}

TEST(AgentTest, CommandsRoundTripAndARepeatedIdRunsOnce) {
  Controller controller;
  FakeBackend backend({"S1"});
  RunningAgent agent(controller.address(), "h1", &backend);
  ASSERT_TRUE(Eventually([&] { return agent->registrations() == 1; }));
  ASSERT_TRUE(Eventually([&] { return controller.AgentConnected("h1"); }));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::StatusOr<v1::CommandResult> first =
      controller.registry().SendCommand("S1", Retrain("S1", 1, "retrain-1"), deadline);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->code(), 0) << first->message();
  EXPECT_EQ(first->link().status(), v1::LINK_STATUS_UP);
  absl::StatusOr<v1::CommandResult> again =
      controller.registry().SendCommand("S1", Retrain("S1", 1, "retrain-1"), deadline);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->command_id(), "retrain-1");
  EXPECT_EQ(again->link().status(), v1::LINK_STATUS_UP);
  EXPECT_EQ(agent->commands_run(), 1);
  EXPECT_THAT(backend.calls(), ::testing::ElementsAre("retrain S1/1"));

  // A refusal from the backend comes back as a result with its code and words.
  v1::Command wrong = Retrain("S1", 2);
  wrong.mutable_retrain()->mutable_expected_peer()->set_onic_serial("WRONG");
  absl::StatusOr<v1::CommandResult> refused =
      controller.registry().SendCommand("S1", wrong, deadline);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(refused->message(), HasSubstr("wiring error"));
}

TEST(AgentTest, PortsRunConcurrentlyAndOnePortInOrder) {
  Controller controller;
  FakeBackend backend({"S1"});
  absl::Notification release_port1;
  backend.HoldRetrainsOn(1, &release_port1);
  RunningAgent agent(controller.address(), "h1", &backend);
  ASSERT_TRUE(Eventually([&] { return controller.AgentConnected("h1"); }));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::thread held([&] {
    EXPECT_TRUE(controller.registry().SendCommand("S1", Retrain("S1", 1, "r1"), deadline).ok());
  });
  // The retrain of port 1 is in the backend, held, before anything else is sent.
  ASSERT_TRUE(Eventually([&] { return backend.held() == 1; }));
  // Port 2 is served while port 1 is held.
  absl::StatusOr<v1::CommandResult> other =
      controller.registry().SendCommand("S1", Retrain("S1", 2, "r2"), deadline);
  ASSERT_TRUE(other.ok()) << other.status();
  // A quiesce of port 1 waits behind its retrain.
  v1::Command quiesce;
  quiesce.set_id("q1");
  quiesce.mutable_quiesce()->set_onic_serial("S1");
  quiesce.mutable_quiesce()->set_port(1);
  std::thread behind(
      [&] { EXPECT_TRUE(controller.registry().SendCommand("S1", quiesce, deadline).ok()); });
  release_port1.Notify();
  held.join();
  behind.join();
  std::vector<std::string> calls = backend.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0], "retrain S1/2");
  EXPECT_EQ(calls[1], "retrain S1/1");
  EXPECT_EQ(calls[2], "quiesce S1/1");
}

TEST(AgentTest, ReconnectsAfterFleetdRestartsAndRegistersAgain) {
  auto controller = std::make_unique<Controller>();
  const int port = controller->port();
  FakeBackend backend({"S1"});
  RunningAgent agent(controller->address(), "h1", &backend);
  ASSERT_TRUE(Eventually([&] { return agent->registrations() == 1; }));
  controller.reset();  // fleetd goes away.
  controller = std::make_unique<Controller>(port);
  ASSERT_NE(controller->port(), 0) << "could not listen on the same port again";
  ASSERT_TRUE(Eventually([&] { return agent->registrations() == 2; }));
  ASSERT_TRUE(Eventually([&] { return controller->AgentConnected("h1"); }));
  absl::StatusOr<v1::CommandResult> result =
      controller->registry().SendCommand("S1", Retrain("S1", 1), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->code(), 0);
}

TEST(AgentTest, PortsThatFinishTogetherAreEachAnswered) {
  Controller controller;
  FakeBackend backend({"S1"});
  absl::Notification release;
  backend.HoldRetrainsOn(1, &release);
  backend.HoldRetrainsOn(2, &release);
  RunningAgent agent(controller.address(), "h1", &backend);
  ASSERT_TRUE(Eventually([&] { return controller.AgentConnected("h1"); }));
  std::unique_ptr<agent_registry::SentCommands> sent =
      RetrainBothPorts(controller, absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(Eventually([&] { return backend.held() == 2; }));
  release.Notify();  // Both finish at once; their answers may share a message.
  std::vector<absl::StatusOr<v1::CommandResult>> results =
      controller.registry().Await(std::move(sent));
  ASSERT_EQ(results.size(), 2u);
  for (uint32_t port : {1u, 2u}) {
    ASSERT_TRUE(results[port - 1].ok()) << results[port - 1].status();
    EXPECT_EQ(results[port - 1]->link().port(), port);
    EXPECT_EQ(results[port - 1]->link().status(), v1::LINK_STATUS_UP);
  }
}

// Whether fleetd's event log says that port 1 of S1 on h1 went down, as an agent reports it.
bool ToldPort1IsDown(Controller& controller) {
  absl::StatusOr<std::vector<v1::Event>> events =
      controller.store().ListEvents({0, 1000, "agent", "h1"});
  if (!events.ok()) return false;
  return std::any_of(events->begin(), events->end(), [](const v1::Event& e) {
    return e.kind() == "agent.link_change" &&
           e.message().find("S1 port 1 on host h1 is now down") != std::string::npos;
  });
}

TEST(AgentTest, LinkChangesNoticedByTheAgentAreReported) {
  // What the engine is told: the ports of its own O-NICs an agent registers DOWN, then each
  // port that goes DOWN. Declared before the controller, whose streams call the listener.
  absl::Mutex mu;
  std::vector<std::string> told;
  Controller controller;
  agent_registry::AgentRegistry::Listener listener;
  listener.links_down = [&](const std::string& host, const std::vector<v1::LinkState>& links) {
    std::vector<std::string> ports;
    for (const v1::LinkState& link : links) {
      ports.push_back(
          absl::StrCat(link.onic_serial(), "/", link.port(), " ", v1::Name(link.status())));
    }
    absl::MutexLock lock(&mu);
    told.push_back(absl::StrCat(host, ": ", absl::StrJoin(ports, ", ")));
  };
  controller.registry().SetListener(std::move(listener));
  FakeBackend backend({"S1"});  // Both ports dark at first.
  RunningAgent agent(controller.address(), "h1", &backend);
  ASSERT_TRUE(Eventually([&] { return controller.AgentConnected("h1"); }));
  ASSERT_TRUE(controller.registry()
                  .SendCommand("S1", Retrain("S1", 1), absl::Now() + absl::Seconds(10))
                  .ok());
  // The link drops by itself; the agent's monitor notices and reports it unprompted, and
  // fleetd records it in the event log.
  backend.Set("S1", 1, v1::LINK_STATUS_DOWN);
  ASSERT_TRUE(Eventually([&] { return ToldPort1IsDown(controller); }));
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock lock(&mu);
    return told.size() == 2;
  }));
  absl::MutexLock lock(&mu);
  EXPECT_THAT(told, ::testing::ElementsAre("h1: S1/1 down, S1/2 down", "h1: S1/1 down"));
}

// A link change the monitor notices as the stream ends cannot be written; fleetd hears of it
// on the next stream, though the port reads the same from then on.
TEST(AgentTest, ALinkChangeNoticedAsTheStreamEndsIsReportedOnTheNextStream) {
  auto controller = std::make_unique<Controller>();
  const int port = controller->port();
  FakeBackend backend({"S1"});
  RunningAgent agent(controller->address(), "h1", &backend);
  ASSERT_TRUE(Eventually([&] { return controller->AgentConnected("h1"); }));
  ASSERT_TRUE(controller->registry()
                  .SendCommand("S1", Retrain("S1", 1), absl::Now() + absl::Seconds(10))
                  .ok());
  // The monitor's next read of the up port is held; the link drops, and fleetd goes away
  // while the read is under way.
  absl::Notification release;
  backend.HoldNextReadOn(1, &release);
  ASSERT_TRUE(Eventually([&] { return backend.reads_held() == 1; }));
  backend.Set("S1", 1, v1::LINK_STATUS_DOWN);
  controller.reset();
  ASSERT_TRUE(Eventually([&] { return !agent->connected(); }));
  release.Notify();  // The read sees DOWN; its link change finds no stream.
  ASSERT_TRUE(Eventually([&] { return backend.reads_released() == 1; }));
  controller = std::make_unique<Controller>(port);
  ASSERT_NE(controller->port(), 0) << "could not listen on the same port again";
  ASSERT_TRUE(Eventually([&] { return ToldPort1IsDown(*controller); }));
}

}  // namespace
}  // namespace fleet::onic_agent
