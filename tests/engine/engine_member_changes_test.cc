// ReplaceMember and DetachDevices, and changes asked for while a transaction lets go.
// The engine over the real SQLite store, the FLEET Gen1 inventory, an in-memory switch and
// agents that check the light (engine_test_fixture.h).
#include "tests/engine/engine_test_fixture.h"

namespace fleet::engine {
namespace {

// fleetd dies after a member change is stored and before the switch hears of it: the old
// member's cross-connects are on the switch, no circuit wants them. A restart takes them off
// in the batch that makes the new ones.
TEST_F(EngineTest, AMemberChangeACrashInterruptsTakesTheOldCrossConnectsOffAtRestart) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  engine_.reset();

  // What ReplaceMember commits (the planner's replacement of gpu3), and nothing after it.
  const std::vector<v1::Circuit> circuits = store_->ListCircuits({}).value();
  const scheduler::FabricSnapshot snapshot =
      scheduler::FabricSnapshot::Build(site_, store_->ListPorts("").value(), circuits, {a});
  absl::StatusOr<scheduler::Replacement> plan = scheduler::PlanReplacement(snapshot, a, "gpu3", "");
  ASSERT_THAT(plan.status(), IsOk());
  store::CircuitReplacement r;
  r.allocation_id = a.id();
  r.state = v1::ALLOCATION_STATE_PROGRAMMING;
  r.members = plan->members;
  int next = a.circuits_size() + 1;
  for (const v1::Circuit& c : plan->phases.at(0).diff.remove) r.remove.push_back(c.id());
  for (v1::Circuit c : plan->phases.at(0).diff.add) {
    c.set_id(absl::StrCat(a.id(), "-c", next++));
    c.set_allocation_id(a.id());
    c.set_state(v1::CIRCUIT_STATE_PLANNED);
    r.add.push_back(std::move(c));
  }
  ASSERT_THAT(r.remove, SizeIs(2));
  ASSERT_THAT(store_->ReplaceCircuits(r, "operator:test").status(), IsOk());
  ASSERT_THAT(store_->PendingRemovals(a.id()).value_or(std::vector<v1::CrossConnect>{}), SizeIs(2));
  ASSERT_EQ(OnSwitch(), Wanted(a));  // The switch still has the old member's cross-connects.

  // Even a site that adopts unknown cross-connects leaves them to the resumed transaction:
  // they are not unknown, only not yet removed.
  EngineOptions adopting;
  adopting.unknown_policy = v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT;
  StartEngine(adopting);
  engine_->WaitIdleForTest();
  EXPECT_THAT(store_->ListCircuits({}).value(),
              Not(Contains(::testing::Property(&v1::Circuit::manual, true))));
  const v1::Allocation after = Get(a.id());
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
  EXPECT_THAT(after.members(), ElementsAre("gpu1", "gpu2", "gpu5", "gpu4"));
  EXPECT_EQ(OnSwitch(), Wanted(after));
  EXPECT_THAT(store_->PendingRemovals(a.id()).value_or(std::vector<v1::CrossConnect>{1}),
              IsEmpty());
}

// A job that acts on READY at once may find the transaction still finishing (it holds the
// allocation for its last steps after storing READY): the change waits for it, it is not
// refused.
TEST_F(EngineTest, AChangeAskedForAsSoonAsReadyWaitsForTheTransactionToLetGo) {
  std::thread asker;
  absl::Status replaced = absl::UnknownError("not asked");
  HoldFirstReady([&](const std::string& id) {
    asker = std::thread([&, id] {
      replaced =
          engine_->ReplaceMember(Replace(id, "gpu3"), Caller::Operator("operator:test")).status();
    });
    // The transaction still holds the allocation while the change is asked for.
    absl::SleepFor(absl::Milliseconds(50));
  });
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_TRUE(asker.joinable());
  asker.join();
  EXPECT_THAT(replaced, IsOk());
  engine_->WaitIdleForTest();
  EXPECT_THAT(Get(a.id()).members(), ElementsAre("gpu1", "gpu2", "gpu5", "gpu4"));
}

// A job told READY switches phase at once while the transaction that stored READY still
// holds the allocation, and holds it longer than a moment (2.5 s here, past the 2 s the
// engine once waited before refusing ABORTED): the switch waits for it and is accepted.
TEST_F(EngineTest, APhaseSwitchSentOnReadyIsAcceptedHoweverLongTheTransactionHoldsOn) {
  std::thread asker;
  absl::Status switched = absl::UnknownError("not asked");
  HoldFirstReady([&](const std::string& id) {
    asker = std::thread([&, id] {
      switched =
          engine_->ActivatePhase(PhaseRequest(id, "tp"), Caller::Job("job:team-a", {"team-a"}))
              .status();
    });
    // Not a synchronization: how long the last step holds on is what the test is about.
    absl::SleepFor(absl::Milliseconds(2500));
  });
  v1::Allocation a = Request(Phased("team-a"), Caller::Job("job:team-a", {"team-a"}));
  ASSERT_TRUE(asker.joinable());
  asker.join();
  EXPECT_THAT(switched, IsOk());
  engine_->WaitIdleForTest();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << now.reason();
  EXPECT_EQ(now.active_phase(), "tp");
}

// A change whose caller stops waiting (its RPC's deadline passes) while another holds the
// allocation is refused, not done after the caller was told it failed.
TEST_F(EngineTest, AChangeWaitingPastItsCallersDeadlineIsRefusedAndNotDone) {
  absl::Status switched = absl::UnknownError("not asked");
  HoldFirstReady([&](const std::string& id) {
    Caller caller = Caller::Job("job:team-a", {"team-a"});
    caller.deadline = absl::Now() + absl::Milliseconds(100);
    // It gives up while the transaction still holds the allocation, as the 100 ms left to its
    // deadline pass on the engine's clock: the clock moves until it has given up.
    std::atomic<bool> done{false};
    std::thread change([&] {
      switched = engine_->ActivatePhase(PhaseRequest(id, "tp"), caller).status();
      done = true;
    });
    EXPECT_TRUE(fleet::testing::Eventually([&] {
      clock_.Advance(absl::Milliseconds(200));
      return done.load();
    }));
    change.join();
  });
  v1::Allocation a = Request(Phased("team-a"), Caller::Job("job:team-a", {"team-a"}));
  EXPECT_THAT(switched, StatusIs(absl::StatusCode::kAborted, HasSubstr("another change")));
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).active_phase(), "dp");
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, ReplaceMemberSwapsInASpareAndReprogramsOnlyItsCircuits) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const int changes = sw_->changes();
  const int retrains = agents_->Count(v1::Command::kRetrain);
  const std::map<std::string, std::string> before = CircuitsById(a);
  const Caller op = Caller::Operator("operator:test");

  // A dry run plans and changes nothing.
  v1::ReplaceMemberRequest dry = Replace(a.id(), "gpu3");
  dry.set_dry_run(true);
  absl::StatusOr<v1::ReplaceMemberResponse> planned = engine_->ReplaceMember(dry, op);
  ASSERT_THAT(planned.status(), IsOk());
  EXPECT_THAT(planned->plan().members(), ElementsAre("gpu1", "gpu2", "gpu5", "gpu4"));
  EXPECT_EQ(sw_->changes(), changes);
  EXPECT_EQ(CircuitsById(Get(a.id())), before);

  absl::StatusOr<v1::ReplaceMemberResponse> replaced =
      engine_->ReplaceMember(Replace(a.id(), "gpu3"), op);
  ASSERT_THAT(replaced.status(), IsOk());
  EXPECT_EQ(replaced->allocation().state(), v1::ALLOCATION_STATE_PROGRAMMING);
  engine_->WaitIdleForTest();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << now.reason();
  // The best free GPU (healthy, same fit and pool, then by id) stands in for gpu3.
  EXPECT_THAT(now.members(), ElementsAre("gpu1", "gpu2", "gpu5", "gpu4"));
  EXPECT_EQ(OnSwitch(), Wanted(now));
  for (const v1::Circuit& c : now.circuits()) {
    EXPECT_EQ(c.state(), v1::CIRCUIT_STATE_ACTIVE) << c.id();
    EXPECT_NE(c.source().onic(), "gpu3-n0");
    EXPECT_NE(c.destination().onic(), "gpu3-n0");
  }
  // The two circuits not touching gpu3 are the same rows; gpu2→gpu3 and gpu3→gpu4 are
  // replaced by two new ones.
  const std::map<std::string, std::string> after = CircuitsById(now);
  int kept = 0;
  for (const auto& [id, circuit] : before) {
    if (circuit.find("gpu3-n0") != std::string::npos) {
      EXPECT_FALSE(after.contains(id)) << id;
    } else {
      EXPECT_EQ(after.at(id), circuit);
      ++kept;
    }
  }
  EXPECT_EQ(kept, 2);
  EXPECT_EQ(after.size(), 4u);
  EXPECT_THAT(store_->PendingRemovals(a.id()).value_or(std::vector<v1::CrossConnect>{1}),
              IsEmpty());
  EXPECT_EQ(replaced->plan().remove_size(), 2);
  EXPECT_EQ(replaced->plan().add_size(), 2);
  // The switch changed exactly the differing cross-connects; only the new links retrained.
  EXPECT_EQ(sw_->changes() - changes, replaced->plan().remove_size() + replaced->plan().add_size());
  EXPECT_GE(agents_->Count(v1::Command::kRetrain) - retrains, 2);
  // gpu3 is free again: another tenant can use it.
  EXPECT_EQ(Request(Link("team-b", "gpu3", "gpu6")).state(), v1::ALLOCATION_STATE_READY);
  std::string story;
  for (const std::string& k : EventKinds(a.id())) story += k.substr(0, k.find(':')) + " ";
  EXPECT_THAT(story, HasSubstr("allocation.member_replaced allocation.state allocation.state "
                               "allocation.state"));
}

// As for a replacement, but nothing new uses the detached device's ports: reconciliation at
// restart must leave its cross-connects to the resumed detach, even under `adopt`.
TEST_F(EngineTest, ADetachACrashInterruptsIsFinishedAtRestartNotAdopted) {
  v1::Allocation a = Request(Attach("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  engine_.reset();
  store::CircuitReplacement r;  // What DetachDevices commits for gpu1, and nothing after it.
  r.allocation_id = a.id();
  r.state = v1::ALLOCATION_STATE_PROGRAMMING;
  for (const std::string& m : a.members()) {
    if (m != "gpu1") r.members.push_back(m);
  }
  for (const v1::Circuit& c : a.circuits()) {
    if (c.source().onic() == "gpu1-n0" || c.destination().onic() == "gpu1-n0") {
      r.remove.push_back(c.id());
    }
  }
  ASSERT_THAT(r.remove, SizeIs(2));
  ASSERT_THAT(store_->ReplaceCircuits(r, "job:team-a").status(), IsOk());
  const int quiesces = agents_->Count(v1::Command::kQuiesce);

  EngineOptions adopting;
  adopting.unknown_policy = v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT;
  StartEngine(adopting);
  engine_->WaitIdleForTest();
  const v1::Allocation after = Get(a.id());
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
  EXPECT_THAT(after.circuits(), SizeIs(2));
  EXPECT_EQ(OnSwitch(), Wanted(after));
  EXPECT_THAT(store_->ListCircuits({}).value(),
              Not(Contains(::testing::Property(&v1::Circuit::manual, true))));
  // gpu1's port and the host port it used lost their light quiesced first.
  EXPECT_GE(agents_->Count(v1::Command::kQuiesce) - quiesces, 2);
}

TEST_F(EngineTest, DetachTakesOneDeviceOffAVirtualServerAndLeavesTheRest) {
  v1::Allocation a = Request(Attach("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_THAT(a.circuits(), SizeIs(4));
  std::vector<v1::Circuit> kept;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.source().onic() != "gpu1-n0" && c.destination().onic() != "gpu1-n0") kept.push_back(c);
  }
  ASSERT_THAT(kept, SizeIs(2));
  const int retrains = agents_->Count(v1::Command::kRetrain);
  const Caller job = Caller::Job("job:team-a", {"team-a"});

  v1::DetachDevicesRequest detach;
  detach.set_id(a.id());
  detach.add_devices("gpu1");
  detach.set_dry_run(true);
  absl::StatusOr<v1::DetachDevicesResponse> dry = engine_->DetachDevices(detach, job);
  ASSERT_THAT(dry.status(), IsOk());
  EXPECT_THAT(dry->plan().remove(), SizeIs(2));
  EXPECT_THAT(dry->plan().ports_used(), SizeIs(2));  // gpu1's port and the host port it used.
  EXPECT_THAT(dry->plan().members(), Not(Contains("gpu1")));
  EXPECT_THAT(Get(a.id()).circuits(), SizeIs(4));  // The dry run changed nothing.

  detach.set_dry_run(false);
  ASSERT_THAT(engine_->DetachDevices(detach, job).status(), IsOk());
  engine_->WaitIdleForTest();
  const v1::Allocation after = Get(a.id());
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
  ASSERT_THAT(after.circuits(), SizeIs(2));
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(after.circuits(i).id(), kept[i].id());  // Kept as they were, not retrained.
    EXPECT_EQ(after.circuits(i).state(), v1::CIRCUIT_STATE_ACTIVE);
  }
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), retrains);
  EXPECT_THAT(after.members(), Not(Contains("gpu1")));
  EXPECT_THAT(after.members(), Contains("gpu2"));
  EXPECT_EQ(OnSwitch(), Wanted(after));
  EXPECT_THAT(EventKinds(a.id()), Contains(HasSubstr("allocation.detach:")));
  // gpu1 is free for another job.
  EXPECT_EQ(Request(Link("team-b", "gpu1", "gpu3")).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, DetachRefusalsNameTheProblemAndChangeNothing) {
  v1::Allocation a = Request(Attach("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  v1::Allocation ring = Request(Ring("team-a", {"gpu5", "gpu6"}));
  const Caller job = Caller::Job("job:team-a", {"team-a"});
  auto detach = [&](const std::string& id, std::vector<std::string> devices, const Caller& caller) {
    v1::DetachDevicesRequest r;
    r.set_id(id);
    for (const std::string& d : devices) r.add_devices(d);
    return engine_->DetachDevices(r, caller).status();
  };
  EXPECT_THAT(detach(a.id(), {}, job),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("none given")));
  EXPECT_THAT(detach(a.id(), {"gpu1", "gpu1"}, job),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("named twice")));
  EXPECT_THAT(detach(a.id(), {"gpu7"}, job),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("devices[0]: gpu7 is not a member of allocation " + a.id())));
  EXPECT_THAT(detach(a.id(), {"server1-cpu0"}, job),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("server1-cpu0 is a device of host server1")));
  EXPECT_THAT(detach(a.id(), {"gpu1", "gpu2"}, job),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("release allocation " + a.id() + " instead")));
  EXPECT_THAT(detach(ring.id(), {"gpu5"}, job),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is not an attach")));
  EXPECT_THAT(detach(a.id(), {"gpu1"}, Caller::Job("job:team-b", {"team-b"})),
              StatusIs(absl::StatusCode::kNotFound, "allocation " + a.id() + " not found"));
  const v1::Allocation same = Get(a.id());
  EXPECT_THAT(same.circuits(), SizeIs(4));
  EXPECT_EQ(same.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(OnSwitch().size(), Wanted(same).size() + Wanted(ring).size());
}

TEST_F(EngineTest, ReplaceMemberRefusalsNameTheProblem) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const Caller op = Caller::Operator("operator:test");
  // A job may replace a member of its own allocation (here a dry run), not of another's.
  v1::ReplaceMemberRequest dry = Replace(a.id(), "gpu3");
  dry.set_dry_run(true);
  EXPECT_THAT(engine_->ReplaceMember(dry, Caller::Job("job:team-a", {"team-a"})).status(), IsOk());
  EXPECT_THAT(engine_->ReplaceMember(dry, Caller::Job("job:team-b", {"team-b"})).status(),
              StatusIs(absl::StatusCode::kNotFound, "allocation " + a.id() + " not found"));
  EXPECT_THAT(engine_->ReplaceMember(Replace(a.id(), "gpu7"), op).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("has no member gpu7")));
  // Every other GPU busy (gpu5..gpu7) or drained (gpu8): no spare.
  ASSERT_EQ(Request(Ring("team-b", {"gpu5", "gpu6", "gpu7"})).state(), v1::ALLOCATION_STATE_READY);
  v1::DrainRequest drain;
  drain.mutable_target()->set_onic("gpu8-n0");
  ASSERT_THAT(engine_->Drain(drain, op).status(), IsOk());
  const int changes = sw_->changes();
  EXPECT_THAT(engine_->ReplaceMember(Replace(a.id(), "gpu3"), op).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       ::testing::AllOf(HasSubstr("no free spare of kind gpu on switch ocs1"),
                                        HasSubstr("gpu3"))));
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_THAT(now.members(), ElementsAre("gpu1", "gpu2", "gpu3", "gpu4"));
  EXPECT_EQ(sw_->changes(), changes);
  // Undrained, gpu8 is the spare.
  v1::UndrainRequest undrain;
  undrain.mutable_target()->set_onic("gpu8-n0");
  ASSERT_THAT(engine_->Undrain(undrain, op), IsOk());
  ASSERT_THAT(engine_->ReplaceMember(Replace(a.id(), "gpu3"), op).status(), IsOk());
  engine_->WaitIdleForTest();
  now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << now.reason();
  EXPECT_THAT(now.members(), ElementsAre("gpu1", "gpu2", "gpu8", "gpu4"));
  EXPECT_EQ(OnSwitch(), [&] {
    std::set<CrossConnect> both = Wanted(now);
    const std::set<CrossConnect> theirs = Wanted(
        store_->ListAllocations({"team-b", v1::ALLOCATION_STATE_UNSPECIFIED, false}).value()[0]);
    both.insert(theirs.begin(), theirs.end());
    return both;
  }());
}

TEST_F(EngineTest, ReplacementTheSwitchRefusesFailsAndLeavesTheSwitchClean) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  sw_->FailNextApplyAfter(1);
  ASSERT_THAT(
      engine_->ReplaceMember(Replace(a.id(), "gpu3"), Caller::Operator("operator:test")).status(),
      IsOk());
  engine_->WaitIdleForTest();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(now.reason(), HasSubstr("program failed"));
  EXPECT_THAT(now.circuits(), IsEmpty());
  EXPECT_THAT(OnSwitch(), IsEmpty());
  // Every GPU is free again.
  EXPECT_EQ(Request(Ring("team-b", {"gpu1", "gpu2", "gpu3", "gpu4"})).state(),
            v1::ALLOCATION_STATE_READY);
}

}  // namespace
}  // namespace fleet::engine
