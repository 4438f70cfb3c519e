// The topology request file's `lease:` and the --lease text share one parser.
#include "controller/cli/topology_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fleet/v1/names.h"

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
              HasSubstr("ring.yaml:1: unknown key 'leas'; expected tenant, name, request_id, "
                        "lease, topology"));
}

TEST(TopologySpecTest, TextThatIsNotUtf8IsRefusedWithItsLine) {
  // A request's strings go over gRPC, where a string that is not UTF-8 is refused naming
  // nothing; the file's line is named here instead.
  absl::StatusOr<v1::RequestTopologyRequest> request =
      ParseTopologySpec(absl::StrCat("tenant: a\nname: r\xe9\n", kRing), "ring.yaml");
  EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(request.status().message(), "ring.yaml:2: not UTF-8 text (byte 0xe9 at column 8)");
}

TEST(TopologySpecTest, ARequestIdAndAHopBoundAreRead) {
  absl::StatusOr<v1::RequestTopologyRequest> request = ParseTopologySpec(
      "tenant: a\nrequest_id: step-42\ntopology:\n  max_switch_hops: 1\n"
      "  links:\n    - {a: gpu1, b: gpu2}\n",
      "links.yaml");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->request_id(), "step-42");
  EXPECT_EQ(request->topology().max_switch_hops(), 1u);
  EXPECT_TRUE(request->topology().has_links());
  absl::StatusOr<v1::RequestTopologyRequest> bad = ParseTopologySpec(
      "tenant: a\ntopology:\n  max_switch_hops: -1\n  links:\n    - {a: gpu1, b: gpu2}\n",
      "links.yaml");
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("topology.max_switch_hops"));
}

absl::StatusOr<v1::RequestTopologyRequest> Parse(absl::string_view text) {
  return ParseTopologySpec(text, "job.yaml");
}

TEST(TopologySpecTest, ReadsEveryTemplateOption) {
  absl::StatusOr<v1::RequestTopologyRequest> request = Parse(
      "topology:\n"
      "  template:\n"
      "    kind: torus-2d\n"
      "    members: [gpu1, gpu2, gpu3, gpu4]\n"
      "    width: 2\n"
      "    duplex: true\n"
      "    reverse: true\n"
      "    hub: gpu3\n"
      "    fanout: 3\n"
      "    dimensions: [2, 2]\n");
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::TemplateSpec& t = request->topology().template_();
  EXPECT_EQ(t.kind(), v1::TEMPLATE_KIND_TORUS_2D);
  EXPECT_THAT(t.members().devices(), ::testing::ElementsAre("gpu1", "gpu2", "gpu3", "gpu4"));
  EXPECT_EQ(t.width(), 2u);
  EXPECT_TRUE(t.duplex());
  EXPECT_TRUE(t.reverse());
  EXPECT_EQ(t.hub(), "gpu3");
  EXPECT_EQ(t.fanout(), 3u);
  EXPECT_THAT(t.dimensions(), ::testing::ElementsAre(2u, 2u));
}

TEST(TopologySpecTest, ReadsEveryTemplateKind) {
  for (const std::string& kind : v1::Names<v1::TemplateKind>()) {
    absl::StatusOr<v1::RequestTopologyRequest> request =
        Parse(absl::StrCat("topology: {template: {kind: ", kind, ", members: [gpu1, gpu2]}}\n"));
    ASSERT_TRUE(request.ok()) << kind << ": " << request.status();
    EXPECT_EQ(v1::Name(request->topology().template_().kind()), kind);
  }
}

TEST(TopologySpecTest, ReadsMembersByNameAndByCount) {
  absl::StatusOr<v1::RequestTopologyRequest> request = Parse(
      "topology:\n"
      "  template:\n"
      "    kind: ring-unidirectional\n"
      "    members:\n"
      "      devices: [gpu1]\n"
      "      count:\n"
      "        - {kind: gpu, count: 3, cluster: c1}\n"
      "        - {kind: fpga, count: 1}\n");
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::MemberSet& m = request->topology().template_().members();
  EXPECT_THAT(m.devices(), ::testing::ElementsAre("gpu1"));
  ASSERT_EQ(m.counts_size(), 2);
  EXPECT_EQ(m.counts(0).kind(), v1::DEVICE_KIND_GPU);
  EXPECT_EQ(m.counts(0).count(), 3u);
  EXPECT_EQ(m.counts(0).cluster(), "c1");
  EXPECT_EQ(m.counts(1).kind(), v1::DEVICE_KIND_FPGA);
  EXPECT_EQ(m.counts(1).cluster(), "");
}

TEST(TopologySpecTest, ReadsAttachAllToAllAndTraffic) {
  absl::StatusOr<v1::RequestTopologyRequest> attach = Parse(
      "topology: {attach: {host: server1, devices: {count: [{kind: gpu, count: 4}]}, "
      "width: 2}}\n");
  ASSERT_TRUE(attach.ok()) << attach.status();
  EXPECT_EQ(attach->topology().attach().host(), "server1");
  EXPECT_EQ(attach->topology().attach().devices().counts(0).count(), 4u);
  EXPECT_EQ(attach->topology().attach().width(), 2u);

  absl::StatusOr<v1::RequestTopologyRequest> all =
      Parse("topology: {all_to_all: {members: [gpu1, gpu2, gpu3]}}\n");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->topology().all_to_all().members().devices_size(), 3);

  absl::StatusOr<v1::RequestTopologyRequest> traffic = Parse(
      "topology:\n"
      "  traffic:\n"
      "    members: [gpu1, gpu2]\n"
      "    matrix:\n"
      "      - {source: 0, destination: 1, bytes: 1.5e9}\n"
      "      - {source: 1, destination: 0, bytes: 100}\n");
  ASSERT_TRUE(traffic.ok()) << traffic.status();
  ASSERT_EQ(traffic->topology().traffic().matrix_size(), 2);
  EXPECT_EQ(traffic->topology().traffic().matrix(0).destination(), 1u);
  EXPECT_EQ(traffic->topology().traffic().matrix(0).bytes(), 1.5e9);
}

TEST(TopologySpecTest, ReadsPhasesAndTheInitialPhase) {
  absl::StatusOr<v1::RequestTopologyRequest> request = Parse(
      "tenant: a\n"
      "phases:\n"
      "  - name: dp\n"
      "    topology: {template: {kind: ring-bidirectional, members: [gpu1, gpu2, gpu3]}}\n"
      "  - name: tp\n"
      "    topology:\n"
      "      links: [{a: gpu1, b: gpu2, duplex: true}]\n"
      "initial_phase: tp\n");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_FALSE(request->has_topology());
  ASSERT_EQ(request->phases_size(), 2);
  EXPECT_EQ(request->phases(0).name(), "dp");
  EXPECT_EQ(request->phases(0).topology().template_().kind(), v1::TEMPLATE_KIND_RING_BIDIRECTIONAL);
  EXPECT_TRUE(request->phases(1).topology().links().links(0).duplex());
  EXPECT_EQ(request->initial_phase(), "tp");
}

// Each bad input is one problem naming the file, the line and the field.
TEST(TopologySpecTest, BadInputNamesFileLineAndField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"topology:\n  template: {kind: star, members: [gpu1], widht: 2}\n",
       "job.yaml:2: template: unknown key 'widht'"},
      {"topology:\n  template: {kind: star, members: [gpu1], width: two}\n",
       "job.yaml:2: template.width must be a non-negative integer"},
      {"topology:\n  template: {kind: chain, members: [gpu1], duplex: maybe}\n",
       "job.yaml:2: template.duplex must be true or false"},
      {"topology:\n  template:\n    kind: torus-2d\n    members: [gpu1]\n    dimensions: 4\n",
       "job.yaml:5: template.dimensions must be a list"},
      {"topology:\n  template: {kind: star}\n", "job.yaml:2: template.members is required"},
      {"topology:\n  template:\n    kind: ring-unidirectional\n    members:\n"
       "      count: [{kind: tpu, count: 2}]\n",
       "job.yaml:5: template.members.count[0].kind 'tpu' is not one of: cpu, gpu"},
      {"topology:\n  template:\n    kind: ring-unidirectional\n    members:\n"
       "      count:\n        - {kind: gpu, count: 0}\n",
       "job.yaml:6: template.members.count[0].count must be at least 1"},
      {"topology:\n  template:\n    kind: ring-unidirectional\n    members: {devices: [a], "
       "counts: []}\n",
       "job.yaml:4: template.members: unknown key 'counts'; expected devices, count"},
      {"topology:\n  attach: {devices: [gpu1]}\n", "job.yaml:2: attach.host is required"},
      {"topology:\n  attach: {host: server1, devices: gpu1}\n",
       "job.yaml:2: attach.devices must be a list of device names or a mapping"},
      {"topology:\n  traffic:\n    members: [gpu1, gpu2]\n    matrix:\n"
       "      - {source: 0, destination: 1, bytes: lots}\n",
       "job.yaml:5: traffic.matrix[0].bytes must be a non-negative number"},
      {"topology:\n  all_to_all: {}\n", "job.yaml:2: all_to_all.members is required"},
      {"topology:\n  template: {kind: star, members: [gpu1]}\n  links: []\n",
       "job.yaml:2: topology needs exactly one of template:, links:, attach:"},
      {"topology:\n  links:\n    - {a: gpu1}\n", "job.yaml:3: links[0] needs a and b"},
      {"phases:\n  - name: dp\n    topology: {template: {kind: hexagon, members: [gpu1]}}\n",
       "job.yaml:3: phases[0].topology.template.kind 'hexagon' is not one of"},
      {"phases:\n  - topology: {all_to_all: {members: [gpu1]}}\n",
       "job.yaml:2: phases[0].name is required"},
      {"phases:\n  - {name: dp, topology: {all_to_all: {members: [a]}}}\n"
       "  - {name: dp, topology: {all_to_all: {members: [a]}}}\n",
       "job.yaml:3: phases[1].name 'dp' is also phases[0]'s name"},
      {"phases: []\n", "job.yaml:1: phases must be a non-empty list"},
      {"phases:\n  - {name: dp, topology: {all_to_all: {members: [a]}}}\ninitial_phase: tp\n",
       "job.yaml:3: initial_phase 'tp' is not one of the phases"},
      {absl::StrCat(kRing, "initial_phase: dp\n"), "job.yaml:3: initial_phase needs phases:"},
      {absl::StrCat(kRing, "phases: []\n"), "job.yaml:3: phases: a request has topology: or"},
      {absl::StrCat(kRing, "prepare_next_phase: true\n"),
       "job.yaml:3: prepare_next_phase needs exactly two phases"},
      {"phases:\n  - {name: dp, topology: {all_to_all: {members: [a]}}}\n"
       "prepare_next_phase: perhaps\n",
       "job.yaml:3: prepare_next_phase must be true or false"},
      {"tenant: a\n",
       "job.yaml:1: 'topology' (with template:, links:, attach:, all_to_all: or "
       "traffic:) or 'phases' is required"},
  };
  for (const auto& [text, message] : cases) {
    absl::StatusOr<v1::RequestTopologyRequest> request = Parse(text);
    ASSERT_FALSE(request.ok()) << text;
    EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(request.status().message(), HasSubstr(message)) << text;
  }
}

// Every shipped example is a valid request file.
TEST(TopologySpecTest, EveryExampleParses) {
  const std::string dir = std::string(FLEET_SOURCE_DIR) + "/deploy/examples";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    absl::StatusOr<v1::RequestTopologyRequest> request =
        ReadTopologySpecFile(entry.path().string());
    EXPECT_TRUE(request.ok()) << entry.path() << ": " << request.status();
  }
  EXPECT_GE(files, 6);
}

}  // namespace
}  // namespace fleet::cli
