// A transaction's stages and faults: switch errors, armed retrains, the switch's queue, refused
// quiesces. The engine over the real SQLite store, the FLEET Gen1 inventory, an in-memory switch
// and agents that check the light (engine_test_fixture.h).
#include "tests/engine/engine_test_fixture.h"

namespace fleet::engine {
namespace {

TEST_F(EngineTest, SwitchErrorRollsBackAndFailsWithTheSwitchMessage) {
  sw_->FailNextApplyAfter(3);  // Three of the eight cross-connects land, then the switch errs.
  v1::Allocation a = Request(Ring("team-a", kGpus));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(a.reason(), HasSubstr("switch ocs1"));
  EXPECT_THAT(a.reason(), HasSubstr("rolled back"));
  EXPECT_THAT(a.circuits(), IsEmpty());
  EXPECT_THAT(OnSwitch(), IsEmpty());
  // The ports are free again.
  EXPECT_EQ(Request(Ring("team-a", kGpus)).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, ArmedRetrainsGoOutWithTheBatchAndTheOthersAfterIt) {
  // Only gpu1's agent arms retrains: the circuit into gpu1 is retrained as the switch makes
  // it (its agent waits for the light); the other three once the switch is verified (the
  // fake answers a retrain sent before then "no light").
  agents_->ArmRetrains(false, {"FLT-GPU1-N0"});
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_EQ(OnSwitch(), Wanted(a));
  EXPECT_EQ(agents_->armed(), 1);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), 4);
  EXPECT_EQ(agents_->cancelled(), 0);
}

TEST_F(EngineTest, AnArmedLightWaitOfZeroRetrainsOnlyAfterTheSwitchIsVerified) {
  engine_.reset();
  EngineOptions options;
  options.armed_light_wait = absl::ZeroDuration();
  StartEngine(options);
  agents_->ArmRetrains(true);
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_EQ(agents_->armed(), 0);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), 4);
}

TEST_F(EngineTest, ArmedLinksWhoseLightCameTooLateAreRetrainedOnceTheSwitchIsVerified) {
  agents_->ArmRetrains(true);
  agents_->ArmedWaitsRunOut(true);
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_EQ(agents_->armed(), 4);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), 8);  // Four armed, four again after.
}

TEST_F(EngineTest, ArmedRetrainsAreCancelledWhenTheSwitchRefusesTheBatch) {
  agents_->ArmRetrains(true);
  sw_->FailNextApplyAfter(3);
  v1::Allocation a = Request(Ring("team-a", kGpus));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(a.reason(), HasSubstr("rolled back"));
  // Every armed port was quiesced again, which ended its wait for light.
  EXPECT_EQ(agents_->armed(), 8);
  EXPECT_EQ(agents_->cancelled(), 8);
  EXPECT_EQ(agents_->Count(v1::Command::kQuiesce), 16);
  EXPECT_THAT(OnSwitch(), IsEmpty());
  // The ports are free and quiesced: the same ring is made again, armed.
  EXPECT_EQ(Request(Ring("team-a", kGpus)).state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(agents_->armed(), 16);
  EXPECT_EQ(agents_->Count(v1::Command::kQuiesce), 16);
}

TEST_F(EngineTest, ArmedLinksOfAChangeSetTheSwitchTookTwiceAreRetrainedAgain) {
  agents_->ArmRetrains(true);
  HeldApplies held(sw_);
  const Caller op = Caller::Operator("operator:test");
  // The first request's batch holds the switch; the next two queue behind it and go out
  // together.
  const std::string first = RequestHeldAtTheSwitch(Link("team-c", "gpu5", "gpu6"));
  absl::StatusOr<v1::RequestTopologyResponse> a =
      engine_->RequestTopology(Link("team-a", "gpu1", "gpu2"), op);
  absl::StatusOr<v1::RequestTopologyResponse> b =
      engine_->RequestTopology(Link("team-b", "gpu3", "gpu4"), op);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(fleet::testing::Eventually(
      [&] { return engine_->SwitchQueuesForTest()["ocs1"].queued == 2; }));
  // Armed as its batch went to the switch: the first link's two circuits. The queued change
  // sets are not armed until their batch goes.
  ASSERT_TRUE(fleet::testing::Eventually([&] { return agents_->armed() == 2; }));
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), 2);
  // Their batch fails part-way and is undone, then each change set is applied alone: the
  // light at their ports came and went before it came to stay, so an armed answer may have
  // judged light that went away.
  sw_->FailNextApplyAfter(1);
  sw_->HoldApplies(false);
  engine_->WaitIdleForTest();
  std::set<CrossConnect> wanted;
  for (const std::string& id : {first, a->allocation().id(), b->allocation().id()}) {
    const v1::Allocation done = Get(id);
    EXPECT_EQ(done.state(), v1::ALLOCATION_STATE_READY) << done.id() << ": " << done.reason();
    for (const CrossConnect& x : Wanted(done)) wanted.insert(x);
  }
  EXPECT_EQ(OnSwitch(), wanted);
  // Three duplex links, two circuits each, all armed. The first link's circuits trained
  // once; the four the switch took twice, armed and again once it was verified.
  EXPECT_EQ(agents_->armed(), 6);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), 2 + 4 * 2);
  EXPECT_EQ(engine_->SwitchQueuesForTest()["ocs1"].batches,
            4);  // First, together, then each alone.
}

// A switch whose address changes gets a new driver and a new programming queue; a
// transaction still inside the old queue finishes there (the old queue is kept, not freed
// under it: the sanitizer build would see the use after free).
TEST_F(EngineTest, ATransactionInsideASwitchsQueueFinishesWhenTheSwitchsAddressChanges) {
  fleet::testing::FakeOpticalSwitch* const old_switch = sw_;
  HeldApplies held(old_switch);
  const std::string first = RequestHeldAtTheSwitch(Link("team-a", "gpu1", "gpu2"));

  v1::Inventory moved = site_;
  for (v1::Switch& sw : *moved.mutable_switches()) {
    if (sw.id() == "ocs1") sw.set_address("192.0.2.44");
  }
  inventory::InventoryApplier applier(store_.get());
  // The switch holds the first request's circuits: an operator moving it forces the apply.
  ASSERT_THAT(applier.Apply(moved, {.force = true}, "operator:test").status(), IsOk());
  // The next batch for ocs1 goes through a new driver, and so a new queue: it is not held.
  absl::StatusOr<v1::RequestTopologyResponse> second =
      engine_->RequestTopology(Link("team-b", "gpu3", "gpu4"), Caller::Operator("operator:test"));
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(fleet::testing::Eventually([&] {
    return Get(second->allocation().id()).state() != v1::ALLOCATION_STATE_PENDING &&
           Get(second->allocation().id()).state() != v1::ALLOCATION_STATE_PROGRAMMING;
  }));
  EXPECT_NE(sw_, old_switch);
  EXPECT_EQ(sw_->ReadCrossConnects()->size(), Wanted(Get(second->allocation().id())).size());

  old_switch->HoldApplies(false);
  engine_->WaitIdleForTest();
  const v1::Allocation done = Get(first);
  EXPECT_EQ(done.state(), v1::ALLOCATION_STATE_READY) << done.reason();
  EXPECT_EQ(old_switch->ReadCrossConnects()->size(), Wanted(done).size());
}

TEST_F(EngineTest, UnreachableSwitchFailsTheRequest) {
  sw_->SetUnreachable(absl::UnavailableError("connection refused"));
  v1::Allocation a = Request(Ring("team-a", kGpus));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(a.reason(), HasSubstr("connection refused"));
  sw_->SetUnreachable(absl::OkStatus());
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

TEST_F(EngineTest, QuiesceRefusedFailsBeforeTheSwitchIsTouched) {
  agents_->RefuseQuiesce(true);
  v1::Allocation a = Request(Ring("team-a", kGpus));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(a.reason(), HasSubstr("driver busy"));
  EXPECT_EQ(sw_->changes(), 0);
}

}  // namespace
}  // namespace fleet::engine
