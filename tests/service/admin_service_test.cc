// AdminService: the event log followed, drain and health over the API.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/fake_agent.h"
#include "tests/service/services_fixture.h"

namespace fleet::service {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

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

class ServicesWithAgentsTest : public ServicesTest {
 protected:
  ServicesWithAgentsTest() { with_agents_ = true; }
};

// RetrainLink asks the O-NIC's agent to retrain the port, expecting the source of the desired
// circuit arriving on it (CreateLinkAllocation's), or any peer when none does; GetLinkStatus reads
// both ports.
TEST_F(ServicesWithAgentsTest, LinkCommandsGoToTheOnicsAgentExpectingTheCircuitsPeer) {
  ApplyGen1();
  const std::string gpu1 = store_->GetOnic("gpu1-n0")->serial();
  const std::string gpu2 = store_->GetOnic("gpu2-n0")->serial();
  CreateLinkAllocation();
  absl::StatusOr<std::unique_ptr<fleet::testing::FakeAgent>> agent =
      fleet::testing::FakeAgent::Connect(address_, "gpu-chassis", {gpu2});
  ASSERT_TRUE(agent.ok()) << agent.status();

  v1::RetrainLinkRequest retrain;
  retrain.set_onic("gpu2-n0");
  retrain.set_port(1);
  v1::LinkState link;
  grpc::Status status = admin_stub_->RetrainLink(Context().get(), retrain, &link);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(link.status(), v1::LINK_STATUS_UP);
  EXPECT_EQ(link.peer_seen(), gpu1 + "/1");
  retrain.set_port(2);  // No circuit arrives there.
  ASSERT_TRUE(admin_stub_->RetrainLink(Context().get(), retrain, &link).ok());
  retrain.set_port(3);
  EXPECT_EQ(admin_stub_->RetrainLink(Context().get(), retrain, &link).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::GetLinkStatusRequest read;
  read.set_onic("gpu2-n0");
  v1::GetLinkStatusResponse ports;
  ASSERT_TRUE(admin_stub_->GetLinkStatus(Context().get(), read, &ports).ok());
  ASSERT_THAT(ports.ports(), SizeIs(2));
  EXPECT_EQ(ports.ports(1).port(), 2u);

  const std::vector<v1::Command> sent = (*agent)->commands();
  ASSERT_THAT(sent, SizeIs(4));
  EXPECT_EQ(sent[0].retrain().onic_serial(), gpu2);
  EXPECT_EQ(sent[0].retrain().port(), 1u);
  EXPECT_EQ(sent[0].retrain().expected_peer().onic_serial(), gpu1);
  EXPECT_EQ(sent[0].retrain().expected_peer().port(), 1u);
  EXPECT_EQ(sent[1].retrain().port(), 2u);
  EXPECT_FALSE(sent[1].retrain().has_expected_peer());
  EXPECT_EQ(sent[2].read_port().port(), 1u);
  EXPECT_EQ(sent[3].read_port().port(), 2u);

  v1::ListAgentsResponse agents;
  ASSERT_TRUE(inventory_stub_->ListAgents(Context().get(), {}, &agents).ok());
  EXPECT_THAT(agents.agents(), SizeIs(1));
}

}  // namespace
}  // namespace fleet::service
