// InventoryStore (controller/store/inventory_store.h) on SQLite: what circuits and
// allocations use cannot be rewired, resized or deleted; deleting what nothing uses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
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
// Changes under circuits

TEST_F(StoreTest, ShrinkingASwitchUnderADesiredCircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  InventoryWrite shrink;
  *shrink.objects.add_switches() = MakeSwitch("s1", 8, 2, {7, 8});  // Egress 11 would vanish.
  shrink.updated = {"switch s1"};
  EXPECT_THAT(
      store_->WriteInventory(shrink, kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("s1"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Switch s1, store_->GetSwitch("s1"));
  EXPECT_EQ(s1.egress_ports(), 8u);
  EXPECT_THAT(s1.trunk_reserved_ports(), ElementsAre(7, 8, 15, 16));
}

TEST_F(StoreTest, RepointingASwitchThatHoldsCircuitsIsRefusedUnlessForced) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  v1::Switch moved = MakeSwitch("s1", 8, 8, {7, 8, 15, 16});
  moved.set_address("192.0.2.99");
  InventoryWrite repoint;
  *repoint.objects.add_switches() = moved;
  repoint.updated = {"switch s1"};
  repoint.changed_fields["switch s1"] = "address s1.mgmt -> 192.0.2.99";
  repoint.repointed_switches["s1"] = "address s1.mgmt -> 192.0.2.99";
  EXPECT_THAT(store_->WriteInventory(repoint, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("switch s1 holds 1 circuit (allocation a1)"),
                             HasSubstr("(address s1.mgmt -> 192.0.2.99)"), HasSubstr("--force"))));
  repoint.dry_run = true;  // Refused the same; and with force, accepted but not written.
  EXPECT_THAT(store_->WriteInventory(repoint, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("switch s1 holds")));
  repoint.force = true;
  EXPECT_THAT(store_->WriteInventory(repoint, kOperator), IsOk());
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Switch s1, store_->GetSwitch("s1"));
  EXPECT_NE(s1.address(), "192.0.2.99");

  repoint.dry_run = false;
  EXPECT_THAT(store_->WriteInventory(repoint, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(s1, store_->GetSwitch("s1"));
  EXPECT_EQ(s1.address(), "192.0.2.99");
  std::vector<v1::Event> events = Events({.object_kind = "switch"});
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().message(),
            "updated switch s1: address s1.mgmt -> 192.0.2.99 (forced while it held 1 circuit "
            "(allocation a1))");
}

TEST_F(StoreTest, ResplittingASwitchUnderADesiredCircuitIsRefused) {
  WriteSite();
  // n-gpu port 2 → n-cpu port 2 through t2: s2 2→5, then s1 7→10.
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-back", "n-gpu", 2, "n-cpu", 2,
                                              {Xc("s2", 2, 5), Xc("s1", 7, 10)})}),
                  kOperator),
              IsOk());
  InventoryWrite resplit;
  // Same 16 ports, but ingress 7 would become an egress.
  *resplit.objects.add_switches() = MakeSwitch("s1", 6, 10, {15, 16});
  resplit.updated = {"switch s1"};
  EXPECT_THAT(store_->WriteInventory(resplit, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("c-back")));
  EXPECT_EQ(Port("s1", 7).direction(), v1::PORT_DIRECTION_INGRESS);
}

TEST_F(StoreTest, RewiringAnOnicPortInACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  InventoryWrite rewire;
  // Port 1's tx moves from s1/1 to s1/5.
  *rewire.objects.add_onics() =
      MakeOnic("n-cpu", "h1-cpu0", "SN-CPU",
               {PortRef("s1", 5), PortRef("s1", 9), PortRef("s1", 2), PortRef("s1", 10)});
  rewire.updated = {"onic n-cpu"};
  EXPECT_THAT(store_->WriteInventory(rewire, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("n-cpu"), HasSubstr("port 1"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Onic onic, store_->GetOnic("n-cpu"));
  EXPECT_THAT(onic.ports(0).tx(), EqualsProto(PortRef("s1", 1)));
  EXPECT_EQ(Port("s1", 1).wiring().onic_port().onic(), "n-cpu");
  EXPECT_FALSE(Port("s1", 5).has_wiring());
}

TEST_F(StoreTest, RewiringTheDestinationPortOfACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  InventoryWrite rewire;
  // n-gpu port 1 is c-up's destination; its rx moves from s1/11 to s1/12.
  *rewire.objects.add_onics() =
      MakeOnic("n-gpu", "gpu0", "SN-GPU",
               {PortRef("s1", 3), PortRef("s1", 12), PortRef("s2", 2), PortRef("s2", 6)});
  rewire.updated = {"onic n-gpu"};
  EXPECT_THAT(store_->WriteInventory(rewire, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("n-gpu"), HasSubstr("port 1"), HasSubstr("c-up"))));
  EXPECT_EQ(Port("s1", 11).wiring().onic_port().onic(), "n-gpu");
}

TEST_F(StoreTest, RewiringAnOnicPortOutsideAnyCircuitSucceeds) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  InventoryWrite rewire;
  // Port 2 (in no circuit) moves its tx from s1/2 to s1/5; port 1 stays as it is.
  *rewire.objects.add_onics() =
      MakeOnic("n-cpu", "h1-cpu0", "SN-CPU",
               {PortRef("s1", 1), PortRef("s1", 9), PortRef("s1", 5), PortRef("s1", 10)});
  rewire.updated = {"onic n-cpu"};
  ASSERT_THAT(store_->WriteInventory(rewire, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Onic onic, store_->GetOnic("n-cpu"));
  EXPECT_THAT(onic.ports(1).tx(), EqualsProto(PortRef("s1", 5)));
  EXPECT_THAT(onic.ports(0).tx(), EqualsProto(PortRef("s1", 1)));
  EXPECT_FALSE(Port("s1", 2).has_wiring());
  EXPECT_EQ(Port("s1", 5).wiring().onic_port().port(), 2u);
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
}

// Regression: the O-NIC rewire check once checked only the ports listed in the new O-NIC while
// WriteInventory deleted every fiber of it, so leaving port 1 out silently unwired circuit c-up
// (failed at commit 2d876cd). The inventory planner refuses O-NICs without two ports, but the
// Store contract refuses this on its own.
TEST_F(StoreTest, DroppingAnOnicPortInACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  InventoryWrite rewire;
  v1::Onic only_port2 =
      MakeOnic("n-cpu", "h1-cpu0", "SN-CPU",
               {PortRef("s1", 1), PortRef("s1", 9), PortRef("s1", 2), PortRef("s1", 10)});
  only_port2.mutable_ports()->DeleteSubrange(0, 1);
  *rewire.objects.add_onics() = only_port2;
  rewire.updated = {"onic n-cpu"};
  EXPECT_THAT(store_->WriteInventory(rewire, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("c-up")));
  EXPECT_EQ(Port("s1", 1).wiring().onic_port().onic(), "n-cpu");
}

TEST_F(StoreTest, ShrinkingASwitchUnderFibersIsRefusedAndChangesNothing) {
  WriteSite();
  const Counts before = Count();
  InventoryWrite shrink;
  // Egress 11..16 would vanish; s1/11 carries n-gpu port 1's rx fiber (no circuit).
  *shrink.objects.add_switches() = MakeSwitch("s1", 8, 2, {7, 8});
  shrink.updated = {"switch s1"};
  EXPECT_THAT(store_->WriteInventory(shrink, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("FOREIGN KEY")));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Switch s1, store_->GetSwitch("s1"));
  EXPECT_EQ(s1.egress_ports(), 8u);
  EXPECT_THAT(s1.trunk_reserved_ports(), ElementsAre(7, 8, 15, 16));
}

// Regression: WriteInventory once deleted and re-inserted trunks with no check, so moving t1
// off s1/15 silently stranded c-multi, whose cross-connect sends light out of s1/15 (failed at
// commit 2d876cd). DeleteObject("trunk") refuses the same situation.
TEST_F(StoreTest, RewiringATrunkCarryingACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2,
                                              {Xc("s1", 2, 15), Xc("s2", 1, 6)})}),
                  kOperator),
              IsOk());
  const Counts before = Count();
  InventoryWrite move;
  *move.objects.add_trunks() = MakeTrunk("t1", PortRef("s1", 16), PortRef("s2", 1));
  move.updated = {"trunk t1"};
  EXPECT_THAT(store_->WriteInventory(move, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("t1"), HasSubstr("c-multi"))));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 15).wiring().trunk(), "t1");
}

// ---------------------------------------------------------------------------------------
// DeleteObject

TEST_F(StoreTest, DeleteOfUnknownKindIsInvalidArgument) {
  WriteSite();
  const Counts before = Count();
  EXPECT_THAT(store_->DeleteObject("allocation", "a1", kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("allocation")));
  EXPECT_THAT(store_->DeleteObject("", "s1", kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("switch")));
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, DeleteOfUnknownNameIsNotFound) {
  WriteSite();
  const Counts before = Count();
  for (const char* kind : {"switch", "host", "device", "onic", "trunk"}) {
    EXPECT_THAT(store_->DeleteObject(kind, "nope", kOperator),
                StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr(kind), HasSubstr("nope"))))
        << kind;
  }
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, DeletingADeviceInALiveAllocationIsRefused) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"gpu0"}, {}), kOperator),
      IsOk());
  const Counts before = Count();
  EXPECT_THAT(
      store_->DeleteObject("device", "gpu0", kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("gpu0"), HasSubstr("a1"))));
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetDevice("gpu0"), IsOk());
  EXPECT_THAT(store_->GetOnic("n-gpu"), IsOk());
}

TEST_F(StoreTest, DeletingADeviceOfAReleasedAllocationSucceeds) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_RELEASED, {"gpu0"}, {}), kOperator),
      IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("device", "gpu0", kOperator));
  EXPECT_THAT(deleted, ElementsAre("device gpu0", "onic n-gpu"));
  // The allocation keeps its history.
  ASSERT_OK_AND_ASSIGN(v1::Allocation a1, store_->GetAllocation("a1"));
  EXPECT_THAT(a1.members(), ElementsAre("gpu0"));
}

TEST_F(StoreTest, DeletingADeviceWhoseOnicIsInACircuitIsRefused) {
  WriteSite();
  // Membership names only the CPU; the GPU's O-NIC is still in c-up.
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(
      store_->DeleteObject("device", "gpu0", kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("gpu0"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, DeletingAnOnicInACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(store_->DeleteObject("onic", "n-gpu", kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("n-gpu"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 11).wiring().onic_port().onic(), "n-gpu");
}

TEST_F(StoreTest, DeletingAnOnicRemovesItsFibers) {
  WriteSite();
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("onic", "n-gpu", kOperator));
  EXPECT_THAT(deleted, ElementsAre("onic n-gpu"));
  EXPECT_THAT(store_->GetOnic("n-gpu"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("n-gpu")));
  EXPECT_FALSE(Port("s1", 3).has_wiring());
  EXPECT_FALSE(Port("s2", 6).has_wiring());
  ASSERT_OK_AND_ASSIGN(v1::Device gpu, store_->GetDevice("gpu0"));
  EXPECT_THAT(gpu.onics(), IsEmpty());
}

TEST_F(StoreTest, DeletingAHostWithDevicesIsRefused) {
  WriteSite();
  const Counts before = Count();
  EXPECT_THAT(store_->DeleteObject("host", "h1", kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("h1"), HasSubstr("h1-cpu0"))));
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, DeletingAnEmptyHostSucceeds) {
  WriteSite();
  ASSERT_THAT(store_->DeleteObject("device", "h1-cpu0", kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("host", "h1", kOperator));
  EXPECT_THAT(deleted, ElementsAre("host h1"));
  EXPECT_THAT(store_->GetHost("h1"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("h1")));
}

TEST_F(StoreTest, DeletingASwitchWithFibersOrTrunksIsRefused) {
  WriteSite();
  const Counts before = Count();
  EXPECT_THAT(
      store_->DeleteObject("switch", "s2", kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("s2"), HasSubstr("n-gpu"))));
  EXPECT_EQ(Count(), before);

  // Without the O-NIC, the trunks still hold it.
  ASSERT_THAT(store_->DeleteObject("onic", "n-gpu", kOperator), IsOk());
  const Counts without_onic = Count();
  absl::StatusOr<std::vector<std::string>> refused =
      store_->DeleteObject("switch", "s2", kOperator);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition,
                                AllOf(HasSubstr("s2"), HasSubstr("trunk"))));
  EXPECT_EQ(Count(), without_onic);

  ASSERT_THAT(store_->DeleteObject("trunk", "t1", kOperator), IsOk());
  ASSERT_THAT(store_->DeleteObject("trunk", "t2", kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("switch", "s2", kOperator));
  EXPECT_THAT(deleted, ElementsAre("switch s2"));
  EXPECT_THAT(store_->GetSwitch("s2"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("s2")));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::SwitchPort> ports, store_->ListPorts(""));
  EXPECT_THAT(ports, SizeIs(16));  // s2's ports went with it.
}

TEST_F(StoreTest, DeletingATrunkCarryingACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2,
                                              {Xc("s1", 2, 15), Xc("s2", 1, 6)})}),
                  kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(store_->DeleteObject("trunk", "t1", kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("t1"), HasSubstr("c-multi"))));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("trunk", "t2", kOperator));
  EXPECT_THAT(deleted, ElementsAre("trunk t2"));
}

TEST_F(StoreTest, DeletingAFreeDeviceDeletesItsOnicsAndRecordsEvents) {
  WriteSite();
  const uint64_t last = Events().back().sequence();
  clock_.Advance(absl::Seconds(30));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("device", "gpu0", "operator:carol"));
  EXPECT_THAT(deleted, ElementsAre("device gpu0", "onic n-gpu"));
  EXPECT_THAT(store_->GetDevice("gpu0"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("gpu0")));
  EXPECT_THAT(store_->GetOnic("n-gpu"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("n-gpu")));
  EXPECT_FALSE(Port("s1", 3).has_wiring());
  EXPECT_FALSE(Port("s1", 11).has_wiring());
  EXPECT_FALSE(Port("s2", 2).has_wiring());
  // The O-NIC serial is free again.
  InventoryWrite again;
  *again.objects.add_devices() = MakeDevice("gpu1", v1::DEVICE_KIND_GPU, "");
  *again.objects.add_onics() =
      MakeOnic("n-gpu1", "gpu1", "SN-GPU",
               {PortRef("s1", 3), PortRef("s1", 11), PortRef("s2", 2), PortRef("s2", 6)});
  ASSERT_THAT(store_->WriteInventory(again, kOperator), IsOk());

  std::vector<v1::Event> events = Events({.after_sequence = last});
  ASSERT_THAT(events, SizeIs(2));
  std::vector<std::string> what;
  for (const v1::Event& e : events) {
    EXPECT_EQ(e.kind(), "inventory.deleted");
    EXPECT_EQ(e.principal(), "operator:carol");
    EXPECT_EQ(Micros(e.time()), absl::ToUnixMicros(clock_.Now()));
    what.push_back(absl::StrCat(e.object_kind(), " ", e.object_id()));
  }
  EXPECT_THAT(what, UnorderedElementsAre("device gpu0", "onic n-gpu"));
}

TEST_F(StoreTest, RefusedDeleteAppendsNoEvent) {
  WriteSite();
  const size_t before = Events().size();
  EXPECT_FALSE(store_->DeleteObject("host", "h1", kOperator).ok());
  EXPECT_FALSE(store_->DeleteObject("switch", "s1", kOperator).ok());
  EXPECT_FALSE(store_->DeleteObject("device", "nope", kOperator).ok());
  EXPECT_EQ(Events().size(), before);
}

}  // namespace
}  // namespace fleet::store
