// The fixture of the end-to-end tests of the engine (engine_e2e_test.cc, healing_e2e_test.cc):
// fleetd (as its own process, so it can be killed), polatis-emu spoken to over TL1 or REST, and
// one emulated agent per host and chassis, all on loopback ports chosen at run time. The
// emulator and the agents belong to the test, so they outlive a fleetd that is killed and
// started again on the same port.
#ifndef FLEET_TESTS_INTEGRATION_ENGINE_E2E_FIXTURE_H_
#define FLEET_TESTS_INTEGRATION_ENGINE_E2E_FIXTURE_H_

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "controller/engine/engine.h"
#include "controller/fleetd/demo.h"
#include "fleet/v1/admin.grpc.pb.h"
#include "fleet/v1/inventory.grpc.pb.h"
#include "fleet/v1/topology.grpc.pb.h"
#include "switch_adapters/polatis/polatis_switch.h"
#include "tests/integration/subprocess.h"

namespace fleet {

using testing::BinaryPath;
using testing::CommandResult;
using testing::Daemon;
using testing::Eventually;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::PortOutsideEphemeralRange;
using testing::RunCommand;
using CrossConnectSet = std::set<std::pair<uint32_t, uint32_t>>;

inline const std::string kRing =
    std::string(FLEET_SOURCE_DIR) + "/deploy/examples/ring-8-gpus.yaml";

// The processes of one test, and what the tests ask of them. The parameter is the protocol
// fleetd speaks to the switch: "tl1" or "rest".
class EngineEndToEnd : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    config_.state_dir = testing::FreshDirectory("engine-" + GetParam());
    config_.insecure = true;
    fleetd::DemoOptions options;
    options.protocol = GetParam();
    options.switch_ms = 0;
    options.training_ms = 5;
    absl::StatusOr<std::unique_ptr<fleetd::Demo>> demo = fleetd::Demo::Prepare(
        config_, std::filesystem::path(BinaryPath("fleetd")).parent_path().string(), options);
    ASSERT_TRUE(demo.ok()) << demo.status();
    demo_ = std::move(*demo);
    ASSERT_NO_FATAL_FAILURE(StartFleetd());
    ASSERT_TRUE(demo_->StartAgents(grpc_).ok());
    ASSERT_TRUE(Eventually([&] { return ConnectedAgents() == 7; }));
    const std::string& tl1 = demo_->switches().front().tl1;
    const size_t colon = tl1.rfind(':');
    // The test reads the switch over TL1 whatever fleetd speaks.
    switch_ = polatis::NewPolatisSwitch({"ocs1",
                                         polatis::Protocol::kTl1,
                                         tl1.substr(0, colon),
                                         static_cast<uint16_t>(std::stoi(tl1.substr(colon + 1))),
                                         {"admin", "root"}});
  }
  void TearDown() override {
    if (HasFailure() && fleetd_) std::cerr << "---- fleetd stderr:\n" << fleetd_->Stderr();
  }

  // Starts fleetd on the port it had before (agents redial it): one picked outside the
  // ephemeral range, so no other test's connection takes it while fleetd is down.
  void StartFleetd(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {BinaryPath("fleetd"),   "--insecure",
                                     "--state-dir",          config_.state_dir,
                                     "--inventory",          config_.inventory,
                                     "--switch-credentials", config_.switch_credentials,
                                     "--grpc-port",          port_,
                                     "--metrics-port",       "0",
                                     "--agent-heartbeat-ms", "100"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<Daemon>> started = Daemon::Start(argv);
    ASSERT_TRUE(started.ok()) << started.status();
    fleetd_ = std::move(*started);
    absl::StatusOr<std::string> grpc = fleetd_->WaitForLine("grpc: ");
    ASSERT_TRUE(grpc.ok()) << grpc.status() << fleetd_->Stderr();
    grpc_ = *grpc;
    port_ = grpc_.substr(grpc_.rfind(':') + 1);
    absl::StatusOr<std::string> metrics = fleetd_->WaitForLine("metrics: ");
    ASSERT_TRUE(metrics.ok()) << metrics.status() << fleetd_->Stderr();
    metrics_ = *metrics;
    // A fresh channel for each fleetd: one that saw its server die waits out gRPC's
    // reconnect backoff (seconds) before it tries the new one.
    auto channel = grpc::CreateChannel(grpc_, grpc::InsecureChannelCredentials());
    topology_ = v1::TopologyService::NewStub(channel);
    inventory_ = v1::InventoryService::NewStub(channel);
  }

  // The test's channel is closed first: gRPC's server shutdown waits for an idle client
  // connection to answer its GOAWAY, which a channel with no call in flight does late.
  void StopFleetd(int signal) {
    topology_.reset();
    inventory_.reset();
    fleetd_->Stop(signal).IgnoreError();
  }

  CommandResult Fleetctl(std::vector<std::string> args) {
    args.insert(args.begin(), {BinaryPath("fleetctl"), "--insecure", "--server", grpc_});
    return RunCommand(args);
  }

  int ConnectedAgents() {
    grpc::ClientContext context;
    v1::ListAgentsResponse agents;
    if (!inventory_->ListAgents(&context, {}, &agents).ok()) return -1;
    int connected = 0;
    for (const v1::Agent& a : agents.agents()) connected += a.connected();
    return connected;
  }

  std::vector<v1::Allocation> Allocations(bool include_released = false) {
    grpc::ClientContext context;
    v1::ListAllocationsRequest request;
    request.set_include_released(include_released);
    v1::ListAllocationsResponse response;
    grpc::Status status = topology_->ListAllocations(&context, request, &response);
    if (!status.ok()) return {};
    return {response.allocations().begin(), response.allocations().end()};
  }

  // Follows the allocation until it is in `state` or the timeout passes; returns the last.
  v1::Allocation WaitFor(const std::string& id, v1::AllocationState state,
                         absl::Duration timeout = absl::Seconds(30)) {
    return WaitUntil(
        id, [state](const v1::Allocation& a) { return a.state() == state; }, timeout);
  }
  // Follows the allocation until `done` holds for it or the timeout passes; returns the last.
  v1::Allocation WaitUntil(const std::string& id,
                           const std::function<bool(const v1::Allocation&)>& done,
                           absl::Duration timeout = absl::Seconds(30)) {
    v1::Allocation last;
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(deadline));
      v1::WatchAllocationRequest request;
      request.set_id(id);
      auto stream = topology_->WatchAllocation(&context, request);
      v1::WatchAllocationResponse update;
      while (stream->Read(&update)) {
        last = update.allocation();
        if (done(last)) {
          context.TryCancel();
          return last;
        }
      }
      (void)stream->Finish();  // fleetd restarting, or the allocation ended: look again.
      absl::SleepFor(absl::Milliseconds(20));
    }
    return last;
  }

  CrossConnectSet OnSwitch() {
    absl::StatusOr<std::vector<switch_adapters::CrossConnect>> xs = switch_->ReadCrossConnects();
    EXPECT_TRUE(xs.ok()) << xs.status();
    CrossConnectSet out;
    for (const switch_adapters::CrossConnect& x :
         xs.value_or(std::vector<switch_adapters::CrossConnect>{})) {
      out.insert({x.ingress, x.egress});
    }
    return out;
  }
  static CrossConnectSet Wanted(const std::vector<v1::Allocation>& allocations) {
    CrossConnectSet out;
    for (const v1::Allocation& a : allocations) {
      for (const v1::Circuit& c : a.circuits()) {
        for (const v1::CrossConnect& x : c.cross_connects()) out.insert({x.ingress(), x.egress()});
      }
    }
    return out;
  }

  // The value of `series` (a metric's name and labels, as /metrics prints them) on fleetd's
  // /metrics; 0 when it has none yet, -1 when the page cannot be read (for Eventually).
  double FleetdMetric(const std::string& series) {
    absl::StatusOr<std::string> page = testing::HttpGet(metrics_, "/metrics");
    if (!page.ok()) return -1;
    for (absl::string_view line : absl::StrSplit(*page, '\n')) {
      double value = 0;
      if (absl::ConsumePrefix(&line, series + " "))
        return absl::SimpleAtod(line, &value) ? value : -1;
    }
    return 0;
  }

  // The emulator's counter of cross-connects made or removed.
  int64_t SwitchChanges() {
    return testing::EmulatorCounter(demo_->switches().front().rest, "cross_connects_changed");
  }

  void Fault(const std::string& method, const std::string& path, const std::string& body = "") {
    absl::StatusOr<testing::HttpReply> reply =
        testing::HttpRequest(demo_->switches().front().rest, method, path, body);
    ASSERT_TRUE(reply.ok()) << reply.status();
    ASSERT_LT(reply->status, 300) << reply->body;
  }

  // Light from each circuit's source arrives at its destination's rx, as the emulator sees it.
  void ExpectLightOnEveryCircuit(const v1::Allocation& a) {
    for (const v1::Circuit& c : a.circuits()) {
      grpc::ClientContext c1, c2;
      v1::GetOnicRequest src_req, dst_req;
      src_req.set_id(c.source().onic());
      dst_req.set_id(c.destination().onic());
      v1::Onic src, dst;
      ASSERT_TRUE(inventory_->GetOnic(&c1, src_req, &src).ok());
      ASSERT_TRUE(inventory_->GetOnic(&c2, dst_req, &dst).ok());
      const uint32_t egress = dst.ports(static_cast<int>(c.destination().port()) - 1).rx().port();
      absl::StatusOr<std::string> light =
          testing::HttpGet(demo_->switches().front().rest, absl::StrCat("/sim/v1/light/", egress));
      ASSERT_TRUE(light.ok()) << light.status();
      EXPECT_THAT(*light, HasSubstr(absl::StrCat(src.serial(), "/", c.source().port())))
          << "circuit " << c.id();
    }
  }

  // Every allocation settled, and the switch holds exactly the live allocations' circuits.
  void ExpectConsistent() {
    std::vector<v1::Allocation> live = Allocations();
    for (const v1::Allocation& a : live) {
      EXPECT_TRUE(a.state() == v1::ALLOCATION_STATE_READY ||
                  a.state() == v1::ALLOCATION_STATE_FAILED)
          << a.id() << " is " << a.state() << ": " << a.reason();
    }
    EXPECT_EQ(OnSwitch(), Wanted(live));
  }

  // The health of ocs1's `port` as fleetd stores it (UP for one never read or well).
  v1::OperState PortHealth(uint32_t port) {
    grpc::ClientContext context;
    v1::ListPortsRequest request;
    request.set_switch_id("ocs1");
    v1::ListPortsResponse response;
    if (!inventory_->ListPorts(&context, request, &response).ok())
      return v1::OPER_STATE_UNSPECIFIED;
    for (const v1::SwitchPort& p : response.ports()) {
      if (p.ref().port() != port) continue;
      return p.oper_state() == v1::OPER_STATE_UNKNOWN ? v1::OPER_STATE_UP : p.oper_state();
    }
    return v1::OPER_STATE_UNSPECIFIED;
  }

  std::string RequestRing(const std::string& file = kRing) {
    CommandResult requested = Fleetctl({"topology", "request", "-f", file, "-o", "json"});
    EXPECT_EQ(requested.exit_code, 0) << requested.err;
    for (const v1::Allocation& a : Allocations()) {
      if (a.state() != v1::ALLOCATION_STATE_RELEASED) return a.id();
    }
    return "";
  }

  fleetd::FleetdConfig config_;
  std::unique_ptr<fleetd::Demo> demo_;
  std::unique_ptr<Daemon> fleetd_;
  std::string port_ = PortOutsideEphemeralRange();
  std::string grpc_;
  std::string metrics_;  // fleetd's /metrics, HOST:PORT.
  std::unique_ptr<v1::TopologyService::Stub> topology_;
  std::unique_ptr<v1::InventoryService::Stub> inventory_;
  std::unique_ptr<switch_adapters::OpticalSwitch> switch_;
};

}  // namespace fleet

#endif  // FLEET_TESTS_INTEGRATION_ENGINE_E2E_FIXTURE_H_
