#include "controller/engine/retry_scheduler.h"

#include <utility>

namespace fleet::engine {

void RetryScheduler::ScheduleAt(const std::string& id, absl::Time due) {
  Retry retry{.due = due, .backoff = fleet::Backoff(initial_, max_)};
  retry.backoff.Next();  // As if this were the first wait: the next one is twice it.
  absl::MutexLock lock(&mu_);
  retries_.insert_or_assign(id, std::move(retry));
}

void RetryScheduler::DueBy(const std::string& id, absl::Time by) {
  absl::MutexLock lock(&mu_);
  auto it = retries_.find(id);
  if (it != retries_.end() && it->second.due > by) it->second.due = by;
}

void RetryScheduler::RetryLater(const std::string& id) {
  {
    absl::MutexLock lock(&mu_);
    Retry& retry =
        retries_.try_emplace(id, Retry{.due = {}, .backoff = fleet::Backoff(initial_, max_)})
            .first->second;
    if (!retry.agent_connected_during_attempt) {
      retry.due = clock_->Now() + retry.backoff.Next();
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
  retries_.try_emplace(id, Retry{.due = {}, .backoff = fleet::Backoff(initial_, max_)})
      .first->second.due = absl::InfiniteFuture();
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
