// Traffic-aware planning against exhaustive search: on every small case tried (up to 8
// members, seeded random matrices), the links chosen carry at least 95% of the optimum.
#include "scheduler/traffic_matching.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "scheduler/planner.h"
#include "tests/scheduler/plan_checks.h"
#include "tests/scheduler/synthetic_site.h"

namespace fleet::scheduler::testing {
namespace {

using Weights = std::vector<std::vector<double>>;

// The optimum by depth-first search over the pairs, heaviest first, pruned by the weight
// still available.
double ExhaustiveBest(const Weights& w, const std::vector<int>& capacity) {
  const int n = capacity.size();
  std::vector<std::tuple<double, int, int>> pairs;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      if (w[i][j] > 0) pairs.push_back({w[i][j], i, j});
    }
  }
  std::sort(pairs.rbegin(), pairs.rend());
  std::vector<double> rest(pairs.size() + 1, 0);
  for (int k = pairs.size() - 1; k >= 0; --k) rest[k] = rest[k + 1] + std::get<0>(pairs[k]);
  std::vector<int> left = capacity;
  double best = 0;
  std::function<void(size_t, double)> search = [&](size_t k, double carried) {
    best = std::max(best, carried);
    if (k == pairs.size() || carried + rest[k] <= best) return;
    auto [weight, i, j] = pairs[k];
    if (left[i] > 0 && left[j] > 0) {
      --left[i], --left[j];
      search(k + 1, carried + weight);
      ++left[i], ++left[j];
    }
    search(k + 1, carried);
  };
  search(0, 0);
  return best;
}

// Skewed like training traffic: a few heavy pairs, many light ones, some none.
Weights RandomWeights(std::mt19937& rng, int n) {
  std::uniform_real_distribution<double> unit(0, 1);
  const double density = 0.3 + 0.7 * unit(rng);
  Weights w(n, std::vector<double>(n, 0));
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      if (unit(rng) > density) continue;
      const double bytes = unit(rng) < 0.5 ? std::exp(8 * unit(rng)) : 1 + 10 * unit(rng);
      w[i][j] = w[j][i] = std::round(bytes);
    }
  }
  return w;
}

TEST(TrafficMatchingTest, WithinFivePercentOfExhaustiveSearchOnRandomSmallCases) {
  std::mt19937 rng(1234);
  int cases = 0, optimal = 0;
  double worst = 1;
  for (int k = 0; k < 5000; ++k) {
    const int n = std::uniform_int_distribution<int>(2, 8)(rng);
    std::vector<int> capacity(n);
    for (int& c : capacity) c = std::uniform_int_distribution<int>(1, 4)(rng);
    const Weights w = RandomWeights(rng, n);
    const double best = ExhaustiveBest(w, capacity);
    const Matching m = MaxWeightBMatching(w, capacity);
    ++cases;
    SCOPED_TRACE(absl::StrCat("case ", k, ", ", n, " members"));
    // Legal: degree limits, no pair twice, no pair without traffic, weight as claimed.
    std::vector<int> degree(n, 0);
    std::set<std::pair<int, int>> seen;
    double carried = 0;
    for (auto [i, j] : m.links) {
      ASSERT_LT(i, j);
      EXPECT_TRUE(seen.insert({i, j}).second);
      EXPECT_GT(w[i][j], 0);
      ++degree[i], ++degree[j];
      carried += w[i][j];
    }
    for (int i = 0; i < n; ++i) EXPECT_LE(degree[i], capacity[i]);
    EXPECT_DOUBLE_EQ(carried, m.weight);
    EXPECT_LE(m.weight, best + 1e-6);
    if (best > 0) {
      EXPECT_GE(m.weight, 0.95 * best) << "optimum " << best;
      worst = std::min(worst, m.weight / best);
      optimal += m.weight >= best - 1e-6;
    }
  }
  RecordProperty("cases", cases);
  RecordProperty("optimal", optimal);
  RecordProperty("worst_ratio", absl::StrCat(worst));
  std::printf("%d cases, %d optimal, worst %.4f of the optimum\n", cases, optimal, worst);
}

TEST(TrafficMatchingTest, HeavyPairsWinOverGreedyTraps) {
  // Greedy takes 1-2 (10) and then cannot use 0-1 and 2-3 (9 each); local search can.
  Weights w(4, std::vector<double>(4, 0));
  auto set = [&](int i, int j, double v) { w[i][j] = w[j][i] = v; };
  set(1, 2, 10);
  set(0, 1, 9);
  set(2, 3, 9);
  const Matching m = MaxWeightBMatching(w, {1, 1, 1, 1});
  EXPECT_EQ(m.weight, 18);
  EXPECT_THAT(m.links, ::testing::ElementsAre(std::pair{0, 1}, std::pair{2, 3}));
}

TEST(TrafficPlanTest, PlansAreLegalAndReportTheShareOnDirectLinks) {
  std::mt19937 rng(55);
  const v1::Inventory site = SyntheticSite({{"", 4, 8, 2, 0}});
  const FabricSnapshot snapshot = FabricSnapshot::Build(site, AllPorts(site), {}, {});
  std::vector<std::string> devices;
  for (const v1::Device& d : site.devices()) devices.push_back(d.id());
  for (int k = 0; k < 300; ++k) {
    std::shuffle(devices.begin(), devices.end(), rng);
    const int n = std::uniform_int_distribution<int>(2, 8)(rng);
    v1::TopologySpec spec;
    const Weights w = RandomWeights(rng, n);
    std::vector<int> capacity;
    double total = 0;
    for (int i = 0; i < n; ++i) {
      spec.mutable_traffic()->mutable_members()->add_devices(devices[i]);
      capacity.push_back(snapshot.DevicePorts(devices[i]).size());
      for (int j = i + 1; j < n; ++j) {
        if (w[i][j] == 0) continue;
        // Split each pair's bytes over both directions.
        v1::TrafficEntry* e = spec.mutable_traffic()->add_matrix();
        e->set_source(j);
        e->set_destination(i);
        e->set_bytes(w[i][j] / 2);
        e = spec.mutable_traffic()->add_matrix();
        e->set_source(i);
        e->set_destination(j);
        e->set_bytes(w[i][j] / 2);
        total += w[i][j];
      }
    }
    absl::StatusOr<v1::Plan> plan = PlanTopology(snapshot, {"a", spec});
    if (total == 0) {
      EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectLegal(*plan, snapshot);
    ExpectDuplexPorts(*plan, snapshot);
    const std::vector<std::string> members(devices.begin(), devices.begin() + n);
    double direct = 0;
    const auto arcs = MemberArcs(*plan, snapshot, members);
    for (auto [a, b] : arcs) {
      if (a < b) direct += w[a][b];
    }
    EXPECT_NEAR(plan->direct_traffic_share(), direct / total, 1e-9);
    EXPECT_GE(direct, 0.95 * ExhaustiveBest(w, capacity));
  }
}

}  // namespace
}  // namespace fleet::scheduler::testing
