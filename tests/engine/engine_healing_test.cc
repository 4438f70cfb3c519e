// Failures under a running allocation and healing: the switch monitor's port health, an
// operator's failed device, links that will not retrain, a failure policy with and without a
// spare, suspect devices.
// The engine over the real SQLite store, the FLEET Gen1 inventory, an in-memory switch and
// agents that check the light (engine_test_fixture.h).
#include "tests/engine/engine_test_fixture.h"

namespace fleet::engine {
namespace {

v1::RequestTopologyRequest Healing(v1::RequestTopologyRequest r, absl::Duration within,
                                   uint32_t max_replacements = 1) {
  r.mutable_on_failure()->set_replace(true);
  *r.mutable_on_failure()->mutable_within() = ToProtoDuration(within);
  r.mutable_on_failure()->set_max_replacements(max_replacements);
  return r;
}

// The egress of the switch port the circuit arriving at O-NIC `onic` leaves by.
uint32_t EgressInto(const v1::Allocation& a, const std::string& onic) {
  for (const v1::Circuit& c : a.circuits()) {
    if (c.destination().onic() == onic) return c.cross_connects(0).egress();
  }
  ADD_FAILURE() << "no circuit into " << onic;
  return 0;
}

class HealingTest : public EngineTest {
 protected:
  // Fails switch port `egress`, has the monitor see it, and runs the retry that follows.
  void FailPortAndRetry(uint32_t egress) {
    sw_->SetPortFailed(egress, true);
    engine_->MonitorSwitches();
    engine_->WaitIdleForTest();
    RetryAfter(absl::ZeroDuration());
  }
  // Runs the retries due after `after` passes, and waits for what they start.
  void RetryAfter(absl::Duration after) {
    clock_.Advance(after);
    engine_->RunDueRetries();
    engine_->WaitIdleForTest();
  }
  v1::SwitchPort Port(uint32_t port) {
    const std::vector<v1::SwitchPort> ports = store_->ListPorts("ocs1").value();
    for (const v1::SwitchPort& p : ports) {
      if (p.ref().port() == port) return p;
    }
    return {};
  }
  // A batch that takes `a`'s cross-connect into `egress` off the switch, as done behind
  // fleetd's back.
  static switch_adapters::CrossConnectBatch TakeOffInto(const v1::Allocation& a, uint32_t egress) {
    switch_adapters::CrossConnectBatch behind;
    for (const CrossConnect& x : Wanted(a)) {
      if (x.egress == egress) behind.remove.push_back(x);
    }
    return behind;
  }
  static std::vector<std::string> Members(const v1::Allocation& a) {
    return {a.members().begin(), a.members().end()};
  }
};

TEST_F(HealingTest, AFailedSwitchPortIsSeenByTheMonitorAndItsMemberReplacedBySpare) {
  v1::Allocation a =
      Request(Healing(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}), absl::Seconds(2)));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const uint32_t egress = EgressInto(a, "gpu3-n0");
  EXPECT_EQ(Port(egress).oper_state(), v1::OPER_STATE_UNKNOWN);  // Never read yet.
  EXPECT_THAT(engine_->MonitorSwitches(), IsEmpty());            // Every lit egress reads light.
  // A first reading that finds a port well is no change, but it is kept: the port reads UP.
  EXPECT_EQ(Port(egress).oper_state(), v1::OPER_STATE_UP);
  EXPECT_EQ(Port(1).oper_state(), v1::OPER_STATE_UP);

  sw_->SetPortFailed(egress, true);
  std::vector<store::PortHealth> seen = engine_->MonitorSwitches();
  ASSERT_THAT(seen, SizeIs(1));
  EXPECT_EQ(seen[0].ref.port(), egress);
  EXPECT_EQ(seen[0].state, v1::OPER_STATE_FAILED);
  EXPECT_EQ(Port(egress).oper_state(), v1::OPER_STATE_FAILED);
  EXPECT_THAT(Port(egress).oper_reason(), HasSubstr("the switch reports it failed"));
  // DEGRADED at once, naming the port; and the retry that follows at once, with no tick,
  // heals it, since the failed port is the member's own fiber.
  engine_->WaitIdleForTest();
  const std::vector<std::string> story = EventKinds(a.id());
  EXPECT_THAT(story,
              Contains(AllOf(HasSubstr("DEGRADED"),
                             HasSubstr(absl::StrCat("switch port ocs1/", egress, " failed")))));
  a = Get(a.id());
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_FALSE(a.has_degraded_since());
  EXPECT_THAT(Members(a), Not(Contains("gpu3")));
  EXPECT_EQ(a.members(0), "gpu1");
  EXPECT_EQ(a.members(1), "gpu2");
  EXPECT_EQ(a.members(3), "gpu4");
  ASSERT_THAT(a.replacements(), SizeIs(1));
  const v1::MemberReplacement& r = a.replacements(0);
  EXPECT_EQ(r.failed(), "gpu3");
  EXPECT_EQ(r.spare(), a.members(2));
  EXPECT_EQ(r.position(), 2u);
  EXPECT_EQ(r.by(), "fleetd");
  EXPECT_THAT(r.reason(), HasSubstr(absl::StrCat("switch port ocs1/", egress, " of gpu3 failed")));
  EXPECT_EQ(OnSwitch(), Wanted(a));
  for (const CrossConnect& x : OnSwitch()) EXPECT_NE(x.egress, egress);
  EXPECT_THAT(EventKinds(a.id()), Contains(HasSubstr("allocation.member_replaced:")));

  // The port stays FAILED; a pass with nothing new records nothing.
  EXPECT_THAT(engine_->MonitorSwitches(), IsEmpty());
  sw_->SetPortFailed(egress, false);
  seen = engine_->MonitorSwitches();
  ASSERT_THAT(seen, SizeIs(1));
  EXPECT_EQ(seen[0].state, v1::OPER_STATE_UP);
  EXPECT_EQ(Port(egress).oper_state(), v1::OPER_STATE_UP);
}

TEST_F(HealingTest, WithoutAPolicyAFailedPortLeavesTheRingDegradedUntilItIsFixed) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const uint32_t egress = EgressInto(a, "gpu2-n0");
  sw_->SetPortFailed(egress, true);
  engine_->MonitorSwitches();
  engine_->WaitIdleForTest();
  ASSERT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_DEGRADED);

  RetryAfter(absl::Seconds(5));  // Retrained, in vain: no light through a failed port.
  a = Get(a.id());
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(a.replacements(), IsEmpty());
  EXPECT_THAT(Members(a), ElementsAre("gpu1", "gpu2", "gpu3"));

  sw_->SetPortFailed(egress, false);
  engine_->MonitorSwitches();
  RetryAfter(absl::Minutes(2));
  a = Get(a.id());
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_THAT(Members(a), ElementsAre("gpu1", "gpu2", "gpu3"));
}

TEST_F(HealingTest, APowerDropBelowTheThresholdDegradesThePortAndItsLink) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const uint32_t egress = EgressInto(a, "gpu1-n0");
  sw_->SetPowerDrop(egress, 10);  // -11.5 dBm: still above -20, nothing to say.
  EXPECT_THAT(engine_->MonitorSwitches(), IsEmpty());
  sw_->SetPowerDrop(egress, 25);  // -26.5 dBm.
  std::vector<store::PortHealth> seen = engine_->MonitorSwitches();
  ASSERT_THAT(seen, SizeIs(1));
  EXPECT_EQ(seen[0].state, v1::OPER_STATE_DEGRADED);
  EXPECT_THAT(seen[0].reason, HasSubstr("-26.50 dBm, below -20.00 dBm"));
  engine_->WaitIdleForTest();
  a = Get(a.id());
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(EventKinds(a.id()), Contains(HasSubstr("switch port ocs1/" + std::to_string(egress) +
                                                     " degraded: -26.50 dBm")));
  EXPECT_THAT(a.reason(), HasSubstr("no light"));  // Its retry, at once, in vain.
}

TEST_F(HealingTest, AnOperatorsFailedDeviceIsReplacedAndGetsNoNewCircuits) {
  v1::Allocation a = Request(Healing(Ring("team-a", {"gpu1", "gpu2", "gpu3"}), absl::Seconds(30)));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  v1::SetDeviceHealthRequest fail;
  fail.set_device("gpu2");
  fail.set_health(v1::DEVICE_HEALTH_FAILED);
  fail.set_reason("ECC errors");
  ASSERT_OK_AND_ASSIGN(v1::Device gpu2, engine_->SetDeviceHealth(fail, Caller::Operator("op:t")));
  EXPECT_EQ(gpu2.health(), v1::DEVICE_HEALTH_FAILED);
  EXPECT_EQ(gpu2.health_reason(), "ECC errors");
  // DEGRADED, then healed at once (not after `within`), with no tick.
  engine_->WaitIdleForTest();
  EXPECT_THAT(EventKinds(a.id()),
              Contains(AllOf(HasSubstr("DEGRADED"), HasSubstr("device gpu2 failed (ECC errors)"))));
  a = Get(a.id());
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_THAT(a.replacements(), SizeIs(1));
  EXPECT_EQ(a.replacements(0).failed(), "gpu2");
  EXPECT_THAT(a.replacements(0).reason(), HasSubstr("device gpu2 failed: ECC errors"));

  // A request naming it is refused: its ports are unusable.
  absl::StatusOr<v1::RequestTopologyResponse> refused =
      engine_->RequestTopology(Ring("team-b", {"gpu2", "gpu8"}), Caller::Operator("operator:test"));
  EXPECT_THAT(refused.status(), StatusIs(absl::StatusCode::kResourceExhausted,
                                         HasSubstr("device gpu2 has failed (ECC errors)")));
  // Healthy again, it may be used.
  fail.set_health(v1::DEVICE_HEALTH_HEALTHY);
  fail.clear_reason();
  ASSERT_OK_AND_ASSIGN(gpu2, engine_->SetDeviceHealth(fail, Caller::Operator("op:t")));
  EXPECT_EQ(gpu2.health(), v1::DEVICE_HEALTH_HEALTHY);
  EXPECT_EQ(Request(Ring("team-b", {"gpu2", "gpu8"})).state(), v1::ALLOCATION_STATE_READY);
  // Only an operator's two words; suspect is fleetd's.
  fail.set_health(v1::DEVICE_HEALTH_SUSPECT);
  EXPECT_THAT(engine_->SetDeviceHealth(fail, Caller::Operator("op:t")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("health: suspect")));
}

TEST_F(HealingTest, AFailedDeviceKeepsItsAllocationDegradedUntilItIsHealthyAgain) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3"}));  // No policy.
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  v1::SetDeviceHealthRequest health;
  health.set_device("gpu2");
  health.set_health(v1::DEVICE_HEALTH_FAILED);
  health.set_reason("ECC errors");
  ASSERT_THAT(engine_->SetDeviceHealth(health, Caller::Operator("op:t")).status(), IsOk());
  engine_->WaitIdleForTest();
  // Its links still carry light and retrain, but an operator said it has failed.
  RetryAfter(absl::Seconds(5));
  a = Get(a.id());
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(a.reason(), HasSubstr("device gpu2 failed: ECC errors"));
  health.set_health(v1::DEVICE_HEALTH_HEALTHY);
  ASSERT_THAT(engine_->SetDeviceHealth(health, Caller::Operator("op:t")).status(), IsOk());
  RetryAfter(absl::ZeroDuration());  // Retried at once, not after the backoff.
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY) << Get(a.id()).reason();
}

TEST_F(HealingTest, AFailurePolicyOutOfBoundsIsRefusedNamingTheField) {
  v1::RequestTopologyRequest r = Healing(Ring("team-a", {"gpu1", "gpu2"}), absl::Hours(25));
  EXPECT_THAT(engine_->RequestTopology(r, Caller::Operator("op:t")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("on_failure.within")));
  r = Healing(Ring("team-a", {"gpu1", "gpu2"}), absl::Seconds(1), 100000);
  EXPECT_THAT(engine_->RequestTopology(r, Caller::Operator("op:t")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("on_failure.max_replacements: 100000")));
  EXPECT_THAT(store_->ListAllocations({}).value(), IsEmpty());
}

TEST_F(HealingTest, LinksThatDoNotRetrainWithinTheDeadlineGetTheirMemberReplaced) {
  v1::Allocation a =
      Request(Healing(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}), absl::Seconds(5)));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  agents_->SetGone("FLT-GPU3-N0", true);
  engine_->AgentGone("gpu-pool-1", {"FLT-GPU3-N0"}, "heartbeats missed");
  engine_->WaitIdleForTest();
  ASSERT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_DEGRADED);

  RetryAfter(absl::Seconds(1));  // Retrained in vain; 4 s left.
  a = Get(a.id());
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(a.replacements(), IsEmpty());

  RetryAfter(absl::Seconds(5));
  a = Get(a.id());
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_THAT(a.replacements(), SizeIs(1));
  // The link into gpu3 would not retrain (its agent is gone; the one out of it did, on the
  // light alone). Its two ends tie; the receiver, whose agent reports it, is replaced.
  EXPECT_EQ(a.replacements(0).failed(), "gpu3");
  EXPECT_THAT(a.replacements(0).reason(), HasSubstr("1 of its links not retrained within 5s"));
  EXPECT_GE(FromProtoDuration(a.replacements(0).degraded_for()), absl::Seconds(5));
}

TEST_F(HealingTest, ACrossConnectTakenOffTheSwitchIsMadeAgainNotHealedWithASpare) {
  v1::Allocation a =
      Request(Healing(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}), absl::Seconds(2)));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const std::set<CrossConnect> wanted = Wanted(a);
  // Someone deletes the cross-connect into gpu3 behind fleetd's back; gpu3's agent reports
  // its port dark.
  const uint32_t egress = EgressInto(a, "gpu3-n0");
  switch_adapters::CrossConnectBatch behind = TakeOffInto(a, egress);
  ASSERT_THAT(behind.remove, SizeIs(1));
  ASSERT_THAT(sw_->Apply(behind).status, IsOk());
  engine_->LinksDown("gpu-pool-1", {Down("FLT-GPU3-N0", 1, "no light")});
  engine_->WaitIdleForTest();
  ASSERT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_DEGRADED);
  // The first retry comes only at the policy's deadline: the worst case for the member.
  RetryAfter(absl::Seconds(2));
  a = Get(a.id());
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_THAT(a.replacements(), IsEmpty());
  EXPECT_THAT(Members(a), ElementsAre("gpu1", "gpu2", "gpu3", "gpu4"));
  EXPECT_EQ(OnSwitch(), wanted);
  std::vector<std::string> drift;
  const std::vector<v1::Event> events = store_->ListEvents({0, 1000, "switch", "ocs1"}).value();
  for (const v1::Event& e : events) {
    drift.push_back(absl::StrCat(e.kind(), ": ", e.message()));
  }
  EXPECT_THAT(drift, Contains(AllOf(HasSubstr("drift.missing"),
                                    HasSubstr(absl::StrCat("->", egress, " is missing")),
                                    HasSubstr("repaired"))));
  ASSERT_OK_AND_ASSIGN(v1::Device gpu3, store_->GetDevice("gpu3"));
  EXPECT_EQ(gpu3.health(), v1::DEVICE_HEALTH_HEALTHY);
}

TEST_F(HealingTest, ACrossConnectHoldingTheRingsEgressIsTakenOffAndTheLinkLitAgain) {
  v1::Allocation a =
      Request(Healing(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}), absl::Seconds(2)));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const std::set<CrossConnect> wanted = Wanted(a);
  // The cross-connect into gpu3 is replaced on the switch by one from a port nobody uses.
  const uint32_t egress = EgressInto(a, "gpu3-n0");
  switch_adapters::CrossConnectBatch behind = TakeOffInto(a, egress);
  behind.add.push_back({300, egress});
  ASSERT_THAT(sw_->Apply(behind).status, IsOk());
  engine_->LinksDown("gpu-pool-1", {Down("FLT-GPU3-N0", 1, "wrong peer")});
  engine_->WaitIdleForTest();
  RetryAfter(absl::Seconds(2));
  a = Get(a.id());
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_THAT(a.replacements(), IsEmpty());
  EXPECT_EQ(OnSwitch(), wanted);
  const std::vector<v1::Event> events = store_->ListEvents({0, 1000, "switch", "ocs1"}).value();
  std::vector<std::string> drift;
  for (const v1::Event& e : events) drift.push_back(e.message());
  EXPECT_THAT(drift, Contains(HasSubstr(absl::StrCat("300->", egress, " is unknown: removed"))));
}

TEST_F(HealingTest, WhileTheSwitchCannotBeReadADarkLinkReplacesNoMember) {
  v1::Allocation a =
      Request(Healing(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}), absl::Seconds(2)));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  agents_->SetGone("FLT-GPU3-N0", true);
  engine_->AgentGone("gpu-pool-1", {"FLT-GPU3-N0"}, "heartbeats missed");
  engine_->WaitIdleForTest();
  sw_->SetUnreachable(absl::UnavailableError("no route to host"));
  for (int i = 0; i < 4; ++i) RetryAfter(absl::Minutes(1));
  a = Get(a.id());
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(a.replacements(), IsEmpty());
  // Seen again, the switch holds the ring: the links have `within` from then, and the agent
  // still away, gpu3 is replaced once it has passed.
  sw_->SetUnreachable(absl::OkStatus());
  RetryAfter(absl::Minutes(2));
  EXPECT_THAT(Get(a.id()).replacements(), IsEmpty());
  RetryAfter(absl::Minutes(2));
  a = Get(a.id());
  ASSERT_THAT(a.replacements(), SizeIs(1));
  EXPECT_EQ(a.replacements(0).failed(), "gpu3");
}

TEST_F(HealingTest, WithNoSpareOrNoReplacementLeftTheAllocationStaysDegradedSayingWhy) {
  // Every GPU of the switch is a member: there is no spare.
  std::vector<std::string> all;
  for (const v1::Device& d : site_.devices()) {
    if (d.kind() == v1::DEVICE_KIND_GPU) all.push_back(d.id());
  }
  v1::Allocation a = Request(Healing(Ring("team-a", all), absl::Seconds(2)));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  FailPortAndRetry(EgressInto(a, "gpu3-n0"));
  a = Get(a.id());
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(a.reason(), HasSubstr("no heal: cannot replace gpu3"));
  EXPECT_THAT(a.reason(), HasSubstr("no free spare of kind gpu"));
  EXPECT_THAT(EventKinds(a.id()), Contains(HasSubstr("allocation.heal_failed:")));
  // The retries go on, and keep saying why.
  RetryAfter(absl::Minutes(2));
  EXPECT_THAT(Get(a.id()).reason(), HasSubstr("no heal: cannot replace gpu3"));
}

TEST_F(HealingTest, AMaxReplacementsPolicyHealsOnceThenStaysDegraded) {
  v1::Allocation a =
      Request(Healing(Ring("team-a", {"gpu1", "gpu2", "gpu3"}), absl::Seconds(2), 1));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  FailPortAndRetry(EgressInto(a, "gpu2-n0"));
  a = Get(a.id());
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_THAT(a.replacements(), SizeIs(1));

  FailPortAndRetry(EgressInto(a, "gpu3-n0"));
  a = Get(a.id());
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(a.replacements(), SizeIs(1));
  EXPECT_THAT(EventKinds(a.id()),
              Contains(HasSubstr("the failure policy's 1 replacement is used up")));
  RetryAfter(absl::Seconds(5));
  EXPECT_THAT(Get(a.id()).reason(), HasSubstr("1 replacement is used up"));
}

TEST_F(HealingTest, ADeviceWhoseRetrainsKeepFailingIsMarkedSuspect) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  sw_->SetPortFailed(EgressInto(a, "gpu3-n0"), true);
  engine_->MonitorSwitches();
  engine_->WaitIdleForTest();
  for (int i = 0; i < 3; ++i) RetryAfter(absl::Minutes(2));
  ASSERT_OK_AND_ASSIGN(v1::Device gpu3, store_->GetDevice("gpu3"));
  EXPECT_EQ(gpu3.health(), v1::DEVICE_HEALTH_SUSPECT);
  EXPECT_THAT(gpu3.health_reason(), HasSubstr("3 retrains in a row failed"));
  ASSERT_OK_AND_ASSIGN(v1::Device gpu1, store_->GetDevice("gpu1"));
  EXPECT_EQ(gpu1.health(), v1::DEVICE_HEALTH_HEALTHY);
}

TEST_F(HealingTest, AnAbsentAgentIsNotAFailedDevice) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  // The GPU pool's agent goes away (a restart, say): every retry finds no agent to train with.
  for (const char* serial : {"FLT-GPU1-N0", "FLT-GPU2-N0", "FLT-GPU3-N0"}) {
    agents_->SetGone(serial, true);
  }
  engine_->AgentGone("gpu-pool-1", {"FLT-GPU1-N0", "FLT-GPU2-N0", "FLT-GPU3-N0"}, "restarting");
  engine_->WaitIdleForTest();
  for (int i = 0; i < 5; ++i) RetryAfter(absl::Minutes(2));
  a = Get(a.id());
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(a.reason(), HasSubstr("no connected agent"));
  for (const char* gpu : {"gpu1", "gpu2", "gpu3"}) {
    ASSERT_OK_AND_ASSIGN(v1::Device d, store_->GetDevice(gpu));
    EXPECT_EQ(d.health(), v1::DEVICE_HEALTH_HEALTHY) << gpu << ": " << d.health_reason();
  }
  // It comes back: the links train, and a device's count of failures never started.
  for (const char* serial : {"FLT-GPU1-N0", "FLT-GPU2-N0", "FLT-GPU3-N0"}) {
    agents_->SetGone(serial, false);
  }
  engine_->AgentConnected("gpu-pool-1", {"FLT-GPU1-N0", "FLT-GPU2-N0", "FLT-GPU3-N0"});
  RetryAfter(absl::ZeroDuration());
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(HealingTest, AJobReplacesAMemberOfItsOwnAllocationAndTheRecordNamesIt) {
  const Caller job = Caller::Job("job:trainer", {"team-a"});
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3"}), job);
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  v1::ReplaceMemberRequest replace;
  replace.set_allocation_id(a.id());
  replace.set_member("gpu2");
  ASSERT_THAT(engine_->ReplaceMember(replace, job).status(), IsOk());
  engine_->WaitIdleForTest();
  a = Get(a.id());
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  ASSERT_THAT(a.replacements(), SizeIs(1));
  EXPECT_EQ(a.replacements(0).by(), "job:trainer");
  EXPECT_EQ(a.replacements(0).failed(), "gpu2");
  // Another tenant's job sees no such allocation.
  EXPECT_THAT(engine_->ReplaceMember(replace, Caller::Job("job:other", {"team-b"})).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(a.id())));
}

TEST_F(HealingTest, ASpareWhoseAgentIsAwayIsNeverChosen) {
  v1::Allocation a = Request(Healing(Ring("team-a", {"gpu1", "gpu2", "gpu3"}), absl::Seconds(2)));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  // Every free GPU but gpu8 is behind an agent that is away.
  for (const char* serial : {"FLT-GPU4-N0", "FLT-GPU5-N0", "FLT-GPU6-N0", "FLT-GPU7-N0"}) {
    agents_->SetGone(serial, true);
  }
  v1::WhatIfFailRequest what_if;
  what_if.mutable_target()->set_device("gpu2");
  ASSERT_OK_AND_ASSIGN(v1::WhatIfFailResponse planned,
                       engine_->WhatIfFail(what_if, Caller::Viewer("viewer:t")));
  ASSERT_THAT(planned.allocations(), SizeIs(1));
  ASSERT_THAT(planned.allocations(0).replacements(), SizeIs(1));
  EXPECT_EQ(planned.allocations(0).replacements(0).spare(), "gpu8");

  FailPortAndRetry(EgressInto(a, "gpu2-n0"));
  a = Get(a.id());
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_THAT(a.replacements(), SizeIs(1));
  EXPECT_EQ(a.replacements(0).spare(), "gpu8");
}

TEST_F(HealingTest, WhatIfNamesWhomAFailureWouldHurtAndHowEachWouldHealTouchingNothing) {
  v1::Allocation a = Request(Healing(Ring("team-a", {"gpu1", "gpu2", "gpu3"}), absl::Seconds(2)));
  v1::Allocation b = Request(Ring("team-b", {"gpu4", "gpu5"}));  // No policy.
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  ASSERT_EQ(b.state(), v1::ALLOCATION_STATE_READY);
  const int changes = sw_->changes();
  const size_t events = EventCount();
  auto what_if = [&](const v1::FailureTarget& target) {
    v1::WhatIfFailRequest request;
    *request.mutable_target() = target;
    return engine_->WhatIfFail(request, Caller::Viewer("viewer:t"));
  };

  v1::FailureTarget device;
  device.set_device("gpu2");
  ASSERT_OK_AND_ASSIGN(v1::WhatIfFailResponse r, what_if(device));
  ASSERT_THAT(r.allocations(), SizeIs(1));
  const v1::HurtAllocation& hurt = r.allocations(0);
  EXPECT_EQ(hurt.id(), a.id());
  EXPECT_THAT(hurt.members_hurt(), ElementsAre("gpu2"));
  EXPECT_THAT(hurt.circuits_hurt(), SizeIs(2));
  EXPECT_TRUE(hurt.heals());
  ASSERT_THAT(hurt.replacements(), SizeIs(1));
  EXPECT_EQ(hurt.replacements(0).failed(), "gpu2");
  EXPECT_THAT(hurt.outcome(), HasSubstr("replace gpu2 by " + hurt.replacements(0).spare() +
                                        ": 2 circuits re-made"));

  v1::FailureTarget port;
  port.mutable_switch_port()->set_switch_id("ocs1");
  port.mutable_switch_port()->set_port(EgressInto(b, "gpu4-n0"));
  ASSERT_OK_AND_ASSIGN(r, what_if(port));
  ASSERT_THAT(r.allocations(), SizeIs(1));
  EXPECT_EQ(r.allocations(0).id(), b.id());
  EXPECT_FALSE(r.allocations(0).heals());
  EXPECT_THAT(r.allocations(0).outcome(), HasSubstr("no failure policy"));

  v1::FailureTarget whole;
  whole.set_switch_id("ocs1");
  ASSERT_OK_AND_ASSIGN(r, what_if(whole));
  ASSERT_THAT(r.allocations(), SizeIs(2));
  for (const v1::HurtAllocation& h : r.allocations()) {
    EXPECT_FALSE(h.heals());
    if (h.id() == a.id()) {
      EXPECT_THAT(h.outcome(), HasSubstr("3 members hurt"));
    }
  }

  v1::FailureTarget unknown;
  unknown.set_device("gpu99");
  EXPECT_THAT(what_if(unknown).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("target.device: gpu99")));
  EXPECT_THAT(what_if(v1::FailureTarget()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target")));
  // A dry run: the switch, the store and the allocations are as they were.
  engine_->WaitIdleForTest();
  EXPECT_EQ(sw_->changes(), changes);
  EXPECT_EQ(EventCount(), events);
  EXPECT_THAT(Get(a.id()).members(), ElementsAre("gpu1", "gpu2", "gpu3"));
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

}  // namespace
}  // namespace fleet::engine
