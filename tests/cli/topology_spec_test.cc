// The topology request file's `lease:` and the --lease text share one parser.
#include "controller/cli/topology_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;

constexpr char kRing[] =
    "topology:\n"
    "  template: {kind: ring-unidirectional, members: [gpu1, gpu2]}\n";

TEST(ParseLeaseTest, ReadsAbslDurations) {
  absl::StatusOr<google::protobuf::Duration> lease = ParseLease("1h30m");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->seconds(), 90 * 60);
  EXPECT_EQ(lease->nanos(), 0);
  lease = ParseLease("1.5s");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->seconds(), 1);
  EXPECT_EQ(lease->nanos(), 500'000'000);
  lease = ParseLease("0");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->seconds(), 0);
}

TEST(ParseLeaseTest, RefusesWhatIsNotAFiniteNonNegativeDuration) {
  for (const char* text : {"", "10", "ten minutes", "10 m", "inf"}) {
    absl::StatusOr<google::protobuf::Duration> lease = ParseLease(text);
    ASSERT_FALSE(lease.ok()) << text;
    EXPECT_EQ(lease.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(lease.status().message(),
              absl::StrCat("'", text, "' is not a duration such as 90s, 10m or 1h30m"));
  }
  absl::StatusOr<google::protobuf::Duration> negative = ParseLease("-5m");
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("'-5m' is negative"));
}

TEST(TopologySpecTest, LeaseIsOptional) {
  absl::StatusOr<v1::RequestTopologyRequest> request =
      ParseTopologySpec(absl::StrCat("tenant: a\n", kRing), "ring.yaml");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_FALSE(request->has_lease());
  EXPECT_EQ(request->topology().template_().members().devices_size(), 2);
}

TEST(TopologySpecTest, ReadsTheLease) {
  absl::StatusOr<v1::RequestTopologyRequest> request =
      ParseTopologySpec(absl::StrCat("tenant: a\nlease: 10m\n", kRing), "ring.yaml");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->lease().seconds(), 600);
}

TEST(TopologySpecTest, BadLeaseNamesFileAndLine) {
  absl::StatusOr<v1::RequestTopologyRequest> request =
      ParseTopologySpec(absl::StrCat("tenant: a\nname: r\nlease: 600\n", kRing), "ring.yaml");
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(request.status().message(),
            "ring.yaml:3: lease: '600' is not a duration such as 90s, 10m or 1h30m");
}

TEST(TopologySpecTest, LeaseMustBeAScalar) {
  absl::StatusOr<v1::RequestTopologyRequest> request =
      ParseTopologySpec(absl::StrCat("lease: [10m]\n", kRing), "ring.yaml");
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().message(),
            "ring.yaml:1: lease: must be a duration such as 90s, 10m or 1h30m");
}

TEST(TopologySpecTest, UnknownKeyListsLeaseAmongTheKnownOnes) {
  absl::StatusOr<v1::RequestTopologyRequest> request =
      ParseTopologySpec(absl::StrCat("leas: 10m\n", kRing), "ring.yaml");
  ASSERT_FALSE(request.ok());
  EXPECT_THAT(request.status().message(),
              HasSubstr("ring.yaml:1: unknown key 'leas'; expected tenant, name, lease, topology"));
}

}  // namespace
}  // namespace fleet::cli
