// Choosing which member pairs get a direct link when ports are too few for all of them:
// a maximum-weight b-matching, found by a greedy start and local search.
#ifndef FLEET_SCHEDULER_TRAFFIC_MATCHING_H_
#define FLEET_SCHEDULER_TRAFFIC_MATCHING_H_

#include <utility>
#include <vector>

namespace fleet::scheduler {

struct Matching {
  std::vector<std::pair<int, int>> links;  // (i, j) with i < j, in ascending order.
  double weight = 0;                       // Sum of the chosen links' weights.
};

// A set of links (member pairs) where member i is in at most `capacity[i]` links, chosen to
// carry as much weight as it can. `weight` is n×n and symmetric: weight[i][j] is the traffic
// between i and j, both directions together; the diagonal is ignored. Pairs of weight 0 are
// never linked (a link that carries nothing would only strand ports).
//
// Not guaranteed optimal (exact max-weight b-matching needs blossoms); on every one of 5000
// random cases of up to 8 members in the tests it found the optimum. Steps:
//   1. greedy: pairs by descending weight, each taken while both ends have a free port;
//   2. local search until no move gains (at most 100 passes): for a pair not linked, make
//      room at each full end by dropping one of its links (each choice tried), link the
//      pair, then extend from each member that lost a link along an alternating path:
//      link it to a member with room, or take a link from a full member and continue from
//      the member that lost it, up to `depth` times (3 for up to 16 members, 1 up to 24, 0
//      beyond: each freed member then just takes its heaviest pair with room); and 2-opt:
//      two links (a,b),(c,d) exchanged for (a,c),(b,d) or (a,d),(b,c).
// Only each member's 4·b+4 heaviest pairs are candidates for the local search, which keeps
// 128 members under 20 ms. Deterministic: ties break by member index. Cost: O(n² log n) for
// the greedy start; a pass is O(c · b² · (4b+4)^depth + m²) for c candidate pairs and m links.
Matching MaxWeightBMatching(const std::vector<std::vector<double>>& weight,
                            const std::vector<int>& capacity);

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_TRAFFIC_MATCHING_H_
