// fleetd's agent registry over a real loopback gRPC stream: to the real agent, or to a raw
// client in the agent's place.
#include "controller/agent_registry/agent_registry.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/proto_time.h"
#include "tests/eventually.h"
#include "tests/onic_agent/agent_fixture.h"
#include "tests/process_threads.h"

namespace fleet::agent_registry {
namespace {

using onic_agent::Controller;
using onic_agent::FakeBackend;
using onic_agent::Retrain;
using onic_agent::RetrainBothPorts;
using onic_agent::RunningAgent;
using testing::Eventually;
using ::testing::HasSubstr;
using testing::ProcessThreads;

// A client in the agent's place on fleetd's AgentService, so a test writes exactly what it
// means to. Writes are serialized, as gRPC requires.
class RawAgentStream {
 public:
  explicit RawAgentStream(const std::string& address)
      : RawAgentStream(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())) {}
  // On a channel shared with other streams.
  explicit RawAgentStream(std::shared_ptr<grpc::Channel> channel)
      : stub_(v1::AgentService::NewStub(std::move(channel))), stream_(stub_->Connect(&context_)) {}
  ~RawAgentStream() {
    StopBeating();
    context_.TryCancel();
  }

  bool Write(const v1::AgentMessage& message) {
    absl::MutexLock lock(&write_mu_);
    return stream_->Write(message);
  }
  // Registers `host` with O-NIC `serial`.
  bool Register(const std::string& host = "h1", const std::string& serial = "S1") {
    v1::AgentMessage hello;
    hello.mutable_register_()->set_host(host);
    hello.mutable_register_()->add_onics()->set_serial(serial);
    return Write(hello);
  }
  // Reads until a command comes; its id, or "" when the stream ended first.
  std::string NextCommandId() {
    v1::ControllerMessage in;
    while (stream_->Read(&in)) {
      if (in.has_command()) return in.command().id();
    }
    return "";
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
  int64_t registered_interval_ms = 0;  // Set by ConnectRawAgents.

 private:
  std::unique_ptr<v1::AgentService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>> stream_;
  absl::Mutex write_mu_;
  absl::Notification stop_beating_;
  std::thread heartbeats_;
};

// Connects `n` raw agents h0..h(n-1), owning S0..S(n-1), on one channel, one after another;
// each has read its `registered`.
std::vector<std::unique_ptr<RawAgentStream>> ConnectRawAgents(Controller& controller, int n) {
  const std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(controller.address(), grpc::InsecureChannelCredentials());
  std::vector<std::unique_ptr<RawAgentStream>> agents;
  for (int i = 0; i < n; ++i) {
    auto raw = std::make_unique<RawAgentStream>(channel);
    v1::ControllerMessage registered;
    EXPECT_TRUE(raw->Register(absl::StrCat("h", i), absl::StrCat("S", i)) &&
                raw->stream().Read(&registered) && registered.has_registered())
        << "agent " << i;
    raw->registered_interval_ms = google::protobuf::util::TimeUtil::DurationToMilliseconds(
        registered.registered().heartbeat_interval());
    agents.push_back(std::move(raw));
  }
  return agents;
}

// Reads `agent`'s heartbeats until one names `ms` as the interval (true), at most 100 of them.
bool HeartbeatsName(RawAgentStream& agent, int64_t ms) {
  v1::ControllerMessage in;
  for (int read = 0; read < 100 && agent.stream().Read(&in);) {
    if (!in.has_heartbeat()) continue;
    ++read;
    if (google::protobuf::util::TimeUtil::DurationToMilliseconds(in.heartbeat().interval()) == ms) {
      return true;
    }
  }
  return false;
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

// The inventory is read for the registering place alone: a chassis's agent owns its pooled
// devices' O-NICs, and an O-NIC reported from another place is named where inventory has it.
TEST(AgentTest, AChassisAgentOwnsItsPooledOnicsAndAnOnicReportedElsewhereIsNamed) {
  Controller controller;
  store::InventoryWrite pooled;
  v1::Device* gpu = pooled.objects.add_devices();
  gpu->set_id("gpu1");
  gpu->set_kind(v1::DEVICE_KIND_GPU);
  gpu->set_chassis("pool-1");
  v1::Onic* onic = pooled.objects.add_onics();
  onic->set_id("n2");
  onic->set_device("gpu1");
  onic->set_serial("S2");
  for (uint32_t p : {1u, 2u}) {
    v1::OnicPort* port = onic->add_ports();
    port->set_index(p);
    port->mutable_tx()->set_switch_id("ocs1");
    port->mutable_tx()->set_port(2 + p);
    port->mutable_rx()->set_switch_id("ocs1");
    port->mutable_rx()->set_port(10 + p);
  }
  pooled.created = {"device gpu1", "onic n2"};
  ASSERT_TRUE(controller.store().WriteInventory(pooled, "test").ok());

  FakeBackend chassis_onics({"S2"});
  RunningAgent chassis(controller.address(), "pool-1", &chassis_onics);
  FakeBackend host_onics({"S1", "S2"});
  RunningAgent host(controller.address(), "h1", &host_onics);
  ASSERT_TRUE(Eventually([&] {
    std::optional<v1::Agent> a = controller.Agent("pool-1");
    std::optional<v1::Agent> b = controller.Agent("h1");
    return a && a->connected() && b && b->connected();
  }));
  EXPECT_THAT(controller.Agent("pool-1")->inventory_mismatches(), ::testing::IsEmpty());
  EXPECT_THAT(controller.Agent("h1")->inventory_mismatches(),
              ::testing::ElementsAre("O-NIC n2 (serial S2) is on 'pool-1' in inventory"));
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

// A fleetd whose commit point is fenced (a replica that does not lead) sends its agents
// nothing: every command's answer is the fence's refusal, and the agent runs none of them.
TEST(AgentTest, AFencedCommitPointSendsAgentsNothing) {
  Controller controller;
  FakeBackend backend({"S1"});
  RunningAgent agent(controller.address(), "h1", &backend);
  ASSERT_TRUE(Eventually([&] { return controller.AgentConnected("h1"); }));
  std::vector<Effect> asked;
  controller.commit_point().SetFence([&asked](Effect effect) {
    asked.push_back(effect);  // Sends are from this thread only.
    return absl::UnavailableError(absl::StrCat("not the leader: ", EffectName(effect)));
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  v1::Command quiesce;
  quiesce.mutable_quiesce()->set_onic_serial("S1");
  quiesce.mutable_quiesce()->set_port(1);
  absl::StatusOr<v1::CommandResult> refused =
      controller.registry().SendCommand("S1", quiesce, deadline);
  EXPECT_EQ(refused.status(), absl::UnavailableError("not the leader: agent command"));
  std::vector<absl::StatusOr<v1::CommandResult>> both =
      controller.registry().Await(RetrainBothPorts(controller, deadline));
  ASSERT_EQ(both.size(), 2u);
  for (const auto& r : both) EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(asked, std::vector<Effect>(2, Effect::kAgentCommand));
  // The agent heard of none; heartbeats are no effect and go on.
  EXPECT_TRUE(backend.calls().empty()) << backend.calls().front();
  EXPECT_TRUE(controller.AgentConnected("h1"));
  // Let in again, the same command runs.
  controller.commit_point().SetFence({});
  absl::StatusOr<v1::CommandResult> sent =
      controller.registry().SendCommand("S1", quiesce, deadline);
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_THAT(backend.calls(), ::testing::ElementsAre("quiesce S1/1"));
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

// Once fleetd begins to stop, an agent it does not hear from is not dropped (its links would be
// marked down for the next start to retrain), and heartbeats are still sent.
TEST(AgentTest, AStoppingRegistryDropsNoAgentItDoesNotHear) {
  Controller controller;
  std::vector<std::unique_ptr<RawAgentStream>> agents = ConnectRawAgents(controller, 1);
  controller.registry().StopJudgingLiveness();
  controller.clock().Advance(absl::Seconds(10));  // 100 intervals without a word.
  // A dropped agent's stream is cancelled, and its next read fails.
  for (int beat = 0; beat < 5; ++beat) {
    ASSERT_TRUE(HeartbeatsName(*agents[0], agents[0]->registered_interval_ms)) << "beat " << beat;
  }
  EXPECT_TRUE(controller.Agent("h0")->connected());
}

// The interval grows with the agents connected so that they send at most
// max_heartbeats_per_second between them (10 here: 5 agents, every 500 ms), is named in
// `registered` and in every heartbeat, and shrinks back as agents leave.
TEST(AgentTest, TheHeartbeatIntervalFollowsTheAgentsConnected) {
  Controller controller(0, /*max_heartbeats_per_second=*/10);
  std::vector<std::unique_ptr<RawAgentStream>> agents = ConnectRawAgents(controller, 5);
  std::vector<int64_t> registered_ms;
  for (const auto& agent : agents) registered_ms.push_back(agent->registered_interval_ms);
  EXPECT_THAT(registered_ms, ::testing::ElementsAre(100, 200, 300, 400, 500));
  EXPECT_TRUE(HeartbeatsName(*agents[0], 500));
  for (int i = 1; i < 5; ++i) agents[i]->Cancel();
  EXPECT_TRUE(
      HeartbeatsName(*agents[0], 100));  // One agent: 0.1 s, as heartbeat_interval is shorter.
}

// When agents leave and the interval shrinks, an agent is judged by the longer intervals that
// have just passed (it answered the last beat of them, not the ones since): three of the new
// interval without a word do not drop it, three of the old one do.
TEST(AgentTest, AnIntervalThatShrinksDropsNoAgentForTheLongerGapsBefore) {
  Controller controller(0, /*max_heartbeats_per_second=*/10);
  std::vector<std::unique_ptr<RawAgentStream>> agents = ConnectRawAgents(controller, 5);
  ASSERT_TRUE(HeartbeatsName(*agents[0], 500));
  for (int i = 2; i < 5; ++i) agents[i]->Cancel();
  ASSERT_TRUE(HeartbeatsName(*agents[0], 200));
  // The agents never answer; liveness is judged on the registry's clock, which stands still
  // but for this: 1 s is past three of the 200 ms interval, within three of the 500 ms ones.
  controller.clock().Advance(absl::Seconds(1));
  ASSERT_TRUE(HeartbeatsName(*agents[0], 200));  // The next beat: judged, and still sent.
  EXPECT_TRUE(controller.Agent("h0")->connected());
  // Once the 500 ms intervals are three beats back, the 1 s of silence counts.
  EXPECT_TRUE(Eventually([&] { return !controller.Agent("h0")->connected(); }));
}

// Four hosts h2..h5 with a CPU and its O-NIC, a chassis c1 of two pooled GPUs with an O-NIC
// each, a host h9 whose device has none, and a pooled device in no chassis: with the fixture's
// h1, six places that each run an agent.
store::InventoryWrite AgentPlaces() {
  store::InventoryWrite write;
  onic_agent::AddSwitch(write, "ocs2", 32);
  uint32_t next_port = 1;
  auto add_device = [&](const std::string& id, const std::string& host, const std::string& chassis,
                        bool with_onic) {
    v1::Device* device = write.objects.add_devices();
    device->set_id(id);
    device->set_kind(host.empty() ? v1::DEVICE_KIND_GPU : v1::DEVICE_KIND_CPU);
    device->set_host(host);
    device->set_chassis(chassis);
    if (!with_onic) return;
    onic_agent::AddOnic(write, id + "-n0", id, id + "-serial", "ocs2", next_port, 32 + next_port);
    next_port += 2;
  };
  for (int i = 2; i <= 5; ++i) {
    const std::string host = absl::StrCat("h", i);
    write.objects.add_hosts()->set_name(host);
    add_device(host + "-cpu0", host, "", true);
  }
  add_device("c1-gpu0", "", "c1", true);
  add_device("c1-gpu1", "", "c1", true);
  write.objects.add_hosts()->set_name("h9");
  add_device("h9-cpu0", "h9", "", false);
  add_device("loose-gpu0", "", "", true);  // No place an agent could serve.
  return write;
}

// Reads `agent`'s heartbeats until one was sent (on the registry's clock) at `at` or later, so
// judged after it: true, at most 100 of them.
bool HeartbeatSentSince(RawAgentStream& agent, absl::Time at) {
  v1::ControllerMessage in;
  for (int read = 0; read < 100 && agent.stream().Read(&in);) {
    if (!in.has_heartbeat()) continue;
    ++read;
    if (FromProtoTime(in.heartbeat().sent()) >= at) return true;
  }
  return false;
}

// The interval is sized for the agents inventory expects, not only those connected yet: at a
// start, the first of a big site's agents are judged at the interval the site will settle on,
// so fleetd's own slowness while the rest register does not drop them. Six places at 10 a
// second: 600 ms, with one agent connected (alone it would be 100 ms).
TEST(AgentTest, TheHeartbeatIntervalIsSizedForTheAgentsInventoryExpects) {
  Controller controller(0, /*max_heartbeats_per_second=*/10);
  const store::InventoryWrite places = AgentPlaces();
  ASSERT_TRUE(controller.store().WriteInventory(places, "test").ok());  // While it runs.
  std::vector<std::unique_ptr<RawAgentStream>> agents = ConnectRawAgents(controller, 1);
  ASSERT_TRUE(HeartbeatsName(*agents[0], 600));
  {
    RawAgentStream later(controller.address());  // Told the interval as it registers.
    v1::ControllerMessage registered;
    ASSERT_TRUE(later.Register("h2", "h2-cpu0-serial") && later.stream().Read(&registered));
    EXPECT_EQ(google::protobuf::util::TimeUtil::DurationToMilliseconds(
                  registered.registered().heartbeat_interval()),
              600);
  }
  // Silence past three of the 100 ms interval one agent alone would be sent, within three of
  // 600 ms, on the registry's clock: kept, at the next beat.
  controller.clock().Advance(absl::Seconds(1));
  ASSERT_TRUE(HeartbeatSentSince(*agents[0], controller.clock().Now()));
  EXPECT_TRUE(controller.Agent("h0")->connected());
  controller.clock().Advance(absl::Seconds(1));  // 2 s: past three of 600 ms.
  EXPECT_TRUE(Eventually([&] { return !controller.Agent("h0")->connected(); }));
}

// Counted before the first agent registers: inventory holding six places when fleetd starts,
// the first agent is told 600 ms in its `registered`, not the 100 ms of one agent.
TEST(AgentTest, TheFirstAgentIsToldTheIntervalOfTheWholeSite) {
  const store::InventoryWrite places = AgentPlaces();
  Controller controller(0, /*max_heartbeats_per_second=*/10, &places);
  std::vector<std::unique_ptr<RawAgentStream>> agents = ConnectRawAgents(controller, 1);
  EXPECT_EQ(agents[0]->registered_interval_ms, 600);
}

// An agent's stream holds no thread: 200 agents connect, each is sent a command whose answer
// completes it, and each one's end is seen. With the synchronous API each stream held two
// (gRPC's for reading, the registry's for writing). The controller's clock stands still, so
// the silent streams never miss a heartbeat.
TEST(AgentTest, TwoHundredAgentsHoldNoThreadAndEachIsServed) {
  Controller controller;
  const std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(controller.address(), grpc::InsecureChannelCredentials());
  std::vector<std::unique_ptr<RawAgentStream>> agents;
  const auto connect = [&](int i) {
    auto raw = std::make_unique<RawAgentStream>(channel);
    v1::ControllerMessage registered;
    EXPECT_TRUE(raw->Register(absl::StrCat("h", i), absl::StrCat("S", i)) &&
                raw->stream().Read(&registered) && registered.has_registered())
        << "agent " << i;
    agents.push_back(std::move(raw));
  };
  connect(0);  // First, so that gRPC's own threads (pollers, executors) are already running.
  const int before = ProcessThreads();
  for (int i = 1; i < 200; ++i) connect(i);
  const int connected = ProcessThreads();
  EXPECT_LT(connected - before, 20) << before << " threads before, " << connected << " with 200";
  const auto count_connected = [&] {
    int n = 0;
    for (const v1::Agent& a : controller.registry().ListAgents()) n += a.connected();
    return n;
  };
  EXPECT_EQ(count_connected(), 200);

  std::vector<AddressedCommand> commands;
  for (int i = 0; i < 200; ++i) {
    v1::Command quiesce;
    quiesce.mutable_quiesce()->set_onic_serial(absl::StrCat("S", i));
    quiesce.mutable_quiesce()->set_port(1);
    commands.push_back({absl::StrCat("S", i), quiesce});
  }
  std::unique_ptr<SentCommands> sent =
      controller.registry().Send(std::move(commands), absl::Now() + absl::Seconds(60));
  for (int i = 0; i < 200; ++i) {
    const std::string id = agents[i]->NextCommandId();
    ASSERT_FALSE(id.empty()) << "agent " << i << " got no command";
    v1::AgentMessage answer;
    answer.mutable_result()->set_command_id(id);
    answer.mutable_result()->set_message(absl::StrCat("done by h", i));
    ASSERT_TRUE(agents[i]->Write(answer));
  }
  std::vector<absl::StatusOr<v1::CommandResult>> results =
      controller.registry().Await(std::move(sent));
  ASSERT_EQ(results.size(), 200u);
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(results[i].ok()) << "agent " << i << ": " << results[i].status();
    EXPECT_EQ(results[i]->message(), absl::StrCat("done by h", i));
  }

  for (std::unique_ptr<RawAgentStream>& raw : agents) raw->Cancel();
  EXPECT_TRUE(Eventually([&] { return count_connected() == 0; }));
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
}  // namespace fleet::agent_registry
