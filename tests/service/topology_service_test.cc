// TopologyService: allocations requested, read, watched and released over the API.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/eventually.h"

#include "tests/service/services_fixture.h"

namespace fleet::service {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

TEST_F(ServicesTest, AllocationsAndCircuitsAreReadFromTheStore) {
  ApplyGen1();
  CreateLinkAllocation();

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
  engine_->WaitIdleForTest();  // Builds the fake switch.
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
  engine_->WaitIdleForTest();
  const std::string other = RequestRing(*topology_stub_, Context().get(), "tenant-b", 7, 2);
  engine_->WaitIdleForTest();
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

}  // namespace
}  // namespace fleet::service
