// The lifecycle rules the store still enforces (controller/store/allocation_lifecycle.h).
#include "controller/store/allocation_lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/store/store_test_util.h"

namespace fleet::store {
namespace {

using ::fleet::store::testing_util::IsOk;
using ::fleet::store::testing_util::StatusIs;
using ::testing::HasSubstr;

TEST(AllocationLifecycleTest, AReleaseEndsReleasedOrFailed) {
  EXPECT_THAT(CheckReleaseEnd("a1", v1::ALLOCATION_STATE_RELEASED), IsOk());
  EXPECT_THAT(CheckReleaseEnd("a1", v1::ALLOCATION_STATE_FAILED), IsOk());
  EXPECT_THAT(CheckReleaseEnd("a1", v1::ALLOCATION_STATE_READY),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("allocation a1: a release ends RELEASED or FAILED, not ready")));
}

TEST(AllocationLifecycleTest, OnlyAReleasedAllocationIsFinal) {
  EXPECT_THAT(CheckNotReleased("a1", v1::ALLOCATION_STATE_FAILED), IsOk());
  EXPECT_THAT(CheckNotReleased("a1", v1::ALLOCATION_STATE_RELEASING), IsOk());
  EXPECT_THAT(CheckNotReleased("a1", v1::ALLOCATION_STATE_RELEASED),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("a released allocation's history is not rewritten")));
}

}  // namespace
}  // namespace fleet::store
