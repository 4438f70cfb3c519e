#include "controller/cli/dot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;

v1::Circuit Circuit(const std::string& from, const std::string& to, v1::CircuitState state,
                    const std::string& phase = "") {
  v1::Circuit c;
  c.set_id(from + "-" + to);
  c.set_allocation_id("a-1");
  c.mutable_source()->set_onic(from);
  c.mutable_source()->set_port(1);
  c.mutable_destination()->set_onic(to);
  c.mutable_destination()->set_port(2);
  v1::CrossConnect* xc = c.add_cross_connects();
  xc->set_switch_id("ocs1");
  xc->set_ingress(49);
  xc->set_egress(435);
  c.set_state(state);
  c.set_phase(phase);
  return c;
}

TEST(DotTest, StatesAreStyledAndPhasesColouredWithALegend) {
  v1::Allocation a;
  a.set_id("a-1");
  a.set_tenant("team-a");
  a.set_state(v1::ALLOCATION_STATE_DEGRADED);
  a.add_members("gpu1");
  a.add_members("gpu2");
  a.add_phases("dp");
  a.add_phases("tp");
  a.set_active_phase("dp");
  *a.add_circuits() = Circuit("gpu1-n0", "gpu2-n0", v1::CIRCUIT_STATE_DEGRADED, "dp");
  *a.add_circuits() = Circuit("gpu2-n0", "gpu1-n0", v1::CIRCUIT_STATE_INACTIVE, "tp");
  const std::string dot = AllocationDot({}, a);
  EXPECT_THAT(dot, HasSubstr("digraph fleet {"));
  // Without the inventory (a job's view) the O-NICs are drawn loose, from the circuits.
  EXPECT_THAT(dot, HasSubstr("\"onic:gpu1-n0\" [label=\"gpu1-n0\"];"));
  EXPECT_THAT(dot, HasSubstr("\"onic:gpu1-n0\" -> \"onic:gpu2-n0\" [taillabel=\"1\", "
                             "headlabel=\"2\", color=\"#d62728\""));
  EXPECT_THAT(dot, HasSubstr("label=\"ocs1 49→435\\nDEGRADED\""));
  EXPECT_THAT(dot, HasSubstr("style=dotted"));
  EXPECT_THAT(dot, HasSubstr("phase dp (active)"));
  EXPECT_THAT(dot, HasSubstr("phase tp<"));
}

TEST(DotTest, NamesAreQuotedAndLabelsEscaped) {
  DotSite site;
  v1::Switch sw;
  sw.set_id("ocs\"1");
  sw.set_model("polatis <7000>");
  site.switches.push_back(sw);
  v1::Device d;
  d.set_id("gpu\\1");
  d.set_kind(v1::DEVICE_KIND_GPU);
  d.set_chassis("pool & co");
  site.devices.push_back(d);
  v1::Onic o;
  o.set_id("n\"0");
  o.set_device(d.id());
  o.add_ports()->mutable_tx()->set_switch_id(sw.id());
  site.onics.push_back(o);
  const std::string dot = SiteDot(site, {});
  EXPECT_THAT(dot, HasSubstr("subgraph \"cluster_switch_ocs\\\"1\""));
  EXPECT_THAT(dot, HasSubstr("label=\"ocs\\\"1\\npolatis <7000>\""));
  EXPECT_THAT(dot, HasSubstr("\"onic:n\\\"0\" [label=\"n\\\"0\"];"));
  EXPECT_THAT(dot, HasSubstr("subgraph \"cluster_device_2\" {\n        label=\"gpu\\\\1 (gpu)\""));
  EXPECT_THAT(dot, HasSubstr("label=\"pool & co\""));
}

}  // namespace
}  // namespace fleet::cli
