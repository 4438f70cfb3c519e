// The fleet.v1 services served in-process over a real loopback gRPC port: the fixture the
// service tests share.
#ifndef FLEET_TESTS_SERVICE_SERVICES_FIXTURE_H_
#define FLEET_TESTS_SERVICE_SERVICES_FIXTURE_H_

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "controller/engine/engine.h"
#include "controller/inventory/inventory.h"
#include "controller/service/admin_service.h"
#include "controller/service/agent_service.h"
#include "controller/service/inventory_service.h"
#include "controller/service/topology_service.h"
#include "controller/store/store.h"
#include "controller/switch_registry/switch_registry.h"
#include "testing/fake_clock.h"
#include "testing/fake_optical_switch.h"

namespace fleet::service {

// fleetd's services over an in-memory store, the real engine and fake switches; without
// agents unless a derived fixture sets with_agents_.
class ServicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rpcs_ = std::make_unique<RpcExecutor>(std::move(rpc_options_));
    absl::StatusOr<std::unique_ptr<store::Store>> opened =
        store::OpenSqliteStore({":memory:", &clock_});
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
    applier_ = std::make_unique<inventory::InventoryApplier>(store_.get());
    // Switches are in-memory fakes; the test keeps a handle on the last one built.
    switches_ = std::make_unique<switch_registry::SwitchRegistry>(
        std::map<std::string, switch_registry::SwitchCredentials>{{"ocs1", {"admin", "root"}}},
        "creds.yaml");
    switches_->RegisterDriver(
        v1::SWITCH_PROTOCOL_TL1,
        [this](const v1::Switch& sw, const switch_registry::SwitchCredentials&,
               const switch_adapters::ChangeGate&)
            -> absl::StatusOr<std::unique_ptr<switch_adapters::OpticalSwitch>> {
          auto fake = std::make_unique<fleet::testing::FakeOpticalSwitch>(fake_size_, fake_size_);
          last_fake_ = fake.get();
          built_for_.push_back(sw.id() + "@" + sw.address());
          return fake;
        });
    engine::EngineOptions engine_options;
    engine_options.reconcile_interval = absl::ZeroDuration();
    engine_ = std::make_unique<engine::Engine>(engine_options, store_.get(), switches_.get(),
                                               /*agents=*/nullptr, &clock_);
    if (with_agents_) {
      agent_registry::AgentRegistryOptions agent_options;
      agent_options.heartbeat_interval = absl::Hours(1);
      agents_ = std::make_unique<agent_registry::AgentRegistry>(agent_options, store_.get(),
                                                                store_.get(), &clock_);
      // Plaintext: callers name themselves, no policy.
      agent_service_ = std::make_unique<AgentServiceImpl>(agents_.get(), nullptr);
    }
    inventory_ = std::make_unique<InventoryServiceImpl>(store_.get(), applier_.get(), rpcs_.get(),
                                                        agents_.get(), switches_.get());
    watches_ = std::make_unique<WatchHub>(store_.get());
    watches_->Start();
    topology_ = std::make_unique<TopologyServiceImpl>(store_.get(), engine_.get(), nullptr,
                                                      watches_.get(), rpcs_.get());
    admin_ = std::make_unique<AdminServiceImpl>(store_.get(), engine_.get(), switches_.get(),
                                                agents_.get(), nullptr, watches_.get(), rpcs_.get(),
                                                "9.9.9");
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(inventory_.get());
    builder.RegisterService(topology_.get());
    builder.RegisterService(admin_.get());
    if (agent_service_ != nullptr) builder.RegisterService(agent_service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    address_ = absl::StrCat("127.0.0.1:", port);
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    inventory_stub_ = v1::InventoryService::NewStub(channel);
    topology_stub_ = v1::TopologyService::NewStub(channel);
    admin_stub_ = v1::AdminService::NewStub(channel);
  }
  void TearDown() override {
    engine_->Shutdown();
    watches_->Stop();
    if (agents_ != nullptr) agents_->Shutdown();
    rpcs_->Stop();
    // A deadline: a stream left unread by a failed test must not hang it.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  std::unique_ptr<grpc::ClientContext> Context(const std::string& principal = "operator:tester") {
    auto context = std::make_unique<grpc::ClientContext>();
    context->AddMetadata("x-fleet-principal", principal);
    return context;
  }

  // Stores allocation alloc-1 of tenant-a, READY: one ACTIVE circuit c1 from gpu1-n0 port 1
  // to gpu2-n0 port 1 through ocs1 49 → 435.
  void CreateLinkAllocation() {
    v1::Allocation allocation;
    allocation.set_id("alloc-1");
    allocation.set_tenant("tenant-a");
    allocation.set_state(v1::ALLOCATION_STATE_READY);
    allocation.add_members("gpu1");
    allocation.add_members("gpu2");
    v1::Circuit* circuit = allocation.add_circuits();
    circuit->set_id("c1");
    circuit->mutable_source()->set_onic("gpu1-n0");
    circuit->mutable_source()->set_port(1);
    circuit->mutable_destination()->set_onic("gpu2-n0");
    circuit->mutable_destination()->set_port(1);
    circuit->set_state(v1::CIRCUIT_STATE_ACTIVE);
    v1::CrossConnect* x = circuit->add_cross_connects();
    x->set_switch_id("ocs1");
    x->set_ingress(49);
    x->set_egress(435);
    ASSERT_TRUE(store_->CreateAllocation(allocation, "operator:tester").ok());
  }

  void ApplyGen1() {
    absl::StatusOr<v1::Inventory> gen1 = inventory::ReadInventoryFile(
        std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-gen1.yaml");
    ASSERT_TRUE(gen1.ok()) << gen1.status();
    v1::ApplyInventoryRequest request;
    *request.mutable_inventory() = *gen1;
    v1::ApplyInventoryResponse response;
    grpc::Status status = inventory_stub_->ApplyInventory(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.created(), 1u + 4u + 18u + 36u);
  }

  // Set by a fixture whose fleetd has an agent registry (and serves AgentService); the
  // engine has none either way.
  bool with_agents_ = false;
  fleet::testing::FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<agent_registry::AgentRegistry> agents_;
  std::unique_ptr<AgentServiceImpl> agent_service_;
  std::unique_ptr<inventory::InventoryApplier> applier_;
  std::unique_ptr<InventoryServiceImpl> inventory_;
  std::unique_ptr<WatchHub> watches_;  // Outlives server_.
  RpcExecutor::Options rpc_options_;   // Set by a derived fixture before SetUp.
  std::unique_ptr<RpcExecutor> rpcs_;  // Outlives server_.
  std::unique_ptr<TopologyServiceImpl> topology_;
  uint32_t fake_size_ = 384;
  fleet::testing::FakeOpticalSwitch* last_fake_ = nullptr;
  std::vector<std::string> built_for_;
  std::unique_ptr<switch_registry::SwitchRegistry> switches_;
  std::unique_ptr<AdminServiceImpl> admin_;
  std::unique_ptr<engine::Engine> engine_;
  std::string address_;  // The server's host:port.
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::InventoryService::Stub> inventory_stub_;
  std::unique_ptr<v1::TopologyService::Stub> topology_stub_;
  std::unique_ptr<v1::AdminService::Stub> admin_stub_;
};

}  // namespace fleet::service

#endif  // FLEET_TESTS_SERVICE_SERVICES_FIXTURE_H_
