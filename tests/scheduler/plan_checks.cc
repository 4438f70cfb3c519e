#include "tests/scheduler/plan_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace fleet::scheduler::testing {
namespace {

std::string PortKey(const v1::OnicPortRef& ref) {
  return absl::StrCat(ref.onic(), "/", ref.port());
}

int IndexOf(const std::vector<std::string>& members, const std::string& device) {
  auto it = std::find(members.begin(), members.end(), device);
  EXPECT_NE(it, members.end()) << device << " is not a member";
  return it - members.begin();
}

}  // namespace

void ExpectLegal(const v1::Plan& plan, const FabricSnapshot& snapshot, uint32_t max_switch_hops) {
  std::set<std::string> ingresses, egresses, txs, rxs, ports, trunks;
  const std::set<std::string> members(plan.members().begin(), plan.members().end());
  int added = 0;
  for (int i = 0; i < plan.circuits_size(); ++i) {
    const v1::Circuit& c = plan.circuits(i);
    ASSERT_GE(c.cross_connects_size(), 1);
    EXPECT_LE(c.cross_connects_size(), static_cast<int>(max_switch_hops)) << "hop bound";
    ASSERT_EQ(c.trunks_size(), c.cross_connects_size() - 1);
    EXPECT_EQ(c.state(), v1::CIRCUIT_STATE_PLANNED);
    const OnicPortState* src = snapshot.Port(c.source().onic(), c.source().port());
    const OnicPortState* dst = snapshot.Port(c.destination().onic(), c.destination().port());
    ASSERT_NE(src, nullptr);
    ASSERT_NE(dst, nullptr);
    const v1::CrossConnect& first = c.cross_connects(0);
    const v1::CrossConnect& last = *c.cross_connects().rbegin();
    EXPECT_EQ(first.switch_id(), src->tx.switch_id());
    EXPECT_EQ(first.ingress(), src->tx.port());
    EXPECT_EQ(last.switch_id(), dst->rx.switch_id());
    EXPECT_EQ(last.egress(), dst->rx.port());
    for (int k = 0; k < c.cross_connects_size(); ++k) {
      const v1::CrossConnect& x = c.cross_connects(k);
      ASSERT_LT(added, plan.add_size());
      EXPECT_EQ(plan.add(added++).SerializeAsString(), x.SerializeAsString());
      EXPECT_TRUE(ingresses.insert(absl::StrCat(x.switch_id(), "/", x.ingress())).second);
      EXPECT_TRUE(egresses.insert(absl::StrCat(x.switch_id(), "/", x.egress())).second);
      if (k + 1 == c.cross_connects_size()) break;
      const v1::CrossConnect& next = c.cross_connects(k + 1);
      const TrunkState* trunk = nullptr;
      for (const TrunkState* t : snapshot.Trunks(x.switch_id(), next.switch_id())) {
        if (t->id == c.trunks(k)) trunk = t;
      }
      ASSERT_NE(trunk, nullptr) << c.trunks(k) << " is not a trunk " << x.switch_id() << "->"
                                << next.switch_id();
      EXPECT_EQ(trunk->from.port(), x.egress()) << trunk->id;
      EXPECT_EQ(trunk->to.port(), next.ingress()) << trunk->id;
      EXPECT_TRUE(trunk->unusable.empty() && trunk->holder.empty()) << trunk->id << " not free";
      EXPECT_TRUE(trunks.insert(trunk->id).second) << trunk->id << " used twice";
    }
    EXPECT_NE(src->device, dst->device) << "a circuit from a device to itself";
    EXPECT_TRUE(src->unusable.empty() && src->tx_holder.empty()) << PortKey(c.source());
    EXPECT_TRUE(dst->unusable.empty() && dst->rx_holder.empty()) << PortKey(c.destination());
    EXPECT_TRUE(txs.insert(PortKey(c.source())).second) << "tx used twice";
    EXPECT_TRUE(rxs.insert(PortKey(c.destination())).second) << "rx used twice";
    ports.insert(PortKey(c.source()));
    ports.insert(PortKey(c.destination()));
    EXPECT_TRUE(members.contains(src->device)) << src->device;
    EXPECT_TRUE(members.contains(dst->device)) << dst->device;
  }
  EXPECT_EQ(added, plan.add_size());
  std::set<std::string> listed;
  for (const v1::OnicPortRef& ref : plan.ports_used()) listed.insert(PortKey(ref));
  EXPECT_EQ(listed, ports);
  EXPECT_EQ(listed.size(), static_cast<size_t>(plan.ports_used_size()));
  EXPECT_EQ(members.size(), static_cast<size_t>(plan.members_size())) << "a member listed twice";
}

std::vector<std::pair<int, int>> MemberArcs(const v1::Plan& plan, const FabricSnapshot& snapshot,
                                            const std::vector<std::string>& members) {
  std::vector<std::pair<int, int>> arcs;
  for (const v1::Circuit& c : plan.circuits()) {
    const OnicPortState* src = snapshot.Port(c.source().onic(), c.source().port());
    const OnicPortState* dst = snapshot.Port(c.destination().onic(), c.destination().port());
    if (src == nullptr || dst == nullptr) continue;
    arcs.push_back({IndexOf(members, src->device), IndexOf(members, dst->device)});
  }
  std::sort(arcs.begin(), arcs.end());
  return arcs;
}

std::map<int, int> PortsPerMember(const v1::Plan& plan, const FabricSnapshot& snapshot,
                                  const std::vector<std::string>& members) {
  std::map<int, std::set<std::string>> ports;
  for (const v1::OnicPortRef& ref : plan.ports_used()) {
    const OnicPortState* st = snapshot.Port(ref.onic(), ref.port());
    if (st != nullptr) ports[IndexOf(members, st->device)].insert(PortKey(ref));
  }
  std::map<int, int> out;
  for (const auto& [member, set] : ports) out[member] = set.size();
  return out;
}

void ExpectDuplexPorts(const v1::Plan& plan, const FabricSnapshot& snapshot) {
  std::map<std::string, std::string> sends_to, hears_from;  // Port → peer device.
  for (const v1::Circuit& c : plan.circuits()) {
    sends_to[PortKey(c.source())] =
        snapshot.Port(c.destination().onic(), c.destination().port())->device;
    hears_from[PortKey(c.destination())] =
        snapshot.Port(c.source().onic(), c.source().port())->device;
  }
  EXPECT_EQ(sends_to, hears_from);
}

}  // namespace fleet::scheduler::testing
