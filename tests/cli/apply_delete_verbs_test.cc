// `fleetctl apply` and `fleetctl delete`, end to end against the fakes.
#include "tests/cli/fleetctl_fixture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST_F(FleetctlTest, DeleteRefusedPrintsCodeAndWholeMessage) {
  EXPECT_EQ(Run({"delete", "host", "server1"}), kExitFailed);
  EXPECT_EQ(err(),
            "error: FAILED_PRECONDITION: host server1 still has devices:\n"
            "  server1-cpu0\n"
            "delete them first\n");
}

TEST_F(FleetctlTest, DeletePrintsEachDeletedObjectOnce) {
  EXPECT_EQ(Run({"delete", "devices", "gpu3"}), kExitOk) << err();
  EXPECT_EQ(out(), "deleted device gpu3\ndeleted onic gpu3-n0\n");
  EXPECT_EQ(Run({"get", "devices"}), kExitOk);
  EXPECT_EQ(err(), "no devices found\n");
}

TEST_F(FleetctlTest, DeleteUnknownKindIsUsageError) {
  EXPECT_EQ(Run({"delete", "circuit", "c1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown kind 'circuit'; kinds: switch, host, device, onic, trunk"));
}

class FleetctlApplyTest : public FleetctlTest {};

TEST_F(FleetctlApplyTest, SendsTheParsedFileAndPrintsCountsAndChanges) {
  std::string path =
      WriteFile("site.yaml",
                "site: test\n"
                "switches:\n"
                "  - {id: ocs1, model: m, size: 384x384, address: a, protocol: tl1}\n"
                "  - {id: ocs2, model: m, size: 8x8, address: b, protocol: rest}\n");
  EXPECT_EQ(Run({"apply", "-f", path, "--dry-run"}), kExitOk) << err();
  EXPECT_TRUE(inventory_.applied().dry_run());
  EXPECT_EQ(inventory_.applied().inventory().switches_size(), 2);
  EXPECT_EQ(out(),
            "dry run: nothing was stored\n"
            "created 1, updated 0, unchanged 1\n"
            "created switch ocs2\n");
}

TEST_F(FleetctlApplyTest, MissingFileFailsWithoutCallingTheServer) {
  std::string path = ::testing::TempDir() + "/no-such-inventory.yaml";
  EXPECT_EQ(Run({"apply", "-f", path}), kExitFailed);
  EXPECT_THAT(err(), StartsWith("error: NOT_FOUND: "));
  EXPECT_THAT(err(), HasSubstr(path));
  EXPECT_EQ(inventory_.applied().inventory().switches_size(), 0);
}

TEST_F(FleetctlApplyTest, MalformedFileIsInvalidArgument) {
  std::string path = WriteFile("bad.yaml", "switches: [\n");
  EXPECT_EQ(Run({"apply", "-f", path}), kExitFailed);
  EXPECT_THAT(err(), StartsWith("error: INVALID_ARGUMENT: "));
}

TEST_F(FleetctlApplyTest, NeedsAFile) {
  EXPECT_EQ(Run({"apply"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("apply needs -f FILE"));
}

}  // namespace
}  // namespace fleet::cli
