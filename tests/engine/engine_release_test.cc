// Releases, evictions, leases and drains.
// The engine over the real SQLite store, the FLEET Gen1 inventory, an in-memory switch and
// agents that check the light (engine_test_fixture.h).
#include "tests/engine/engine_test_fixture.h"

namespace fleet::engine {
namespace {

TEST_F(EngineTest, ReleaseRemovesTheCrossConnectsAndFreesThePorts) {
  v1::Allocation a = Request(Ring("team-a", kGpus));
  absl::StatusOr<v1::Allocation> released =
      engine_->ReleaseTopology(a.id(), Caller::Job("job:team-a", {"team-a"}));
  ASSERT_THAT(released.status(), IsOk());
  EXPECT_EQ(released->state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_THAT(released->circuits(), IsEmpty());
  EXPECT_THAT(OnSwitch(), IsEmpty());
  EXPECT_THAT(store_->ListCircuits({}).value(), IsEmpty());
  // Releasing again is harmless.
  EXPECT_THAT(engine_->ReleaseTopology(a.id(), Caller::Job("job:team-a", {"team-a"})).status(),
              IsOk());
  EXPECT_EQ(Request(Ring("team-b", kGpus)).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, PortsAReleaseLeftQuiescedAreNotQuiescedAgain) {
  v1::Allocation a = Request(Ring("team-a", kGpus));
  const int first = agents_->Count(v1::Command::kQuiesce);
  EXPECT_EQ(first, 8);  // One port of each GPU.
  ASSERT_THAT(engine_->ReleaseTopology(a.id(), Caller::Job("job:team-a", {"team-a"})).status(),
              IsOk());
  const int released = agents_->Count(v1::Command::kQuiesce);
  EXPECT_EQ(released, 16);  // Out of service before their light goes.
  // The same ports, still out of service: the next ring goes straight to the switch.
  v1::Allocation b = Request(Ring("team-b", kGpus));
  EXPECT_EQ(b.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(agents_->Count(v1::Command::kQuiesce), released);
  // A port whose agent reconnected since is quiesced again: its state is unknown.
  ASSERT_THAT(engine_->ReleaseTopology(b.id(), Caller::Job("job:team-b", {"team-b"})).status(),
              IsOk());
  agents_->SetGone("FLT-GPU1-N0", true);
  agents_->SetGone("FLT-GPU1-N0", false);
  const int before = agents_->Count(v1::Command::kQuiesce);
  EXPECT_EQ(Request(Ring("team-b", kGpus)).state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(agents_->Count(v1::Command::kQuiesce), before + 1);
}

TEST_F(EngineTest, ReleaseThatTheSwitchRefusesKeepsThePortsAndRetries) {
  v1::Allocation a = Request(Ring("team-a", kGpus));
  sw_->SetUnreachable(absl::UnavailableError("link down"));
  v1::Allocation stuck =
      engine_->ReleaseTopology(a.id(), Caller::Operator("operator:test")).value();
  EXPECT_EQ(stuck.state(), v1::ALLOCATION_STATE_RELEASING);
  EXPECT_THAT(stuck.reason(), HasSubstr("link down"));
  // Its ports stay held until the light is really gone.
  v1::RequestTopologyRequest same_port;
  same_port.set_tenant("team-a");
  v1::Link* link = same_port.mutable_topology()->mutable_links()->add_links();
  link->mutable_a()->mutable_onic_port()->set_onic("gpu1-n0");
  link->mutable_a()->mutable_onic_port()->set_port(1);
  link->mutable_b()->set_device("gpu3");
  EXPECT_THAT(engine_->RequestTopology(same_port, Caller::Operator("operator:x")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("gpu1-n0")));
  sw_->SetUnreachable(absl::OkStatus());
  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

TEST_F(EngineTest, AnEvictionTheSwitchRefusesEndsFailedWithItsReasonOnRetry) {
  v1::Allocation a;
  ASSERT_NO_FATAL_FAILURE(StuckEviction(&a));
  sw_->SetUnreachable(absl::OkStatus());
  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  const v1::Allocation evicted = Get(a.id());
  EXPECT_EQ(evicted.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(evicted.reason(), HasSubstr("O-NIC gpu2-n0 was drained: dirty connector"));
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

TEST_F(EngineTest, AnEvictionARestartInterruptsStillEndsFailedWithItsReason) {
  v1::Allocation a;
  ASSERT_NO_FATAL_FAILURE(StuckEviction(&a));
  // The reason shown while it is stuck is the switch's; the intent is kept apart from it.
  EXPECT_THAT(Get(a.id()).reason(), HasSubstr("removal failed, retrying"));

  // fleetd restarts; the switch is back. The resumed release ends as the eviction meant.
  engine_.reset();
  sw_->SetUnreachable(absl::OkStatus());
  StartEngine();
  engine_->WaitIdleForTest();
  const v1::Allocation evicted = Get(a.id());
  EXPECT_EQ(evicted.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(evicted.reason(), HasSubstr("O-NIC gpu2-n0 was drained: dirty connector"));
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

TEST_F(EngineTest, ASecondReleaseOfAStuckEvictionDoesNotChangeHowItEnds) {
  v1::Allocation a;
  ASSERT_NO_FATAL_FAILURE(StuckEviction(&a));
  sw_->SetUnreachable(absl::OkStatus());
  absl::StatusOr<v1::Allocation> released =
      engine_->ReleaseTopology(a.id(), Caller::Job("job:team-a", {"team-a"}));
  ASSERT_THAT(released.status(), IsOk());
  EXPECT_EQ(released->state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(released->reason(), HasSubstr("O-NIC gpu2-n0 was drained: dirty connector"));
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

TEST_F(EngineTest, LeaseExpiryReleasesAndKeepAliveRenews) {
  v1::RequestTopologyRequest r = Ring("team-a", kGpus);
  *r.mutable_lease() = google::protobuf::util::TimeUtil::SecondsToDuration(10);
  v1::Allocation a = Request(r);
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const Caller job = Caller::Job("job:team-a", {"team-a"});

  clock_.Advance(absl::Seconds(8));
  ASSERT_THAT(engine_->KeepAlive(a.id(), job).status(), IsOk());
  clock_.Advance(absl::Seconds(8));
  engine_->ExpireLeases();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);

  clock_.Advance(absl::Seconds(3));
  engine_->ExpireLeases();
  engine_->WaitIdleForTest();
  v1::Allocation expired = Get(a.id());
  EXPECT_EQ(expired.state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_THAT(expired.reason(), HasSubstr("lease expired"));
  EXPECT_THAT(OnSwitch(), IsEmpty());
  EXPECT_THAT(engine_->KeepAlive(a.id(), job).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("released")));
}

TEST_F(EngineTest, LeaseLongerThanTheMaximumIsRefused) {
  v1::RequestTopologyRequest r = Ring("team-a", kGpus);
  *r.mutable_lease() = google::protobuf::util::TimeUtil::SecondsToDuration(86400 * 30);
  EXPECT_THAT(engine_->RequestTopology(r, Caller::Operator("operator:test")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lease")));
}

TEST_F(EngineTest, DrainRefusesNewCircuitsAndEvictMovesTheAllocationsOffIt) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2"}));
  const Caller op = Caller::Operator("operator:t");
  v1::DrainRequest drain;
  drain.mutable_target()->set_onic("gpu2-n0");
  drain.set_reason("dirty connector");
  v1::DrainResponse drained = engine_->Drain(drain, op).value();
  EXPECT_THAT(drained.affected_allocations(), ElementsAre(a.id()));
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);  // Without evict: kept.
  EXPECT_THAT(engine_->RequestTopology(Link("team-b", "gpu2", "gpu3"), op).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("drained")));
  EXPECT_THAT(engine_->Drain(drain, Caller::Job("job:team-a", {"team-a"})).status(),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));

  // Evicted: gpu2 is replaced by a spare, and the ring stays up.
  drain.set_evict(true);
  ASSERT_OK_AND_ASSIGN(v1::DrainResponse evicted, engine_->Drain(drain, op));
  engine_->WaitIdleForTest();
  ASSERT_THAT(evicted.evictions(), SizeIs(1));
  EXPECT_TRUE(evicted.evictions(0).moved()) << evicted.evictions(0).reason();
  ASSERT_THAT(evicted.evictions(0).replacements(), SizeIs(1));
  EXPECT_EQ(evicted.evictions(0).replacements(0).failed(), "gpu2");
  v1::Allocation moved = Get(a.id());
  EXPECT_EQ(moved.state(), v1::ALLOCATION_STATE_READY) << moved.reason();
  EXPECT_THAT(moved.members(), Not(Contains("gpu2")));
  EXPECT_THAT(moved.replacements(0).reason(), HasSubstr("O-NIC gpu2-n0 was drained"));
  EXPECT_EQ(moved.replacements(0).by(), "operator:t");
  EXPECT_EQ(OnSwitch(), Wanted(moved));

  // With no spare to move to (a ring of every GPU), the eviction fails it.
  ASSERT_THAT(engine_->ReleaseTopology(a.id(), op).status(), IsOk());
  v1::UndrainRequest undrain_gpu2;
  undrain_gpu2.mutable_target()->set_onic("gpu2-n0");
  ASSERT_THAT(engine_->Undrain(undrain_gpu2, op), IsOk());
  v1::Allocation all = Request(Ring("team-a", kGpus));
  ASSERT_EQ(all.state(), v1::ALLOCATION_STATE_READY) << all.reason();
  drain.mutable_target()->set_onic("gpu3-n0");
  ASSERT_OK_AND_ASSIGN(evicted, engine_->Drain(drain, op));
  ASSERT_THAT(evicted.evictions(), SizeIs(1));
  EXPECT_FALSE(evicted.evictions(0).moved());
  EXPECT_THAT(evicted.evictions(0).reason(), HasSubstr("no free spare"));
  all = Get(all.id());
  EXPECT_EQ(all.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(all.reason(), HasSubstr("O-NIC gpu3-n0 was drained: dirty connector"));
  EXPECT_THAT(OnSwitch(), IsEmpty());
  v1::UndrainRequest undrain_gpu3;
  undrain_gpu3.mutable_target()->set_onic("gpu3-n0");
  ASSERT_THAT(engine_->Undrain(undrain_gpu3, op), IsOk());

  v1::UndrainRequest undrain;
  undrain.mutable_target()->set_onic("gpu2-n0");
  ASSERT_THAT(engine_->Undrain(undrain, op), IsOk());
  EXPECT_EQ(Request(Link("team-b", "gpu2", "gpu3")).state(), v1::ALLOCATION_STATE_READY);
  v1::DrainRequest unknown;
  unknown.mutable_target()->set_host("server9");
  EXPECT_THAT(engine_->Drain(unknown, op).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("server9")));
}

}  // namespace
}  // namespace fleet::engine
