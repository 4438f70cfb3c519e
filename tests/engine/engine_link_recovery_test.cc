// Agents that go and come back, links reported down: DEGRADED allocations, retries, idle
// ports quiesced.
// The engine over the real SQLite store, the FLEET Gen1 inventory, an in-memory switch and
// agents that check the light (engine_test_fixture.h).
#include "tests/engine/engine_test_fixture.h"

namespace fleet::engine {
namespace {

TEST_F(EngineTest, GoneAgentDegradesNamingTheLinkAndRecoversWhenItReturns) {
  agents_->SetGone("FLT-GPU3-N0", true);
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(a.reason(), HasSubstr("gpu2-n0/1 -> gpu3-n0/1"));
  EXPECT_EQ(OnSwitch(), Wanted(a));  // Circuits kept.
  int degraded = 0;
  for (const v1::Circuit& c : a.circuits()) degraded += c.state() == v1::CIRCUIT_STATE_DEGRADED;
  EXPECT_EQ(degraded, 1);

  // Still gone at the first retry: still DEGRADED, retried later.
  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_DEGRADED);

  agents_->SetGone("FLT-GPU3-N0", false);
  engine_->AgentConnected("gpu-pool-1", {"FLT-GPU3-N0"});
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, AnAgentThatConnectsDuringARetryIsRetriedAtOnce) {
  agents_->SetGone("FLT-GPU3-N0", true);
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  // The agent registers while the retry is running, just after it found no agent: that attempt
  // misses it, and the agent is there for every attempt after it.
  // (Asked twice per attempt: before reading the links, and before retraining those down.)
  agents_->BackAfterAsked("FLT-GPU3-N0", 2,
                          [this] { engine_->AgentConnected("gpu-pool-1", {"FLT-GPU3-N0"}); });
  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  // The next attempt is due at once, not after a doubled backoff: no time passes here. (The
  // engine's own loop may have run it already.)
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY) << Get(a.id()).reason();
}

TEST_F(EngineTest, AConnectingAgentsIdlePortsAreQuiescedSoARequestNeedNotWaitForThem) {
  // gpu1 → gpu2 → gpu1 uses port 1 of each O-NIC (the first free one).
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const size_t before = agents_->QuiescedPorts().size();
  engine_->AgentConnected("gpu-pool-1", {"FLT-GPU1-N0", "FLT-GPU3-N0", "FLT-GPU4-N0"});
  engine_->WaitIdleForTest();
  std::vector<std::string> quiesced = agents_->QuiescedPorts();
  quiesced.erase(quiesced.begin(), quiesced.begin() + static_cast<long>(before));
  // Every port in no circuit of the O-NICs named, and nothing else: not gpu1's port in the
  // ring, nor any port of gpu2, whose agent did not connect.
  EXPECT_THAT(quiesced,
              ::testing::UnorderedElementsAre("FLT-GPU1-N0/2", "FLT-GPU3-N0/1", "FLT-GPU3-N0/2",
                                              "FLT-GPU4-N0/1", "FLT-GPU4-N0/2"));
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);

  // A ring over gpu3 and gpu4 finds its ports out of service already: no quiesce is sent.
  v1::Allocation b = Request(Ring("team-a", {"gpu3", "gpu4"}));
  ASSERT_EQ(b.state(), v1::ALLOCATION_STATE_READY) << b.reason();
  EXPECT_EQ(agents_->QuiescedPorts().size(), before + quiesced.size());

  // Connecting again sends nothing: its idle ports are known quiesced, the rest are in use.
  engine_->AgentConnected("gpu-pool-1", {"FLT-GPU1-N0", "FLT-GPU3-N0", "FLT-GPU4-N0"});
  engine_->WaitIdleForTest();
  EXPECT_EQ(agents_->QuiescedPorts().size(), before + quiesced.size());
}

TEST_F(EngineTest, AgentGoneDegradesAndItsReturnHealsWithoutRetrainingWorkingLinks) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const int retrains = agents_->Count(v1::Command::kRetrain);
  agents_->SetGone("FLT-GPU2-N0", true);
  engine_->AgentGone("gpu-pool-1", {"FLT-GPU2-N0"}, "missed 3 heartbeats");
  engine_->WaitIdleForTest();
  v1::Allocation degraded = Get(a.id());
  EXPECT_EQ(degraded.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(degraded.reason(), HasSubstr("gpu-pool-1 is gone (missed 3 heartbeats)"));
  int affected = 0;
  for (const v1::Circuit& c : degraded.circuits()) {
    affected += c.state() == v1::CIRCUIT_STATE_DEGRADED;
  }
  EXPECT_EQ(affected, 2);  // gpu1 → gpu2 and gpu2 → gpu3.
  EXPECT_EQ(OnSwitch(), Wanted(a));

  agents_->SetGone("FLT-GPU2-N0", false);
  engine_->AgentConnected("gpu-pool-1", {"FLT-GPU2-N0"});
  clock_.Advance(absl::Seconds(1));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
  // The light never stopped: the returned agent reported the links up, nothing retrained.
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), retrains);
}

int DegradedCircuits(const v1::Allocation& a) {
  int degraded = 0;
  for (const v1::Circuit& c : a.circuits()) degraded += c.state() == v1::CIRCUIT_STATE_DEGRADED;
  return degraded;
}

// An agent that goes while a transaction holds an allocation it serves is not skipped: its
// loss is recorded with the allocation's mark and lands as the transaction lets go.
TEST_F(EngineTest, AnAgentGoneWhileATransactionHoldsTheAllocationStillDegradesIt) {
  HoldFirstReady([&](const std::string&) {
    agents_->SetGone("FLT-GPU2-N0", true);
    engine_->AgentGone("gpu-pool-1", {"FLT-GPU2-N0"}, "missed 3 heartbeats");
  });
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(a.reason(), HasSubstr("the agent of host gpu-pool-1 is gone (missed 3 heartbeats)"));
  EXPECT_EQ(DegradedCircuits(a), 2);  // gpu1 -> gpu2 and gpu2 -> gpu3.
  // Back before the retry: the links kept their light, and nothing is retrained.
  const int retrains = agents_->Count(v1::Command::kRetrain);
  agents_->SetGone("FLT-GPU2-N0", false);
  engine_->AgentConnected("gpu-pool-1", {"FLT-GPU2-N0"});
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY) << Get(a.id()).reason();
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), retrains);
}

// An agent that is back by the time its loss is looked at was never gone for the allocation.
TEST_F(EngineTest, AnAgentBackBeforeItsLossIsSyncedDegradesNothing) {
  HoldFirstReady([&](const std::string&) {
    engine_->AgentGone("gpu-pool-1", {"FLT-GPU2-N0"}, "restarting");
    // It reconnects before the transaction lets go (its O-NIC never left the fake).
  });
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_EQ(DegradedCircuits(a), 0);
}

// A report is not sent twice: one that arrives while a transaction holds the allocation is
// kept with it in the sync queue, and lands as the transaction lets go, with no worker
// waiting on the claim meanwhile.
TEST_F(EngineTest, ALinkReportedDownWhileATransactionHoldsItLandsAsItLetsGo) {
  HoldFirstReady([&](const std::string&) {
    engine_->LinksDown("gpu-pool-1", {Down("FLT-GPU2-N0", 1, "no light")});
    // Two reports of one link, and one of another: one sync does them all.
    engine_->LinksDown("gpu-pool-1", {Down("FLT-GPU2-N0", 1, "no light")});
    engine_->LinksDown("gpu-pool-1", {Down("FLT-GPU3-N0", 1, "no light")});
  });
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  // In the order the reports were found, which their workers decide.
  EXPECT_THAT(a.reason(), HasSubstr("link gpu1-n0/1 -> gpu2-n0/1: the agent of host gpu-pool-1 "
                                    "reports gpu2-n0/1 down (no light)"));
  EXPECT_THAT(a.reason(), HasSubstr("link gpu2-n0/1 -> gpu3-n0/1: the agent of host gpu-pool-1 "
                                    "reports gpu3-n0/1 down (no light)"));
  EXPECT_EQ(DegradedCircuits(a), 2);
  EXPECT_EQ(OnSwitch(), Wanted(a));
  // Its retry comes after the first backoff, and heals it.
  clock_.Advance(absl::Seconds(1));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY) << Get(a.id()).reason();
}

TEST_F(EngineTest, ALinkReportedDownDegradesAtOnceNamingItAndARetryHealsIt) {
  // gpu1 → gpu2 → gpu3 → gpu1, each on port 1 of its O-NIC.
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const int retrains = agents_->Count(v1::Command::kRetrain);

  // A port in no circuit of it changes nothing.
  engine_->LinksDown("gpu-pool-1", {Down("FLT-GPU2-N0", 2, "no light")});
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);

  engine_->LinksDown("gpu-pool-1", {Down("FLT-GPU2-N0", 1, "rx -31.0 dBm below -20.0 dBm")});
  engine_->WaitIdleForTest();
  v1::Allocation degraded = Get(a.id());
  EXPECT_EQ(degraded.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_EQ(degraded.reason(),
            "link gpu1-n0/1 -> gpu2-n0/1: the agent of host gpu-pool-1 reports gpu2-n0/1 down "
            "(rx -31.0 dBm below -20.0 dBm)");
  EXPECT_EQ(DegradedCircuits(degraded), 1);
  EXPECT_EQ(OnSwitch(), Wanted(a));  // Nothing is taken off the switch.

  // Another link of the DEGRADED allocation goes too: it is marked, so the retry sees to it,
  // and the reason keeps the first.
  engine_->LinksDown("gpu-pool-1", {Down("FLT-GPU3-N0", 1, "wrong peer FLT-GPU9-N0/1")});
  engine_->WaitIdleForTest();
  EXPECT_EQ(DegradedCircuits(Get(a.id())), 2);
  EXPECT_EQ(Get(a.id()).reason(),
            degraded.reason() +
                "; link gpu2-n0/1 -> gpu3-n0/1: the agent of host gpu-pool-1 reports gpu3-n0/1 "
                "down (wrong peer FLT-GPU9-N0/1)");

  // The retry asks the agents first: the light is back, so the links are up and nothing is
  // retrained.
  clock_.Advance(absl::Seconds(1));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY) << Get(a.id()).reason();
  EXPECT_EQ(DegradedCircuits(Get(a.id())), 0);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), retrains);
}

TEST_F(EngineTest, ALinkDownWhoseAgentStaysAwayStaysDegradedAndIsRetried) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  agents_->SetGone("FLT-GPU2-N0", true);
  engine_->LinksDown("gpu-pool-1", {Down("FLT-GPU2-N0", 1, "no light")});
  engine_->WaitIdleForTest();
  ASSERT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_DEGRADED);
  clock_.Advance(absl::Seconds(1));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_DEGRADED);

  agents_->SetGone("FLT-GPU2-N0", false);
  clock_.Advance(absl::Seconds(10));
  engine_->RunDueRetries();
  engine_->WaitIdleForTest();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY) << Get(a.id()).reason();
}

}  // namespace
}  // namespace fleet::engine
