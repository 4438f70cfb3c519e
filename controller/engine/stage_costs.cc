#include "controller/engine/stage_costs.h"

#include <algorithm>

#include "common/proto_time.h"

namespace fleet::engine {

void StageCosts::Record(const std::string& stage, absl::Duration took) {
  const auto it = std::find(kStages.begin(), kStages.end(), stage);
  if (it == kStages.end()) return;
  absl::MutexLock lock(&mu_);
  std::deque<absl::Duration>& kept = kept_[it - kStages.begin()];
  kept.push_back(took);
  if (kept.size() > kWindow) kept.pop_front();
}

std::vector<v1::StageCost> StageCosts::Recent() const {
  std::array<std::vector<absl::Duration>, kStages.size()> sorted;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < kStages.size(); ++i) sorted[i].assign(kept_[i].begin(), kept_[i].end());
  }
  std::vector<v1::StageCost> out;
  for (size_t i = 0; i < kStages.size(); ++i) {
    v1::StageCost& cost = out.emplace_back();
    cost.set_stage(kStages[i]);
    std::vector<absl::Duration>& d = sorted[i];
    cost.set_samples(d.size());
    if (d.empty()) continue;
    std::sort(d.begin(), d.end());
    // Nearest rank: the smallest kept duration at or above the share.
    auto at = [&](size_t percent) { return d[(d.size() * percent + 99) / 100 - 1]; };
    *cost.mutable_median() = ToProtoDuration(at(50));
    *cost.mutable_p90() = ToProtoDuration(at(90));
  }
  return out;
}

}  // namespace fleet::engine
