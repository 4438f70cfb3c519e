// AllocationStore (controller/store/allocation_store.h) on SQLite: allocations and circuits
// (invariants 1 and 2), circuit replacement, and observed cross-connects.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "controller/store/store.h"
#include "tests/store/store_test_util.h"

// Filters are built with designated initializers naming only the fields a test sets; the
// others keep their documented defaults, which is what this warning would flag.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace fleet::store {
namespace {

using namespace ::fleet::store::testing_util;  // The fixture, its builders and matchers.

// ---------------------------------------------------------------------------------------
// Allocations and circuits

TEST_F(StoreTest, CreateAllocationPersistsEverything) {
  WriteSite();
  const absl::Time now = clock_.Now();
  v1::Allocation a = MakeAllocation(
      "a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING, {"h1-cpu0", "gpu0"},
      {MakeCircuit("c-up", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)}, v1::CIRCUIT_STATE_PROGRAMMED,
                   "dp"),
       MakeCircuit("c-down", "n-gpu", 1, "n-cpu", 1, {Xc("s1", 3, 9)}, v1::CIRCUIT_STATE_DEGRADED,
                   "dp"),
       MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 15), Xc("s2", 1, 6)},
                   v1::CIRCUIT_STATE_INACTIVE, "tp")});
  a.mutable_circuits(1)->set_reason("n-cpu port 1 did not train");
  a.set_reason("n-cpu port 1 did not train");
  a.add_phases("dp");
  a.add_phases("tp");
  a.set_active_phase("dp");
  a.mutable_request()->mutable_lease()->set_seconds(60);
  a.mutable_request()->set_request_id("req-1");
  a.mutable_request()->add_phases()->set_name("dp");
  a.mutable_request()->add_phases()->set_name("tp");
  *a.mutable_lease_expires() = Stamp(now + absl::Seconds(60));
  a.set_direct_traffic_share(0.75);
  for (const char* stage : {"plan", "persist"}) {
    v1::StageTiming* t = a.add_stage_timings();
    t->set_stage(stage);
    *t->mutable_started() = Stamp(now - absl::Milliseconds(3));
    t->mutable_duration()->set_nanos(1'500'000);
  }
  ASSERT_THAT(store_->CreateAllocation(a, "job:tenant-a"), IsOk());

  v1::Allocation expected = a;
  *expected.mutable_created() = Stamp(now);
  *expected.mutable_updated() = Stamp(now);
  for (v1::Circuit& c : *expected.mutable_circuits()) c.set_allocation_id("a1");
  ASSERT_OK_AND_ASSIGN(v1::Allocation got, store_->GetAllocation("a1"));
  EXPECT_THAT(got, EqualsProto(expected));

  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> listed, store_->ListAllocations({}));
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_THAT(listed[0], EqualsProto(expected));

  std::vector<v1::Event> events = Events({.object_kind = "allocation"});
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].kind(), "allocation.created");
  EXPECT_EQ(events[0].object_id(), "a1");
  EXPECT_EQ(events[0].principal(), "job:tenant-a");
  EXPECT_EQ(Micros(events[0].time()), absl::ToUnixMicros(now));
  EXPECT_THAT(events[0].message(), AllOf(HasSubstr("a1"), HasSubstr("tenant-a")));
}

TEST_F(StoreTest, CreateAllocationKeepsAGivenCreationTimeAndStampsUpdateFromClock) {
  WriteSite();
  clock_.Advance(absl::Hours(1));
  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"gpu0"}, {});
  *a.mutable_created() = Stamp(absl::FromUnixSeconds(1'600'000'000));
  ASSERT_THAT(store_->CreateAllocation(a, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation got, store_->GetAllocation("a1"));
  EXPECT_EQ(got.created().seconds(), 1'600'000'000);
  EXPECT_EQ(Micros(got.updated()), absl::ToUnixMicros(clock_.Now()));
}

// Regression: Circuit.trunks, the trunk fibers a multi-switch circuit crosses, was once not
// stored at all (failed at commit 2d876cd).
TEST_F(StoreTest, CircuitTrunksArePersisted) {
  WriteSite();
  v1::Circuit multi =
      MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 15), Xc("s2", 1, 6)});
  multi.add_trunks("t1");
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {multi}),
                                       kOperator),
              IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
  ASSERT_THAT(circuits, SizeIs(1));
  EXPECT_THAT(circuits[0].cross_connects(), SizeIs(2));
  EXPECT_THAT(circuits[0].trunks(), ElementsAre("t1"));
}

TEST_F(StoreTest, LeasesPassedAreTheLiveAllocationsPastTheirLeaseLongestPassedFirst) {
  WriteSite();
  const absl::Time now = clock_.Now();
  struct Lease {
    const char* id;
    v1::AllocationState state;
    absl::Duration from_now;
  };
  for (const Lease& l : {Lease{"a-ready", v1::ALLOCATION_STATE_READY, -absl::Seconds(5)},
                         Lease{"a-later", v1::ALLOCATION_STATE_READY, absl::Seconds(5)},
                         Lease{"a-pending", v1::ALLOCATION_STATE_PENDING, -absl::Minutes(1)},
                         Lease{"a-degraded", v1::ALLOCATION_STATE_DEGRADED, absl::ZeroDuration()},
                         Lease{"a-releasing", v1::ALLOCATION_STATE_RELEASING, -absl::Hours(1)},
                         Lease{"a-failed", v1::ALLOCATION_STATE_FAILED, -absl::Hours(1)}}) {
    v1::Allocation a = MakeAllocation(l.id, "tenant-a", l.state, {}, {});
    *a.mutable_lease_expires() = Stamp(now + l.from_now);
    ASSERT_THAT(store_->CreateAllocation(a, "job:tenant-a"), IsOk());
  }
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> passed, store_->LeasesPassed(now));
  EXPECT_THAT(passed, ElementsAre("a-pending", "a-ready", "a-degraded"));
  // A renewed lease is not passed any more.
  AllocationUpdate renew;
  renew.id = "a-ready";
  renew.lease_expires = now + absl::Minutes(10);
  ASSERT_THAT(store_->UpdateAllocation(renew, "job:tenant-a"), IsOk());
  ASSERT_OK_AND_ASSIGN(passed, store_->LeasesPassed(now));
  EXPECT_THAT(passed, ElementsAre("a-pending", "a-degraded"));
}

// A retried request finds its allocation by tenant and request id, ended ones included,
// through the index (the query plan says so), and rows written before the request_id column
// are found once the store has opened them again.
TEST_F(StoreTest, FindRequestFindsTheTenantsAllocationOfARequestIdThroughTheIndex) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("fleet.db");
  OpenStore(path);
  WriteSite();
  for (const auto& [id, tenant, request_id] :
       {std::tuple{"a1", "tenant-a", "r1"}, std::tuple{"a2", "tenant-a", "r2"},
        std::tuple{"b1", "tenant-b", "r1"}, std::tuple{"a3", "tenant-a", ""}}) {
    v1::Allocation a = MakeAllocation(id, tenant, v1::ALLOCATION_STATE_READY, {}, {});
    a.mutable_request()->set_request_id(request_id);
    ASSERT_THAT(store_->CreateAllocation(a, kOperator), IsOk());
  }
  AllocationUpdate released;
  released.id = "a2";
  released.state = v1::ALLOCATION_STATE_RELEASED;
  ASSERT_THAT(store_->UpdateAllocation(released, kOperator), IsOk());
  const auto found = [&](const std::string& tenant, const std::string& request_id) {
    absl::StatusOr<std::optional<v1::Allocation>> a = store_->FindRequest(tenant, request_id);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() && a->has_value() ? (*a)->id() : std::string("none");
  };
  EXPECT_EQ(found("tenant-a", "r1"), "a1");
  EXPECT_EQ(found("tenant-b", "r1"), "b1");
  EXPECT_EQ(found("tenant-a", "r2"), "a2");  // RELEASED: a retry is answered with it.
  EXPECT_EQ(found("tenant-b", "r2"), "none");
  EXPECT_EQ(found("tenant-a", ""), "none");

  absl::StatusOr<std::unique_ptr<Database>> raw = Database::Open(path);
  ASSERT_TRUE(raw.ok()) << raw.status();
  std::string plan;
  {
    absl::StatusOr<Statement> explain = (*raw)->Prepare(
        "EXPLAIN QUERY PLAN SELECT id FROM allocations WHERE tenant = 'tenant-a' AND "
        "request_id = 'r1' AND request_id != '' ORDER BY created_us, id LIMIT 1");
    ASSERT_TRUE(explain.ok()) << explain.status();
    while (explain->Step().value_or(false)) absl::StrAppend(&plan, explain->Text(3), "\n");
  }
  EXPECT_THAT(plan, HasSubstr("allocations_by_request")) << plan;
  // As a row written before migration 10 is: no request_id.
  ASSERT_THAT((*raw)->Exec("UPDATE allocations SET request_id = NULL"), IsOk());
  raw->reset();
  OpenStore(path);
  EXPECT_EQ(found("tenant-a", "r1"), "a1");
  EXPECT_EQ(found("tenant-b", "r1"), "b1");
}

TEST_F(StoreTest, ListAllocationsFiltersByTenantStateAndHidesReleased) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0"}, {}), kOperator),
      IsOk());
  clock_.Advance(absl::Seconds(1));
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"gpu0"}, {}), kOperator),
      IsOk());
  clock_.Advance(absl::Seconds(1));
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a0-old", "tenant-a", v1::ALLOCATION_STATE_RELEASED, {"gpu0"}, {}),
                  kOperator),
              IsOk());
  auto ids = [](const std::vector<v1::Allocation>& list) {
    std::vector<std::string> out;
    for (const v1::Allocation& a : list) out.push_back(a.id());
    return out;
  };
  // Ordered by creation time, not id.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> live, store_->ListAllocations({}));
  EXPECT_THAT(ids(live), ElementsAre("a1", "a2"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> all,
                       store_->ListAllocations({.include_released = true}));
  EXPECT_THAT(ids(all), ElementsAre("a1", "a2", "a0-old"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> tenant_a,
                       store_->ListAllocations({.tenant = "tenant-a"}));
  EXPECT_THAT(ids(tenant_a), ElementsAre("a1"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> tenant_a_all,
                       store_->ListAllocations({.tenant = "tenant-a", .include_released = true}));
  EXPECT_THAT(ids(tenant_a_all), ElementsAre("a1", "a0-old"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> pending,
                       store_->ListAllocations({.state = v1::ALLOCATION_STATE_PENDING}));
  EXPECT_THAT(ids(pending), ElementsAre("a2"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> released,
                       store_->ListAllocations({.state = v1::ALLOCATION_STATE_RELEASED}));
  EXPECT_THAT(ids(released), ElementsAre("a0-old"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> nobody,
                       store_->ListAllocations({.tenant = "tenant-c"}));
  EXPECT_THAT(nobody, IsEmpty());
  // A released allocation is still readable by id.
  ASSERT_OK_AND_ASSIGN(v1::Allocation old, store_->GetAllocation("a0-old"));
  EXPECT_EQ(old.state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_THAT(old.members(), ElementsAre("gpu0"));
}

TEST_F(StoreTest, CreateAllocationWithKnownIdIsAlreadyExists) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"gpu0"}, {GpuToCpu()}),
          kOperator),
      StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("a1")));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation a1, store_->GetAllocation("a1"));
  EXPECT_EQ(a1.tenant(), "tenant-a");
  EXPECT_THAT(a1.members(), ElementsAre("h1-cpu0", "gpu0"));
}

// Admission plans without a lock and commits only if the inventory it planned on is unchanged:
// a drain committed in between refuses the commit, naming both versions, and writes nothing.
TEST_F(StoreTest, CreateAllocationPlannedOnAnOlderInventoryIsAbortedAndNothingIsStored) {
  WriteSite();
  const uint64_t planned_at = store_->InventoryVersion();
  ASSERT_THAT(store_->SetDrained({.host = "h1"}, true, "", kOperator), IsOk());
  const uint64_t now = store_->InventoryVersion();
  ASSERT_GT(now, planned_at);
  const Counts before = Count();
  const v1::Allocation a1 = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PENDING,
                                           {"h1-cpu0", "gpu0"}, {CpuToGpu()});
  EXPECT_THAT(store_->CreateAllocation(a1, kOperator, planned_at),
              StatusIs(absl::StatusCode::kAborted,
                       AllOf(HasSubstr("a1"), HasSubstr(absl::StrCat("version ", planned_at)),
                             HasSubstr(absl::StrCat("version ", now)))));
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetAllocation("a1"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("a1")));
  // Planned on the version that is current, or on any, it commits.
  EXPECT_THAT(store_->CreateAllocation(a1, kOperator, now), IsOk());
  const v1::Allocation a2 =
      MakeAllocation("a2", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"gpu0"}, {});
  EXPECT_THAT(store_->CreateAllocation(a2, kOperator, store::kAnyInventory), IsOk());
  // Circuits and allocations do not move the version.
  EXPECT_EQ(store_->InventoryVersion(), now);
}

// A replacement's new circuits and a phase switch's handover are conditioned the same way.
TEST_F(StoreTest, UpdatesAndReplacementsPlannedOnAnOlderInventoryAreAbortedWritingNothing) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const uint64_t planned_at = store_->InventoryVersion();
  ASSERT_THAT(store_->SetDrained({.host = "h1"}, true, "", kOperator), IsOk());
  const Counts before = Count();
  AllocationUpdate update;
  update.id = "a1";
  update.state = v1::ALLOCATION_STATE_PROGRAMMING;
  update.planned_at_inventory = planned_at;
  EXPECT_THAT(store_->UpdateAllocation(update, kOperator).status(),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("planned on inventory version")));
  CircuitReplacement replacement;
  replacement.allocation_id = "a1";
  replacement.add = {GpuToCpu()};
  replacement.planned_at_inventory = planned_at;
  EXPECT_THAT(store_->ReplaceCircuits(replacement, kOperator).status(),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("planned on inventory version")));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation a1, store_->GetAllocation("a1"));
  EXPECT_EQ(a1.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_THAT(a1.circuits(), SizeIs(1));
  update.planned_at_inventory = store_->InventoryVersion();
  EXPECT_THAT(store_->UpdateAllocation(update, kOperator).status(), IsOk());
}

TEST_F(StoreTest, CircuitOnABusyIngressIsRefusedAndNothingIsStored) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  // Its first circuit is fine; the second reuses s1 ingress 1 (c-up's).
  v1::Allocation a2 = MakeAllocation(
      "a2", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"gpu0"},
      {GpuToCpu(), MakeCircuit("c-clash", "n-gpu", 2, "n-cpu", 2, {Xc("s1", 1, 10)})});
  EXPECT_THAT(
      store_->CreateAllocation(a2, kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("s1/1"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetAllocation("a2"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("a2")));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> a2_circuits,
                       store_->ListCircuits({.allocation_id = "a2"}));
  EXPECT_THAT(a2_circuits, IsEmpty());
  EXPECT_EQ(Port("s1", 3).circuit_id(), "");   // c-down's ingress was not kept.
  EXPECT_EQ(Port("s1", 10).circuit_id(), "");  // Nor c-clash's egress.
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
}

TEST_F(StoreTest, CircuitOnABusyEgressIsRefusedAndNothingIsStored) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  v1::Allocation a2 =
      MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0"},
                     {MakeCircuit("c-clash", "n-cpu", 2, "n-gpu", 1, {Xc("s1", 2, 11)})});
  EXPECT_THAT(store_->CreateAllocation(a2, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("s1/11"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetAllocation("a2"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("a2")));
  EXPECT_EQ(Port("s1", 2).circuit_id(), "");
}

TEST_F(StoreTest, CircuitsOfOneAllocationMayNotShareAPort) {
  WriteSite();
  v1::Allocation a = MakeAllocation(
      "a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0", "gpu0"},
      {CpuToGpu(), MakeCircuit("c-twin", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 11)})});
  EXPECT_THAT(store_->CreateAllocation(a, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("s1/11"), HasSubstr("c-up"))));
  EXPECT_EQ(Count().allocations, 0u);
  EXPECT_EQ(Count().circuits, 0u);
  EXPECT_THAT(Events({.object_kind = "allocation"}), IsEmpty());
}

TEST_F(StoreTest, InactiveCircuitMayShareDesiredPorts) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  // Same ports as c-up, twice, in phases that are not active.
  v1::Allocation a2 =
      MakeAllocation("a2", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                     {MakeCircuit("c-later-1", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)},
                                  v1::CIRCUIT_STATE_INACTIVE, "p2"),
                      MakeCircuit("c-later-2", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)},
                                  v1::CIRCUIT_STATE_INACTIVE, "p3")});
  ASSERT_THAT(store_->CreateAllocation(a2, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> circuits,
                       store_->ListCircuits({.allocation_id = "a2"}));
  ASSERT_THAT(circuits, SizeIs(2));
  EXPECT_EQ(circuits[0].state(), v1::CIRCUIT_STATE_INACTIVE);
  // The ports still show the desired circuit, not the inactive ones.
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
  EXPECT_EQ(Port("s1", 11).circuit_id(), "c-up");
}

TEST_F(StoreTest, DesiredCircuitMayUsePortsOfAnInactiveOne) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-later", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)},
                                              v1::CIRCUIT_STATE_INACTIVE, "p2")}),
                  kOperator),
              IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "");
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                               kOperator),
      IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
}

// Stores a1 READY with c-up and c-down on the small site and returns the replacement of
// c-up by `add`, making a1 PROGRAMMING.
CircuitReplacement ReplacingCUp(Store& store, const v1::Circuit& add) {
  EXPECT_THAT(store.WriteInventory(SmallSite(), kOperator), IsOk());
  EXPECT_THAT(store.CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                    {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()}),
                                     kOperator),
              IsOk());
  CircuitReplacement r;
  r.allocation_id = "a1";
  r.remove = {"c-up"};
  r.add = {add};
  r.members = {"h1-cpu0"};
  r.state = v1::ALLOCATION_STATE_PROGRAMMING;
  return r;
}

TEST_F(StoreTest, ReplaceCircuitsSwapsCircuitsAndMembersInOneTransaction) {
  // c-up leaves; its ingress s1/1 goes to the new circuit in the same commit.
  CircuitReplacement r = ReplacingCUp(
      *store_,
      MakeCircuit("c-new", "n-cpu", 1, "n-cpu", 2, {Xc("s1", 1, 10)}, v1::CIRCUIT_STATE_PLANNED));
  r.members = {"h1-cpu0", "gpu0-spare"};
  r.event_message = "a1: gpu0 replaced";
  ASSERT_OK_AND_ASSIGN(v1::Allocation after, store_->ReplaceCircuits(r, kOperator));
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_PROGRAMMING);
  EXPECT_THAT(after.members(), ElementsAre("h1-cpu0", "gpu0-spare"));
  std::vector<std::string> ids;
  for (const v1::Circuit& c : after.circuits()) ids.push_back(c.id());
  EXPECT_THAT(ids, ElementsAre("c-down", "c-new"));
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-new");
  EXPECT_EQ(Port("s1", 11).circuit_id(), "");
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Event> events,
                       store_->ListEvents({.object_kind = "allocation", .object_id = "a1"}));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind(), "allocation.replace");
  EXPECT_EQ(events.back().message(), "a1: gpu0 replaced");
  // The switch may still hold c-up's cross-connect until the engine clears it.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> pending, store_->PendingRemovals("a1"));
  ASSERT_THAT(pending, SizeIs(1));
  EXPECT_THAT(pending[0], EqualsProto(CpuToGpu().cross_connects(0)));
  ASSERT_THAT(store_->ClearPendingRemovals("a1"), IsOk());
  ASSERT_OK_AND_ASSIGN(pending, store_->PendingRemovals("a1"));
  EXPECT_THAT(pending, IsEmpty());
}

TEST_F(StoreTest, RefusedReplaceCircuitsChangesNothing) {
  // s1/3 is c-down's ingress, which stays.
  CircuitReplacement r = ReplacingCUp(
      *store_,
      MakeCircuit("c-clash", "n-gpu", 1, "n-cpu", 2, {Xc("s1", 3, 10)}, v1::CIRCUIT_STATE_PLANNED));
  EXPECT_THAT(store_->ReplaceCircuits(r, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("c-down")));
  r.add.clear();
  r.remove = {"c-elsewhere"};
  EXPECT_THAT(store_->ReplaceCircuits(r, kOperator),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("c-elsewhere")));
  r.allocation_id = "a-none";
  EXPECT_THAT(store_->ReplaceCircuits(r, kOperator),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("a-none")));
  ASSERT_OK_AND_ASSIGN(v1::Allocation a, store_->GetAllocation("a1"));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_THAT(a.members(), ElementsAre("h1-cpu0", "gpu0"));
  EXPECT_EQ(a.circuits_size(), 2);
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> pending, store_->PendingRemovals("a1"));
  EXPECT_THAT(pending, IsEmpty());
}

TEST_F(StoreTest, CircuitFromAnUnknownOnicPortIsRefusedAndNothingIsStored) {
  WriteSite();
  const Counts before = Count();
  v1::Allocation a = MakeAllocation(
      "a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0"},
      {CpuToGpu(), MakeCircuit("c-ghost", "n-ghost", 1, "n-cpu", 2, {Xc("s1", 4, 10)})});
  EXPECT_THAT(store_->CreateAllocation(a, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("c-ghost"), HasSubstr("n-ghost"))));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 1).circuit_id(), "");
}

TEST_F(StoreTest, CrossConnectOnAMissingSwitchPortIsRefusedAndNothingIsStored) {
  WriteSite();
  const Counts before = Count();
  v1::Allocation a = MakeAllocation(
      "a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0"},
      {MakeCircuit("c-far", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11), Xc("s9", 1, 2)})});
  EXPECT_THAT(store_->CreateAllocation(a, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("FOREIGN KEY")));
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetAllocation("a1"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("a1")));
}

TEST_F(StoreTest, ListCircuitsFiltersBySwitchAndAllocation) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()}),
                               kOperator),
      IsOk());
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2,
                                              {Xc("s1", 2, 15), Xc("s2", 1, 6)})}),
                  kOperator),
              IsOk());
  auto ids = [](const std::vector<v1::Circuit>& list) {
    std::vector<std::string> out;
    for (const v1::Circuit& c : list) out.push_back(c.id());
    return out;
  };
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> all, store_->ListCircuits({}));
  EXPECT_THAT(ids(all), ElementsAre("c-up", "c-down", "c-multi"));  // Allocation, then position.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> on_s1, store_->ListCircuits({.switch_id = "s1"}));
  EXPECT_THAT(ids(on_s1), ElementsAre("c-up", "c-down", "c-multi"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> on_s2, store_->ListCircuits({.switch_id = "s2"}));
  ASSERT_THAT(ids(on_s2), ElementsAre("c-multi"));
  // A circuit keeps all its hops, in path order, even when listed for one switch.
  ASSERT_THAT(on_s2[0].cross_connects(), SizeIs(2));
  EXPECT_THAT(on_s2[0].cross_connects(0), EqualsProto(Xc("s1", 2, 15)));
  EXPECT_THAT(on_s2[0].cross_connects(1), EqualsProto(Xc("s2", 1, 6)));
  EXPECT_EQ(on_s2[0].allocation_id(), "a2");
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> of_a1,
                       store_->ListCircuits({.allocation_id = "a1"}));
  EXPECT_THAT(ids(of_a1), ElementsAre("c-up", "c-down"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> a1_on_s2,
                       store_->ListCircuits({.switch_id = "s2", .allocation_id = "a1"}));
  EXPECT_THAT(a1_on_s2, IsEmpty());
}

TEST_F(StoreTest, ListPortsShowsTheDesiredCircuitOnBothEnds) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {CpuToGpu(), MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2,
                                                          {Xc("s1", 2, 15), Xc("s2", 1, 6)})}),
                  kOperator),
              IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
  EXPECT_EQ(Port("s1", 11).circuit_id(), "c-up");
  EXPECT_EQ(Port("s1", 2).circuit_id(), "c-multi");
  EXPECT_EQ(Port("s1", 15).circuit_id(), "c-multi");
  EXPECT_EQ(Port("s2", 1).circuit_id(), "c-multi");
  EXPECT_EQ(Port("s2", 6).circuit_id(), "c-multi");
  EXPECT_EQ(Port("s1", 3).circuit_id(), "");
  EXPECT_EQ(Port("s1", 9).circuit_id(), "");
  // Wiring is still reported next to the circuit.
  EXPECT_EQ(Port("s1", 15).wiring().trunk(), "t1");
}

// ---------------------------------------------------------------------------------------
// Observed cross-connects

TEST_F(StoreTest, RecordObservedCrossConnectsReplacesThatSwitchsRows) {
  WriteSite();
  const Counts before = Count();
  const uint64_t last = store_->LastEventSequence();
  // Unordered, switch ids left out or given, and a port the inventory does not know.
  ASSERT_THAT(
      store_->RecordObservedCrossConnects("s1", {Xc("s1", 3, 9), Xc("", 1, 11), Xc("s1", 99, 100)}),
      IsOk());
  ASSERT_THAT(store_->RecordObservedCrossConnects("s2", {Xc("s2", 2, 6)}), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> s1, store_->ListObservedCrossConnects("s1"));
  ASSERT_THAT(s1, SizeIs(3));
  EXPECT_THAT(s1[0], EqualsProto(Xc("s1", 1, 11)));
  EXPECT_THAT(s1[1], EqualsProto(Xc("s1", 3, 9)));
  EXPECT_THAT(s1[2], EqualsProto(Xc("s1", 99, 100)));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> all, store_->ListObservedCrossConnects(""));
  ASSERT_THAT(all, SizeIs(4));
  EXPECT_THAT(all[3], EqualsProto(Xc("s2", 2, 6)));

  ASSERT_THAT(store_->RecordObservedCrossConnects("s1", {Xc("s1", 4, 12)}), IsOk());
  ASSERT_OK_AND_ASSIGN(s1, store_->ListObservedCrossConnects("s1"));
  ASSERT_THAT(s1, SizeIs(1));
  EXPECT_THAT(s1[0], EqualsProto(Xc("s1", 4, 12)));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> s2, store_->ListObservedCrossConnects("s2"));
  EXPECT_THAT(s2, SizeIs(1));  // Another switch's rows are untouched.

  ASSERT_THAT(store_->RecordObservedCrossConnects("s1", {}), IsOk());
  ASSERT_OK_AND_ASSIGN(s1, store_->ListObservedCrossConnects("s1"));
  EXPECT_THAT(s1, IsEmpty());

  // Observed state is not a change of the fleet: no event, and nothing else moves.
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(store_->LastEventSequence(), last);
  EXPECT_EQ(Port("s1", 4).circuit_id(), "");
}

TEST_F(StoreTest, ObservedCrossConnectsOfAnUnknownSwitchAreNotFound) {
  WriteSite();
  EXPECT_THAT(store_->RecordObservedCrossConnects("s9", {Xc("s9", 1, 2)}),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("switch"), HasSubstr("s9"))));
  EXPECT_THAT(store_->ListObservedCrossConnects("s9"),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("switch"), HasSubstr("s9"))));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> all, store_->ListObservedCrossConnects(""));
  EXPECT_THAT(all, IsEmpty());
}

TEST_F(StoreTest, RefusedObservationKeepsThePreviousOne) {
  WriteSite();
  ASSERT_THAT(store_->RecordObservedCrossConnects("s1", {Xc("s1", 1, 11)}), IsOk());
  EXPECT_THAT(
      store_->RecordObservedCrossConnects("s1", {Xc("s1", 2, 10), Xc("s1", 2, 12)}),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("s1"), HasSubstr("ingress 2"))));
  EXPECT_THAT(
      store_->RecordObservedCrossConnects("s1", {Xc("s2", 2, 6)}),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("s1"), HasSubstr("s2"))));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> s1, store_->ListObservedCrossConnects("s1"));
  ASSERT_THAT(s1, SizeIs(1));
  EXPECT_THAT(s1[0], EqualsProto(Xc("s1", 1, 11)));
}

TEST_F(StoreTest, DeletingASwitchDeletesWhatItWasObservedToHold) {
  WriteSite();
  InventoryWrite add;
  *add.objects.add_switches() = MakeSwitch("s3", 4, 4, {});
  add.created = {"switch s3"};
  ASSERT_THAT(store_->WriteInventory(add, kOperator), IsOk());
  ASSERT_THAT(store_->RecordObservedCrossConnects("s3", {Xc("s3", 1, 5)}), IsOk());
  ASSERT_THAT(store_->RecordObservedCrossConnects("s1", {Xc("s1", 1, 11)}), IsOk());
  ASSERT_THAT(store_->DeleteObject("switch", "s3", kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> all, store_->ListObservedCrossConnects(""));
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].switch_id(), "s1");
}

}  // namespace
}  // namespace fleet::store
