// The batch rules every OpticalSwitch shares, through the in-memory switch.
#include "switch_adapters/optical_switch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/fake_optical_switch.h"

namespace fleet::switch_adapters {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ValidateBatchTest, PortsMustBeOnTheRightSideAndUsedOnce) {
  EXPECT_TRUE(ValidateBatch({{}, {{1, 9}, {2, 10}}}, 8, 8).ok());
  absl::Status s = ValidateBatch({{}, {{9, 1}}}, 8, 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("ingress 9 is not an ingress port (1..8)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("egress 1 is not an egress port (9..16)"));
  EXPECT_THAT(std::string(ValidateBatch({{}, {{1, 17}}}, 8, 8).message()),
              HasSubstr("egress 17 is not an egress port"));
  EXPECT_THAT(std::string(ValidateBatch({{}, {{1, 9}, {1, 10}}}, 8, 8).message()),
              HasSubstr("a port appears in two adds"));
  EXPECT_THAT(std::string(ValidateBatch({{{1, 9}, {1, 9}}, {}}, 8, 8).message()),
              HasSubstr("a port appears in two removes"));
}

TEST(PlanBatchTest, SkipsWhatIsAlreadyDoneAndRefusesConflicts) {
  std::vector<CrossConnect> current = {{1, 9}, {2, 10}};
  absl::StatusOr<CrossConnectBatch> plan =
      PlanBatch({{{2, 10}, {3, 11}}, {{1, 9}, {4, 12}}}, current);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->remove, ElementsAre(CrossConnect{2, 10}));  // 3->11 is not there.
  EXPECT_THAT(plan->add, ElementsAre(CrossConnect{4, 12}));     // 1->9 is there already.

  // An egress freed by a remove of the same batch may be reused.
  plan = PlanBatch({{{2, 10}}, {{5, 10}}}, current);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->add, ElementsAre(CrossConnect{5, 10}));

  absl::StatusOr<CrossConnectBatch> busy = PlanBatch({{}, {{5, 9}, {1, 11}}}, current);
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(busy.status().message()), HasSubstr("egress 9 is in use by 1->9"));
  EXPECT_THAT(std::string(busy.status().message()), HasSubstr("ingress 1 is in use by 1->9"));

  absl::StatusOr<CrossConnectBatch> wrong = PlanBatch({{{1, 10}}, {}}, current);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("ingress 1 goes to 9, not 10"));
}

TEST(VerifyBatchTest, NamesEveryPortThatDiffers) {
  EXPECT_TRUE(VerifyBatch({{{2, 10}}, {{1, 9}}}, {{1, 9}}).ok());
  absl::Status s = VerifyBatch({{{2, 10}}, {{1, 9}, {3, 11}}}, {{1, 12}, {2, 10}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("1->9 goes to 12 instead"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("3->11 is missing"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("2->10 is still there"));
}

TEST(FakeOpticalSwitchTest, AppliesRemovesBeforeAddsAndReadsBack) {
  fleet::testing::FakeOpticalSwitch fake(8, 8);
  ApplyResult first = fake.Apply({{}, {{1, 9}, {2, 10}}});
  ASSERT_TRUE(first.status.ok()) << first.status;
  EXPECT_THAT(first.added, ElementsAre(CrossConnect{1, 9}, CrossConnect{2, 10}));
  // Move egress 9 from ingress 1 to ingress 3 in one batch.
  ApplyResult moved = fake.Apply({{{1, 9}}, {{3, 9}}});
  ASSERT_TRUE(moved.status.ok()) << moved.status;
  ASSERT_TRUE(moved.observed.has_value());
  EXPECT_THAT(*moved.observed, ElementsAre(CrossConnect{2, 10}, CrossConnect{3, 9}));
  EXPECT_EQ(fake.changes(), 4);
}

TEST(FakeOpticalSwitchTest, ReapplyingChangesNothing) {
  fleet::testing::FakeOpticalSwitch fake(8, 8);
  CrossConnectBatch batch{{}, {{1, 9}, {2, 10}}};
  ASSERT_TRUE(fake.Apply(batch).status.ok());
  const int changes = fake.changes();
  ApplyResult again = fake.Apply(batch);
  EXPECT_TRUE(again.status.ok());
  EXPECT_THAT(again.added, IsEmpty());
  EXPECT_EQ(fake.changes(), changes);
}

TEST(FakeOpticalSwitchTest, PreconditionFailureChangesNothing) {
  fleet::testing::FakeOpticalSwitch fake(8, 8);
  ASSERT_TRUE(fake.Apply({{}, {{1, 9}}}).status.ok());
  ApplyResult refused = fake.Apply({{}, {{2, 10}, {3, 9}}});
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(*refused.observed, ElementsAre(CrossConnect{1, 9}));
  EXPECT_EQ(fake.changes(), 1);
}

TEST(FakeOpticalSwitchTest, PartialFailureReportsWhatReallyHappened) {
  fleet::testing::FakeOpticalSwitch fake(8, 8);
  fake.FailNextApplyAfter(2);
  ApplyResult partial = fake.Apply({{}, {{1, 9}, {2, 10}, {3, 11}}});
  EXPECT_EQ(partial.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(partial.added, ElementsAre(CrossConnect{1, 9}, CrossConnect{2, 10}));
  EXPECT_THAT(*partial.observed, ElementsAre(CrossConnect{1, 9}, CrossConnect{2, 10}));
  // The next apply of the same batch completes it.
  ApplyResult rest = fake.Apply({{}, {{1, 9}, {2, 10}, {3, 11}}});
  EXPECT_TRUE(rest.status.ok());
  EXPECT_THAT(rest.added, ElementsAre(CrossConnect{3, 11}));
}

TEST(FakeOpticalSwitchTest, UnreachableAndShuttersAndFailedPorts) {
  fleet::testing::FakeOpticalSwitch fake(4, 4);
  fake.SetUnreachable(absl::UnavailableError("link down"));
  EXPECT_EQ(fake.ReadCrossConnects().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(fake.Apply({{}, {{1, 5}}}).status.code(), absl::StatusCode::kUnavailable);
  fake.SetUnreachable(absl::OkStatus());
  ASSERT_TRUE(fake.SetShutters({2}, false).ok());
  fake.SetPortFailed(3, true);
  absl::StatusOr<std::vector<PortState>> ports = fake.ReadPorts();
  ASSERT_TRUE(ports.ok());
  ASSERT_EQ(ports->size(), 8u);
  EXPECT_EQ((*ports)[1].status, PortStatus::kDisabled);
  EXPECT_EQ((*ports)[2].status, PortStatus::kFailed);
  EXPECT_EQ((*ports)[0].status, PortStatus::kEnabled);
  EXPECT_EQ(fake.SetShutters({9}, true).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fleet::switch_adapters
