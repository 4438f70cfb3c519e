#include "scheduler/traffic_matching.h"

#include <algorithm>
#include <tuple>

namespace fleet::scheduler {
namespace {

// The links chosen so far, with a journal so a tentative move can be undone.
class LinkSet {
 public:
  LinkSet(const std::vector<std::vector<double>>& weight, const std::vector<int>& capacity)
      : w_(weight),
        capacity_(capacity),
        n_(static_cast<int>(capacity.size())),
        linked_(n_ * n_, false),
        partners_(n_),
        best_(n_, 0),
        by_weight_(n_) {
    for (int i = 0; i < n_; ++i) {
      for (int j = 0; j < n_; ++j) {
        if (i == j || w_[i][j] <= 0) continue;
        best_[i] = std::max(best_[i], w_[i][j]);
        by_weight_[i].push_back(j);
      }
      std::stable_sort(by_weight_[i].begin(), by_weight_[i].end(),
                       [&](int a, int b) { return w_[i][a] > w_[i][b]; });
      // A member's links in a good matching are among its heaviest pairs: the search looks
      // at a few times its capacity of them, which keeps large member sets fast.
      by_weight_[i].resize(std::min<size_t>(by_weight_[i].size(), 4 * capacity_[i] + 4));
    }
  }

  int size() const { return n_; }
  double w(int a, int b) const { return w_[a][b]; }
  // The heaviest pair member i is in, linked or not (0 for none): what linking it can gain.
  double best(int i) const { return i < 0 ? 0 : best_[i]; }
  // The members i has the most traffic with, heaviest first (the search's candidates).
  const std::vector<int>& by_weight(int i) const { return by_weight_[i]; }
  bool linked(int a, int b) const { return linked_[a * n_ + b]; }
  bool Full(int i) const { return static_cast<int>(partners_[i].size()) >= capacity_[i]; }
  const std::vector<int>& partners(int i) const { return partners_[i]; }

  void Add(int a, int b) {
    Set(a, b, true);
    journal_.push_back({a, b, true});
  }
  void Remove(int a, int b) {
    Set(a, b, false);
    journal_.push_back({a, b, false});
  }
  // Changes since the last Commit can be rolled back to a mark.
  size_t Mark() const { return journal_.size(); }
  void RollbackTo(size_t mark) {
    while (journal_.size() > mark) {
      Set(journal_.back().a, journal_.back().b, !journal_.back().added);
      journal_.pop_back();
    }
  }
  void Commit() { journal_.clear(); }

  // Links member i to its heaviest candidate that has room; the weight gained.
  double Refill(int i) {
    if (i < 0) return 0;
    for (int j : by_weight_[i]) {
      if (Full(i)) return 0;
      if (!linked(i, j) && !Full(j)) {
        Add(i, j);
        return w_[i][j];
      }
    }
    return 0;
  }

 private:
  struct Change {
    int a, b;
    bool added;
  };
  void Set(int a, int b, bool on) {
    linked_[a * n_ + b] = linked_[b * n_ + a] = on;
    for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
      std::vector<int>& p = partners_[x];
      if (on) {
        p.push_back(y);
      } else {
        p.erase(std::find(p.begin(), p.end(), y));
      }
    }
  }

  const std::vector<std::vector<double>>& w_;
  const std::vector<int>& capacity_;
  const int n_;
  std::vector<bool> linked_;
  std::vector<std::vector<int>> partners_;
  std::vector<double> best_;
  std::vector<std::vector<int>> by_weight_;
  std::vector<Change> journal_;
};

// Continues an alternating path from member i, which has a free port, and then from member
// `then` (-1 for none): leaves i's port free, or links i to a member j with room, or takes a
// port of a full member j by dropping one of j's links (up to `depth` times along the path)
// and continues from the member that dropped. Keeps the first path whose total gain exceeds
// eps and answers true; otherwise leaves everything as it was.
bool Extend(LinkSet& s, int i, int then, double gain, int depth, double eps) {
  if (i < 0) return then < 0 ? gain > eps : Extend(s, then, -1, gain, depth, eps);
  if (Extend(s, -1, then, gain, depth, eps)) return true;
  if (s.Full(i)) return false;  // Filled meanwhile, by a link from the other open end.
  // An optimistic bound: the next link at each open end is as heavy as any there.
  const double rest = s.best(then);
  for (int j : s.by_weight(i)) {
    const double w = s.w(i, j);
    if (gain + w + rest + (depth > 0 ? s.best(j) : 0) <= eps) break;  // Lighter ones follow.
    if (s.linked(i, j)) continue;
    const size_t mark = s.Mark();
    if (!s.Full(j)) {
      s.Add(i, j);
      if (Extend(s, -1, then, gain + w, depth, eps)) return true;
      s.RollbackTo(mark);
      continue;
    }
    if (depth == 0) continue;
    const std::vector<int> partners = s.partners(j);
    for (int q : partners) {
      const double after = gain + w - s.w(j, q);
      if (q == then || after + s.best(q) + rest <= eps) continue;
      s.Remove(j, q);
      s.Add(i, j);
      if (Extend(s, q, then, after, depth - 1, eps)) return true;
      s.RollbackTo(mark);
    }
  }
  return false;
}

// Links pair (u, v), making room at a full end by dropping one of its links (each choice
// tried), then extends from the members that dropped.
bool TryPair(LinkSet& s, int u, int v, int depth, double eps) {
  const std::vector<int> none = {-1};
  const std::vector<int> drop_u = s.Full(u) ? s.partners(u) : none;
  const std::vector<int> drop_v = s.Full(v) ? s.partners(v) : none;
  for (int x : drop_u) {
    for (int y : drop_v) {
      const double base = s.w(u, v) - (x >= 0 ? s.w(u, x) : 0) - (y >= 0 ? s.w(v, y) : 0);
      if (base + s.best(x) + s.best(y) <= eps) continue;
      if (x >= 0) s.Remove(u, x);
      if (y >= 0) s.Remove(v, y);
      s.Add(u, v);
      // Without depth, each freed member just takes its heaviest pair with room.
      const bool gained =
          depth == 0 ? base + s.Refill(x) + s.Refill(y) > eps : Extend(s, x, y, base, depth, eps);
      if (gained) {
        s.Commit();
        return true;
      }
      s.RollbackTo(0);
    }
  }
  return false;
}

// Exchanges the ends of two links where that carries more; degrees do not change.
bool TwoOpt(LinkSet& s, double eps) {
  std::vector<std::pair<int, int>> links;
  for (int a = 0; a < s.size(); ++a) {
    for (int b : s.partners(a)) {
      if (a < b) links.push_back({a, b});
    }
  }
  std::sort(links.begin(), links.end());
  bool improved = false;
  for (size_t i = 0; i < links.size(); ++i) {
    for (size_t j = i + 1; j < links.size(); ++j) {
      auto [a, b] = links[i];
      auto [c, d] = links[j];
      if (a == c || a == d || b == c || b == d) continue;
      const double old = s.w(a, b) + s.w(c, d);
      for (auto [p, q] : {std::pair{c, d}, std::pair{d, c}}) {
        // (a,b),(c,d) → (a,p),(b,q)
        if (s.linked(a, p) || s.linked(b, q) || s.w(a, p) <= 0 || s.w(b, q) <= 0) continue;
        if (s.w(a, p) + s.w(b, q) - old <= eps) continue;
        s.Remove(a, b);
        s.Remove(c, d);
        s.Add(a, p);
        s.Add(b, q);
        s.Commit();
        links[i] = std::minmax(a, p);
        links[j] = std::minmax(b, q);
        improved = true;
        break;
      }
    }
  }
  return improved;
}

}  // namespace

Matching MaxWeightBMatching(const std::vector<std::vector<double>>& weight,
                            const std::vector<int>& capacity) {
  LinkSet s(weight, capacity);
  const int n = s.size();
  std::vector<std::tuple<double, int, int>> pairs;  // (-weight, i, j): heaviest first.
  double total = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      if (weight[i][j] > 0) {
        pairs.push_back({-weight[i][j], i, j});
        total += weight[i][j];
      }
    }
  }
  std::sort(pairs.begin(), pairs.end());
  for (auto [neg, i, j] : pairs) {
    if (!s.Full(i) && !s.Full(j)) s.Add(i, j);
  }
  s.Commit();
  // The local search looks at pairs among either end's candidates.
  std::vector<std::tuple<double, int, int>> candidates;
  for (int i = 0; i < n; ++i) {
    for (int j : s.by_weight(i)) {
      if (i < j ||
          std::find(s.by_weight(j).begin(), s.by_weight(j).end(), i) == s.by_weight(j).end()) {
        candidates.push_back({-weight[i][j], std::min(i, j), std::max(i, j)});
      }
    }
  }
  std::sort(candidates.begin(), candidates.end());
  // Gains smaller than this are rounding, not improvement; it also bounds the passes.
  const double eps = total * 1e-12;
  // How many links an alternating path may take from full members: deeper finds more and
  // costs more, so large member sets search shallower.
  const int depth = n <= 16 ? 3 : n <= 24 ? 1 : 0;
  for (int pass = 0; pass < 100; ++pass) {
    bool improved = false;
    for (auto [neg, i, j] : candidates) {
      if (!s.linked(i, j) && TryPair(s, i, j, depth, eps)) improved = true;
    }
    if (TwoOpt(s, eps)) improved = true;
    if (!improved) break;
  }
  Matching m;
  for (int i = 0; i < n; ++i) {
    for (int j : s.partners(i)) {
      if (i < j) {
        m.links.push_back({i, j});
        m.weight += weight[i][j];
      }
    }
  }
  std::sort(m.links.begin(), m.links.end());
  return m;
}

}  // namespace fleet::scheduler
