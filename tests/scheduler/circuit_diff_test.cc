#include "scheduler/circuit_diff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "absl/strings/str_cat.h"

namespace fleet::scheduler {
namespace {

v1::Circuit Path(const std::string& from, const std::string& to, uint32_t ingress,
                 uint32_t egress) {
  v1::Circuit c;
  c.mutable_source()->set_onic(from);
  c.mutable_source()->set_port(1);
  c.mutable_destination()->set_onic(to);
  c.mutable_destination()->set_port(1);
  v1::CrossConnect* x = c.add_cross_connects();
  x->set_switch_id("ocs1");
  x->set_ingress(ingress);
  x->set_egress(egress);
  return c;
}

TEST(CircuitDiffTest, KeepsCircuitsAlreadyRightAndChangesOnlyTheRest) {
  v1::Circuit ab = Path("a", "b", 1, 386), bc = Path("b", "c", 2, 387), ca = Path("c", "a", 3, 385);
  std::vector<v1::Circuit> current = {ab, bc};
  current[0].set_id("alloc-c1");
  current[0].set_state(v1::CIRCUIT_STATE_ACTIVE);
  current[1].set_id("alloc-c2");
  v1::Circuit desired_ab = ab;
  desired_ab.set_phase("round-2");  // Phase and state do not make a circuit different.
  const CircuitDiff diff = DiffCircuits(current, {ca, desired_ab});
  ASSERT_EQ(diff.kept.size(), 1u);
  EXPECT_EQ(diff.kept[0].id(), "alloc-c1");  // The current copy, with its id and state.
  EXPECT_EQ(diff.kept[0].state(), v1::CIRCUIT_STATE_ACTIVE);
  ASSERT_EQ(diff.remove.size(), 1u);
  EXPECT_EQ(diff.remove[0].id(), "alloc-c2");
  ASSERT_EQ(diff.add.size(), 1u);
  EXPECT_EQ(diff.add[0].destination().onic(), "a");
  // Same ends, another cross-connect: not the same circuit.
  const CircuitDiff moved = DiffCircuits({ab}, {Path("a", "b", 1, 390)});
  EXPECT_EQ(moved.kept.size(), 0u);
  EXPECT_EQ(moved.remove.size(), 1u);
  EXPECT_EQ(moved.add.size(), 1u);
  // Re-planning the same circuits changes nothing.
  const CircuitDiff same = DiffCircuits(current, {bc, ab});
  EXPECT_TRUE(same.add.empty() && same.remove.empty());
  EXPECT_EQ(same.kept.size(), 2u);
}

TEST(CircuitDiffTest, RandomDiffsPartitionBothSidesAsMultisets) {
  std::mt19937 rng(3);
  std::vector<v1::Circuit> pool;
  for (uint32_t i = 0; i < 12; ++i)
    pool.push_back(Path(absl::StrCat("n", i % 4), "m", i, 400 + i % 5));
  auto key = [](const v1::Circuit& c) { return c.cross_connects(0).ShortDebugString(); };
  for (int k = 0; k < 2000; ++k) {
    std::vector<v1::Circuit> current, desired;
    std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
    for (int i = std::uniform_int_distribution<int>(0, 8)(rng); i > 0; --i)
      current.push_back(pool[pick(rng)]);
    for (int i = std::uniform_int_distribution<int>(0, 8)(rng); i > 0; --i)
      desired.push_back(pool[pick(rng)]);
    const CircuitDiff diff = DiffCircuits(current, desired);
    std::map<std::string, int> cur, des, kept_rem, kept_add;
    for (const auto& c : current) ++cur[key(c)];
    for (const auto& c : desired) ++des[key(c)];
    for (const auto& c : diff.kept) ++kept_rem[key(c)], ++kept_add[key(c)];
    for (const auto& c : diff.remove) ++kept_rem[key(c)];
    for (const auto& c : diff.add) ++kept_add[key(c)];
    EXPECT_EQ(kept_rem, cur);
    EXPECT_EQ(kept_add, des);
    // As much kept as the two sides have in common.
    size_t common = 0;
    for (const auto& [path, times] : cur) common += std::min(times, des[path]);
    EXPECT_EQ(diff.kept.size(), common);
  }
}

}  // namespace
}  // namespace fleet::scheduler
