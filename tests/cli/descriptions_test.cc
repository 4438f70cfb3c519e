// What `describe` and the verbs that change things print.
#include "controller/cli/descriptions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/cli/object_text.h"
#include "controller/cli/output.h"

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;

TEST(DescribeTest, AllocationListsMembersCircuitsAndStageTimings) {
  v1::Allocation a;
  a.set_id("a1");
  a.set_state(v1::ALLOCATION_STATE_READY);
  a.add_members("gpu1");
  a.add_phases("dp");
  a.add_phases("tp");
  a.set_active_phase("tp");
  v1::Circuit* c = a.add_circuits();
  c->set_id("c1");
  c->mutable_source()->set_onic("gpu1-n0");
  c->mutable_source()->set_port(1);
  c->mutable_destination()->set_onic("gpu2-n0");
  c->mutable_destination()->set_port(1);
  v1::CrossConnect* xc = c->add_cross_connects();
  xc->set_switch_id("ocs1");
  xc->set_ingress(1);
  xc->set_egress(390);
  c->set_state(v1::CIRCUIT_STATE_ACTIVE);
  v1::StageTiming* t = a.add_stage_timings();
  t->set_stage("program");
  t->mutable_duration()->set_nanos(12'345'678);
  t = a.add_stage_timings();
  t->set_stage("retrain");
  t->mutable_duration()->set_seconds(2);
  std::string text = DescribeAllocation(a, {}, absl::FromUnixSeconds(1'700'000'000));
  EXPECT_THAT(text, HasSubstr("State:"));
  EXPECT_THAT(text, HasSubstr("  tp (active)\n"));
  EXPECT_THAT(text, HasSubstr("Members:\n  gpu1\n"));
  EXPECT_THAT(text, HasSubstr("  c1  gpu1-n0/1 → gpu2-n0/1  via ocs1:1→390  active\n"));
  EXPECT_THAT(text, HasSubstr("Stage timings:\n  program  12.346 ms\n  retrain  2000.000 ms\n"));
  EXPECT_THAT(text, HasSubstr("Events:         (none)\n"));
}

TEST(DescribeTest, AllocationShowsReasonLeaseAndEvents) {
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  v1::Allocation a;
  a.set_id("a2");
  a.set_state(v1::ALLOCATION_STATE_DEGRADED);
  a.set_reason("link gpu2-n0/1 did not train");
  a.mutable_lease_expires()->set_seconds(1'700'000'000 + 600);
  v1::Circuit* c = a.add_circuits();
  c->set_id("c7");
  c->set_state(v1::CIRCUIT_STATE_DEGRADED);
  c->set_reason("no light at gpu2-n0/1");
  v1::Event event;
  event.set_sequence(41);
  event.mutable_time()->set_seconds(1'700'000'000);
  event.set_principal("fleetd");
  event.set_kind("allocation.state");
  event.set_object_kind("allocation");
  event.set_object_id("a2");
  event.set_message("allocation a2 is degraded");
  std::string text = DescribeAllocation(a, {event}, now);
  EXPECT_THAT(text, HasSubstr("Reason:         link gpu2-n0/1 did not train\n"));
  EXPECT_THAT(text, HasSubstr("Lease expires:  2023-11-14T22:23:20Z (in 10m)\n"));
  EXPECT_THAT(text, HasSubstr("  c7  - → -  via -  degraded  (no light at gpu2-n0/1)\n"));
  EXPECT_THAT(text, HasSubstr("Events:\n"
                              "  SEQ  AGE  PRINCIPAL  KIND              OBJECT         MESSAGE\n"
                              "  41   0s   fleetd     allocation.state  "
                              "allocation/a2  allocation a2 is degraded\n"));
}

TEST(AllocationTextTest, ShowsIdentityMembersAndCircuits) {
  v1::Allocation a;
  a.set_id("a2");
  a.set_tenant("team-a");
  a.set_state(v1::ALLOCATION_STATE_PENDING);
  a.add_members("gpu1");
  v1::Circuit* c = a.add_circuits();
  c->set_id("c1");
  c->mutable_source()->set_onic("gpu1-n0");
  c->mutable_source()->set_port(1);
  c->mutable_destination()->set_onic("gpu2-n0");
  c->mutable_destination()->set_port(2);
  for (uint32_t hop = 0; hop < 2; ++hop) {
    v1::CrossConnect* xc = c->add_cross_connects();
    xc->set_switch_id(hop == 0 ? "ocs1" : "ocs2");
    xc->set_ingress(1 + hop);
    xc->set_egress(390 + hop);
  }
  c->add_trunks("ocs1-ocs2-01");
  c->set_state(v1::CIRCUIT_STATE_PLANNED);
  EXPECT_EQ(
      AllocationText(a),
      "ID:      a2\n"
      "Tenant:  team-a\n"
      "Name:    -\n"
      "State:   pending\n"
      "Reason:  -\n"
      "Members:\n"
      "  gpu1\n"
      "Circuits:\n"
      "  c1  gpu1-n0/1 → gpu2-n0/2  via ocs1:1→390,ocs2:2→391 trunks ocs1-ocs2-01  planned\n");
}

TEST(PlanTextTest, ShowsMembersCountsAndCrossConnects) {
  v1::Plan plan;
  plan.add_members("gpu1");
  plan.add_members("gpu2");
  v1::Circuit* c = plan.add_circuits();
  c->mutable_source()->set_onic("gpu1-n0");
  c->mutable_source()->set_port(1);
  c->mutable_destination()->set_onic("gpu2-n0");
  c->mutable_destination()->set_port(1);
  v1::CrossConnect* xc = c->add_cross_connects();
  xc->set_switch_id("ocs1");
  xc->set_ingress(49);
  xc->set_egress(435);
  *plan.add_add() = *xc;
  *plan.add_ports_used() = c->source();
  EXPECT_EQ(PlanText(plan),
            "members: gpu1, gpu2\n"
            "1 circuit, 1 cross-connect to make, 0 to remove, 1 O-NIC port\n"
            "SOURCE     DESTINATION  CROSS-CONNECTS\n"
            "gpu1-n0/1  gpu2-n0/1    ocs1:49→435\n");
}

// A circuit from `from` to `to`, port 1 each, through ocs1:ingress→egress, in `phase`.
v1::Circuit PlannedCircuit(const std::string& from, const std::string& to, uint32_t ingress,
                           uint32_t egress, const std::string& phase) {
  v1::Circuit c;
  c.mutable_source()->set_onic(from);
  c.mutable_source()->set_port(1);
  c.mutable_destination()->set_onic(to);
  c.mutable_destination()->set_port(1);
  v1::CrossConnect* xc = c.add_cross_connects();
  xc->set_switch_id("ocs1");
  xc->set_ingress(ingress);
  xc->set_egress(egress);
  c.set_phase(phase);
  return c;
}

// All-to-all's rounds: every round's circuits are planned, the first round's made; the counts
// say which, and each circuit its round.
TEST(PlanTextTest, PhasedPlanCountsEachPhaseAndSaysWhichGoesFirst) {
  v1::Plan plan;
  plan.add_members("gpu1");
  plan.add_members("gpu2");
  plan.add_members("gpu3");
  *plan.add_circuits() = PlannedCircuit("gpu1-n0", "gpu2-n0", 49, 435, "round-1");
  *plan.add_circuits() = PlannedCircuit("gpu2-n0", "gpu1-n0", 51, 433, "round-1");
  *plan.add_circuits() = PlannedCircuit("gpu1-n0", "gpu3-n0", 49, 437, "round-2");
  for (int i = 0; i < 2; ++i) *plan.add_add() = plan.circuits(i).cross_connects(0);
  for (int i = 0; i < 3; ++i) *plan.add_ports_used() = plan.circuits(i).source();
  EXPECT_EQ(PlanText(plan),
            "members: gpu1, gpu2, gpu3\n"
            "3 circuits in 2 phases (round-1 2, round-2 1) over 3 O-NIC ports\n"
            "round-1 first: 2 cross-connects to make, 0 to remove\n"
            "SOURCE     DESTINATION  CROSS-CONNECTS  PHASE\n"
            "gpu1-n0/1  gpu2-n0/1    ocs1:49→435     round-1\n"
            "gpu2-n0/1  gpu1-n0/1    ocs1:51→433     round-1\n"
            "gpu1-n0/1  gpu3-n0/1    ocs1:49→437     round-2\n");
  // A request's initial phase other than the first.
  EXPECT_THAT(PlanText(plan, "round-2"), HasSubstr("\nround-2 first: 2 cross-connects"));
}

TEST(PlanTextTest, TrafficAwarePlanShowsItsDirectShare) {
  v1::Plan plan;
  plan.add_members("gpu1");
  plan.add_members("gpu2");
  *plan.add_circuits() = PlannedCircuit("gpu1-n0", "gpu2-n0", 49, 435, "");
  plan.set_direct_traffic_share(0.98484);
  EXPECT_THAT(PlanText(plan),
              HasSubstr("\ndirect traffic: 98.5% of the bytes on direct circuits\nSOURCE"));
  v1::Allocation a;
  a.set_id("a3");
  a.set_direct_traffic_share(0.98484);
  EXPECT_THAT(AllocationText(a),
              HasSubstr("Direct traffic:  98.5% of the bytes on direct circuits\n"));
  plan.set_direct_traffic_share(0);
  EXPECT_THAT(PlanText(plan), ::testing::Not(HasSubstr("direct traffic")));
}

// Past nine circuits the ids grow a digit; the ends, paths and states still line up.
TEST(DescribeTest, CircuitLinesLineUpPastTenCircuits) {
  v1::Allocation a;
  a.set_id("a-1f");
  for (int i = 1; i <= 11; ++i) {
    v1::Circuit c = PlannedCircuit(absl::StrCat("gpu", i, "-n0"), "gpu1-n0", i, 400 + i, "");
    c.set_id(absl::StrCat("a-1f-c", i));
    c.set_state(i == 11 ? v1::CIRCUIT_STATE_DEGRADED : v1::CIRCUIT_STATE_ACTIVE);
    *a.add_circuits() = std::move(c);
  }
  const std::string text = AllocationText(a);
  EXPECT_THAT(text, HasSubstr("  a-1f-c9   gpu9-n0/1  → gpu1-n0/1  via ocs1:9→409   active\n"
                              "  a-1f-c10  gpu10-n0/1 → gpu1-n0/1  via ocs1:10→410  active\n"
                              "  a-1f-c11  gpu11-n0/1 → gpu1-n0/1  via ocs1:11→411  degraded\n"));
}

TEST(DrainTextTest, NamesTheTargetAndTheAllocationsUsingIt) {
  v1::DrainRequest request;
  request.mutable_target()->mutable_switch_port()->set_switch_id("ocs1");
  request.mutable_target()->mutable_switch_port()->set_port(5);
  v1::DrainResponse response;
  EXPECT_EQ(DrainText(request, response), "drained port ocs1/5\nno allocation uses it\n");
  response.add_affected_allocations("a1");
  response.add_affected_allocations("a4");
  EXPECT_EQ(DrainText(request, response),
            "drained port ocs1/5\nallocations still using it: a1, a4\n");
  request.set_evict(true);
  request.set_reason("fiber swap");
  v1::Eviction* moved = response.add_evictions();
  moved->set_allocation_id("a1");
  moved->set_moved(true);
  moved->add_replacements()->set_failed("gpu3");
  moved->mutable_replacements(0)->set_spare("gpu9");
  v1::Eviction* failed = response.add_evictions();
  failed->set_allocation_id("a4");
  failed->set_reason("no free spare of kind gpu on switch ocs1");
  EXPECT_EQ(DrainText(request, response),
            "drained port ocs1/5: fiber swap\nallocation a1 moved: gpu3 -> gpu9\n"
            "allocation a4 failed: no free spare of kind gpu on switch ocs1\n");
  v1::DrainTarget host;
  host.set_host("server1");
  EXPECT_EQ(DrainTargetText(host), "host server1");
  EXPECT_EQ(DrainTargetText(v1::DrainTarget()), "nothing");
}

TEST(ReconcileTextTest, ShowsDriftAndCounts) {
  v1::ReconcileRequest request;
  v1::ReconcileResponse response;
  response.set_resumed_transactions(1);
  response.set_rolled_back_transactions(2);
  EXPECT_EQ(ReconcileText(request, response),
            "no drift\nrepaired 0, resumed 1 transaction, rolled back 2 transactions\n");
  v1::Drift* drift = response.add_drift();
  drift->set_kind(v1::Drift::KIND_WRONG);
  drift->mutable_cross_connect()->set_switch_id("ocs2");
  drift->mutable_cross_connect()->set_ingress(4);
  drift->mutable_cross_connect()->set_egress(400);
  drift->set_circuit_id("c9");
  drift->set_action("repaired");
  response.set_repaired(1);
  request.set_dry_run(true);
  EXPECT_EQ(ReconcileText(request, response),
            "dry run: nothing was changed\n"
            "KIND   SWITCH  INGRESS  EGRESS  CIRCUIT  ACTION\n"
            "wrong  ocs2    4        400     c9       repaired\n"
            "repaired 1, resumed 1 transaction, rolled back 2 transactions\n");
}

}  // namespace
}  // namespace fleet::cli
