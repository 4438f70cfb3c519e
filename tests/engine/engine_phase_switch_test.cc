// Phased allocations and ActivatePhase.
// The engine over the real SQLite store, the FLEET Gen1 inventory, an in-memory switch and
// agents that check the light (engine_test_fixture.h).
#include "tests/engine/engine_test_fixture.h"

namespace fleet::engine {
namespace {

TEST_F(EngineTest, PhasedRequestProgramsOnlyTheInitialPhaseAndHoldsEveryPhasesPorts) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_THAT(a.phases(), ElementsAre("dp", "tp"));
  EXPECT_EQ(a.active_phase(), "dp");
  for (const v1::Circuit& c : a.circuits()) {
    EXPECT_EQ(c.state(), c.phase() == "dp" ? v1::CIRCUIT_STATE_ACTIVE : v1::CIRCUIT_STATE_INACTIVE)
        << c.id();
  }
  EXPECT_EQ(OnSwitch(), PhaseWanted(a, "dp"));
  // The inactive phase's ports are the job's: another tenant cannot take them.
  const Caller op = Caller::Operator("operator:test");
  EXPECT_THAT(engine_->RequestTopology(Link("team-b", "gpu1", "gpu5"), op).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("gpu1")));
}

TEST_F(EngineTest, ActivatePhaseReprogramsOnlyTheCircuitsThatDiffer) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const int changes = sw_->changes();
  const int retrains = agents_->Count(v1::Command::kRetrain);
  const Caller caller = Caller::Job("job:team-a", {"team-a"});

  absl::StatusOr<v1::ActivatePhaseResponse> switched = engine_->ActivatePhase(
      [&] {
        v1::ActivatePhaseRequest r;
        r.set_id(a.id());
        r.set_phase("tp");
        return r;
      }(),
      caller);
  ASSERT_THAT(switched.status(), IsOk());
  engine_->WaitIdleForTest();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << now.reason();
  EXPECT_EQ(now.active_phase(), "tp");
  EXPECT_EQ(OnSwitch(), PhaseWanted(now, "tp"));
  // The ring's gpu2↔gpu3 and gpu4↔gpu1 go (4 cross-connects), tp's own links are new only
  // where the ring's ports differ; what both phases share stays on the switch untouched.
  std::set<CrossConnect> shared;
  const std::set<CrossConnect> dp = PhaseWanted(now, "dp"), tp = PhaseWanted(now, "tp");
  std::set_intersection(dp.begin(), dp.end(), tp.begin(), tp.end(),
                        std::inserter(shared, shared.begin()));
  const int differing = static_cast<int>(dp.size() + tp.size() - 2 * shared.size());
  EXPECT_EQ(sw_->changes() - changes, differing);
  EXPECT_EQ(switched->plan().remove_size() + switched->plan().add_size(), differing);
  // The new links retrain, and so do kept ones whose ports were quiesced with them.
  EXPECT_GE(agents_->Count(v1::Command::kRetrain) - retrains, switched->plan().add_size());
  for (const v1::Circuit& c : now.circuits()) {
    EXPECT_EQ(c.state(), c.phase() == "tp" ? v1::CIRCUIT_STATE_ACTIVE : v1::CIRCUIT_STATE_INACTIVE)
        << c.id();
  }

  // And back; activating the active phase changes nothing.
  v1::ActivatePhaseRequest back;
  back.set_id(a.id());
  back.set_phase("dp");
  ASSERT_THAT(engine_->ActivatePhase(back, caller).status(), IsOk());
  engine_->WaitIdleForTest();
  EXPECT_EQ(OnSwitch(), PhaseWanted(Get(a.id()), "dp"));
  const int settled = sw_->changes();
  ASSERT_THAT(engine_->ActivatePhase(back, caller).status(), IsOk());
  engine_->WaitIdleForTest();
  EXPECT_EQ(sw_->changes(), settled);
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, AnInactivePhasesPortsAreHeldAgainstOtherTenants) {
  v1::RequestTopologyRequest r;
  r.set_tenant("team-a");
  for (auto [name, a, b] : {std::tuple{"one", "gpu1", "gpu2"}, std::tuple{"two", "gpu3", "gpu4"}}) {
    v1::Phase* phase = r.add_phases();
    phase->set_name(name);
    v1::Link* link = phase->mutable_topology()->mutable_links()->add_links();
    link->mutable_a()->set_device(a);
    link->mutable_b()->set_device(b);
    link->set_duplex(true);
  }
  v1::Allocation a = Request(r);
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const Caller op = Caller::Operator("operator:test");
  // Phase `two` is not on the switch, but the port it uses at gpu3 is not anyone else's.
  v1::RequestTopologyRequest theirs = Link("team-b", "gpu3", "gpu5");
  v1::Endpoint* end = theirs.mutable_topology()->mutable_links()->mutable_links(0)->mutable_a();
  end->mutable_onic_port()->set_onic("gpu3-n0");
  end->mutable_onic_port()->set_port(1);
  EXPECT_THAT(engine_->RequestTopology(theirs, op).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("gpu3-n0/1 cannot be used: tx belongs to another tenant")));
  v1::ActivatePhaseRequest two;
  two.set_id(a.id());
  two.set_phase("two");
  ASSERT_THAT(engine_->ActivatePhase(two, Caller::Job("job:team-a", {"team-a"})).status(), IsOk());
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(OnSwitch(), PhaseWanted(Get(a.id()), "two"));
}

TEST_F(EngineTest, KeptCircuitsOnQuiescedPortsAreRetrainedAndTheRestLeftAlone) {
  // A one-way ring and the chain along it: switching keeps three circuits and removes 4→1,
  // whose ports are gpu4's (the receiving end of 3→4) and gpu1's (the sender of 1→2).
  v1::RequestTopologyRequest r;
  r.set_tenant("team-a");
  for (auto [name, kind] : {std::pair{"ring", v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL},
                            std::pair{"chain", v1::TEMPLATE_KIND_CHAIN}}) {
    v1::Phase* phase = r.add_phases();
    phase->set_name(name);
    v1::TemplateSpec* t = phase->mutable_topology()->mutable_template_();
    t->set_kind(kind);
    for (const char* m : {"gpu1", "gpu2", "gpu3", "gpu4"}) t->mutable_members()->add_devices(m);
  }
  v1::Allocation a = Request(r);
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const int changes = sw_->changes();
  const int retrains = agents_->Count(v1::Command::kRetrain);
  v1::ActivatePhaseRequest chain;
  chain.set_id(a.id());
  chain.set_phase("chain");
  absl::StatusOr<v1::ActivatePhaseResponse> switched =
      engine_->ActivatePhase(chain, Caller::Job("job:team-a", {"team-a"}));
  ASSERT_THAT(switched.status(), IsOk());
  EXPECT_EQ(switched->plan().remove_size(), 1);
  EXPECT_EQ(switched->plan().add_size(), 0);
  engine_->WaitIdleForTest();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << now.reason();
  EXPECT_EQ(OnSwitch(), PhaseWanted(now, "chain"));
  EXPECT_EQ(sw_->changes() - changes, 1);
  // 1→2 and 3→4 retrained; 2→3, on ports nobody quiesced, left alone.
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain) - retrains, 2);
}

TEST_F(EngineTest, ActivatePhaseRefusalsNameTheProblem) {
  v1::Allocation a = Request(Phased("team-a"));
  v1::Allocation single = Request(Link("team-a", "gpu5", "gpu6"));
  v1::ActivatePhaseRequest r;
  r.set_id(a.id());
  r.set_phase("pp");
  EXPECT_THAT(engine_->ActivatePhase(r, Caller::Job("job:team-a", {"team-a"})).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("its phases are dp, tp")));
  r.set_phase("tp");
  EXPECT_THAT(engine_->ActivatePhase(r, Caller::Job("job:team-b", {"team-b"})).status(),
              StatusIs(absl::StatusCode::kNotFound, "allocation " + r.id() + " not found"));
  r.set_id(single.id());
  EXPECT_THAT(engine_->ActivatePhase(r, Caller::Job("job:team-a", {"team-a"})).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no phases")));
  EXPECT_EQ(Get(a.id()).active_phase(), "dp");

  v1::RequestTopologyRequest bad = Phased("team-a");
  bad.mutable_phases(1)->set_name("dp");
  const Caller op = Caller::Operator("operator:test");
  EXPECT_THAT(engine_->RequestTopology(bad, op).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'dp' is given twice")));
  bad = Phased("team-a");
  bad.set_initial_phase("pp");
  EXPECT_THAT(engine_->RequestTopology(bad, op).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("initial_phase")));
}

TEST_F(EngineTest, APhaseWhoseNewCircuitsUseADrainedPortIsRefusedUntilUndrained) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  // A tp circuit that dp does not have: switching to tp would light its ports anew.
  std::set<std::string> dp_links;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.phase() == "dp")
      dp_links.insert(c.source().ShortDebugString() + c.destination().ShortDebugString());
  }
  const v1::Circuit* fresh = nullptr;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.phase() == "tp" &&
        !dp_links.contains(c.source().ShortDebugString() + c.destination().ShortDebugString())) {
      fresh = &c;
      break;
    }
  }
  ASSERT_NE(fresh, nullptr);
  const Caller op = Caller::Operator("operator:t");
  v1::DrainRequest drain;
  drain.mutable_target()->set_onic(fresh->source().onic());
  drain.set_reason("dirty connector");
  ASSERT_THAT(engine_->Drain(drain, op).status(), IsOk());
  const int changes = sw_->changes();
  v1::ActivatePhaseRequest r;
  r.set_id(a.id());
  r.set_phase("tp");
  EXPECT_THAT(engine_->ActivatePhase(r, Caller::Job("job:team-a", {"team-a"})).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("phase tp cannot be activated: circuit " + fresh->id()),
                             HasSubstr("onic " + fresh->source().onic() + " is drained"))));
  // Nothing changed: still on dp, READY, the switch untouched; and it can switch once undrained.
  EXPECT_EQ(sw_->changes(), changes);
  EXPECT_EQ(Get(a.id()).active_phase(), "dp");
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
  v1::UndrainRequest undrain;
  undrain.mutable_target()->set_onic(fresh->source().onic());
  ASSERT_THAT(engine_->Undrain(undrain, op), IsOk());
  ASSERT_THAT(engine_->ActivatePhase(r, Caller::Job("job:team-a", {"team-a"})).status(), IsOk());
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).active_phase(), "tp");
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, PhaseSwitchTheSwitchRefusesGoesBackToTheOldPhaseAndHeals) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  sw_->FailNextApplyAfter(1);
  v1::ActivatePhaseRequest r;
  r.set_id(a.id());
  r.set_phase("tp");
  ASSERT_THAT(engine_->ActivatePhase(r, Caller::Job("job:team-a", {"team-a"})).status(), IsOk());
  engine_->WaitIdleForTest();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_EQ(now.active_phase(), "dp");
  EXPECT_THAT(now.reason(), HasSubstr("back on phase dp"));
  EXPECT_EQ(OnSwitch(), PhaseWanted(now, "dp"));  // Rolled back.

  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY) << Get(a.id()).reason();
}

TEST_F(EngineTest, APhaseSwitchACrashInterruptedFinishesAtRestart) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_NO_FATAL_FAILURE(CrashAfterHandoverToTp(a));
  ASSERT_EQ(OnSwitch(), PhaseWanted(a, "dp"));

  StartEngine();
  engine_->WaitIdleForTest();
  v1::Allocation after = Get(a.id());
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
  EXPECT_EQ(after.active_phase(), "tp");
  EXPECT_EQ(OnSwitch(), PhaseWanted(after, "tp"));
}

TEST_F(EngineTest, APhaseSwitchACrashInterruptedAndTheSwitchRefusesGoesBackToTheOldPhase) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_NO_FATAL_FAILURE(CrashAfterHandoverToTp(a));
  sw_->FailNextApplyAfter(1);  // The switch refuses the batch the restarted fleetd sends.
  StartEngine();
  engine_->WaitIdleForTest();
  v1::Allocation after = Get(a.id());
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_DEGRADED) << after.reason();
  EXPECT_EQ(after.active_phase(), "dp");
  EXPECT_THAT(after.reason(), HasSubstr("back on phase dp"));
  EXPECT_EQ(OnSwitch(), PhaseWanted(after, "dp"));  // Rolled back.

  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY) << Get(a.id()).reason();
}

TEST_F(EngineTest, AllToAllBecomesRoundsAndEveryRoundCanBeActivated) {
  v1::RequestTopologyRequest r;
  r.set_tenant("team-a");
  for (const char* m : {"gpu1", "gpu2", "gpu3", "gpu4"}) {
    r.mutable_topology()->mutable_all_to_all()->mutable_members()->add_devices(m);
  }
  v1::Allocation a = Request(r);
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  // Two ports per GPU: each round sends to two others, so the three peers take two rounds.
  EXPECT_THAT(a.phases(), ElementsAre("round-1", "round-2"));
  std::set<std::pair<std::string, std::string>> pairs;
  for (const std::string& round : a.phases()) {
    v1::ActivatePhaseRequest activate;
    activate.set_id(a.id());
    activate.set_phase(round);
    ASSERT_THAT(engine_->ActivatePhase(activate, Caller::Job("job:team-a", {"team-a"})).status(),
                IsOk());
    engine_->WaitIdleForTest();
    v1::Allocation now = Get(a.id());
    ASSERT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << round << ": " << now.reason();
    EXPECT_EQ(OnSwitch(), PhaseWanted(now, round));
    for (const v1::Circuit& c : now.circuits()) {
      if (c.phase() == round) pairs.insert({c.source().onic(), c.destination().onic()});
    }
  }
  EXPECT_THAT(pairs, SizeIs(12));  // Every ordered pair of the four.
}

}  // namespace
}  // namespace fleet::engine
