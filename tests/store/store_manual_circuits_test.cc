// AllocationStore::CreateManualCircuit (controller/store/allocation_store.h) on SQLite:
// manual circuits beside allocated ones, under the same port and id checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "controller/store/store.h"
#include "tests/store/store_test_util.h"

// Filters are built with designated initializers naming only the fields a test sets; the
// others keep their documented defaults, which is what this warning would flag.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace fleet::store {
namespace {

using namespace ::fleet::store::testing_util;  // The fixture, its builders and matchers.

// ---------------------------------------------------------------------------------------
// Manual circuits

TEST_F(StoreTest, CreateManualCircuitPersistsItWithAnEvent) {
  WriteSite();
  const uint64_t before = Events().back().sequence();
  v1::Circuit c =
      Manual(MakeCircuit("m-1", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 15), Xc("s2", 1, 6)},
                         v1::CIRCUIT_STATE_PROGRAMMED));
  c.add_trunks("t1");
  ASSERT_THAT(store_->CreateManualCircuit(c, "reconciler"), IsOk());

  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
  ASSERT_THAT(circuits, SizeIs(1));
  EXPECT_THAT(circuits[0], EqualsProto(c));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> on_s2, store_->ListCircuits({.switch_id = "s2"}));
  EXPECT_THAT(on_s2, SizeIs(1));
  EXPECT_EQ(Port("s1", 2).circuit_id(), "m-1");
  EXPECT_EQ(Port("s2", 6).circuit_id(), "m-1");
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> allocations,
                       store_->ListAllocations({.include_released = true}));
  EXPECT_THAT(allocations, IsEmpty());

  std::vector<v1::Event> events = Events({.after_sequence = before});
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].kind(), "circuit.created");
  EXPECT_EQ(events[0].object_kind(), "circuit");
  EXPECT_EQ(events[0].object_id(), "m-1");
  EXPECT_EQ(events[0].principal(), "reconciler");
  EXPECT_THAT(events[0].message(),
              AllOf(HasSubstr("manual"), HasSubstr("n-cpu"), HasSubstr("n-gpu")));
}

TEST_F(StoreTest, CreateManualCircuitRefusesACircuitThatIsNotManual) {
  WriteSite();
  const Counts before = Count();
  v1::Circuit not_manual = CpuToGpu("m-1");
  EXPECT_THAT(
      store_->CreateManualCircuit(not_manual, kOperator),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("m-1"), HasSubstr("manual"))));
  v1::Circuit owned = Manual(CpuToGpu("m-1"));
  owned.set_allocation_id("a1");
  EXPECT_THAT(store_->CreateManualCircuit(owned, kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("m-1"), HasSubstr("allocation"), HasSubstr("a1"))));
  EXPECT_THAT(store_->CreateManualCircuit(Manual(CpuToGpu("")), kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("id")));
  v1::Circuit stateless = Manual(CpuToGpu("m-1"));
  stateless.set_state(v1::CIRCUIT_STATE_UNSPECIFIED);
  EXPECT_THAT(
      store_->CreateManualCircuit(stateless, kOperator),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("m-1"), HasSubstr("state"))));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 1).circuit_id(), "");
}

TEST_F(StoreTest, ManualCircuitOnABusyPortIsRefusedAndNothingIsStored) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(store_->CreateManualCircuit(
                  Manual(MakeCircuit("m-1", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 11)})), kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("s1/11"), HasSubstr("c-up"))));
  // The O-NIC's tx port is taken even through free switch ports.
  EXPECT_THAT(store_->CreateManualCircuit(
                  Manual(MakeCircuit("m-2", "n-cpu", 1, "n-gpu", 2, {Xc("s1", 4, 12)})), kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("m-2")));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 2).circuit_id(), "");
  EXPECT_EQ(Port("s1", 4).circuit_id(), "");

  // And the other way round: an allocation cannot take a manual circuit's port.
  ASSERT_THAT(store_->CreateManualCircuit(
                  Manual(MakeCircuit("m-3", "n-gpu", 1, "n-cpu", 1, {Xc("s1", 3, 9)})), kOperator),
              IsOk());
  EXPECT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"gpu0"}, {GpuToCpu()}),
          kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("s1/3"), HasSubstr("m-3"))));
}

TEST_F(StoreTest, CircuitIdsAreUniqueAcrossManualAndAllocatedCircuits) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  ASSERT_THAT(store_->CreateManualCircuit(Manual(GpuToCpu("m-1")), kOperator), IsOk());
  const Counts before = Count();
  EXPECT_THAT(
      store_->CreateManualCircuit(
          Manual(MakeCircuit("c-up", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 12)})), kOperator),
      StatusIs(absl::StatusCode::kAlreadyExists, AllOf(HasSubstr("c-up"), HasSubstr("a1"))));
  EXPECT_THAT(
      store_->CreateManualCircuit(
          Manual(MakeCircuit("m-1", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 12)})), kOperator),
      StatusIs(absl::StatusCode::kAlreadyExists, AllOf(HasSubstr("m-1"), HasSubstr("manual"))));
  EXPECT_THAT(store_->CreateAllocation(
                  MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0"},
                                 {MakeCircuit("m-1", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 12)})}),
                  kOperator),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("m-1")));
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, ManualCircuitFromAnUnknownOnicPortIsRefusedAndNothingIsStored) {
  WriteSite();
  const Counts before = Count();
  EXPECT_THAT(
      store_->CreateManualCircuit(
          Manual(MakeCircuit("m-ghost", "n-ghost", 1, "n-cpu", 2, {Xc("s1", 4, 10)})), kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("m-ghost"), HasSubstr("n-ghost"))));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 4).circuit_id(), "");
}

TEST_F(StoreTest, AllocationUpdatesLeaveManualCircuitsAlone) {
  WriteSite();
  ASSERT_THAT(store_->CreateManualCircuit(Manual(GpuToCpu("m-1")), kOperator), IsOk());
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  AllocationUpdate other{.id = "a1"};
  other.circuits["m-1"] = {.state = v1::CIRCUIT_STATE_REMOVING};
  EXPECT_THAT(store_->UpdateAllocation(other, kOperator),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("m-1")));
  ASSERT_THAT(
      store_->UpdateAllocation(
          {.id = "a1", .state = v1::ALLOCATION_STATE_FAILED, .remove_circuits = true}, kOperator),
      IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
  ASSERT_THAT(circuits, SizeIs(1));
  EXPECT_EQ(circuits[0].id(), "m-1");
  EXPECT_EQ(circuits[0].state(), v1::CIRCUIT_STATE_PLANNED);
  EXPECT_EQ(Port("s1", 3).circuit_id(), "m-1");
}

}  // namespace
}  // namespace fleet::store
