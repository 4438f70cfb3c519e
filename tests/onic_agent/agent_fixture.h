// The fixture of the tests of the O-NIC agent (tests/onic_agent/agent_test.cc) and of fleetd's
// agent registry (tests/agent_registry/): fleetd's agent side in-process on a loopback gRPC
// port, a fake O-NIC backend, and the real agent running on its own thread.
#ifndef FLEET_TESTS_ONIC_AGENT_AGENT_FIXTURE_H_
#define FLEET_TESTS_ONIC_AGENT_AGENT_FIXTURE_H_

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "controller/agent_registry/agent_registry.h"
#include "controller/service/agent_service.h"
#include "controller/store/store.h"
#include "onic_agent/agent.h"
#include "testing/fake_clock.h"

namespace fleet::onic_agent {

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

// Adds to `write` a TL1 Polatis switch `id` at 127.0.0.1 of `ports` ingress and `ports` egress
// ports.
inline void AddSwitch(store::InventoryWrite& write, const std::string& id, uint32_t ports) {
  v1::Switch* sw = write.objects.add_switches();
  sw->set_id(id);
  sw->set_model("polatis");
  sw->set_ingress_ports(ports);
  sw->set_egress_ports(ports);
  sw->set_address("127.0.0.1");
  sw->set_protocol(v1::SWITCH_PROTOCOL_TL1);
}

// Adds to `write` O-NIC `id` of `device` with serial `serial`, its ports 1 and 2 on switch
// `switch_id`: transmitting on `tx` and tx + 1, receiving on `rx` and rx + 1.
inline void AddOnic(store::InventoryWrite& write, const std::string& id, const std::string& device,
                    const std::string& serial, const std::string& switch_id, uint32_t tx,
                    uint32_t rx) {
  v1::Onic* onic = write.objects.add_onics();
  onic->set_id(id);
  onic->set_device(device);
  onic->set_serial(serial);
  for (uint32_t p : {1u, 2u}) {
    v1::OnicPort* onic_port = onic->add_ports();
    onic_port->set_index(p);
    onic_port->mutable_tx()->set_switch_id(switch_id);
    onic_port->mutable_tx()->set_port(tx + p - 1);
    onic_port->mutable_rx()->set_switch_id(switch_id);
    onic_port->mutable_rx()->set_port(rx + p - 1);
  }
}

// fleetd's agent side, in-process: a store with one host and its O-NIC, the registry and
// AgentService on a loopback port.
class Controller {
 public:
  // `max_heartbeats_per_second`: AgentRegistryOptions' (0: the 20 ms interval is fixed).
  // `more_inventory`, when given, is written after the fixture's own, before the registry
  // starts.
  explicit Controller(int port = 0, double max_heartbeats_per_second = 0,
                      const store::InventoryWrite* more_inventory = nullptr) {
    store_ = *store::OpenSqliteStore({":memory:", &clock_});
    store::InventoryWrite write;
    AddSwitch(write, "ocs1", 8);
    write.objects.add_hosts()->set_name("h1");
    v1::Device* cpu = write.objects.add_devices();
    cpu->set_id("h1-cpu0");
    cpu->set_kind(v1::DEVICE_KIND_CPU);
    cpu->set_host("h1");
    AddOnic(write, "n1", "h1-cpu0", "S1", "ocs1", /*tx=*/1, /*rx=*/9);
    EXPECT_TRUE(store_->WriteInventory(write, "test").ok());
    if (more_inventory != nullptr) {
      absl::Status more = store_->WriteInventory(*more_inventory, "test");
      EXPECT_TRUE(more.ok()) << more;
    }
    agent_registry::AgentRegistryOptions options;
    options.heartbeat_interval = absl::Milliseconds(20);
    options.max_heartbeats_per_second = max_heartbeats_per_second;
    options.commit_point = &commit_point_;
    registry_ = std::make_unique<agent_registry::AgentRegistry>(options, store_.get(), store_.get(),
                                                                &clock_);
    service_ = std::make_unique<service::AgentServiceImpl>(registry_.get(), nullptr);
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
  // The registry's commit point: no fence unless a test sets one.
  CommitPoint& commit_point() { return commit_point_; }

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
  CommitPoint commit_point_;
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

inline v1::Command Retrain(const std::string& serial, uint32_t port, const std::string& id = "") {
  v1::Command command;
  command.set_id(id);
  command.mutable_retrain()->set_onic_serial(serial);
  command.mutable_retrain()->set_port(port);
  return command;
}

// Sends retrains of both ports of S1 at once, to be answered by `deadline`.
inline std::unique_ptr<agent_registry::SentCommands> RetrainBothPorts(Controller& controller,
                                                                      absl::Time deadline) {
  std::vector<agent_registry::AddressedCommand> commands(2);
  for (uint32_t port : {1u, 2u}) {
    commands[port - 1].onic_serial = "S1";
    commands[port - 1].command = Retrain("S1", port);
  }
  return controller.registry().Send(std::move(commands), deadline);
}

}  // namespace fleet::onic_agent

#endif  // FLEET_TESTS_ONIC_AGENT_AGENT_FIXTURE_H_
