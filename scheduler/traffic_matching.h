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
// Not guaranteed optimal (exact max-weight b-matching needs blossoms); in practice within a
// few percent, and every local move below is exact:
//   1. greedy: pairs by descending weight, each taken while both ends have a free port;
//   2. local search until no move gains: for a pair not linked, make room at each full end
//      by dropping one of its links (each choice tried), link the pair, then give each
//      freed member its best pair whose other end has room (an augmenting path of up to
//      five links); and 2-opt: two links (a,b),(c,d) exchanged for (a,c),(b,d) or (a,d),(b,c).
// Deterministic: ties break by member index. Time per local-search pass is about
// O(n² · b² + m²) for n members, b = max capacity and m links; a few passes in practice.
Matching MaxWeightBMatching(const std::vector<std::vector<double>>& weight,
                            const std::vector<int>& capacity);

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_TRAFFIC_MATCHING_H_
