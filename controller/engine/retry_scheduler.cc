#include "controller/engine/retry_scheduler.h"

#include <algorithm>

namespace fleet::engine {

void RetryScheduler::ScheduleAt(const std::string& id, absl::Time due) {
  absl::MutexLock lock(&mu_);
  retries_[id] = Retry{.due = due, .backoff = initial_};
}

void RetryScheduler::Backoff(const std::string& id) {
  {
    absl::MutexLock lock(&mu_);
    auto [it, fresh] = retries_.try_emplace(id, Retry{.due = {}, .backoff = initial_});
    Retry& retry = it->second;
    if (!retry.agent_connected_during_attempt) {
      if (!fresh) retry.backoff = std::min(retry.backoff * 2, max_);
      retry.due = clock_->Now() + retry.backoff;
      return;
    }
    retry.agent_connected_during_attempt = false;
    retry.due = clock_->Now();
  }
  if (wake_) wake_();
}

void RetryScheduler::Forget(const std::string& id) {
  absl::MutexLock lock(&mu_);
  retries_.erase(id);
}

std::vector<std::string> RetryScheduler::Due() {
  std::vector<std::string> due;
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  for (const auto& [id, retry] : retries_) {
    if (retry.due <= now) due.push_back(id);
  }
  return due;
}

void RetryScheduler::Running(const std::string& id) {
  absl::MutexLock lock(&mu_);
  retries_[id].due = absl::InfiniteFuture();
}

void RetryScheduler::AgentConnected() {
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (auto& [id, retry] : retries_) {
      if (retry.due != absl::InfiniteFuture()) {
        retry.due = now;
      } else {
        retry.agent_connected_during_attempt = true;  // Running now; rerun when it ends.
      }
    }
  }
  if (wake_) wake_();
}

std::optional<absl::Time> RetryScheduler::DueForTest(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = retries_.find(id);
  if (it == retries_.end()) return std::nullopt;
  return it->second.due;
}

}  // namespace fleet::engine
