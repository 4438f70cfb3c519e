// Restarts, resumed transactions and reconciliation of the switch.
// The engine over the real SQLite store, the FLEET Gen1 inventory, an in-memory switch and
// agents that check the light (engine_test_fixture.h).
#include "tests/engine/engine_test_fixture.h"

namespace fleet::engine {
namespace {

TEST_F(EngineTest, RestartLeavesReadyAllocationsUntouched) {
  v1::Allocation a = Request(Ring("team-a", kGpus));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const int changes = sw_->changes();
  const int retrains = agents_->Count(v1::Command::kRetrain);
  engine_.reset();
  StartEngine();
  engine_->WaitIdleForTest();
  EXPECT_EQ(sw_->changes(), changes);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), retrains);
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

// What a crash leaves behind at each stage, then a restart.
class InterruptedTest : public EngineTest,
                        public ::testing::WithParamInterface<std::pair<v1::AllocationState, int>> {
};

TEST_P(InterruptedTest, RestartResumesTheTransaction) {
  const auto [state, landed] = GetParam();
  // Take an allocation through, then rewind the store and the switch to the crash point.
  v1::Allocation a = Request(Ring("team-a", kGpus));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  engine_.reset();
  store::AllocationUpdate rewind;
  rewind.id = a.id();
  rewind.state = state;
  for (const v1::Circuit& c : a.circuits()) {
    rewind.circuits[c.id()] = {state == v1::ALLOCATION_STATE_RELEASING ? v1::CIRCUIT_STATE_REMOVING
                                                                       : v1::CIRCUIT_STATE_PLANNED,
                               ""};
  }
  ASSERT_THAT(store_->UpdateAllocation(rewind, "test").status(), IsOk());
  const std::set<CrossConnect> wanted = Wanted(a);
  std::vector<CrossConnect> all(wanted.begin(), wanted.end());
  switch_adapters::CrossConnectBatch undo;
  undo.remove.assign(all.begin() + landed, all.end());
  ASSERT_THAT(sw_->Apply(undo).status, IsOk());

  StartEngine();
  engine_->WaitIdleForTest();
  v1::Allocation after = Get(a.id());
  if (state == v1::ALLOCATION_STATE_RELEASING) {
    EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_RELEASED);
    EXPECT_THAT(OnSwitch(), IsEmpty());
  } else {
    EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
    EXPECT_EQ(OnSwitch(), Wanted(after));
  }
  EXPECT_THAT(EventKinds(a.id()), Contains(HasSubstr("resuming")));
}

INSTANTIATE_TEST_SUITE_P(Stages, InterruptedTest,
                         ::testing::Values(std::pair{v1::ALLOCATION_STATE_PENDING, 0},
                                           std::pair{v1::ALLOCATION_STATE_PROGRAMMING, 0},
                                           std::pair{v1::ALLOCATION_STATE_PROGRAMMING, 3},
                                           std::pair{v1::ALLOCATION_STATE_TRAINING, 8},
                                           std::pair{v1::ALLOCATION_STATE_RELEASING, 8},
                                           std::pair{v1::ALLOCATION_STATE_RELEASING, 5}));

TEST_F(EngineTest, ReconcileRepairsAMissingCrossConnectAndRetrains) {
  v1::Allocation a = Request(Ring("team-a", kGpus));
  const CrossConnect lost = *Wanted(a).begin();
  switch_adapters::CrossConnectBatch behind_our_back;
  behind_our_back.remove.push_back(lost);
  ASSERT_THAT(sw_->Apply(behind_our_back).status, IsOk());

  v1::ReconcileRequest dry;
  dry.set_dry_run(true);
  v1::ReconcileResponse seen = engine_->Reconcile(dry, Caller::Operator("operator:t")).value();
  ASSERT_THAT(seen.drift(), SizeIs(1));
  EXPECT_EQ(seen.drift(0).kind(), v1::Drift::KIND_MISSING);
  // A dry run changes nothing: not the switch, nor the allocation's state.
  EXPECT_EQ(OnSwitch().size(), 7u);
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);

  v1::ReconcileResponse fixed = engine_->Reconcile({}, Caller::Operator("operator:t")).value();
  EXPECT_EQ(fixed.repaired(), 1u);
  EXPECT_EQ(OnSwitch(), Wanted(a));
  // DEGRADED for the retrain its sync does (which may have begun already: the mark wakes it).
  const std::vector<v1::Event> events = store_->ListEvents({0, 1000, "allocation", a.id()}).value();
  EXPECT_THAT(events,
              Contains(::testing::Property(&v1::Event::message,
                                           HasSubstr("DEGRADED: a cross-connect was missing on the "
                                                     "switch and was repaired; retraining"))));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, ReconcileReportsResumedTransactionsAndThoseRolledBack) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  // As a crash would leave it: PROGRAMMING, nothing on the switch yet, and meanwhile someone
  // patched a foreign cross-connect onto the egress its first circuit needs.
  store::AllocationUpdate rewind;
  rewind.id = a.id();
  rewind.state = v1::ALLOCATION_STATE_PROGRAMMING;
  for (const v1::Circuit& c : a.circuits())
    rewind.circuits[c.id()] = {v1::CIRCUIT_STATE_PLANNED, ""};
  ASSERT_THAT(store_->UpdateAllocation(rewind, "test").status(), IsOk());
  switch_adapters::CrossConnectBatch clear;
  for (const CrossConnect& x : Wanted(a)) clear.remove.push_back(x);
  ASSERT_THAT(sw_->Apply(clear).status, IsOk());
  const uint32_t egress = a.circuits(0).cross_connects(0).egress();
  sw_->ForceCrossConnect({300, egress});

  v1::ReconcileResponse r = engine_->Reconcile({}, Caller::Operator("operator:t")).value();
  EXPECT_EQ(r.resumed_transactions(), 1u);
  EXPECT_EQ(r.rolled_back_transactions(), 1u);
  v1::Allocation failed = Get(a.id());
  EXPECT_EQ(failed.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(failed.reason(), HasSubstr(absl::StrCat(egress)));
  // Only the foreign cross-connect is left: the failed resume took nothing with it.
  EXPECT_EQ(OnSwitch(), (std::set<CrossConnect>{{300, egress}}));
}

TEST_F(EngineTest, ReconcileAppliesTheUnknownCrossConnectPolicy) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2"}));
  // s1c0-n0 port 1 tx (ingress 1) to s2c0-n0 port 1 rx (egress 397): wired O-NIC ports.
  sw_->ForceCrossConnect({1, 397});
  sw_->ForceCrossConnect({300, 700});  // Trunk-reserved ports: no O-NIC to adopt it for.
  const Caller op = Caller::Operator("operator:t");

  v1::ReconcileResponse reported = engine_->Reconcile({}, op).value();
  ASSERT_THAT(reported.drift(), SizeIs(2));
  for (const v1::Drift& d : reported.drift()) {
    EXPECT_EQ(d.kind(), v1::Drift::KIND_UNKNOWN);
    EXPECT_EQ(d.action(), "reported");
  }
  EXPECT_THAT(OnSwitch(), Contains(CrossConnect{1, 397}));

  v1::ReconcileRequest adopt;
  adopt.set_unknown(v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT);
  v1::ReconcileResponse adopted = engine_->Reconcile(adopt, op).value();
  std::map<uint32_t, std::string> actions;
  for (const v1::Drift& d : adopted.drift()) actions[d.cross_connect().ingress()] = d.action();
  EXPECT_EQ(actions[1], "adopted");
  EXPECT_THAT(actions[300], HasSubstr("cannot adopt"));
  std::vector<v1::Circuit> manual;
  const std::vector<v1::Circuit> circuits = store_->ListCircuits({}).value();
  for (const v1::Circuit& c : circuits) {
    if (c.manual()) manual.push_back(c);
  }
  ASSERT_THAT(manual, SizeIs(1));
  EXPECT_EQ(manual[0].source().onic(), "s1c0-n0");
  EXPECT_EQ(manual[0].destination().onic(), "s2c0-n0");

  v1::ReconcileRequest remove;
  remove.set_unknown(v1::UNKNOWN_CROSS_CONNECT_POLICY_REMOVE);
  v1::ReconcileResponse removed = engine_->Reconcile(remove, op).value();
  ASSERT_THAT(removed.drift(), SizeIs(1));
  EXPECT_EQ(removed.drift(0).cross_connect().ingress(), 300u);
  EXPECT_EQ(removed.drift(0).action(), "removed");
  std::set<CrossConnect> expected = Wanted(a);
  expected.insert({1, 397});  // Adopted: now desired.
  EXPECT_EQ(OnSwitch(), expected);
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

}  // namespace
}  // namespace fleet::engine
