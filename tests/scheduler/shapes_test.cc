#include "scheduler/shapes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace fleet::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

v1::TemplateSpec Torus(std::vector<uint32_t> dims) {
  v1::TemplateSpec t;
  t.set_kind(dims.size() == 2 ? v1::TEMPLATE_KIND_TORUS_2D : v1::TEMPLATE_KIND_TORUS_3D);
  for (uint32_t d : dims) t.add_dimensions(d);
  return t;
}

TEST(ShapesTest, ATorusDimensionOfTwoIsOneLinkNotTwo) {
  // 2x2: a square, four duplex links; every member has two neighbours, one per dimension.
  absl::StatusOr<std::vector<Arc>> square = TemplateArcs(Torus({2, 2}), 4, 0);
  ASSERT_TRUE(square.ok()) << square.status();
  EXPECT_THAT(*square, SizeIs(8));
  // 3x2: each member has 2 links along x and 1 along y: 9 links.
  EXPECT_THAT(*TemplateArcs(Torus({3, 2}), 6, 0), SizeIs(18));
  // 4x4x4: six neighbours each, 64*6/2 links.
  EXPECT_THAT(*TemplateArcs(Torus({4, 4, 4}), 64, 0), SizeIs(2 * 192));
  EXPECT_THAT(std::string(TemplateArcs(Torus({2, 2}), 5, 0).status().message()),
              HasSubstr("2x2 is 4 positions for 5 members"));
  v1::TemplateSpec flat = Torus({4});
  flat.set_kind(v1::TEMPLATE_KIND_TORUS_2D);
  EXPECT_THAT(std::string(TemplateArcs(flat, 4, 0).status().message()),
              HasSubstr("a 2-D torus needs 2 dimensions, got 1"));
}

TEST(ShapesTest, TreeIsHeapOrderedWithFanout) {
  v1::TemplateSpec t;
  t.set_kind(v1::TEMPLATE_KIND_TREE);
  t.set_fanout(3);
  EXPECT_THAT(*TemplateArcs(t, 5, 0), ElementsAre(Arc{0, 1}, Arc{0, 2}, Arc{0, 3}, Arc{1, 4}));
  t.set_reverse(true);
  EXPECT_THAT(*TemplateArcs(t, 3, 0), ElementsAre(Arc{1, 0}, Arc{2, 0}));
}

TEST(ShapesTest, ChainStarAndWidth) {
  v1::TemplateSpec chain;
  chain.set_kind(v1::TEMPLATE_KIND_CHAIN);
  chain.set_reverse(true);
  EXPECT_THAT(*TemplateArcs(chain, 3, 0), ElementsAre(Arc{1, 0}, Arc{2, 1}));
  v1::TemplateSpec star;
  star.set_kind(v1::TEMPLATE_KIND_STAR);
  star.set_duplex(true);
  star.set_width(2);
  EXPECT_THAT(*TemplateArcs(star, 2, 1), ElementsAre(Arc{1, 0}, Arc{0, 1}, Arc{1, 0}, Arc{0, 1}));
}

TEST(ShapesTest, AllToAllRoundsAreOptimalForEachPortCount) {
  for (int n = 2; n <= 40; ++n) {
    for (int ports = 1; ports <= 7; ++ports) {
      const std::vector<std::vector<Arc>> rounds = AllToAllRounds(n, ports);
      EXPECT_EQ(static_cast<int>(rounds.size()), (n - 1 + ports - 1) / ports) << n << " " << ports;
      std::set<std::pair<int, int>> pairs;
      for (const std::vector<Arc>& round : rounds) {
        std::vector<int> out(n), in(n);
        for (const Arc& a : round) {
          EXPECT_NE(a.from, a.to);
          EXPECT_TRUE(pairs.insert({a.from, a.to}).second);
          ++out[a.from];
          ++in[a.to];
        }
        for (int i = 0; i < n; ++i) {
          EXPECT_LE(out[i], ports);
          EXPECT_LE(in[i], ports);
        }
        // Each round's arcs fit in `ports` ports per member once paired.
        for (const auto& slots : MemberSlots(n, round))
          EXPECT_LE(static_cast<int>(slots.size()), ports);
      }
      EXPECT_EQ(static_cast<int>(pairs.size()), n * (n - 1));
    }
  }
}

TEST(ShapesTest, AllToAllRoundsPairShiftsIntoDuplexPorts) {
  // Six members, two ports: shifts {1, 5} and {2, 4} pair up; {3} is its own complement.
  const std::vector<std::vector<Arc>> rounds = AllToAllRounds(6, 2);
  ASSERT_THAT(rounds, SizeIs(3));
  for (const auto& round : rounds) {
    for (const auto& slots : MemberSlots(6, round)) {
      for (const PortSlot& s : slots) {
        ASSERT_GE(s.out, 0);
        ASSERT_GE(s.in, 0);
        EXPECT_EQ(round[s.out].to, round[s.in].from) << "a port sends to and hears one peer";
      }
    }
  }
}

TEST(ShapesTest, SlotsPairAPortsTxAndRxWithTheSamePeerFirst) {
  // Member 0 sends to 1 and 2, hears 2 then 1: pairs 0→1 with 1→0 and 0→2 with 2→0.
  const std::vector<Arc> arcs = {{0, 1}, {0, 2}, {2, 0}, {1, 0}};
  const auto slots = MemberSlots(3, arcs);
  ASSERT_THAT(slots[0], SizeIs(2));
  EXPECT_EQ(slots[0][0].out, 0);
  EXPECT_EQ(slots[0][0].in, 3);
  EXPECT_EQ(slots[0][1].out, 1);
  EXPECT_EQ(slots[0][1].in, 2);
  // A unidirectional ring member hears its predecessor on the port that sends onwards.
  const auto ring = MemberSlots(3, {{0, 1}, {1, 2}, {2, 0}});
  EXPECT_EQ(ring[1][0].out, 1);
  EXPECT_EQ(ring[1][0].in, 0);
}

}  // namespace
}  // namespace fleet::scheduler
