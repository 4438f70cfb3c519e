#include "controller/store/recent_commits.h"

#include <algorithm>
#include <utility>

namespace fleet::store {

RecentCommits::RecentCommits(uint64_t last_sequence)
    : last_sequence_(last_sequence), floor_(last_sequence) {}

void RecentCommits::Publish(uint64_t sequence,
                            std::map<std::string, std::shared_ptr<const v1::Allocation>> images) {
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, image] : images) commits_.push_back({sequence, id, std::move(image)});
    while (commits_.size() > kKept) {
      floor_ = commits_.front().sequence;
      commits_.pop_front();
    }
    last_sequence_ = std::max(last_sequence_, sequence);
  }
  absl::MutexLock lock(&listener_mu_);
  if (listener_) listener_();
}

void RecentCommits::SetListener(std::function<void()> listener) {
  absl::MutexLock lock(&listener_mu_);
  listener_ = std::move(listener);
}

uint64_t RecentCommits::LastSequence() {
  absl::MutexLock lock(&mu_);
  return last_sequence_;
}

bool RecentCommits::WaitForNewer(uint64_t after_sequence, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto newer = [this, after_sequence]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return last_sequence_ > after_sequence; };
  return mu_.AwaitWithDeadline(absl::Condition(&newer), deadline);
}

std::optional<std::vector<AllocationCommit>> RecentCommits::After(uint64_t after) {
  absl::MutexLock lock(&mu_);
  if (after < floor_) return std::nullopt;
  auto first = std::upper_bound(
      commits_.begin(), commits_.end(), after,
      [](uint64_t sequence, const AllocationCommit& c) { return sequence < c.sequence; });
  return std::vector<AllocationCommit>(first, commits_.end());
}

std::optional<AllocationCommit> RecentCommits::Last(const std::string& id) {
  absl::MutexLock lock(&mu_);
  for (auto it = commits_.rbegin(); it != commits_.rend(); ++it) {
    if (it->id == id) return *it;
  }
  return std::nullopt;
}

}  // namespace fleet::store
