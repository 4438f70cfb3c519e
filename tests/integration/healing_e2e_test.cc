// Healing end to end over real processes (engine_e2e_fixture.h): a READY ring whose request
// says `on_failure: {replace: true}` loses a member to a failed switch port, to light below the
// threshold, or to an operator's word, and is READY again with a spare in its place; with no
// spare it stays DEGRADED saying why; a heal killed at any point is finished at restart. What
// is not a member's fault replaces no member and marks no device SUSPECT: a cross-connect
// deleted on the switch (made again), agents away across a restart.
#include "tests/integration/engine_e2e_fixture.h"

namespace fleet {
namespace {

using ::testing::Contains;
using ::testing::SizeIs;

class HealingEndToEndTest : public EngineEndToEnd {
 protected:
  void SetUp() override {
    EngineEndToEnd::SetUp();
    if (HasFatalFailure()) return;
    // A ring of four of the eight GPUs that replaces one failed member with a free GPU.
    healing_ring_ = testing::WriteFile("healing-ring",
                                       "tenant: team-a\nname: healing-ring\n"
                                       "on_failure: {replace: true, within: 2s}\n"
                                       "topology:\n  template:\n    kind: ring-unidirectional\n"
                                       "    members: [gpu1, gpu2, gpu3, gpu4]\n");
  }

  // The egress of O-NIC `onic` port 1's rx fiber.
  uint32_t RxEgress(const std::string& onic) {
    grpc::ClientContext context;
    v1::GetOnicRequest request;
    request.set_id(onic);
    v1::Onic o;
    EXPECT_TRUE(inventory_->GetOnic(&context, request, &o).ok());
    return o.ports_size() > 0 ? o.ports(0).rx().port() : 0;
  }
  // Waits for the allocation to be READY again with `n` replacements.
  v1::Allocation WaitHealed(const std::string& id, int n = 1) {
    return WaitUntil(id, [n](const v1::Allocation& a) {
      return a.state() == v1::ALLOCATION_STATE_READY && a.replacements_size() == n;
    });
  }
  std::string EventsOf(const std::string& id) {
    return Fleetctl({"events", "--object-kind", "allocation", "--object", id}).out;
  }

  std::string healing_ring_;
};

TEST_P(HealingEndToEndTest, AFailedSwitchPortUnderTheRingIsHealedWithASpare) {
  const std::string id = RequestRing(healing_ring_);
  ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
  const uint32_t egress = RxEgress("gpu3-n0");
  ASSERT_NO_FATAL_FAILURE(
      Fault("PUT", absl::StrCat("/sim/v1/ports/", egress), R"({"failed":true})"));
  v1::Allocation healed = WaitHealed(id);
  ASSERT_EQ(healed.state(), v1::ALLOCATION_STATE_READY) << healed.reason();
  ASSERT_THAT(healed.replacements(), SizeIs(1));
  const v1::MemberReplacement& r = healed.replacements(0);
  EXPECT_EQ(r.failed(), "gpu3");
  EXPECT_EQ(r.by(), "fleetd");
  EXPECT_EQ(r.position(), 2u);
  EXPECT_EQ(healed.members(2), r.spare());
  EXPECT_EQ(OnSwitch(), Wanted({healed}));
  ExpectLightOnEveryCircuit(healed);
  // A reading that met the fault between its port and its light reads showed the port dark
  // (DEGRADED), which heals the same; the next reading says the switch reports it failed.
  EXPECT_TRUE(Eventually([&] { return PortHealth(egress) == v1::OPER_STATE_FAILED; }))
      << "port health " << v1::OperState_Name(PortHealth(egress));
  const std::string events = EventsOf(id);
  EXPECT_THAT(events, HasSubstr("DEGRADED"));
  EXPECT_THAT(events, HasSubstr("allocation.member_replaced"));
  // describe shows the replacement and the policy.
  const std::string described = Fleetctl({"describe", "allocation", id}).out;
  EXPECT_THAT(described, HasSubstr("gpu3 -> " + r.spare()));
  EXPECT_THAT(described, HasSubstr("replace within 2s"));
}

TEST_P(HealingEndToEndTest, LightBelowTheThresholdIsHealedToo) {
  const std::string id = RequestRing(healing_ring_);
  ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
  ASSERT_NO_FATAL_FAILURE(Fault("PUT", absl::StrCat("/sim/v1/ports/", RxEgress("gpu4-n0")),
                                R"({"power_drop_db":30.0})"));
  v1::Allocation healed = WaitHealed(id);
  ASSERT_EQ(healed.state(), v1::ALLOCATION_STATE_READY) << healed.reason();
  EXPECT_EQ(healed.replacements(0).failed(), "gpu4");
  ExpectLightOnEveryCircuit(healed);
}

TEST_P(HealingEndToEndTest, ADeviceTheOperatorFailsIsReplacedAndShownFailed) {
  const std::string id = RequestRing(healing_ring_);
  ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
  CommandResult failed = Fleetctl({"device", "fail", "gpu2", "--reason", "ECC errors"});
  ASSERT_EQ(failed.exit_code, 0) << failed.err;
  EXPECT_THAT(failed.out, HasSubstr("device gpu2 failed: ECC errors"));
  v1::Allocation healed = WaitHealed(id);
  ASSERT_EQ(healed.state(), v1::ALLOCATION_STATE_READY) << healed.reason();
  EXPECT_EQ(healed.replacements(0).failed(), "gpu2");
  EXPECT_THAT(healed.replacements(0).reason(), HasSubstr("ECC errors"));
  ExpectLightOnEveryCircuit(healed);
  const std::string devices = Fleetctl({"get", "devices", "--kind", "gpu"}).out;
  EXPECT_THAT(devices, HasSubstr("failed"));
  EXPECT_EQ(Fleetctl({"device", "heal", "gpu2"}).exit_code, 0);
  EXPECT_THAT(Fleetctl({"describe", "device", "gpu2"}).out, HasSubstr("healthy"));
}

TEST_P(HealingEndToEndTest, WithNoSpareTheRingStaysDegradedSayingWhy) {
  const std::string all =
      testing::WriteFile("all-gpus",
                         "tenant: team-a\non_failure: {replace: true, within: 1s}\n"
                         "topology:\n  template:\n    kind: ring-unidirectional\n"
                         "    members:\n      count: [{kind: gpu, count: 8}]\n");
  const std::string id = RequestRing(all);
  ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
  ASSERT_NO_FATAL_FAILURE(
      Fault("PUT", absl::StrCat("/sim/v1/ports/", RxEgress("gpu3-n0")), R"({"failed":true})"));
  v1::Allocation stuck = WaitUntil(
      id, [](const v1::Allocation& a) { return a.reason().find("no heal") != std::string::npos; });
  EXPECT_EQ(stuck.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(stuck.reason(), HasSubstr("no free spare of kind gpu"));
  EXPECT_THAT(stuck.replacements(), ::testing::IsEmpty());
  // The fault cleared, its links retrain and it is READY with its own members.
  ASSERT_NO_FATAL_FAILURE(Fault("DELETE", "/sim/v1/faults"));
  v1::Allocation ready = WaitFor(id, v1::ALLOCATION_STATE_READY, absl::Seconds(90));
  EXPECT_EQ(ready.state(), v1::ALLOCATION_STATE_READY) << ready.reason();
}

// The agent of the GPU chassis is lost: every GPU is behind it, so no spare can stand in (a
// device whose agent is away is never one); the ring stays DEGRADED saying so, and is READY
// with its own members once the agent is back.
TEST_P(HealingEndToEndTest, ALostAgentWithNoReachableSpareLeavesTheRingDegradedUntilItReturns) {
  const std::string id = RequestRing(healing_ring_);
  ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
  ASSERT_TRUE(demo_->StopAgent("gpu-pool-1").ok());
  v1::Allocation stuck = WaitUntil(
      id, [](const v1::Allocation& a) { return a.reason().find("no heal") != std::string::npos; });
  EXPECT_EQ(stuck.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(stuck.reason(), HasSubstr("no connected agent for O-NIC"));
  EXPECT_THAT(stuck.reason(), HasSubstr("no free spare"));
  EXPECT_THAT(stuck.replacements(), ::testing::IsEmpty());
  ASSERT_TRUE(demo_->RestartAgent("gpu-pool-1").ok());
  v1::Allocation ready = WaitFor(id, v1::ALLOCATION_STATE_READY, absl::Seconds(90));
  ASSERT_EQ(ready.state(), v1::ALLOCATION_STATE_READY) << ready.reason();
  EXPECT_THAT(ready.members(), ::testing::ElementsAre("gpu1", "gpu2", "gpu3", "gpu4"));
  ExpectLightOnEveryCircuit(ready);
}

// A cross-connect of the READY ring is deleted on the switch behind fleetd's back (TL1
// DLT-PATCH or REST DELETE): fleetd makes it again and retrains the dark link. The member
// whose link went dark is healthy and is not replaced, though its failure policy's 2 s pass.
TEST_P(HealingEndToEndTest, ACrossConnectDeletedOnTheSwitchIsMadeAgainNotHealedWithASpare) {
  const std::string id = RequestRing(healing_ring_);
  const v1::Allocation ready = WaitFor(id, v1::ALLOCATION_STATE_READY);
  ASSERT_EQ(ready.state(), v1::ALLOCATION_STATE_READY);
  const uint32_t egress = RxEgress("gpu3-n0");
  switch_adapters::CrossConnectBatch behind;
  for (const auto& [ingress, out] : OnSwitch()) {
    if (out == egress) behind.remove.push_back({ingress, out});
  }
  ASSERT_THAT(behind.remove, SizeIs(1));
  ASSERT_TRUE(switch_->Apply(behind).status.ok());
  ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_DEGRADED).state(), v1::ALLOCATION_STATE_DEGRADED);
  const v1::Allocation again = WaitFor(id, v1::ALLOCATION_STATE_READY);
  ASSERT_EQ(again.state(), v1::ALLOCATION_STATE_READY) << again.reason();
  EXPECT_THAT(again.replacements(), IsEmpty());
  EXPECT_THAT(again.members(), ::testing::ElementsAre("gpu1", "gpu2", "gpu3", "gpu4"));
  EXPECT_EQ(OnSwitch(), Wanted({ready}));
  ExpectLightOnEveryCircuit(again);
  const std::string drift = Fleetctl({"events", "--object-kind", "switch", "--object", "ocs1"}).out;
  EXPECT_THAT(drift,
              HasSubstr(absl::StrCat(behind.remove[0].ingress, "->", egress, " is missing")));
  EXPECT_THAT(drift, HasSubstr("repaired"));
  const CommandResult gpus = Fleetctl({"get", "devices", "--kind", "gpu"});
  ASSERT_EQ(gpus.exit_code, 0) << gpus.err;
  EXPECT_THAT(gpus.out, HasSubstr("gpu3"));
  EXPECT_THAT(gpus.out, ::testing::Not(HasSubstr("suspect")));
}

// fleetd and the agents stop cleanly, the agents first (the ring goes DEGRADED); fleetd
// starts again and every agent but the GPU chassis's is back before it. The retries that
// find no agent for the GPUs' O-NICs say nothing of the GPUs: none is marked SUSPECT, and
// the ring is READY once the chassis's agent is back.
TEST_P(HealingEndToEndTest, ARestartWithTheGpuAgentBackLastMarksNoGpuSuspect) {
  const std::string id = RequestRing(kRing);
  ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
  for (const auto& [place, metrics] : demo_->agent_metrics()) {
    ASSERT_TRUE(demo_->StopAgent(place).ok()) << place;
  }
  ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_DEGRADED).state(), v1::ALLOCATION_STATE_DEGRADED);
  StopFleetd(SIGTERM);
  ASSERT_NO_FATAL_FAILURE(StartFleetd());
  for (const auto& [place, metrics] : demo_->agent_metrics()) {
    if (place == "gpu-pool-1") continue;
    ASSERT_TRUE(demo_->RestartAgent(place).ok()) << place;
  }
  ASSERT_TRUE(Eventually([&] { return ConnectedAgents() == 6; }));
  // Three retries in a row find no agent for the GPUs' O-NICs (8 links each): as many as
  // make a device SUSPECT when its own links fail. (The restarted fleetd counts from 0.)
  ASSERT_TRUE(Eventually(
      [&] { return FleetdMetric(R"(fleet_link_retrains_total{outcome="agent_gone"})") >= 3 * 8; },
      absl::Seconds(60)));
  auto no_gpu_suspect = [&] {
    grpc::ClientContext context;
    v1::ListDevicesResponse devices;
    EXPECT_TRUE(inventory_->ListDevices(&context, v1::ListDevicesRequest(), &devices).ok());
    int gpus = 0;
    for (const v1::Device& d : devices.devices()) {
      if (d.kind() != v1::DEVICE_KIND_GPU) continue;
      ++gpus;
      EXPECT_EQ(d.health(), v1::DEVICE_HEALTH_HEALTHY) << d.id() << ": " << d.health_reason();
    }
    EXPECT_EQ(gpus, 8);
  };
  no_gpu_suspect();
  ASSERT_TRUE(demo_->RestartAgent("gpu-pool-1").ok());
  const v1::Allocation ready = WaitFor(id, v1::ALLOCATION_STATE_READY, absl::Seconds(90));
  ASSERT_EQ(ready.state(), v1::ALLOCATION_STATE_READY) << ready.reason();
  no_gpu_suspect();
  ExpectLightOnEveryCircuit(ready);
}

// fleetd SIGKILLs itself at each point of the heal's transaction; started again, it finishes
// the heal: the spare in place, light on every circuit, the switch holding exactly them.
TEST_P(HealingEndToEndTest, AHealKilledAtAnyPointIsFinishedAtRestart) {
  int n = 0;
  for (const char* point : {"quiesced", "programmed", "trained"}) {
    SCOPED_TRACE(point);
    const std::string id = RequestRing(healing_ring_);
    ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
    StopFleetd(SIGTERM);
    ASSERT_NO_FATAL_FAILURE(StartFleetd({"--crash-at", point}));
    ASSERT_TRUE(Eventually([&] { return ConnectedAgents() == 7; }));
    const std::string member = absl::StrCat("gpu", 2 + n++);
    ASSERT_NO_FATAL_FAILURE(Fault("PUT", absl::StrCat("/sim/v1/ports/", RxEgress(member + "-n0")),
                                  R"({"failed":true})"));
    absl::StatusOr<int> died = fleetd_->Wait(absl::Seconds(30));
    ASSERT_TRUE(died.ok()) << died.status();
    ASSERT_NO_FATAL_FAILURE(StartFleetd());
    v1::Allocation healed = WaitHealed(id);
    ASSERT_EQ(healed.state(), v1::ALLOCATION_STATE_READY) << healed.reason();
    EXPECT_EQ(healed.replacements(0).failed(), member);
    ExpectConsistent();
    ExpectLightOnEveryCircuit(healed);
    ASSERT_EQ(Fleetctl({"topology", "release", id, "--wait"}).exit_code, 0);
    EXPECT_THAT(OnSwitch(), IsEmpty());
    ASSERT_NO_FATAL_FAILURE(Fault("DELETE", "/sim/v1/faults"));
    // The next ring names this member again: wait for the monitor to find its port well.
    const uint32_t egress = RxEgress(member + "-n0");
    ASSERT_TRUE(Eventually([&] { return PortHealth(egress) == v1::OPER_STATE_UP; }));
  }
}

TEST_P(HealingEndToEndTest, WhatIfSaysHowTheRingWouldHealAndTouchesNothing) {
  const std::string id = RequestRing(healing_ring_);
  ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
  const int64_t changes = SwitchChanges();
  CommandResult what_if = Fleetctl({"what-if", "fail", "device", "gpu3"});
  ASSERT_EQ(what_if.exit_code, 0) << what_if.err;
  EXPECT_THAT(what_if.out, HasSubstr("nothing was touched"));
  EXPECT_THAT(what_if.out, HasSubstr(id));
  EXPECT_THAT(what_if.out, HasSubstr("replace gpu3 by"));
  CommandResult port = Fleetctl(
      {"what-if", "fail", "port", absl::StrCat("ocs1/", RxEgress("gpu2-n0")), "-o", "json"});
  ASSERT_EQ(port.exit_code, 0) << port.err;
  EXPECT_THAT(port.out, HasSubstr("\"heals\": true"));
  EXPECT_EQ(SwitchChanges(), changes);
  v1::Allocation still = WaitFor(id, v1::ALLOCATION_STATE_READY);
  EXPECT_THAT(still.replacements(), ::testing::IsEmpty());
}

// drain --evict moves the ring off the drained O-NIC: its member replaced, READY throughout
// the operator's command.
TEST_P(HealingEndToEndTest, DrainWithEvictMovesTheRingToASpare) {
  const std::string id = RequestRing(healing_ring_);
  ASSERT_EQ(WaitFor(id, v1::ALLOCATION_STATE_READY).state(), v1::ALLOCATION_STATE_READY);
  CommandResult drained = Fleetctl({"drain", "onic", "gpu2-n0", "--evict", "--reason", "swap"});
  ASSERT_EQ(drained.exit_code, 0) << drained.err;
  EXPECT_THAT(drained.out, HasSubstr(absl::StrCat("allocation ", id, " moved: gpu2 -> ")));
  v1::Allocation moved = WaitFor(id, v1::ALLOCATION_STATE_READY);
  ASSERT_THAT(moved.replacements(), SizeIs(1));
  EXPECT_EQ(moved.replacements(0).failed(), "gpu2");
  EXPECT_EQ(OnSwitch(), Wanted({moved}));
  ExpectLightOnEveryCircuit(moved);
}

INSTANTIATE_TEST_SUITE_P(Protocols, HealingEndToEndTest, ::testing::Values("tl1", "rest"),
                         [](const auto& protocol) { return protocol.param; });

}  // namespace
}  // namespace fleet
