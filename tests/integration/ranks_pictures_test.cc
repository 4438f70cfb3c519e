// What a job and an operator read off a running allocation, end to end: `fleetctl topology
// ranks`, `fleetctl topology fabric` (a job's planner's view) and the Graphviz pictures of
// `describe allocation -o dot` and `get circuits -o dot`, rendered by Graphviz's own `dot -Tsvg`,
// on a real `fleetd --demo` (one switch) and on the two-cluster site (two switches joined by
// trunks).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <memory>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "fleet/v1/topology.pb.h"
#include "tests/integration/subprocess.h"

namespace fleet {
namespace {

using testing::BinaryPath;
using testing::CommandResult;
using testing::Daemon;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

constexpr char kDot[] = "/usr/bin/dot";

// The titles of the SVG's node and edge groups (`onic:gpu1-n0`,
// `onic:gpu1-n0->onic:gpu2-n0`), and the first line of each cluster's label (`ocs1`,
// `server1`, `gpu3 (gpu)`).
struct Svg {
  std::set<std::string> nodes;
  std::set<std::string> edges;
  std::set<std::string> clusters;
};

Svg Render(const std::string& dot_text) {
  const std::string file = testing::WriteFile("picture.dot", dot_text);
  const CommandResult svg = testing::RunCommand({kDot, "-Tsvg", file});
  EXPECT_EQ(svg.exit_code, 0) << "dot -Tsvg refused the picture: " << svg.err << "\n" << dot_text;
  Svg out;
  const std::regex group(
      R"re(<g id="(node|edge|clust)\d+" class="(?:node|edge|cluster)">\s*<title>([^<]*)</title>(?:\s*<(?:polygon|path)[^>]*>\s*<text[^>]*>([^<]*)</text>)?)re");
  for (auto it = std::sregex_iterator(svg.out.begin(), svg.out.end(), group);
       it != std::sregex_iterator(); ++it) {
    // Graphviz writes '-' as &#45;, '>' as &gt; and '&' as &amp;.
    auto text = [](std::string t) {
      t = std::regex_replace(t, std::regex("&#45;"), "-");
      t = std::regex_replace(t, std::regex("&gt;"), ">");
      return std::regex_replace(t, std::regex("&amp;"), "&");
    };
    if ((*it)[1] == "clust") {
      out.clusters.insert(text((*it)[3].str()));
    } else {
      ((*it)[1] == "node" ? out.nodes : out.edges).insert(text((*it)[2].str()));
    }
  }
  return out;
}

class RanksPicturesTest : public ::testing::Test {
 protected:
  // Starts `fleetd --demo` (on `site`, when given) and requests the topology in `request`.
  void Start(const std::string& site, const std::string& request) {
    ASSERT_EQ(access(kDot, X_OK), 0)
        << kDot << " is missing: install graphviz (deploy/quickstart/install-deps.sh)";
    std::vector<std::string> argv = {BinaryPath("fleetd"),
                                     "--insecure",
                                     "--demo",
                                     "--state-dir",
                                     testing::FreshDirectory("ranks-pictures"),
                                     "--grpc-port",
                                     "0",
                                     "--metrics-port",
                                     "0",
                                     "--agent-heartbeat-ms",
                                     "100"};
    if (!site.empty()) argv.insert(argv.end(), {"--demo-site", site});
    absl::StatusOr<std::unique_ptr<Daemon>> started = Daemon::Start(argv);
    ASSERT_TRUE(started.ok()) << started.status();
    fleetd_ = std::move(*started);
    // fleetd shows its address once the demo has started every agent: 14 of them on the
    // two-switch site take longer than the default wait under the sanitizers.
    absl::StatusOr<std::string> grpc = fleetd_->WaitForLine("grpc: ", absl::Seconds(120));
    ASSERT_TRUE(grpc.ok()) << grpc.status();
    at_ = std::make_unique<testing::FleetdAt>(*grpc);
    const std::string file = testing::WriteFile("request.yaml", request);
    auto response = testing::FleetctlJson<v1::RequestTopologyResponse>(
        *at_, {"topology", "request", "-f", file, "--wait", "--name", "pictured", "--request-id",
               "ranks-pictures-1"});
    allocation_ = response.allocation();
    ASSERT_EQ(allocation_.state(), v1::ALLOCATION_STATE_READY) << allocation_.reason();
  }

  // The two-cluster site, with a ring over two GPUs of each switch.
  void StartRingOverTwoSwitches() {
    Start(std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-2cluster.yaml",
          R"(tenant: team-a
topology:
  template: {kind: ring-unidirectional, members: [a-gpu1, a-gpu2, b-gpu1, b-gpu2]}
)");
  }

  CommandResult Fleetctl(std::vector<std::string> args) { return testing::Fleetctl(*at_, args); }

  std::unique_ptr<Daemon> fleetd_;
  std::unique_ptr<testing::FleetdAt> at_;
  v1::Allocation allocation_;
};

TEST_F(RanksPicturesTest, ARingOnTheDemoIsRankedAndDrawnCircuitByCircuit) {
  // Named out of order: the ring's light runs gpu3 → gpu1 → gpu4 → gpu2 → gpu3.
  Start("", R"(tenant: team-a
topology:
  template: {kind: ring-unidirectional, members: [gpu3, gpu1, gpu4, gpu2]}
)");
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(allocation_.name(), "pictured");
  // The idempotency key given on the command line: asking again gets the same allocation.
  const std::string file = testing::WriteFile("again.yaml", R"(tenant: team-a
topology:
  template: {kind: ring-unidirectional, members: [gpu3, gpu1, gpu4, gpu2]}
)");
  auto again = testing::FleetctlJson<v1::RequestTopologyResponse>(
      *at_, {"topology", "request", "-f", file, "--request-id", "ranks-pictures-1"});
  EXPECT_EQ(again.allocation().id(), allocation_.id());

  auto ranks =
      testing::FleetctlJson<v1::GetRanksResponse>(*at_, {"topology", "ranks", allocation_.id()});
  EXPECT_EQ(ranks.order(), v1::RANK_ORDER_RING);
  ASSERT_EQ(ranks.ranks_size(), 4);
  std::vector<std::string> order;
  for (const v1::Rank& r : ranks.ranks()) order.push_back(r.device());
  EXPECT_THAT(order, ::testing::ElementsAre("gpu3", "gpu1", "gpu4", "gpu2"));
  // Each rank's circuit goes to the next rank's device, the last back to the first.
  for (int r = 0; r < 4; ++r) {
    const std::string from = order[static_cast<size_t>(r)] + "-n0";
    const std::string to = order[static_cast<size_t>((r + 1) % 4)] + "-n0";
    bool found = false;
    for (const v1::Circuit& c : allocation_.circuits()) {
      found |= c.source().onic() == from && c.destination().onic() == to;
    }
    EXPECT_TRUE(found) << "no circuit " << from << " -> " << to;
  }
  const CommandResult table = Fleetctl({"topology", "ranks", allocation_.id()});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("4 ranks in ring order"));
  // Pooled GPUs attached to no host have no hostfile.
  const CommandResult hostfile = Fleetctl({"topology", "ranks", allocation_.id(), "--hostfile"});
  EXPECT_EQ(hostfile.exit_code, 1);
  EXPECT_THAT(hostfile.err, HasSubstr("has no host"));
  // An attach of two GPUs to server1, for another tenant named on the command line: its ranks
  // are the two GPUs, not server1's CPUs whose O-NIC ports they use, and every rank runs on
  // server1, so the hostfile is one line.
  const std::string attach = testing::WriteFile("attach.yaml", R"(tenant: team-a
topology:
  attach: {host: server1, devices: {count: [{kind: gpu, count: 2}]}}
)");
  auto attached = testing::FleetctlJson<v1::RequestTopologyResponse>(
      *at_, {"topology", "request", "-f", attach, "--wait", "--tenant", "team-b", "--name",
             "virtual-server"});
  EXPECT_EQ(attached.allocation().tenant(), "team-b");
  EXPECT_EQ(attached.allocation().name(), "virtual-server");
  auto attach_ranks = testing::FleetctlJson<v1::GetRanksResponse>(
      *at_, {"topology", "ranks", attached.allocation().id()});
  EXPECT_EQ(attach_ranks.order(), v1::RANK_ORDER_MEMBERS);
  ASSERT_EQ(attach_ranks.ranks_size(), 2);
  ASSERT_GT(attached.allocation().members_size(), 2);  // The GPUs, then server1's CPUs.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(attach_ranks.ranks(r).device(), attached.allocation().members(r));
    EXPECT_THAT(attach_ranks.ranks(r).device(), ::testing::StartsWith("gpu"));
    EXPECT_EQ(attach_ranks.ranks(r).host(), "server1");
    EXPECT_NE(attach_ranks.ranks(r).pcie_address(), "");
  }
  const CommandResult slots =
      Fleetctl({"topology", "ranks", attached.allocation().id(), "--hostfile"});
  EXPECT_EQ(slots.exit_code, 0) << slots.err;
  EXPECT_EQ(slots.out, "server1 slots=2\n");
  const CommandResult released =
      Fleetctl({"topology", "release", attached.allocation().id(), "--wait"});
  EXPECT_EQ(released.exit_code, 0) << released.err;
  const CommandResult phase = Fleetctl({"topology", "ranks", allocation_.id(), "--phase", "tp"});
  EXPECT_EQ(phase.exit_code, 1);
  EXPECT_THAT(phase.err, HasSubstr("NOT_FOUND: phase: allocation " + allocation_.id() +
                                   " has no phase 'tp'; it is single-phase"));

  const CommandResult described =
      Fleetctl({"describe", "allocation", allocation_.id(), "-o", "dot"});
  ASSERT_EQ(described.exit_code, 0) << described.err;
  const Svg one = Render(described.out);
  EXPECT_THAT(one.nodes,
              IsSupersetOf({"onic:gpu1-n0", "onic:gpu2-n0", "onic:gpu3-n0", "onic:gpu4-n0"}));
  EXPECT_EQ(one.nodes.size(), 4u);  // No other O-NIC.
  EXPECT_THAT(one.clusters, IsSupersetOf({"ocs1", "gpu-pool-1", "gpu3 (gpu)"}));
  EXPECT_EQ(one.edges,
            (std::set<std::string>{"onic:gpu3-n0->onic:gpu1-n0", "onic:gpu1-n0->onic:gpu4-n0",
                                   "onic:gpu4-n0->onic:gpu2-n0", "onic:gpu2-n0->onic:gpu3-n0"}));
  // Each edge is labelled with its cross-connect as the switch holds it.
  for (const v1::Circuit& c : allocation_.circuits()) {
    EXPECT_THAT(described.out, HasSubstr(absl::StrCat("ocs1 ", c.cross_connects(0).ingress(), "→",
                                                      c.cross_connects(0).egress())));
  }

  const CommandResult site = Fleetctl({"get", "circuits", "-o", "dot"});
  ASSERT_EQ(site.exit_code, 0) << site.err;
  const Svg whole = Render(site.out);
  // Every O-NIC of the Gen1 site (24 of the servers, 8 GPUs, 4 of the NVMe) and the switch.
  EXPECT_EQ(whole.nodes.size(), 24u + 8u + 4u);
  EXPECT_THAT(whole.nodes, IsSupersetOf({"onic:s1c0-n0", "onic:nvme2-n1"}));
  EXPECT_THAT(whole.clusters, IsSupersetOf({"ocs1", "server1", "server1-cpu0 (cpu)", "jbod-2"}));
  EXPECT_EQ(whole.edges, one.edges);

  // Only those two draw.
  const CommandResult refused = Fleetctl({"get", "hosts", "-o", "dot"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("-o dot draws only `get circuits` and `describe allocation`"));
  const CommandResult usage = Fleetctl({"health", "-o", "dot"});
  EXPECT_EQ(usage.exit_code, 2);
}

TEST_F(RanksPicturesTest, ARingOverTwoSwitchesIsDrawnWithItsTrunks) {
  StartRingOverTwoSwitches();
  ASSERT_FALSE(HasFailure());
  const CommandResult described =
      Fleetctl({"describe", "allocation", allocation_.id(), "-o", "dot"});
  ASSERT_EQ(described.exit_code, 0) << described.err;
  const Svg one = Render(described.out);
  EXPECT_EQ(one.edges.size(), 4u);
  EXPECT_THAT(described.out, HasSubstr("trunk a-b-"));
  EXPECT_THAT(described.out, HasSubstr("trunk b-a-"));

  const CommandResult site = Fleetctl({"get", "circuits", "-o", "dot"});
  ASSERT_EQ(site.exit_code, 0) << site.err;
  const Svg whole = Render(site.out);
  EXPECT_THAT(whole.clusters, IsSupersetOf({"ocs-a", "ocs-b"}));
  // The four circuits, and the trunks one edge each way between the switches.
  EXPECT_THAT(whole.edges, IsSupersetOf(one.edges));
  EXPECT_THAT(whole.edges,
              IsSupersetOf({"switch:ocs-a->switch:ocs-b", "switch:ocs-b->switch:ocs-a"}));
  EXPECT_EQ(whole.edges.size(), 6u);
}

TEST_F(RanksPicturesTest, TheFabricAcrossTwoSwitchesShowsTrunkHopsAndMeasuredCosts) {
  StartRingOverTwoSwitches();
  ASSERT_FALSE(HasFailure());
  // The allocation's own member a-gpu1 and two free GPUs, one per switch.
  auto fabric = testing::FleetctlJson<v1::GetFabricResponse>(
      *at_, {"topology", "fabric", "--allocation", allocation_.id(), "a-gpu1", "a-gpu3", "b-gpu3"});
  ASSERT_EQ(fabric.devices_size(), 3);
  EXPECT_EQ(fabric.devices(0).ports(0).use(), v1::PORT_USE_OWN);  // The ring's port.
  EXPECT_EQ(fabric.devices(0).ports(0).switch_id(), "ocs-a");
  EXPECT_EQ(fabric.devices(1).ports(0).use(), v1::PORT_USE_FREE);
  EXPECT_EQ(fabric.devices(2).ports(0).switch_id(), "ocs-b");
  ASSERT_EQ(fabric.pairs_size(), 6);
  for (const v1::FabricPair& p : fabric.pairs()) {
    EXPECT_TRUE(p.joinable()) << p.source() << " -> " << p.destination() << ": " << p.reason();
    const bool across = (p.source()[0] == 'a') != (p.destination()[0] == 'a');
    EXPECT_EQ(p.trunk_hops(), across ? 1u : 0u) << p.source() << " -> " << p.destination();
    EXPECT_EQ(p.switches_size(), across ? 2 : 1);
  }
  // The ring's transaction measured every stage but the retrain, which counts only when the
  // transaction ended READY (a slow machine may end it DEGRADED, the link retried after).
  ASSERT_EQ(fabric.change_costs_size(), 4);
  for (const v1::StageCost& c : fabric.change_costs()) {
    if (c.stage() != "retrain") EXPECT_GE(c.samples(), 1u) << c.stage();
    if (c.samples() > 0) {
      EXPECT_GT(c.median().seconds() * 1'000'000'000 + c.median().nanos(), 0) << c.stage();
    }
  }
  const CommandResult table = Fleetctl({"topology", "fabric", "a-gpu3", "b-gpu3"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("2 devices; 2 of 2 ordered pairs joinable"));
  EXPECT_THAT(table.out, HasSubstr("ocs-a -> ocs-b"));
  EXPECT_THAT(table.out, HasSubstr("retrain"));
  const CommandResult unknown = Fleetctl({"topology", "fabric", "a-gpu3", "gpu99"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("devices[1]: device gpu99 not found"));
}

}  // namespace
}  // namespace fleet
