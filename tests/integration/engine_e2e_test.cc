// The reconfiguration engine end to end over real processes (engine_e2e_fixture.h): requests,
// switch faults and hiccups, crashes at every stage.
#include "tests/integration/engine_e2e_fixture.h"

namespace fleet {
namespace {

class EngineEndToEndTest : public EngineEndToEnd {};

TEST_P(EngineEndToEndTest, RingBecomesReadyWithLightEverywhereAndReleaseClearsTheSwitch) {
  CommandResult ring = Fleetctl({"topology", "request", "-f", kRing, "--wait"});
  ASSERT_EQ(ring.exit_code, 0) << ring.err << ring.out;
  std::vector<v1::Allocation> live = Allocations();
  ASSERT_EQ(live.size(), 1u);
  const v1::Allocation& a = live[0];
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(a.circuits_size(), 8);
  EXPECT_EQ(OnSwitch(), Wanted(live));
  ExpectLightOnEveryCircuit(a);

  CommandResult described = Fleetctl({"describe", "allocation", a.id()});
  EXPECT_THAT(described.out, HasSubstr("retrain"));
  EXPECT_THAT(described.out, HasSubstr("ready"));

  CommandResult released = Fleetctl({"topology", "release", a.id(), "--wait"});
  ASSERT_EQ(released.exit_code, 0) << released.err;
  EXPECT_THAT(OnSwitch(), IsEmpty());
  EXPECT_THAT(Allocations(), IsEmpty());
}

TEST_P(EngineEndToEndTest, DryRunAndRefusedRequestsLeaveTheSwitchAlone) {
  const int64_t changes = SwitchChanges();
  CommandResult dry = Fleetctl({"topology", "request", "-f", kRing, "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  const std::string bad =
      testing::WriteFile("bad-ring",
                         "tenant: t\ntopology:\n  template:\n    kind: ring-unidirectional\n"
                         "    members: [gpu1, gpu42]\n");
  CommandResult refused = Fleetctl({"topology", "request", "-f", bad});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("gpu42"));
  EXPECT_EQ(SwitchChanges(), changes);
  EXPECT_THAT(Allocations(true), IsEmpty());
}

TEST_P(EngineEndToEndTest, SwitchFaultsFailTheRequestAndLeaveNothingBehind) {
  // No switch monitor: its reads would take the refusal injected for the request.
  StopFleetd(SIGTERM);
  ASSERT_NO_FATAL_FAILURE(StartFleetd({"--monitor-interval-ms", "0"}));
  ASSERT_TRUE(Eventually([&] { return ConnectedAgents() == 7; }));
  struct Case {
    std::string fault;
    std::string reason;
  };
  for (const Case& c : {Case{R"({"deny_next":1})", "Injected fault"},
                        Case{R"({"fail_bulk_after":3})", "rolled back"}}) {
    SCOPED_TRACE(c.fault);
    ASSERT_NO_FATAL_FAILURE(Fault("PUT", "/sim/v1/faults", c.fault));
    CommandResult ring = Fleetctl({"topology", "request", "-f", kRing, "--wait"});
    EXPECT_EQ(ring.exit_code, 1);
    EXPECT_THAT(ring.err, HasSubstr(c.reason));
    ASSERT_NO_FATAL_FAILURE(Fault("DELETE", "/sim/v1/faults"));
    EXPECT_THAT(OnSwitch(), IsEmpty());
    grpc::ClientContext context;
    v1::ListCircuitsResponse circuits;
    ASSERT_TRUE(inventory_->ListCircuits(&context, {}, &circuits).ok());
    EXPECT_THAT(circuits.circuits(), IsEmpty());
  }
}

TEST_P(EngineEndToEndTest, SwitchHiccupsAreRiddenOut) {
  for (const std::string& fault :
       {std::string(R"({"latency_ms":20})"), std::string(R"({"expire_sessions":true})"),
        std::string("drop-connections")}) {
    SCOPED_TRACE(fault);
    if (fault == "drop-connections") {
      ASSERT_NO_FATAL_FAILURE(Fault("POST", "/sim/v1/faults/drop-connections"));
    } else {
      ASSERT_NO_FATAL_FAILURE(Fault("PUT", "/sim/v1/faults", fault));
    }
    CommandResult ring = Fleetctl({"topology", "request", "-f", kRing, "--wait"});
    EXPECT_EQ(ring.exit_code, 0) << ring.err;
    ASSERT_NO_FATAL_FAILURE(Fault("DELETE", "/sim/v1/faults"));
    ExpectConsistent();
    for (const v1::Allocation& a : Allocations()) {
      EXPECT_EQ(Fleetctl({"topology", "release", a.id(), "--wait"}).exit_code, 0);
    }
    EXPECT_THAT(OnSwitch(), IsEmpty());
  }
}

// The port faults of the emulator under a READY ring: weak light (30 dB of loss puts gpu2-n0
// port 1's rx, egress 435, below the agent's floor) and a failed port (no light at all).
// Either way the ring is DEGRADED naming the link (the agent and the switch monitor both see
// it), keeps its circuits (no failure policy: no spare), and is READY once the fault is
// cleared.
TEST_P(EngineEndToEndTest, PortFaultsDegradeNamingTheLinkUntilFixed) {
  for (const std::string& fault :
       {std::string(R"({"power_drop_db":30.0})"), std::string(R"({"failed":true})")}) {
    SCOPED_TRACE(fault);
    const std::string id = RequestRing();
    ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
    ASSERT_NO_FATAL_FAILURE(Fault("PUT", "/sim/v1/ports/435", fault));
    v1::Allocation degraded = WaitFor(id, v1::ALLOCATION_STATE_DEGRADED);
    ASSERT_EQ(degraded.state(), v1::ALLOCATION_STATE_DEGRADED) << degraded.reason();
    EXPECT_THAT(degraded.reason(), HasSubstr("gpu1-n0/1 -> gpu2-n0/1"));
    EXPECT_EQ(OnSwitch(), Wanted({degraded}));  // The circuits are kept.
    EXPECT_TRUE(Eventually([&] { return PortHealth(435) != v1::OPER_STATE_UP; }));
    ASSERT_NO_FATAL_FAILURE(Fault("DELETE", "/sim/v1/faults"));
    v1::Allocation ready = WaitFor(id, v1::ALLOCATION_STATE_READY);
    EXPECT_EQ(ready.state(), v1::ALLOCATION_STATE_READY) << ready.reason();
    EXPECT_EQ(ready.members_size(), 8);
    EXPECT_THAT(ready.replacements(), IsEmpty());
    // The monitor finds the port well again, so the next ring may use it.
    EXPECT_TRUE(Eventually([&] { return PortHealth(435) == v1::OPER_STATE_UP; }));
    ASSERT_EQ(Fleetctl({"topology", "release", id, "--wait"}).exit_code, 0);
  }
}

TEST_P(EngineEndToEndTest, KilledAndRestartedFleetdLeavesAReadyRingUntouched) {
  const std::string id = RequestRing();
  ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
  const int64_t changes = SwitchChanges();
  StopFleetd(SIGKILL);
  ASSERT_NO_FATAL_FAILURE(StartFleetd());
  ASSERT_TRUE(Eventually([&] { return ConnectedAgents() == 7; }));
  // Start-up reconciliation has run (fleetd prints its address after it) and every agent is
  // back: not one cross-connect was touched.
  EXPECT_EQ(SwitchChanges(), changes);
  std::vector<v1::Allocation> live = Allocations();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].state(), v1::ALLOCATION_STATE_READY);
  ExpectConsistent();
}

// fleetd SIGKILLs itself at each point of a reconfiguration; started again, it finishes the
// transaction. Points after the switch was programmed must not change the switch again.
TEST_P(EngineEndToEndTest, CrashAtEveryStageOfARequestIsRecovered) {
  for (const char* point :
       {"persisted", "quiesced", "programmed", "training", "trained", "ready"}) {
    SCOPED_TRACE(point);
    StopFleetd(SIGTERM);
    ASSERT_NO_FATAL_FAILURE(StartFleetd({"--crash-at", point}));
    // The agents are back (registered, their reconnect backoff reset) when fleetd dies.
    ASSERT_TRUE(Eventually([&] { return ConnectedAgents() == 7; }));
    Fleetctl({"topology", "request", "-f", kRing});  // May lose its answer with fleetd.
    absl::StatusOr<int> died = fleetd_->Wait(absl::Seconds(20));
    ASSERT_TRUE(died.ok()) << died.status();
    const int64_t changes = SwitchChanges();
    ASSERT_NO_FATAL_FAILURE(StartFleetd());
    std::vector<v1::Allocation> live = Allocations();
    ASSERT_EQ(live.size(), 1u);
    v1::Allocation ready = WaitFor(live[0].id(), v1::ALLOCATION_STATE_READY);
    ASSERT_EQ(ready.state(), v1::ALLOCATION_STATE_READY) << ready.reason();
    ExpectConsistent();
    ExpectLightOnEveryCircuit(ready);
    const std::string p = point;
    if (p != "persisted" && p != "quiesced") {
      EXPECT_EQ(SwitchChanges(), changes) << "correct cross-connects were changed";
    }
    ASSERT_EQ(Fleetctl({"topology", "release", ready.id(), "--wait"}).exit_code, 0);
    EXPECT_THAT(OnSwitch(), IsEmpty());
  }
}

TEST_P(EngineEndToEndTest, CrashDuringAReleaseIsRecovered) {
  for (const char* point : {"releasing", "removed"}) {
    SCOPED_TRACE(point);
    const std::string id = RequestRing();
    ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
    StopFleetd(SIGTERM);
    ASSERT_NO_FATAL_FAILURE(StartFleetd({"--crash-at", point}));
    // The agents are back (registered, their reconnect backoff reset) when fleetd dies.
    ASSERT_TRUE(Eventually([&] { return ConnectedAgents() == 7; }));
    Fleetctl({"topology", "release", id});
    ASSERT_TRUE(fleetd_->Wait(absl::Seconds(20)).ok());
    ASSERT_NO_FATAL_FAILURE(StartFleetd());
    v1::Allocation released = WaitFor(id, v1::ALLOCATION_STATE_RELEASED);
    EXPECT_EQ(released.state(), v1::ALLOCATION_STATE_RELEASED) << released.reason();
    EXPECT_THAT(OnSwitch(), IsEmpty());
    EXPECT_THAT(Allocations(), IsEmpty());
  }
}

INSTANTIATE_TEST_SUITE_P(Protocols, EngineEndToEndTest, ::testing::Values("tl1", "rest"),
                         [](const auto& protocol) { return protocol.param; });

}  // namespace
}  // namespace fleet
