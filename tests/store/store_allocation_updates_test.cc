// AllocationStore::UpdateAllocation (controller/store/allocation_store.h) on SQLite: every
// field, release intents, refusals, and circuits joining and leaving the desired set.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
// UpdateAllocation

v1::StageTiming Timing(const std::string& stage, absl::Time started, absl::Duration took) {
  v1::StageTiming t;
  t.set_stage(stage);
  *t.mutable_started() = Stamp(started);
  t.mutable_duration()->set_seconds(absl::IDivDuration(took, absl::Seconds(1), &took));
  t.mutable_duration()->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(took)));
  return t;
}

// The circuit `id` of `a`, or an empty circuit (and a failure) when it has none.
v1::Circuit CircuitOf(const v1::Allocation& a, const std::string& id) {
  for (const v1::Circuit& c : a.circuits()) {
    if (c.id() == id) return c;
  }
  ADD_FAILURE() << "allocation " << a.id() << " has no circuit " << id;
  return {};
}

TEST_F(StoreTest, UpdateAllocationAppliesEveryFieldAndReturnsTheCommittedAllocation) {
  WriteSite();
  const absl::Time created = clock_.Now();
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()}),
                               kOperator),
      IsOk());
  const uint64_t before = Events().back().sequence();
  clock_.Advance(absl::Seconds(7));
  const absl::Time lease = clock_.Now() + absl::Hours(1);
  AllocationUpdate update;
  update.id = "a1";
  update.state = v1::ALLOCATION_STATE_DEGRADED;
  update.reason = "n-gpu port 1 did not train";
  update.stage_timings = std::vector<v1::StageTiming>{
      Timing("program", created, absl::Milliseconds(40)),
      Timing("train", created + absl::Milliseconds(40), absl::Milliseconds(2500))};
  update.lease_expires = lease;
  update.circuits["c-up"] = {.state = v1::CIRCUIT_STATE_ACTIVE};
  update.circuits["c-down"] = {.state = v1::CIRCUIT_STATE_DEGRADED,
                               .reason = "n-cpu port 1 saw no light"};
  ASSERT_OK_AND_ASSIGN(v1::Allocation returned, store_->UpdateAllocation(update, "engine"));

  ASSERT_OK_AND_ASSIGN(v1::Allocation stored, store_->GetAllocation("a1"));
  EXPECT_THAT(returned, EqualsProto(stored));
  EXPECT_EQ(stored.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_EQ(stored.reason(), "n-gpu port 1 did not train");
  ASSERT_THAT(stored.stage_timings(), SizeIs(2));
  EXPECT_THAT(stored.stage_timings(0), EqualsProto((*update.stage_timings)[0]));
  EXPECT_THAT(stored.stage_timings(1), EqualsProto((*update.stage_timings)[1]));
  EXPECT_EQ(Micros(stored.lease_expires()), absl::ToUnixMicros(lease));
  EXPECT_EQ(Micros(stored.created()), absl::ToUnixMicros(created));
  EXPECT_EQ(Micros(stored.updated()), absl::ToUnixMicros(clock_.Now()));
  EXPECT_EQ(CircuitOf(stored, "c-up").state(), v1::CIRCUIT_STATE_ACTIVE);
  EXPECT_EQ(CircuitOf(stored, "c-up").reason(), "");
  EXPECT_EQ(CircuitOf(stored, "c-down").state(), v1::CIRCUIT_STATE_DEGRADED);
  EXPECT_EQ(CircuitOf(stored, "c-down").reason(), "n-cpu port 1 saw no light");
  // What was not named is kept.
  EXPECT_EQ(stored.tenant(), "tenant-a");
  EXPECT_THAT(stored.members(), ElementsAre("h1-cpu0", "gpu0"));
  EXPECT_THAT(CircuitOf(stored, "c-up").cross_connects(0), EqualsProto(Xc("s1", 1, 11)));

  std::vector<v1::Event> events = Events({.after_sequence = before});
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].kind(), "allocation.state");
  EXPECT_EQ(events[0].object_kind(), "allocation");
  EXPECT_EQ(events[0].object_id(), "a1");
  EXPECT_EQ(events[0].principal(), "engine");
  EXPECT_EQ(events[0].severity(), v1::EVENT_SEVERITY_INFO);
  EXPECT_EQ(Micros(events[0].time()), absl::ToUnixMicros(clock_.Now()));
  EXPECT_THAT(events[0].message(),
              AllOf(HasSubstr("a1"), HasSubstr("degraded"), HasSubstr("did not train")));
}

TEST_F(StoreTest, AReleaseIntentIsKeptApartFromTheReasonShown) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  ASSERT_OK_AND_ASSIGN(std::optional<AllocationUpdate::ReleaseIntent> none,
                       store_->ReleaseIntentOf("a1"));
  EXPECT_FALSE(none.has_value());

  AllocationUpdate releasing{.id = "a1", .state = v1::ALLOCATION_STATE_RELEASING};
  releasing.release = AllocationUpdate::ReleaseIntent{v1::ALLOCATION_STATE_FAILED, "evicted"};
  ASSERT_THAT(store_->UpdateAllocation(releasing, "e").status(), IsOk());
  ASSERT_THAT(store_->UpdateAllocation({.id = "a1", .reason = "removal failed"}, "e").status(),
              IsOk());
  ASSERT_OK_AND_ASSIGN(std::optional<AllocationUpdate::ReleaseIntent> intent,
                       store_->ReleaseIntentOf("a1"));
  ASSERT_TRUE(intent.has_value());
  EXPECT_EQ(intent->state, v1::ALLOCATION_STATE_FAILED);
  EXPECT_EQ(intent->reason, "evicted");
  ASSERT_OK_AND_ASSIGN(v1::Allocation shown, store_->GetAllocation("a1"));
  EXPECT_EQ(shown.reason(), "removal failed");

  // A release ends RELEASED or FAILED; anything else is refused and changes nothing.
  AllocationUpdate wrong{.id = "a1"};
  wrong.release = AllocationUpdate::ReleaseIntent{v1::ALLOCATION_STATE_READY, ""};
  EXPECT_THAT(store_->UpdateAllocation(wrong, "e").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RELEASED or FAILED")));
  ASSERT_OK_AND_ASSIGN(intent, store_->ReleaseIntentOf("a1"));
  EXPECT_EQ(intent->state, v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(store_->ReleaseIntentOf("nope").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
}

TEST_F(StoreTest, UpdateAllocationLeavesUnsetFieldsAsTheyAre) {
  WriteSite();
  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_TRAINING,
                                    {"h1-cpu0", "gpu0"}, {CpuToGpu()});
  a.set_reason("waiting for agents");
  *a.add_stage_timings() = Timing("plan", clock_.Now(), absl::Milliseconds(3));
  *a.mutable_lease_expires() = Stamp(clock_.Now() + absl::Minutes(10));
  ASSERT_THAT(store_->CreateAllocation(a, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation original, store_->GetAllocation("a1"));

  clock_.Advance(absl::Seconds(1));
  ASSERT_OK_AND_ASSIGN(v1::Allocation updated,
                       store_->UpdateAllocation({.id = "a1", .reason = "agents answered"}, "e"));
  v1::Allocation expected = original;
  expected.set_reason("agents answered");
  *expected.mutable_updated() = Stamp(clock_.Now());
  EXPECT_THAT(updated, EqualsProto(expected));

  // An update naming nothing still stamps the time and leaves a record.
  clock_.Advance(absl::Seconds(1));
  const size_t events = Events().size();
  ASSERT_OK_AND_ASSIGN(v1::Allocation touched, store_->UpdateAllocation({.id = "a1"}, "e"));
  *expected.mutable_updated() = Stamp(clock_.Now());
  EXPECT_THAT(touched, EqualsProto(expected));
  EXPECT_THAT(Events(), SizeIs(events + 1));
}

TEST_F(StoreTest, UpdateAllocationReplacesStageTimingsEvenWithNone) {
  WriteSite();
  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"gpu0"}, {});
  *a.add_stage_timings() = Timing("plan", clock_.Now(), absl::Milliseconds(3));
  *a.add_stage_timings() = Timing("persist", clock_.Now(), absl::Milliseconds(1));
  ASSERT_THAT(store_->CreateAllocation(a, kOperator), IsOk());

  AllocationUpdate one;
  one.id = "a1";
  one.stage_timings =
      std::vector<v1::StageTiming>{Timing("program", clock_.Now(), absl::Seconds(2))};
  ASSERT_OK_AND_ASSIGN(v1::Allocation replaced, store_->UpdateAllocation(one, kOperator));
  ASSERT_THAT(replaced.stage_timings(), SizeIs(1));
  EXPECT_EQ(replaced.stage_timings(0).stage(), "program");
  EXPECT_EQ(replaced.stage_timings(0).duration().seconds(), 2);

  AllocationUpdate none;
  none.id = "a1";
  none.stage_timings = std::vector<v1::StageTiming>{};
  ASSERT_OK_AND_ASSIGN(v1::Allocation cleared, store_->UpdateAllocation(none, kOperator));
  EXPECT_THAT(cleared.stage_timings(), IsEmpty());
  ASSERT_OK_AND_ASSIGN(v1::Allocation stored, store_->GetAllocation("a1"));
  EXPECT_THAT(stored.stage_timings(), IsEmpty());
}

TEST_F(StoreTest, UpdateAllocationRecordsTheGivenEventKindMessageAndSeverity) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"gpu0"}, {}), kOperator),
      IsOk());
  AllocationUpdate update{.id = "a1",
                          .state = v1::ALLOCATION_STATE_DEGRADED,
                          .event_kind = "allocation.degraded",
                          .event_message = "gpu0's agent stopped answering",
                          .severity = v1::EVENT_SEVERITY_WARNING};
  ASSERT_THAT(store_->UpdateAllocation(update, "engine"), IsOk());
  std::vector<v1::Event> events = Events({.object_kind = "allocation", .object_id = "a1"});
  ASSERT_THAT(events, SizeIs(2));
  EXPECT_EQ(events[1].kind(), "allocation.degraded");
  EXPECT_EQ(events[1].message(), "gpu0's agent stopped answering");
  EXPECT_EQ(events[1].severity(), v1::EVENT_SEVERITY_WARNING);
  EXPECT_EQ(events[1].principal(), "engine");
}

TEST_F(StoreTest, UpdateOfUnknownAllocationIsNotFoundAndChangesNothing) {
  WriteSite();
  const Counts before = Count();
  EXPECT_THAT(
      store_->UpdateAllocation({.id = "a9", .state = v1::ALLOCATION_STATE_READY}, kOperator),
      StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("allocation"), HasSubstr("a9"))));
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, UpdateNamingACircuitNotOfTheAllocationIsNotFoundAndChangesNothing) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {GpuToCpu()}),
                                       kOperator),
              IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation original, store_->GetAllocation("a1"));
  const Counts before = Count();
  clock_.Advance(absl::Seconds(1));
  for (const char* circuit : {"c-down", "c-nowhere"}) {
    AllocationUpdate update{.id = "a1", .state = v1::ALLOCATION_STATE_DEGRADED};
    update.circuits["c-up"] = {.state = v1::CIRCUIT_STATE_DEGRADED};
    update.circuits[circuit] = {.state = v1::CIRCUIT_STATE_DEGRADED};
    EXPECT_THAT(store_->UpdateAllocation(update, kOperator),
                StatusIs(absl::StatusCode::kNotFound,
                         AllOf(HasSubstr("circuit"), HasSubstr(circuit), HasSubstr("a1"))));
    // Even with remove_circuits, which would have deleted the changes with the rows.
    update.remove_circuits = true;
    EXPECT_THAT(store_->UpdateAllocation(update, kOperator),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr(circuit)));
  }
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation after, store_->GetAllocation("a1"));
  EXPECT_THAT(after, EqualsProto(original));
  ASSERT_OK_AND_ASSIGN(v1::Allocation a2, store_->GetAllocation("a2"));
  EXPECT_EQ(CircuitOf(a2, "c-down").state(), v1::CIRCUIT_STATE_PLANNED);
}

TEST_F(StoreTest, UpdateOfAReleasedAllocationIsRefused) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_RELEASED, {"gpu0"}, {}), kOperator),
      IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation original, store_->GetAllocation("a1"));
  const Counts before = Count();
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(
      store_->UpdateAllocation({.id = "a1", .state = v1::ALLOCATION_STATE_READY}, kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("a1"), HasSubstr("released"))));
  EXPECT_THAT(store_->UpdateAllocation({.id = "a1", .reason = "rewritten"}, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("a1")));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation after, store_->GetAllocation("a1"));
  EXPECT_THAT(after, EqualsProto(original));
}

TEST_F(StoreTest, UpdateWithAnUnspecifiedStateIsInvalidArgument) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(
      store_->UpdateAllocation({.id = "a1", .state = v1::ALLOCATION_STATE_UNSPECIFIED}, kOperator),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a1")));
  AllocationUpdate update{.id = "a1"};
  update.circuits["c-up"] = {};
  EXPECT_THAT(store_->UpdateAllocation(update, kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("c-up")));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation a1, store_->GetAllocation("a1"));
  EXPECT_EQ(a1.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(CircuitOf(a1, "c-up").state(), v1::CIRCUIT_STATE_PLANNED);
}

TEST_F(StoreTest, RemovingCircuitsFreesTheirPortsForOthers) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING, {"h1-cpu0", "gpu0"},
                         {CpuToGpu(), MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2,
                                                  {Xc("s1", 2, 15), Xc("s2", 1, 6)})}),
          kOperator),
      IsOk());
  AllocationUpdate fail{.id = "a1",
                        .state = v1::ALLOCATION_STATE_FAILED,
                        .reason = "s1 refused the cross-connect",
                        .remove_circuits = true};
  ASSERT_OK_AND_ASSIGN(v1::Allocation failed, store_->UpdateAllocation(fail, "engine"));
  EXPECT_EQ(failed.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(failed.circuits(), IsEmpty());
  EXPECT_THAT(failed.members(), ElementsAre("h1-cpu0", "gpu0"));  // History is kept.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
  EXPECT_THAT(circuits, IsEmpty());
  for (const auto& [switch_id, port] : std::vector<std::pair<std::string, uint32_t>>{
           {"s1", 1}, {"s1", 11}, {"s1", 2}, {"s1", 15}, {"s2", 1}, {"s2", 6}}) {
    EXPECT_EQ(Port(switch_id, port).circuit_id(), "") << switch_id << "/" << port;
  }
  std::vector<v1::Event> events = Events({.object_kind = "allocation", .object_id = "a1"});
  ASSERT_THAT(events, SizeIs(2));
  EXPECT_THAT(events[1].message(),
              AllOf(HasSubstr("failed"), HasSubstr("refused"), HasSubstr("2 circuits")));

  // The same ports now go to another allocation.
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu("c-up-2")}),
                               kOperator),
      IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up-2");
}

TEST_F(StoreTest, ReleasingWhileHoldingCircuitsIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation original, store_->GetAllocation("a1"));
  const Counts before = Count();
  for (v1::AllocationState state : {v1::ALLOCATION_STATE_RELEASED, v1::ALLOCATION_STATE_FAILED}) {
    EXPECT_THAT(
        store_->UpdateAllocation({.id = "a1", .state = state}, kOperator),
        StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("a1"), HasSubstr("c-up"))));
  }
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation after, store_->GetAllocation("a1"));
  EXPECT_THAT(after, EqualsProto(original));
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");

  // Releasing step by step: REMOVING circuits keep their ports until they are removed.
  AllocationUpdate releasing{.id = "a1", .state = v1::ALLOCATION_STATE_RELEASING};
  releasing.circuits["c-up"] = {.state = v1::CIRCUIT_STATE_REMOVING};
  ASSERT_THAT(store_->UpdateAllocation(releasing, kOperator), IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
  ASSERT_OK_AND_ASSIGN(
      v1::Allocation released,
      store_->UpdateAllocation(
          {.id = "a1", .state = v1::ALLOCATION_STATE_RELEASED, .remove_circuits = true},
          kOperator));
  EXPECT_EQ(released.state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_THAT(released.circuits(), IsEmpty());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "");
}

TEST_F(StoreTest, PhaseSwitchHandsPortsFromTheOldPhaseToTheNewInOneUpdate) {
  WriteSite();
  // Both phases use n-cpu port 1 → n-gpu port 1 across s1 1→11.
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-now", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)},
                                              v1::CIRCUIT_STATE_ACTIVE, "p1"),
                                  MakeCircuit("c-next", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)},
                                              v1::CIRCUIT_STATE_INACTIVE, "p2")}),
                  kOperator),
              IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-now");
  AllocationUpdate to_p2{.id = "a1", .state = v1::ALLOCATION_STATE_PROGRAMMING};
  // c-next sorts before c-now, so map order would take the ports before they are freed.
  to_p2.circuits["c-now"] = {.state = v1::CIRCUIT_STATE_INACTIVE};
  to_p2.circuits["c-next"] = {.state = v1::CIRCUIT_STATE_PLANNED};
  ASSERT_OK_AND_ASSIGN(v1::Allocation a1, store_->UpdateAllocation(to_p2, "engine"));
  EXPECT_EQ(CircuitOf(a1, "c-now").state(), v1::CIRCUIT_STATE_INACTIVE);
  EXPECT_EQ(CircuitOf(a1, "c-next").state(), v1::CIRCUIT_STATE_PLANNED);
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-next");
  EXPECT_EQ(Port("s1", 11).circuit_id(), "c-next");

  // The freed ports are now taken by p2: another allocation cannot have them.
  EXPECT_THAT(
      store_->CreateAllocation(MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                               kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("c-next")));
}

TEST_F(StoreTest, ActivatingACircuitOnABusyPortIsRefusedAndChangesNothing) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  // a2's later phase uses c-up's switch ports; a3's uses its O-NIC ports through other ones.
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_READY, {"gpu0"},
                                 {MakeCircuit("c-later", "n-gpu", 2, "n-cpu", 2, {Xc("s1", 1, 11)},
                                              v1::CIRCUIT_STATE_INACTIVE, "p2")}),
                  kOperator),
              IsOk());
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a3", "tenant-c", v1::ALLOCATION_STATE_READY, {"h1-cpu0"},
                                 {MakeCircuit("c-tx", "n-cpu", 1, "n-gpu", 2, {Xc("s1", 4, 12)},
                                              v1::CIRCUIT_STATE_INACTIVE, "p2")}),
                  kOperator),
              IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation a2_before, store_->GetAllocation("a2"));
  const Counts before = Count();
  AllocationUpdate a2{.id = "a2", .state = v1::ALLOCATION_STATE_PROGRAMMING};
  a2.circuits["c-later"] = {.state = v1::CIRCUIT_STATE_PLANNED};
  EXPECT_THAT(store_->UpdateAllocation(a2, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("c-later"), HasSubstr("s1/1"), HasSubstr("c-up"))));
  AllocationUpdate a3{.id = "a3"};
  a3.circuits["c-tx"] = {.state = v1::CIRCUIT_STATE_PLANNED};
  EXPECT_THAT(store_->UpdateAllocation(a3, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("c-tx"), HasSubstr("n-cpu port 1"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation a2_after, store_->GetAllocation("a2"));
  EXPECT_THAT(a2_after, EqualsProto(a2_before));
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
  EXPECT_EQ(Port("s1", 4).circuit_id(), "");
}

// Invariant 2 holds whichever write would break it: an allocation is not created ended
// with circuits, nor ended by a replacement of its circuits; nothing is written.
TEST_F(StoreTest, NoWriteLeavesAnEndedAllocationHoldingCircuits) {
  WriteSite();
  const Counts empty = Count();
  EXPECT_THAT(store_->CreateAllocation(MakeAllocation("a0", "tenant-a", v1::ALLOCATION_STATE_FAILED,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("a0"), HasSubstr("cannot be created"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), empty);
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation before, store_->GetAllocation("a1"));
  const Counts held = Count();
  CircuitReplacement end;
  end.allocation_id = "a1";
  end.add = {GpuToCpu()};
  end.members = {"h1-cpu0", "gpu0"};
  end.state = v1::ALLOCATION_STATE_RELEASED;
  EXPECT_THAT(store_->ReplaceCircuits(end, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("a1"), HasSubstr("cannot become"))));
  EXPECT_EQ(Count(), held);
  ASSERT_OK_AND_ASSIGN(v1::Allocation after, store_->GetAllocation("a1"));
  EXPECT_THAT(after, EqualsProto(before));
}

}  // namespace
}  // namespace fleet::store
