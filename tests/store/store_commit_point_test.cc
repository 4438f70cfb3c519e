// The store behind a fenced commit point (controller/commit_point/commit_point.h): a replica
// that may not act commits no write of any kind, and what it holds (the database, the
// in-memory desired state, the commit feed) stays exactly as it was.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/store/store_test_util.h"

namespace fleet::store {
namespace {

using namespace testing_util;  // NOLINT(build/namespaces): the store tests' shared helpers.

TEST_F(StoreTest, AFencedCommitPointCommitsNoWriteOfAnyKindAndLeavesTheStoreAsItWas) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a1", "team-a", v1::ALLOCATION_STATE_READY,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()}),
                               kOperator),
      IsOk());
  const Counts before = Count();
  const v1::Allocation a1 = store_->GetAllocation("a1").value();
  const uint64_t sequence = store_->LastEventSequence();
  const uint64_t inventory_version = store_->InventoryVersion();
  const v1::Inventory inventory = store_->LoadInventory().value();
  const v1::SwitchPort port4 = Port("s1", 4);

  std::vector<Effect> asked;
  commit_point_.SetFence([&asked](Effect effect) {
    asked.push_back(effect);
    return absl::UnavailableError("not the leader");
  });
  const absl::Status refused = absl::UnavailableError("not the leader");
  // One write of each kind the store has.
  InventoryWrite another_host;
  another_host.objects.add_hosts()->set_name("h2");
  another_host.created = {"host h2"};
  EXPECT_EQ(ToStatus(store_->WriteInventory(another_host, kOperator)), refused);
  EXPECT_EQ(ToStatus(store_->DeleteObject("trunk", "t1", kOperator)), refused);
  DrainTargetRef n_gpu;
  n_gpu.onic = "n-gpu";
  EXPECT_EQ(ToStatus(store_->SetDrained(n_gpu, true, "cleaning", kOperator)), refused);
  EXPECT_EQ(ToStatus(store_->SetPortHealth({{PortRef("s1", 4), v1::OPER_STATE_FAILED, "los"}})),
            refused);
  EXPECT_EQ(ToStatus(store_->SetDeviceHealth("gpu0", v1::DEVICE_HEALTH_SUSPECT, "xid", kOperator)),
            refused);
  EXPECT_EQ(ToStatus(store_->CreateAllocation(
                MakeAllocation("a2", "team-b", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0"}, {}),
                kOperator)),
            refused);
  AllocationUpdate release;
  release.id = "a1";
  release.state = v1::ALLOCATION_STATE_RELEASING;
  EXPECT_EQ(ToStatus(store_->UpdateAllocation(release, kOperator)), refused);
  CircuitReplacement replace;
  replace.allocation_id = "a1";
  replace.remove = {"c-up"};
  replace.members = {"h1-cpu0", "gpu0"};
  EXPECT_EQ(ToStatus(store_->ReplaceCircuits(replace, kOperator)), refused);
  EXPECT_EQ(ToStatus(store_->ClearPendingRemovals("a1")), refused);
  EXPECT_EQ(ToStatus(store_->CreateManualCircuit(
                Manual(MakeCircuit("m1", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 12)})), kOperator)),
            refused);
  EXPECT_EQ(ToStatus(store_->RecordObservedCrossConnects("s1", {Xc("s1", 1, 11)})), refused);
  v1::Event event;
  event.set_kind("operator.note");
  EXPECT_EQ(ToStatus(store_->AppendEvent(event)), refused);
  EXPECT_EQ(ToStatus(store_->PruneEvents({.max_count = 1}, 100)), refused);
  EXPECT_EQ(ToStatus(store_->PruneEndedAllocations({.max_count = 0}, 100)), refused);
  EXPECT_EQ(asked, std::vector<Effect>(14, Effect::kStoreWrite));

  // Nothing of them: not in the tables, not in the desired state, not in the feed.
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetAllocation("a1").value(), EqualsProto(a1));
  EXPECT_EQ(store_->ListCircuits({"s1", "", ""}).value().size(), 2u);
  EXPECT_EQ(store_->LastEventSequence(), sequence);
  EXPECT_EQ(store_->InventoryVersion(), inventory_version);
  EXPECT_THAT(store_->LoadInventory().value(), EqualsProto(inventory));
  EXPECT_TRUE(store_->ListObservedCrossConnects("s1").value().empty());
  EXPECT_THAT(Port("s1", 4), EqualsProto(port4));

  // Let in again, the same write commits.
  commit_point_.SetFence({});
  ASSERT_THAT(store_->UpdateAllocation(release, kOperator).status(), IsOk());
  EXPECT_EQ(store_->GetAllocation("a1")->state(), v1::ALLOCATION_STATE_RELEASING);
  EXPECT_GT(store_->LastEventSequence(), sequence);
}

}  // namespace
}  // namespace fleet::store
