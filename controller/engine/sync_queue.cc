#include "controller/engine/sync_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fleet::engine {

SyncQueue::Entry SyncQueue::NewEntry(absl::Time due) const {
  Entry entry{.due = due, .backoff = fleet::Backoff(options_.initial, options_.max)};
  entry.backoff.Next();  // As if this were the first wait: the next one is twice it.
  return entry;
}

bool SyncQueue::EndAttempt(Entry& entry, absl::Time retry_at, absl::Time now) {
  // `marked` stays until an attempt begins (Running) and sees what it was for: a Forget or a
  // transaction's RetryLater before then keeps the entry due.
  const bool rerun = entry.marked;
  entry.running = false;
  entry.retry_due = std::min(retry_at, entry.due_by);
  entry.due = rerun ? now : entry.retry_due;
  entry.due_by = absl::InfiniteFuture();
  return rerun;
}

absl::Status SyncQueue::Mark(const std::string& id, std::optional<absl::Time> at) {
  return Add(id, at, /*again=*/true);
}

absl::Status SyncQueue::Ensure(const std::string& id) { return Add(id, std::nullopt, false); }

absl::Status SyncQueue::Add(const std::string& id, std::optional<absl::Time> at, bool again) {
  bool woke = false;
  bool full = false;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    const absl::Time due = at.value_or(now);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      full = entries_.size() >= options_.max_entries;
      if (!full) entries_.emplace(id, NewEntry(due)).first->second.marked = true;
      woke = !full && due <= now;
    } else if (!again) {
      return absl::OkStatus();
    } else {
      it->second.marked = true;
      if (!it->second.running) {
        it->second.due = std::min(due, it->second.due);
        woke = due <= now;
      }
    }
  }
  if (full) {
    if (options_.refused) options_.refused();
    return absl::ResourceExhaustedError(absl::StrCat("the sync queue holds ", options_.max_entries,
                                                     " allocations, its bound; ", "allocation ", id,
                                                     " is synced by the next reconciliation"));
  }
  if (woke && wake_) wake_();
  return absl::OkStatus();
}

void SyncQueue::DueBy(const std::string& id, absl::Time by) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& entry = it->second;
  if (entry.running) {
    entry.due_by = std::min(entry.due_by, by);
  } else {
    entry.due = std::min(entry.due, by);
    entry.retry_due = std::min(entry.retry_due, by);
  }
}

void SyncQueue::RetryLater(const std::string& id) {
  bool rerun = false;
  {
    absl::MutexLock lock(&mu_);
    rerun = RetryLaterLocked(
        entries_
            .try_emplace(
                id, Entry{.due = {}, .backoff = fleet::Backoff(options_.initial, options_.max)})
            .first->second);
  }
  if (rerun && wake_) wake_();
}

bool SyncQueue::RetryLaterLocked(Entry& entry) {
  const absl::Time now = clock_->Now();
  if (!entry.marked) {
    absl::Duration wait = entry.backoff.Next();
    if (options_.jitter) wait = wait * options_.jitter();
    EndAttempt(entry, now + wait, now);
    return false;
  }
  // Rerun at once, for what the attempt may have missed; not a step of the backoff, and no
  // retry time to go back to.
  EndAttempt(entry, absl::InfiniteFuture(), now);
  return true;
}

void SyncQueue::RetryAt(const std::string& id, absl::Time at) {
  {
    absl::MutexLock lock(&mu_);
    auto [it, fresh] = entries_.try_emplace(id, NewEntry(at));
    if (!EndAttempt(it->second, at, clock_->Now())) return;
  }
  if (wake_) wake_();
}

void SyncQueue::NothingNew(const std::string& id) {
  bool scheduled = false, rerun = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    scheduled = it != entries_.end() && it->second.retry_due != absl::InfiniteFuture();
    if (scheduled) rerun = EndAttempt(it->second, it->second.retry_due, clock_->Now());
  }
  if (!scheduled) {
    RetryLater(id);  // No retry time to go back to: as a failed attempt.
  } else if (rerun && wake_) {
    wake_();
  }
}

void SyncQueue::Forget(const std::string& id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    if (!it->second.marked) {
      entries_.erase(it);
      return;
    }
    it->second = NewEntry(clock_->Now());
    it->second.marked = true;  // Not attempted yet: a later Forget keeps it too.
  }
  if (wake_) wake_();
}

std::vector<std::string> SyncQueue::Due() {
  std::vector<std::string> due;
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  for (const auto& [id, entry] : entries_) {
    if (!entry.running && entry.due <= now) due.push_back(id);
  }
  return due;
}

std::optional<absl::Time> SyncQueue::NextDue() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  std::optional<absl::Time> next;
  for (const auto& [id, entry] : entries_) {
    if (!entry.running && entry.due > now && (!next || entry.due < *next)) next = entry.due;
  }
  return next;
}

bool SyncQueue::IsDue(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  return it != entries_.end() && !it->second.running && it->second.due <= clock_->Now();
}

bool SyncQueue::Running(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.running || it->second.due > clock_->Now()) return false;
  Entry& entry = it->second;
  entry.running = true;
  entry.marked = false;  // This attempt sees what the marks so far were for.
  entry.due = absl::InfiniteFuture();
  return true;
}

void SyncQueue::EndIfRunning(const std::string& id) {
  bool rerun = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end() || !it->second.running) return;
    rerun = RetryLaterLocked(it->second);
  }
  if (rerun && wake_) wake_();
}

void SyncQueue::AgentConnected() {
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (auto& [id, entry] : entries_) {
      entry.marked = true;  // Running now: rerun when it ends.
      if (!entry.running) entry.due = now;
    }
  }
  if (wake_) wake_();
}

size_t SyncQueue::size() {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

std::optional<absl::Time> SyncQueue::DueForTest(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.due;
}

}  // namespace fleet::engine
