// The agent and fleetd's agent registry over a real loopback gRPC stream.
#include "onic_agent/agent.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "controller/agent_registry/agent_registry.h"
#include "controller/service/agent_service.h"
#include "controller/store/store.h"
#include "fleet/v1/names.h"
#include "testing/fake_clock.h"
#include "tests/eventually.h"

namespace fleet::onic_agent {
namespace {

using ::testing::HasSubstr;

// A small stateful O-NIC backend: ports hold a status; Retrain can be held at a gate; every
// call is recorded in order.
class FakeBackend : public OnicBackend {
 public:
  explicit FakeBackend(std::vector<std::string> serials) : serials_(std::move(serials)) {}

  std::string name() const override { return "fake"; }

  absl::StatusOr<std::vector<v1::AgentOnic>> Discover() override {
    std::vector<v1::AgentOnic> out;
    for (const std::string& serial : serials_) {
      v1::AgentOnic& onic = out.emplace_back();
      onic.set_serial(serial);
      for (uint32_t port : {1u, 2u}) *onic.add_ports() = State(serial, port);
    }
    return out;
  }

  CommandOutcome Quiesce(const std::string& serial, uint32_t port, absl::Time) override {
    Record(absl::StrCat("quiesce ", serial, "/", port));
    Set(serial, port, v1::LINK_STATUS_QUIESCED);
    return {absl::OkStatus(), State(serial, port)};
  }

  CommandOutcome Retrain(const std::string& serial, uint32_t port, const v1::PeerIdentity& expected,
                         absl::Time deadline) override {
    absl::Notification* gate = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = gates_.find(port); it != gates_.end()) {
        gate = it->second;
        ++held_;
      }
    }
    if (gate != nullptr) gate->WaitForNotificationWithDeadline(deadline);
    Record(absl::StrCat("retrain ", serial, "/", port));
    if (!expected.onic_serial().empty() && expected.onic_serial() == "WRONG") {
      Set(serial, port, v1::LINK_STATUS_DOWN);
      return {absl::FailedPreconditionError("wiring error: saw X/1, expected WRONG/1"),
              State(serial, port)};
    }
    Set(serial, port, v1::LINK_STATUS_UP);
    return {absl::OkStatus(), State(serial, port)};
  }

  CommandOutcome ReadPort(const std::string& serial, uint32_t port) override {
    absl::Notification* gate = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = read_gates_.find(port); it != read_gates_.end()) {
        gate = it->second;
        read_gates_.erase(it);  // One read is held.
        ++reads_held_;
      }
    }
    if (gate != nullptr) gate->WaitForNotification();
    CommandOutcome outcome{absl::OkStatus(), State(serial, port)};
    if (gate != nullptr) {
      absl::MutexLock lock(&mu_);
      ++reads_released_;
    }
    return outcome;
  }

  absl::Status Blink(const std::string&, absl::Duration) override { return absl::OkStatus(); }

  // Sees light arrive once SeeLightArrive() was called: a port's light comes with Light().
  bool SeesLightArrive() const override { return sees_light_.load(); }
  absl::StatusOr<absl::Time> AwaitLight(const std::string& serial, uint32_t port,
                                        const v1::PeerIdentity&, absl::Time until,
                                        const std::atomic<bool>& cancelled) override {
    Record(absl::StrCat("await light ", serial, "/", port));
    absl::MutexLock lock(&mu_);
    ++awaiting_;
    absl::StatusOr<absl::Time> outcome = absl::Now();
    while (!lit_.contains({serial, port})) {
      if (cancelled.load()) {
        outcome = absl::CancelledError("stopped waiting for light");
        break;
      }
      if (absl::Now() >= until) {
        outcome = absl::DeadlineExceededError("no light");
        break;
      }
      // The agent sets `cancelled` without telling this mutex: look again every millisecond.
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](bool* b) { return *b; }, &light_changed_),
                           absl::Milliseconds(1));
      light_changed_ = false;
    }
    --awaiting_;
    if (outcome.ok()) outcome = absl::Now();
    return outcome;
  }
  void SeeLightArrive() { sees_light_ = true; }
  void Light(const std::string& serial, uint32_t port) {
    absl::MutexLock lock(&mu_);
    lit_.insert({serial, port});
    light_changed_ = true;
  }
  // How many AwaitLight calls are waiting now.
  int awaiting() {
    absl::MutexLock lock(&mu_);
    return awaiting_;
  }

  void HoldRetrainsOn(uint32_t port, absl::Notification* gate) {
    absl::MutexLock lock(&mu_);
    gates_[port] = gate;
  }
  // Holds the next read of `port` until `gate` is notified.
  void HoldNextReadOn(uint32_t port, absl::Notification* gate) {
    absl::MutexLock lock(&mu_);
    read_gates_[port] = gate;
  }
  // Reads that reached such a gate, and those that have read the port after it opened.
  int reads_held() {
    absl::MutexLock lock(&mu_);
    return reads_held_;
  }
  int reads_released() {
    absl::MutexLock lock(&mu_);
    return reads_released_;
  }
  std::vector<std::string> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  // Changes a port behind the agent's back (a link that drops on its own).
  void Set(const std::string& serial, uint32_t port, v1::LinkStatus status) {
    absl::MutexLock lock(&mu_);
    status_[{serial, port}] = status;
  }

  // How many retrains have reached a gate set by HoldRetrainsOn.
  int held() {
    absl::MutexLock lock(&mu_);
    return held_;
  }

 private:
  v1::LinkState State(const std::string& serial, uint32_t port) {
    absl::MutexLock lock(&mu_);
    v1::LinkState link;
    link.set_onic_serial(serial);
    link.set_port(port);
    auto it = status_.find({serial, port});
    link.set_status(it == status_.end() ? v1::LINK_STATUS_DOWN : it->second);
    return link;
  }
  void Record(std::string call) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::move(call));
  }

  const std::vector<std::string> serials_;
  absl::Mutex mu_;
  std::map<std::pair<std::string, uint32_t>, v1::LinkStatus> status_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, absl::Notification*> gates_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  int held_ ABSL_GUARDED_BY(mu_) = 0;  // Retrains that reached a gate.
  std::map<uint32_t, absl::Notification*> read_gates_ ABSL_GUARDED_BY(mu_);
  int reads_held_ ABSL_GUARDED_BY(mu_) = 0;
  int reads_released_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> sees_light_{false};
  std::set<std::pair<std::string, uint32_t>> lit_ ABSL_GUARDED_BY(mu_);
  bool light_changed_ ABSL_GUARDED_BY(mu_) = false;
  int awaiting_ ABSL_GUARDED_BY(mu_) = 0;
};

using testing::Eventually;

// fleetd's agent side, in-process: a store with one host and its O-NIC, the registry and
// AgentService on a loopback port.
class Controller {
 public:
  explicit Controller(int port = 0) {
    store_ = *store::OpenSqliteStore({":memory:", &clock_});
    store::InventoryWrite write;
    v1::Switch* sw = write.objects.add_switches();
    sw->set_id("ocs1");
    sw->set_model("polatis");
    sw->set_ingress_ports(8);
    sw->set_egress_ports(8);
    sw->set_address("127.0.0.1");
    sw->set_protocol(v1::SWITCH_PROTOCOL_TL1);
    write.objects.add_hosts()->set_name("h1");
    v1::Device* cpu = write.objects.add_devices();
    cpu->set_id("h1-cpu0");
    cpu->set_kind(v1::DEVICE_KIND_CPU);
    cpu->set_host("h1");
    v1::Onic* onic = write.objects.add_onics();
    onic->set_id("n1");
    onic->set_device("h1-cpu0");
    onic->set_serial("S1");
    for (uint32_t p : {1u, 2u}) {
      v1::OnicPort* onic_port = onic->add_ports();
      onic_port->set_index(p);
      onic_port->mutable_tx()->set_switch_id("ocs1");
      onic_port->mutable_tx()->set_port(p);
      onic_port->mutable_rx()->set_switch_id("ocs1");
      onic_port->mutable_rx()->set_port(8 + p);
    }
    EXPECT_TRUE(store_->WriteInventory(write, "test").ok());
    agent_registry::AgentRegistryOptions options;
    options.heartbeat_interval = absl::Milliseconds(20);
    registry_ = std::make_unique<agent_registry::AgentRegistry>(options, store_.get(), &clock_);
    service_ = std::make_unique<service::AgentServiceImpl>(registry_.get());
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
  }
  ~Controller() { Stop(); }

  void Stop() {
    if (server_ == nullptr) return;
    registry_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_.reset();
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int port() const { return port_; }
  agent_registry::AgentRegistry& registry() { return *registry_; }
  store::Store& store() { return *store_; }
  fleet::testing::FakeClock& clock() { return clock_; }

  std::optional<v1::Agent> Agent(const std::string& host) {
    for (const v1::Agent& a : registry_->ListAgents()) {
      if (a.host() == host) return a;
    }
    return std::nullopt;
  }
  bool AgentConnected(const std::string& host) {
    std::optional<v1::Agent> a = Agent(host);
    return a && a->connected();
  }

 private:
  fleet::testing::FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<agent_registry::AgentRegistry> registry_;
  std::unique_ptr<service::AgentServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// An agent running on its own thread.
class RunningAgent {
 public:
  RunningAgent(const std::string& controller, const std::string& host, OnicBackend* backend) {
    AgentOptions options;
    options.controller = controller;
    options.tls.insecure = true;  // The in-process fleetd serves plaintext.
    options.host = host;
    options.software_version = "test";
    options.min_backoff = absl::Milliseconds(10);
    options.max_backoff = absl::Milliseconds(100);
    options.monitor_interval = absl::Milliseconds(20);
    options.seed = 7;
    agent_ = std::make_unique<Agent>(options, backend);
    thread_ = std::thread([this] { agent_->Run(); });
  }
  ~RunningAgent() {
    agent_->Stop();
    thread_.join();
  }
  Agent& operator*() { return *agent_; }
  Agent* operator->() { return agent_.get(); }

 private:
  std::unique_ptr<Agent> agent_;
  std::thread thread_;
};

v1::Command Retrain(const std::string& serial, uint32_t port, const std::string& id = "") {
  v1::Command command;
  command.set_id(id);
  command.mutable_retrain()->set_onic_serial(serial);
  command.mutable_retrain()->set_port(port);
  return command;
}

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

// A client in the agent's place on fleetd's AgentService, so a test writes exactly what it
// means to. Writes are serialized, as gRPC requires.
class RawAgentStream {
 public:
  explicit RawAgentStream(const std::string& address)
      : stub_(v1::AgentService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        stream_(stub_->Connect(&context_)) {}
  ~RawAgentStream() {
    StopBeating();
    context_.TryCancel();
  }

  bool Write(const v1::AgentMessage& message) {
    absl::MutexLock lock(&write_mu_);
    return stream_->Write(message);
  }
  // Registers host h1 with O-NIC S1.
  bool Register() {
    v1::AgentMessage hello;
    hello.mutable_register_()->set_host("h1");
    hello.mutable_register_()->add_onics()->set_serial("S1");
    return Write(hello);
  }
  // Registers, reads fleetd's `registered` into `registered`, and heartbeats every 5 ms
  // from then on, so fleetd keeps the agent however slow the machine is.
  bool RegisterAndBeat(v1::ControllerMessage& registered) {
    if (!Register() || !stream_->Read(&registered) || !registered.has_registered()) return false;
    heartbeats_ = std::thread([this] {
      v1::AgentMessage beat;
      beat.mutable_heartbeat()->set_sequence(1);
      while (!stop_beating_.WaitForNotificationWithTimeout(absl::Milliseconds(5)) && Write(beat)) {
      }
    });
    return true;
  }
  void StopBeating() {
    if (!heartbeats_.joinable()) return;
    stop_beating_.Notify();
    heartbeats_.join();
  }
  // Reads commands until there is one retrain per port in `ports`; returns port → command id.
  std::map<uint32_t, std::string> RetrainIds(size_t ports) {
    std::map<uint32_t, std::string> ids;
    v1::ControllerMessage in;
    while (ids.size() < ports && stream_->Read(&in)) {
      if (in.has_command()) ids[in.command().retrain().port()] = in.command().id();
    }
    return ids;
  }
  grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>& stream() { return *stream_; }
  void Cancel() { context_.TryCancel(); }

 private:
  std::unique_ptr<v1::AgentService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>> stream_;
  absl::Mutex write_mu_;
  absl::Notification stop_beating_;
  std::thread heartbeats_;
};

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

TEST(AgentTest, DisagreementWithInventoryIsAcceptedWithAnAlarm) {
  Controller controller;
  FakeBackend backend({"S9"});
  RunningAgent agent(controller.address(), "h1", &backend);
  ASSERT_TRUE(Eventually([&] {
    std::optional<v1::Agent> a = controller.Agent("h1");
    return a && a->connected();
  }));
  const v1::Agent listed = *controller.Agent("h1");
  std::vector<std::string> mismatches(listed.inventory_mismatches().begin(),
                                      listed.inventory_mismatches().end());
  EXPECT_THAT(mismatches, ::testing::Contains(HasSubstr("O-NIC serial S9 is not in inventory")));
  EXPECT_THAT(mismatches, ::testing::Contains(HasSubstr("O-NIC n1 (serial S1) is in inventory "
                                                        "but was not reported")));
  absl::StatusOr<std::vector<v1::Event>> events = controller.store().ListEvents({});
  ASSERT_TRUE(events.ok());
  bool alarmed = false;
  for (const v1::Event& e : *events) {
    alarmed |= e.kind() == "agent.inventory_mismatch" && e.severity() == v1::EVENT_SEVERITY_ALARM &&
               e.message().find("S9") != std::string::npos;
  }
  EXPECT_TRUE(alarmed);
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

TEST(AgentTest, TheRegistryKnowsWhichPortsItsAgentsLeftQuiesced) {
  Controller controller;
  FakeBackend backend({"S1"});
  auto agent = std::make_unique<RunningAgent>(controller.address(), "h1", &backend);
  ASSERT_TRUE(Eventually([&] { return controller.AgentConnected("h1"); }));
  agent_registry::AgentRegistry& registry = controller.registry();
  EXPECT_FALSE(registry.KnownQuiesced("S1", 1));  // Registered DOWN.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  v1::Command quiesce;
  quiesce.mutable_quiesce()->set_onic_serial("S1");
  quiesce.mutable_quiesce()->set_port(1);
  absl::StatusOr<v1::CommandResult> quiesced = registry.SendCommand("S1", quiesce, deadline);
  ASSERT_TRUE(quiesced.ok()) << quiesced.status();
  EXPECT_TRUE(registry.KnownQuiesced("S1", 1));
  EXPECT_FALSE(registry.KnownQuiesced("S1", 2));
  EXPECT_FALSE(registry.KnownQuiesced("S9", 1));
  // Retrained, it is in service again.
  ASSERT_TRUE(registry.SendCommand("S1", Retrain("S1", 1), deadline).ok());
  EXPECT_FALSE(registry.KnownQuiesced("S1", 1));
  ASSERT_TRUE(registry.SendCommand("S1", quiesce, deadline).ok());
  EXPECT_TRUE(registry.KnownQuiesced("S1", 1));
  // An agent that goes away takes what the registry knew with it.
  agent.reset();
  ASSERT_TRUE(Eventually([&] { return !controller.Agent("h1")->connected(); }));
  EXPECT_FALSE(registry.KnownQuiesced("S1", 1));
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

TEST(AgentTest, UnknownOrDeadOwnerIsUnavailableAtOnce) {
  Controller controller;
  absl::StatusOr<v1::CommandResult> nobody =
      controller.registry().SendCommand("S1", Retrain("S1", 1), absl::Now() + absl::Seconds(30));
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(nobody.status().message()),
              HasSubstr("no agent has reported O-NIC serial S1"));

  FakeBackend backend({"S1"});
  {
    RunningAgent agent(controller.address(), "h1", &backend);
    ASSERT_TRUE(Eventually([&] { return controller.AgentConnected("h1"); }));
  }  // The agent stops.
  ASSERT_TRUE(Eventually([&] { return !controller.Agent("h1")->connected(); }));
  // Waiting for the deadline would end DEADLINE_EXCEEDED; UNAVAILABLE naming the agent means
  // the registry answered at once.
  absl::StatusOr<v1::CommandResult> gone =
      controller.registry().SendCommand("S1", Retrain("S1", 1), absl::Now() + absl::Seconds(30));
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr("is not connected"));
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

TEST(AgentTest, ARestartedFleetdsCommandsAreRunNotAnsweredFromTheLastRunsCache) {
  auto controller = std::make_unique<Controller>();
  const int port = controller->port();
  FakeBackend backend({"S1"});
  RunningAgent agent(controller->address(), "h1", &backend);
  ASSERT_TRUE(Eventually([&] { return controller->AgentConnected("h1"); }));
  v1::Command quiesce;
  quiesce.mutable_quiesce()->set_onic_serial("S1");
  quiesce.mutable_quiesce()->set_port(1);
  ASSERT_TRUE(
      controller->registry().SendCommand("S1", quiesce, absl::Now() + absl::Seconds(10)).ok());
  controller.reset();
  controller = std::make_unique<Controller>(port);
  ASSERT_NE(controller->port(), 0) << "could not listen on the same port again";
  ASSERT_TRUE(Eventually([&] { return agent->registrations() == 2; }));
  ASSERT_TRUE(Eventually([&] { return controller->AgentConnected("h1"); }));
  // The new run's first command has an id of its own: the agent runs the retrain rather than
  // replaying the last run's first answer (the quiesce).
  absl::StatusOr<v1::CommandResult> retrained =
      controller->registry().SendCommand("S1", Retrain("S1", 1), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(retrained.ok()) << retrained.status();
  EXPECT_EQ(retrained->link().status(), v1::LINK_STATUS_UP);
  EXPECT_THAT(backend.calls(), ::testing::ElementsAre("quiesce S1/1", "retrain S1/1"));
  EXPECT_FALSE(controller->registry().KnownQuiesced("S1", 1));
}

// Sends retrains of both ports of S1 at once, to be answered by `deadline`.
std::unique_ptr<agent_registry::SentCommands> RetrainBothPorts(Controller& controller,
                                                               absl::Time deadline) {
  std::vector<agent_registry::AddressedCommand> commands(2);
  for (uint32_t port : {1u, 2u}) {
    commands[port - 1].onic_serial = "S1";
    commands[port - 1].command = Retrain("S1", port);
  }
  return controller.registry().Send(std::move(commands), deadline);
}

TEST(AgentTest, AnswersSentTogetherInOneMessageEachCompleteTheirCommand) {
  Controller controller;
  RawAgentStream raw(controller.address());  // So the batch is exactly what is sent.
  v1::ControllerMessage registered;
  ASSERT_TRUE(raw.RegisterAndBeat(registered));
  EXPECT_TRUE(registered.registered().takes_result_batches());
  std::unique_ptr<agent_registry::SentCommands> sent =
      RetrainBothPorts(controller, absl::Now() + absl::Seconds(30));
  std::map<uint32_t, std::string> ids = raw.RetrainIds(2);
  ASSERT_EQ(ids.size(), 2u);
  v1::AgentMessage batch;
  v1::CommandResult* second = batch.mutable_results()->add_results();
  second->set_command_id(ids[2]);
  second->set_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
  second->set_message("wiring error: saw X/1, expected Y/1");
  v1::CommandResult* first = batch.mutable_results()->add_results();
  first->set_command_id(ids[1]);
  first->mutable_link()->set_status(v1::LINK_STATUS_UP);
  ASSERT_TRUE(raw.Write(batch));
  std::vector<absl::StatusOr<v1::CommandResult>> results =
      controller.registry().Await(std::move(sent));
  ASSERT_EQ(results.size(), 2u);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_EQ(results[0]->code(), 0);
  EXPECT_EQ(results[0]->link().status(), v1::LINK_STATUS_UP);
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  EXPECT_THAT(results[1]->message(), HasSubstr("wiring error"));
}

// Await wakes when the last answer is in or at the deadline: a command nobody answers fails
// then, and the answered one keeps its answer.
TEST(AgentTest, ACommandNobodyAnswersFailsAtItsDeadline) {
  Controller controller;
  RawAgentStream raw(controller.address());
  v1::ControllerMessage registered;
  ASSERT_TRUE(raw.RegisterAndBeat(registered));
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  std::unique_ptr<agent_registry::SentCommands> sent = RetrainBothPorts(controller, deadline);
  std::map<uint32_t, std::string> ids = raw.RetrainIds(2);
  ASSERT_EQ(ids.size(), 2u);
  v1::AgentMessage answer;  // Port 1 answers; port 2 never does.
  answer.mutable_result()->set_command_id(ids[1]);
  answer.mutable_result()->mutable_link()->set_status(v1::LINK_STATUS_UP);
  ASSERT_TRUE(raw.Write(answer));
  std::vector<absl::StatusOr<v1::CommandResult>> results =
      controller.registry().Await(std::move(sent));
  EXPECT_GE(absl::Now(), deadline);
  ASSERT_EQ(results.size(), 2u);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_EQ(results[0]->link().status(), v1::LINK_STATUS_UP);
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(results[1].status().message()), HasSubstr("got no answer in time"));
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

TEST(AgentTest, AnAgentThatStopsHeartbeatingIsDropped) {
  Controller controller;
  // A raw client that registers and then says nothing more: like a hung agent.
  RawAgentStream raw(controller.address());
  ASSERT_TRUE(raw.Register());
  ASSERT_TRUE(Eventually([&] { return controller.AgentConnected("h1"); }));
  // Liveness is judged on the registry's clock: 3 heartbeat intervals pass without a word.
  controller.clock().Advance(absl::Seconds(1));
  ASSERT_TRUE(Eventually([&] { return !controller.Agent("h1")->connected(); }));
  raw.Cancel();
  EXPECT_TRUE(Eventually([&] {
    absl::StatusOr<std::vector<v1::Event>> events =
        controller.store().ListEvents({0, 100, "agent", "h1"});
    return events.ok() && !events->empty() &&
           events->back().message().find("missed 3 heartbeats") != std::string::npos;
  }));
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

TEST(AgentTest, FirstMessageMustBeRegister) {
  Controller controller;
  RawAgentStream raw(controller.address());
  v1::AgentMessage beat;
  beat.mutable_heartbeat()->set_sequence(1);
  ASSERT_TRUE(raw.Write(beat));
  raw.stream().WritesDone();
  v1::ControllerMessage ignored;
  while (raw.stream().Read(&ignored)) {
  }
  grpc::Status status = raw.stream().Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("must be register"));
}

}  // namespace
}  // namespace fleet::onic_agent
