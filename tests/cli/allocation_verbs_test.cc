// `fleetctl allocation replace`, end to end against the fakes.
#include "tests/cli/fleetctl_fixture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(FleetctlTest, AllocationReplacePrintsTheSwapAndTheCrossConnectsThatChange) {
  EXPECT_EQ(Run({"allocation", "replace", "a1", "gpu3"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "a1 member gpu3 replaced: 2 cross-connects removed, 2 added\n"
            "members: gpu1, gpu2, gpu5, gpu4\n"
            "  removed  ocs1:2→387\n"
            "  removed  ocs1:3→386\n"
            "  added    ocs1:2→389\n"
            "  added    ocs1:5→386\n"
            "a1 programming\n");
  EXPECT_EQ(Run({"allocation", "replace", "a1", "gpu3", "--dry-run"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("dry run: a1 member gpu3 replaced"));
  EXPECT_THAT(out(), Not(HasSubstr("a1 ready")));
  EXPECT_EQ(Run({"allocation", "replace", "a1", "gpu7"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: member: allocation a1 has no member gpu7\n");
  EXPECT_EQ(Run({"allocation", "replace", "a1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("allocation replace needs an ID and a MEMBER"));
  EXPECT_EQ(Run({"allocation", "swap", "a1", "gpu3"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown allocation subcommand 'swap'"));
  EXPECT_EQ(Run({"allocation", "replace", "a1", "gpu3", "--dry-run", "--wait"}), kExitUsage);
}

}  // namespace
}  // namespace fleet::cli
