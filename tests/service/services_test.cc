// The fleet.v1 services served in-process over a real loopback gRPC port.
#include "controller/service/services.h"

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "switch_adapters/fake_optical_switch.h"
#include "tests/eventually.h"

namespace fleet::service {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

class ServicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<store::Store>> opened =
        store::OpenSqliteStore({":memory:", &clock_});
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
    applier_ = std::make_unique<inventory::InventoryApplier>(store_.get());
    inventory_ = std::make_unique<InventoryServiceImpl>(store_.get(), applier_.get());
    // Switches are in-memory fakes; the test keeps a handle on the last one built.
    switches_ = std::make_unique<fabric::SwitchRegistry>(
        [this](const polatis::PolatisSwitchOptions& options) {
          auto fake = std::make_unique<switches::FakeOpticalSwitch>(fake_size_, fake_size_);
          last_fake_ = fake.get();
          built_for_.push_back(options.name + "@" + options.host);
          return fake;
        },
        std::map<std::string, polatis::Credentials>{{"ocs1", {"admin", "root"}}}, "creds.yaml");
    engine::EngineOptions engine_options;
    engine_options.reconcile_interval = absl::ZeroDuration();
    engine_ = std::make_unique<engine::Engine>(engine_options, store_.get(), switches_.get(),
                                               /*agents=*/nullptr, &clock_);
    topology_ = std::make_unique<TopologyServiceImpl>(store_.get(), engine_.get());
    admin_ = std::make_unique<AdminServiceImpl>(store_.get(), switches_.get(), "9.9.9",
                                                /*agents=*/nullptr, engine_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(inventory_.get());
    builder.RegisterService(topology_.get());
    builder.RegisterService(admin_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    auto channel =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    inventory_stub_ = v1::InventoryService::NewStub(channel);
    topology_stub_ = v1::TopologyService::NewStub(channel);
    admin_stub_ = v1::AdminService::NewStub(channel);
  }
  void TearDown() override {
    engine_->Shutdown();
    server_->Shutdown();
  }

  std::unique_ptr<grpc::ClientContext> Context(const std::string& principal = "operator:tester") {
    auto context = std::make_unique<grpc::ClientContext>();
    context->AddMetadata("x-fleet-principal", principal);
    return context;
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

  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<inventory::InventoryApplier> applier_;
  std::unique_ptr<InventoryServiceImpl> inventory_;
  std::unique_ptr<TopologyServiceImpl> topology_;
  uint32_t fake_size_ = 384;
  switches::FakeOpticalSwitch* last_fake_ = nullptr;
  std::vector<std::string> built_for_;
  std::unique_ptr<fabric::SwitchRegistry> switches_;
  std::unique_ptr<AdminServiceImpl> admin_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::InventoryService::Stub> inventory_stub_;
  std::unique_ptr<v1::TopologyService::Stub> topology_stub_;
  std::unique_ptr<v1::AdminService::Stub> admin_stub_;
};

TEST_F(ServicesTest, Gen1PortsAreAllListedWithTheirWiring) {
  ApplyGen1();
  v1::ListPortsRequest request;
  request.set_switch_id("ocs1");
  v1::ListPortsResponse response;
  ASSERT_TRUE(inventory_stub_->ListPorts(Context().get(), request, &response).ok());
  ASSERT_THAT(response.ports(), SizeIs(768));
  const v1::SwitchPort& first = response.ports(0);
  EXPECT_EQ(first.ref().port(), 1u);
  EXPECT_EQ(first.direction(), v1::PORT_DIRECTION_INGRESS);
  EXPECT_EQ(first.wiring().onic_port().onic(), "s1c0-n0");
  EXPECT_EQ(first.wiring().onic_port().port(), 1u);
  const v1::SwitchPort& rx = response.ports(384);  // Port 385: s1c0-n0 port 1's rx fiber.
  EXPECT_EQ(rx.ref().port(), 385u);
  EXPECT_EQ(rx.direction(), v1::PORT_DIRECTION_EGRESS);
  EXPECT_EQ(rx.wiring().onic_port().onic(), "s1c0-n0");
  int trunk = 0, wired = 0;
  for (const v1::SwitchPort& p : response.ports()) {
    trunk += p.reservation() == v1::PORT_RESERVATION_TRUNK;
    wired += p.has_wiring();
  }
  EXPECT_EQ(trunk, 192);
  EXPECT_EQ(wired, 144);
}

TEST_F(ServicesTest, ListAndGetInventoryObjects) {
  ApplyGen1();
  v1::ListOnicsResponse onics;
  ASSERT_TRUE(inventory_stub_->ListOnics(Context().get(), {}, &onics).ok());
  EXPECT_THAT(onics.onics(), SizeIs(36));

  v1::ListOnicsRequest on_host;
  on_host.set_host("server2");
  ASSERT_TRUE(inventory_stub_->ListOnics(Context().get(), on_host, &onics).ok());
  EXPECT_THAT(onics.onics(), SizeIs(6));

  v1::ListDevicesRequest gpus;
  gpus.set_kind(v1::DEVICE_KIND_GPU);
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(inventory_stub_->ListDevices(Context().get(), gpus, &devices).ok());
  EXPECT_THAT(devices.devices(), SizeIs(8));

  v1::GetOnicRequest get;
  get.set_id("gpu3-n0");
  v1::Onic onic;
  ASSERT_TRUE(inventory_stub_->GetOnic(Context().get(), get, &onic).ok());
  EXPECT_EQ(onic.device(), "gpu3");
  ASSERT_THAT(onic.ports(), SizeIs(2));

  v1::GetSwitchRequest missing;
  missing.set_id("ocs9");
  v1::Switch sw;
  grpc::Status status = inventory_stub_->GetSwitch(Context().get(), missing, &sw);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "switch ocs9 not found");

  grpc::Status empty = inventory_stub_->GetSwitch(Context().get(), {}, &sw);
  EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(empty.error_message(), HasSubstr("id is empty"));
}

TEST_F(ServicesTest, BrokenInventoryIsInvalidArgumentListingEveryProblem) {
  ApplyGen1();
  v1::ApplyInventoryRequest request;
  v1::Onic* onic = request.mutable_inventory()->add_onics();
  onic->set_id("extra");
  onic->set_device("nosuchdevice");
  onic->set_serial("FLT-S1C0-N0");  // Already used by s1c0-n0.
  v1::ApplyInventoryResponse response;
  grpc::Status status = inventory_stub_->ApplyInventory(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("device 'nosuchdevice' is not in the inventory"));
  EXPECT_THAT(status.error_message(), HasSubstr("duplicate serial 'FLT-S1C0-N0'"));
  EXPECT_THAT(status.error_message(), HasSubstr("has 0 ports"));
  EXPECT_EQ(store_->GetOnic("extra").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ServicesTest, ChangesRecordTheCallersPrincipal) {
  ApplyGen1();
  v1::DeleteObjectRequest request;
  request.set_kind("device");
  request.set_name("gpu8");
  v1::DeleteObjectResponse response;
  ASSERT_TRUE(
      inventory_stub_->DeleteObject(Context("operator:alice").get(), request, &response).ok());
  EXPECT_THAT(response.deleted(), ::testing::ElementsAre("device gpu8", "onic gpu8-n0"));

  v1::ListEventsRequest events_request;
  events_request.set_object_kind("device");
  events_request.set_object_id("gpu8");
  v1::ListEventsResponse events;
  ASSERT_TRUE(admin_stub_->ListEvents(Context().get(), events_request, &events).ok());
  ASSERT_THAT(events.events(), SizeIs(2));  // Created by the apply, then deleted.
  EXPECT_EQ(events.events(0).principal(), "operator:tester");
  EXPECT_EQ(events.events(1).principal(), "operator:alice");
  EXPECT_EQ(events.events(1).kind(), "inventory.deleted");
}

TEST_F(ServicesTest, DeleteIsRefusedWhileInUse) {
  ApplyGen1();
  v1::DeleteObjectRequest request;
  request.set_kind("host");
  request.set_name("server1");
  v1::DeleteObjectResponse response;
  grpc::Status status = inventory_stub_->DeleteObject(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("host server1 still has devices server1-cpu0"));

  request.set_kind("widget");
  status = inventory_stub_->DeleteObject(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("cannot delete kind 'widget'"));
  EXPECT_TRUE(store_->GetHost("server1").ok());
}

TEST_F(ServicesTest, AllocationsAndCircuitsAreReadFromTheStore) {
  ApplyGen1();
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

  v1::GetAllocationRequest get;
  get.set_id("alloc-1");
  v1::Allocation got;
  ASSERT_TRUE(topology_stub_->GetAllocation(Context().get(), get, &got).ok());
  EXPECT_EQ(got.tenant(), "tenant-a");
  ASSERT_THAT(got.circuits(), SizeIs(1));
  EXPECT_EQ(got.circuits(0).cross_connects(0).egress(), 435u);

  v1::ListAllocationsRequest other_tenant;
  other_tenant.set_tenant("tenant-b");
  v1::ListAllocationsResponse list;
  ASSERT_TRUE(topology_stub_->ListAllocations(Context().get(), other_tenant, &list).ok());
  EXPECT_THAT(list.allocations(), SizeIs(0));

  v1::ListCircuitsRequest circuits_request;
  circuits_request.set_switch_id("ocs1");
  v1::ListCircuitsResponse circuits;
  ASSERT_TRUE(inventory_stub_->ListCircuits(Context().get(), circuits_request, &circuits).ok());
  ASSERT_THAT(circuits.circuits(), SizeIs(1));
  EXPECT_EQ(circuits.circuits(0).allocation_id(), "alloc-1");

  // The O-NIC of a member in a live allocation cannot be deleted.
  v1::DeleteObjectRequest del;
  del.set_kind("device");
  del.set_name("gpu1");
  v1::DeleteObjectResponse deleted;
  grpc::Status status = inventory_stub_->DeleteObject(Context().get(), del, &deleted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("device gpu1 is a member of allocation alloc-1"));
}

TEST_F(ServicesTest, DryRunPlansARingAndTouchesNothing) {
  ApplyGen1();
  absl::StatusOr<std::vector<v1::Event>> before = store_->ListEvents({});
  ASSERT_TRUE(before.ok());
  v1::RequestTopologyRequest request;
  request.set_tenant("tenant-a");
  request.set_dry_run(true);
  v1::TemplateSpec* ring = request.mutable_topology()->mutable_template_();
  ring->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
  for (int i = 1; i <= 8; ++i) ring->mutable_members()->add_devices("gpu" + std::to_string(i));
  v1::RequestTopologyResponse response;
  grpc::Status status = topology_stub_->RequestTopology(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(response.has_allocation());
  EXPECT_THAT(response.plan().circuits(), SizeIs(8));
  EXPECT_THAT(response.plan().add(), SizeIs(8));
  EXPECT_THAT(*store_->ListCircuits({}), SizeIs(0));
  EXPECT_THAT(*store_->ListEvents({}), SizeIs(before->size()));

  // Admission errors come back with their codes and words.
  ring->mutable_members()->set_devices(7, "gpu99");
  status = topology_stub_->RequestTopology(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("device gpu99 not found"));
}

// A ring of `gpus` GPUs from gpu`first` for `tenant`, over the API; returns its id.
std::string RequestRing(v1::TopologyService::Stub& stub, grpc::ClientContext* context,
                        const std::string& tenant, int first, int gpus) {
  v1::RequestTopologyRequest request;
  request.set_tenant(tenant);
  v1::TemplateSpec* ring = request.mutable_topology()->mutable_template_();
  ring->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
  for (int i = first; i < first + gpus; ++i) {
    ring->mutable_members()->add_devices("gpu" + std::to_string(i));
  }
  v1::RequestTopologyResponse response;
  grpc::Status status = stub.RequestTopology(context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.allocation().id();
}

// Reads a watch to its end: each message's allocation id and state.
std::vector<std::pair<std::string, v1::AllocationState>> ReadWatch(
    grpc::ClientReader<v1::WatchAllocationResponse>& stream, size_t at_most = 100) {
  std::vector<std::pair<std::string, v1::AllocationState>> seen;
  v1::WatchAllocationResponse update;
  while (seen.size() < at_most && stream.Read(&update)) {
    seen.push_back({update.allocation().id(), update.allocation().state()});
  }
  return seen;
}

// A watch of one allocation is sent every state it is committed in, in order, however fast
// they follow each other, and ends when the allocation does; a tenant's watch sees only that
// tenant's allocations.
TEST_F(ServicesTest, WatchAllocationSendsEveryStateInOrderAndEndsWithTheAllocation) {
  ApplyGen1();
  const std::string first = RequestRing(*topology_stub_, Context().get(), "tenant-a", 1, 2);
  engine_->WaitIdle();  // Builds the fake switch.
  ASSERT_NE(last_fake_, nullptr);
  auto tenant_context = Context();
  tenant_context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  v1::WatchAllocationRequest tenant_watch;
  tenant_watch.set_tenant("tenant-b");
  std::unique_ptr<grpc::ClientReader<v1::WatchAllocationResponse>> tenant_stream =
      topology_stub_->WatchAllocation(tenant_context.get(), tenant_watch);

  // The switch holds the next request in PROGRAMMING while its watch starts.
  last_fake_->HoldApplies(true);
  const std::string id = RequestRing(*topology_stub_, Context().get(), "tenant-a", 3, 4);
  ASSERT_TRUE(fleet::testing::Eventually([&] {
    absl::StatusOr<v1::Allocation> a = store_->GetAllocation(id);
    return last_fake_->held() == 1 && a.ok() && a->state() == v1::ALLOCATION_STATE_PROGRAMMING;
  }));
  auto context = Context();
  v1::WatchAllocationRequest watch;
  watch.set_id(id);
  std::unique_ptr<grpc::ClientReader<v1::WatchAllocationResponse>> stream =
      topology_stub_->WatchAllocation(context.get(), watch);
  v1::WatchAllocationResponse update;
  ASSERT_TRUE(stream->Read(&update));
  EXPECT_EQ(update.allocation().state(), v1::ALLOCATION_STATE_PROGRAMMING);
  // An event about it that changes nothing (as the engine records one) is not a new state.
  v1::Event note;
  note.set_kind("allocation.quiesce_skipped");
  note.set_object_kind("allocation");
  note.set_object_id(id);
  note.set_message("no connected agent");
  ASSERT_TRUE(store_->AppendEvent(note).ok());
  last_fake_->HoldApplies(false);
  engine_->WaitIdle();
  const std::string other = RequestRing(*topology_stub_, Context().get(), "tenant-b", 7, 2);
  engine_->WaitIdle();
  v1::ReleaseTopologyRequest release;
  release.set_id(id);
  v1::ReleaseTopologyResponse released;
  ASSERT_TRUE(topology_stub_->ReleaseTopology(Context().get(), release, &released).ok());

  using Seen = std::vector<std::pair<std::string, v1::AllocationState>>;
  // No agents here, so no link can be retrained: DEGRADED, not READY.
  EXPECT_EQ(ReadWatch(*stream), (Seen{{id, v1::ALLOCATION_STATE_TRAINING},
                                      {id, v1::ALLOCATION_STATE_DEGRADED},
                                      {id, v1::ALLOCATION_STATE_RELEASING},
                                      {id, v1::ALLOCATION_STATE_RELEASED}}));
  EXPECT_TRUE(stream->Finish().ok());
  // The tenant's watch: tenant-b's one allocation, up to its last state; nothing of
  // tenant-a's, though they changed all along.
  Seen tenant_seen;
  while (tenant_stream->Read(&update)) {
    tenant_seen.push_back({update.allocation().id(), update.allocation().state()});
    if (update.allocation().state() == v1::ALLOCATION_STATE_DEGRADED) break;
  }
  tenant_context->TryCancel();
  (void)tenant_stream->Finish();
  ASSERT_FALSE(tenant_seen.empty());
  for (const auto& [allocation, state] : tenant_seen) EXPECT_EQ(allocation, other);
  EXPECT_EQ(tenant_seen.back().second, v1::ALLOCATION_STATE_DEGRADED);
  for (size_t i = 1; i < tenant_seen.size(); ++i) {
    EXPECT_LT(tenant_seen[i - 1].second, tenant_seen[i].second);  // In order.
  }
  EXPECT_NE(first, other);
}

TEST_F(ServicesTest, PhaseAndReplaceRequestsAreCheckedAndAFleetdWithoutAgentsSaysSo) {
  ApplyGen1();
  v1::RequestTopologyRequest phased;
  phased.set_tenant("tenant-a");
  phased.add_phases()->set_name("dp");
  v1::RequestTopologyResponse topology;
  grpc::Status phases = topology_stub_->RequestTopology(Context().get(), phased, &topology);
  EXPECT_EQ(phases.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(phases.error_message(), HasSubstr("phases[0] (dp)"));
  v1::ActivatePhaseResponse activated;
  grpc::Status no_id = topology_stub_->ActivatePhase(Context().get(), {}, &activated);
  EXPECT_EQ(no_id.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(no_id.error_message(), HasSubstr("id is empty"));
  v1::ReplaceMemberResponse replaced;
  grpc::Status no_member = admin_stub_->ReplaceMember(Context().get(), {}, &replaced);
  EXPECT_EQ(no_member.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(no_member.error_message(), HasSubstr("member is empty"));
  v1::ListAgentsResponse agents;
  EXPECT_EQ(inventory_stub_->ListAgents(Context().get(), {}, &agents).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(ServicesTest, WatchEventsReplaysTheLogThenFollowsIt) {
  ApplyGen1();
  const uint64_t last = store_->LastEventSequence();
  ASSERT_GT(last, 3u);
  v1::WatchEventsRequest request;
  request.set_after_sequence(last - 2);
  auto context = Context();
  std::unique_ptr<grpc::ClientReader<v1::Event>> stream =
      admin_stub_->WatchEvents(context.get(), request);
  v1::Event event;
  ASSERT_TRUE(stream->Read(&event));
  EXPECT_EQ(event.sequence(), last - 1);
  ASSERT_TRUE(stream->Read(&event));
  EXPECT_EQ(event.sequence(), last);
  // A change made now arrives on the open stream.
  v1::DrainRequest drain;
  drain.mutable_target()->set_host("server2");
  drain.set_reason("firmware update");
  v1::DrainResponse drained;
  ASSERT_TRUE(admin_stub_->Drain(Context().get(), drain, &drained).ok());
  ASSERT_TRUE(stream->Read(&event));
  EXPECT_EQ(event.sequence(), last + 1);
  EXPECT_EQ(event.object_id(), "server2");
  EXPECT_THAT(event.message(), HasSubstr("firmware update"));
  context->TryCancel();
  while (stream->Read(&event)) {
  }
}

// A follower far behind whose events retention pruned starts at the oldest kept, then
// follows: no error, no replay of a gap.
TEST_F(ServicesTest, WatchEventsFromAPrunedSequenceStartsAtTheOldestKept) {
  ApplyGen1();
  clock_.Advance(absl::Hours(24 * 31));
  v1::DrainRequest drain;
  drain.mutable_target()->set_host("server2");
  v1::DrainResponse drained;
  ASSERT_TRUE(admin_stub_->Drain(Context().get(), drain, &drained).ok());
  const uint64_t kept = store_->LastEventSequence();
  absl::StatusOr<int64_t> pruned = store_->PruneEvents({absl::Hours(24 * 30), 0}, 1000);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  ASSERT_EQ(*pruned, static_cast<int64_t>(kept - 1));

  v1::WatchEventsRequest request;
  request.set_after_sequence(3);
  auto context = Context();
  std::unique_ptr<grpc::ClientReader<v1::Event>> stream =
      admin_stub_->WatchEvents(context.get(), request);
  v1::Event event;
  ASSERT_TRUE(stream->Read(&event));
  EXPECT_EQ(event.sequence(), kept);
  EXPECT_EQ(event.object_id(), "server2");
  v1::UndrainRequest undrain;
  undrain.mutable_target()->set_host("server2");
  v1::UndrainResponse undrained;
  ASSERT_TRUE(admin_stub_->Undrain(Context().get(), undrain, &undrained).ok());
  ASSERT_TRUE(stream->Read(&event));
  EXPECT_EQ(event.sequence(), kept + 1);
  context->TryCancel();
  while (stream->Read(&event)) {
  }
}

TEST_F(ServicesTest, HealthProbesEverySwitch) {
  ApplyGen1();
  v1::HealthResponse health;
  ASSERT_TRUE(admin_stub_->Health(Context().get(), {}, &health).ok());
  ASSERT_THAT(health.components(), SizeIs(2));
  EXPECT_EQ(health.components(1).name(), "switch/ocs1");
  EXPECT_EQ(health.components(1).state(), v1::ComponentHealth::STATE_OK);
  EXPECT_THAT(health.components(1).detail(), HasSubstr("0 cross-connects"));
  EXPECT_THAT(built_for_, ::testing::ElementsAre("ocs1@192.0.2.10"));

  last_fake_->SetUnreachable(absl::UnavailableError("cannot connect to switch at 192.0.2.10"));
  ASSERT_TRUE(admin_stub_->Health(Context().get(), {}, &health).ok());
  EXPECT_EQ(health.overall(), v1::ComponentHealth::STATE_DOWN);
  EXPECT_EQ(health.components(1).state(), v1::ComponentHealth::STATE_DOWN);
  EXPECT_THAT(health.components(1).detail(), HasSubstr("cannot connect"));
  EXPECT_THAT(built_for_, SizeIs(1));  // The same driver is reused.
}

TEST_F(ServicesTest, HealthFlagsASwitchOfTheWrongSizeAndOneWithoutCredentials) {
  fake_size_ = 16;
  ApplyGen1();
  v1::ApplyInventoryRequest second;
  v1::Switch* sw = second.mutable_inventory()->add_switches();
  sw->set_id("ocs2");
  sw->set_model("polatis");
  sw->set_ingress_ports(16);
  sw->set_egress_ports(16);
  sw->set_address("192.0.2.11");
  sw->set_protocol(v1::SWITCH_PROTOCOL_REST);
  v1::ApplyInventoryResponse applied;
  ASSERT_TRUE(inventory_stub_->ApplyInventory(Context().get(), second, &applied).ok());

  v1::HealthResponse health;
  ASSERT_TRUE(admin_stub_->Health(Context().get(), {}, &health).ok());
  ASSERT_THAT(health.components(), SizeIs(3));
  EXPECT_EQ(health.components(1).state(), v1::ComponentHealth::STATE_DEGRADED);
  EXPECT_THAT(health.components(1).detail(),
              HasSubstr("reports 16x16 ports but inventory says 384x384"));
  EXPECT_EQ(health.components(2).name(), "switch/ocs2");
  EXPECT_EQ(health.components(2).state(), v1::ComponentHealth::STATE_DOWN);
  EXPECT_THAT(health.components(2).detail(),
              HasSubstr("no credentials for switch ocs2 in creds.yaml"));
}

TEST_F(ServicesTest, HealthReportsTheStoreAndVersion) {
  v1::HealthResponse health;
  ASSERT_TRUE(admin_stub_->Health(Context().get(), {}, &health).ok());
  EXPECT_EQ(health.version(), "9.9.9");
  EXPECT_EQ(health.overall(), v1::ComponentHealth::STATE_OK);
  ASSERT_THAT(health.components(), SizeIs(1));
  EXPECT_EQ(health.components(0).name(), "store");
}

}  // namespace
}  // namespace fleet::service
