// The engine behind a fenced commit point (controller/commit_point/commit_point.h), as a
// replica that has lost the lead would run: it stores nothing, sends its switch nothing
// (not even a repair of drift it finds), and acts again once let in.
#include <array>
#include <atomic>
#include <memory>
#include <set>

#include "tests/engine/engine_test_fixture.h"

namespace fleet::engine {
namespace {

// Refuses the effects it is told to, counting every one it is asked about by kind; lifted
// when it goes. The counts are shared with the fence, which a thread may still be running.
class TestFence {
 public:
  explicit TestFence(CommitPoint& commit_point) : commit_point_(commit_point) {}
  ~TestFence() { commit_point_.SetFence({}); }

  void Refuse(std::set<Effect> effects) {
    commit_point_.SetFence([asked = asked_, effects](Effect effect) {
      ++(*asked)[static_cast<int>(effect)];
      if (!effects.contains(effect)) return absl::OkStatus();
      return absl::UnavailableError(absl::StrCat("not the leader: ", EffectName(effect)));
    });
  }
  void Lift() { commit_point_.SetFence({}); }
  int asked(Effect effect) const { return (*asked_)[static_cast<int>(effect)].load(); }

 private:
  CommitPoint& commit_point_;
  const std::shared_ptr<std::array<std::atomic<int>, 3>> asked_ =
      std::make_shared<std::array<std::atomic<int>, 3>>();
};

TEST_F(EngineTest, AFencedOffReplicaChangesNothingAndActsAgainOnceLetIn) {
  const v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  // Drift the replica will find: one of the ring's cross-connects gone behind fleetd's back.
  const CrossConnect lost = *Wanted(a).begin();
  switch_adapters::CrossConnectBatch lose;
  lose.remove = {lost};
  ASSERT_TRUE(sw_->Apply(lose).status.ok());
  const std::set<CrossConnect> on_switch = OnSwitch();
  const size_t events = EventCount();

  TestFence fence(commit_point_);
  // (The fixture's agents are not the agent registry, so the agents' gate is not reached
  // here: AgentTest.AFencedCommitPointSendsAgentsNothing tests it.)
  fence.Refuse({Effect::kStoreWrite, Effect::kSwitchCommand, Effect::kAgentCommand});
  const Caller op = Caller::Operator("operator:test");
  EXPECT_THAT(engine_->ReleaseTopology(a.id(), op).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not the leader")));
  EXPECT_THAT(
      engine_->RequestTopology(Ring("team-b", {"gpu5", "gpu6", "gpu7", "gpu8"}), op).status(),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not the leader")));
  v1::DrainRequest drain;
  drain.mutable_target()->set_onic("gpu2-n0");
  drain.set_reason("dirty connector");
  drain.set_evict(true);
  EXPECT_THAT(engine_->Drain(drain, op).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not the leader")));
  absl::StatusOr<v1::ReconcileResponse> reconciled = engine_->Reconcile({}, op);
  EXPECT_THAT(reconciled.status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not the leader")));
  EXPECT_GT(fence.asked(Effect::kStoreWrite), 0);
  engine_->WaitIdleForTest();

  EXPECT_EQ(OnSwitch(), on_switch);
  EXPECT_EQ(EventCount(), events);
  const v1::Allocation still = Get(a.id());
  EXPECT_EQ(still.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(store_->ListAllocations({}).value().size(), 1u);
  EXPECT_EQ(store_->GetOnic("gpu2-n0")->admin_state(), v1::ADMIN_STATE_ENABLED);

  // With only the switch fenced, the drift is read and compared, and its repair refused.
  fence.Refuse({Effect::kSwitchCommand});
  reconciled = engine_->Reconcile({}, op);
  EXPECT_THAT(reconciled.status(), StatusIs(absl::StatusCode::kUnavailable,
                                            HasSubstr("not the leader: switch command")));
  EXPECT_GT(fence.asked(Effect::kSwitchCommand), 0);
  engine_->WaitIdleForTest();
  EXPECT_EQ(OnSwitch(), on_switch);

  // Let in: the drift is repaired (by this reconcile, or by the sync the refused repair
  // left marked, whichever takes the allocation first) and the release goes through.
  fence.Lift();
  reconciled = engine_->Reconcile({}, op);
  ASSERT_TRUE(reconciled.ok()) << reconciled.status();
  engine_->WaitIdleForTest();
  EXPECT_EQ(OnSwitch(), Wanted(a));
  ASSERT_TRUE(engine_->ReleaseTopology(a.id(), op).ok());
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

// Only the switch is fenced: the request is stored, its batch refused before a byte goes to
// the switch, and the allocation fails with the refusal as its reason. Then its release's
// one write is refused.
TEST_F(EngineTest, ASwitchBatchRefusedAtTheCommitPointFailsTheRequestWithTheSwitchUntouched) {
  TestFence fence(commit_point_);
  fence.Refuse({Effect::kSwitchCommand});
  const v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(a.reason(), HasSubstr("not the leader: switch command"));
  EXPECT_THAT(OnSwitch(), IsEmpty());
  EXPECT_GT(fence.asked(Effect::kSwitchCommand), 0);
  EXPECT_GT(fence.asked(Effect::kStoreWrite), 0);
  // Its release is one store write, and is not answered as done when that is refused.
  fence.Refuse({Effect::kStoreWrite});
  const Caller op = Caller::Operator("operator:test");
  EXPECT_THAT(engine_->ReleaseTopology(a.id(), op).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not the leader: store write")));
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_FAILED);
  fence.Lift();
  ASSERT_THAT(engine_->ReleaseTopology(a.id(), op).status(), IsOk());
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_RELEASED);
}

// A release already under way (RELEASING committed) whose last write is refused is answered
// OK: its circuits are off the switch, and the end is committed by a later attempt.
TEST_F(EngineTest, AReleaseUnderWayWhoseEndIsRefusedEndsOnceLetIn) {
  v1::Allocation a;
  ASSERT_NO_FATAL_FAILURE(StuckEviction(&a));
  sw_->SetUnreachable(absl::OkStatus());
  TestFence fence(commit_point_);
  fence.Refuse({Effect::kStoreWrite});
  const Caller op = Caller::Operator("operator:test");
  EXPECT_THAT(engine_->ReleaseTopology(a.id(), op).status(), IsOk());
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_RELEASING);
  EXPECT_THAT(OnSwitch(), IsEmpty());
  fence.Lift();
  ASSERT_THAT(engine_->ReleaseTopology(a.id(), op).status(), IsOk());
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_FAILED);  // The eviction's end.
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

}  // namespace
}  // namespace fleet::engine
