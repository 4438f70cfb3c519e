// Make before break (RequestTopologyRequest.prepare_next_phase): two phases on the switch at
// once, each on its own O-NIC ports, and a phase switch that is only a state change.
// The engine over the real SQLite store, the FLEET Gen1 inventory, an in-memory switch and
// agents that check the light (engine_test_fixture.h).
#include "fleet/v1/names.h"
#include "tests/engine/engine_test_fixture.h"

namespace fleet::engine {
namespace {

// A unidirectional ring over gpu1..gpu4 (one port each), then duplex pairs (one port each).
v1::RequestTopologyRequest RingThenPairs(const std::string& tenant) {
  v1::RequestTopologyRequest r = Phased(tenant);
  r.mutable_phases(0)->mutable_topology()->mutable_template_()->set_kind(
      v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
  r.set_prepare_next_phase(true);
  return r;
}

v1::ActivatePhaseRequest Activate(const std::string& id, const std::string& phase) {
  v1::ActivatePhaseRequest r;
  r.set_id(id);
  r.set_phase(phase);
  return r;
}

std::set<CrossConnect> Both(const v1::Allocation& a) {
  std::set<CrossConnect> both = PhaseWanted(a, "dp");
  const std::set<CrossConnect> tp = PhaseWanted(a, "tp");
  both.insert(tp.begin(), tp.end());
  return both;
}

TEST_F(EngineTest, BothPreparedPhasesAreProgrammedAndTrainedAtAdmissionOnTheirOwnPorts) {
  v1::Allocation a = Request(RingThenPairs("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_EQ(a.active_phase(), "dp");
  std::set<std::string> dp_ports, tp_ports;
  for (const v1::Circuit& c : a.circuits()) {
    EXPECT_EQ(c.state(), v1::CIRCUIT_STATE_ACTIVE) << c.id() << " of phase " << c.phase();
    std::set<std::string>& ports = c.phase() == "dp" ? dp_ports : tp_ports;
    ports.insert(v1::PortName(c.source()));
    ports.insert(v1::PortName(c.destination()));
  }
  EXPECT_THAT(dp_ports, ElementsAre("gpu1-n0/1", "gpu2-n0/1", "gpu3-n0/1", "gpu4-n0/1"));
  EXPECT_THAT(tp_ports, ElementsAre("gpu1-n0/2", "gpu2-n0/2", "gpu3-n0/2", "gpu4-n0/2"));
  EXPECT_EQ(PhaseWanted(a, "dp").size(), 4u);
  EXPECT_EQ(PhaseWanted(a, "tp").size(), 4u);
  EXPECT_EQ(OnSwitch(), Both(a));
}

TEST_F(EngineTest, ActivatingAPreparedPhaseSendsNoSwitchCommandAndNoRetrain) {
  v1::Allocation a = Request(RingThenPairs("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const int changes = sw_->changes();
  const int retrains = agents_->Count(v1::Command::kRetrain);
  const int quiesces = agents_->Count(v1::Command::kQuiesce);
  const Caller caller = Caller::Job("job:team-a", {"team-a"});
  for (const char* phase : {"tp", "dp", "tp"}) {
    absl::StatusOr<v1::ActivatePhaseResponse> switched =
        engine_->ActivatePhase(Activate(a.id(), phase), caller);
    ASSERT_THAT(switched.status(), IsOk());
    // READY in the answer itself: nothing is left to do in the background.
    EXPECT_EQ(switched->allocation().state(), v1::ALLOCATION_STATE_READY);
    EXPECT_EQ(switched->allocation().active_phase(), phase);
    EXPECT_THAT(switched->plan().add(), IsEmpty());
    EXPECT_THAT(switched->plan().remove(), IsEmpty());
    EXPECT_EQ(switched->plan().circuits_size(), 4);
  }
  engine_->WaitIdleForTest();
  EXPECT_EQ(sw_->changes(), changes);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), retrains);
  EXPECT_EQ(agents_->Count(v1::Command::kQuiesce), quiesces);
  const v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.active_phase(), "tp");
  EXPECT_EQ(OnSwitch(), Both(now));
  absl::StatusOr<std::vector<v1::Event>> events =
      store_->ListEvents({0, 100, "allocation", a.id()});
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_THAT(events->back().message(), HasSubstr("prepared: no switch command"));
  // Released, both phases come off.
  ASSERT_THAT(engine_->ReleaseTopology(a.id(), caller).status(), IsOk());
  engine_->WaitIdleForTest();
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

TEST_F(EngineTest, PhasesThatShareAPortAreNotPreparedAndSwitchInPlace) {
  v1::RequestTopologyRequest r = Phased("team-a");  // A bidirectional ring: both ports each.
  r.set_prepare_next_phase(true);
  v1::Allocation a = Request(r);
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  for (const v1::Circuit& c : a.circuits()) {
    EXPECT_EQ(c.state(), c.phase() == "dp" ? v1::CIRCUIT_STATE_ACTIVE : v1::CIRCUIT_STATE_INACTIVE)
        << c.id();
  }
  EXPECT_EQ(OnSwitch(), PhaseWanted(a, "dp"));
  const int changes = sw_->changes();
  ASSERT_THAT(engine_->ActivatePhase(Activate(a.id(), "tp"), Caller::Job("job:team-a", {"team-a"}))
                  .status(),
              IsOk());
  engine_->WaitIdleForTest();
  EXPECT_GT(sw_->changes(), changes);
  EXPECT_EQ(OnSwitch(), PhaseWanted(Get(a.id()), "tp"));
}

TEST_F(EngineTest, PrepareNextPhaseIsRefusedUnlessTheRequestHasTwoPhases) {
  const Caller op = Caller::Operator("operator:test");
  v1::RequestTopologyRequest one = Ring("team-a", {"gpu1", "gpu2"});
  one.set_prepare_next_phase(true);
  EXPECT_THAT(engine_->RequestTopology(one, op).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("prepare_next_phase"), HasSubstr("exactly two phases"),
                             HasSubstr("this one has one topology"))));
  v1::RequestTopologyRequest three = RingThenPairs("team-a");
  *three.add_phases() = three.phases(1);
  three.mutable_phases(2)->set_name("pp");
  EXPECT_THAT(engine_->RequestTopology(three, op).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("prepare_next_phase"), HasSubstr("this one has 3"))));
  EXPECT_THAT(store_->ListAllocations({}).value(), IsEmpty());
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

// A member of a prepared allocation replaced: its circuits in both phases are re-made on the
// spare's ports, both on the switch, and the phases still switch without a command.
TEST_F(EngineTest, AReplacedMemberOfAPreparedAllocationIsReplacedInBothPhases) {
  v1::Allocation a = Request(RingThenPairs("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_THAT(
      engine_->ReplaceMember(Replace(a.id(), "gpu3"), Caller::Operator("operator:test")).status(),
      IsOk());
  engine_->WaitIdleForTest();
  const v1::Allocation after = Get(a.id());
  ASSERT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
  EXPECT_THAT(after.members(), Not(Contains("gpu3")));
  for (const v1::Circuit& c : after.circuits()) {
    EXPECT_EQ(c.state(), v1::CIRCUIT_STATE_ACTIVE) << c.id() << " of phase " << c.phase();
    EXPECT_NE(c.source().onic(), "gpu3-n0") << c.id();
    EXPECT_NE(c.destination().onic(), "gpu3-n0") << c.id();
  }
  EXPECT_EQ(OnSwitch(), Both(after));
  const int changes = sw_->changes();
  absl::StatusOr<v1::ActivatePhaseResponse> switched =
      engine_->ActivatePhase(Activate(a.id(), "tp"), Caller::Job("job:team-a", {"team-a"}));
  ASSERT_THAT(switched.status(), IsOk());
  EXPECT_EQ(switched->allocation().state(), v1::ALLOCATION_STATE_READY);
  engine_->WaitIdleForTest();
  EXPECT_EQ(sw_->changes(), changes);
}

}  // namespace
}  // namespace fleet::engine
