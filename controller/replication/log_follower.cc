#include "controller/replication/log_follower.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/thread_name.h"

namespace fleet::replication {

absl::Status LogFollower::CatchUp() {
  absl::MutexLock one_at_a_time(&catch_up_mu_);
  absl::StatusOr<uint64_t> position = store_->ReplicaPosition();
  if (!position.ok()) return position.status();
  absl::StatusOr<etcd::LogBounds> bounds = log_->Bounds();
  if (!bounds.ok()) return bounds.status();
  auto record = [&] {
    absl::MutexLock lock(&mu_);
    progress_.position = *position;
    // Entries appended since the bounds were read may have been applied too.
    progress_.head = std::max(bounds->head, *position);
  };
  record();
  while (*position < bounds->head) {
    absl::StatusOr<std::vector<etcd::LogEntry>> entries = log_->Read(*position + 1);
    if (absl::IsOutOfRange(entries.status())) {
      // Trimmed since the position was read. On the leader its own writes may have moved the
      // position past the trim meanwhile: behind only if it still is.
      position = store_->ReplicaPosition();
      if (!position.ok()) return position.status();
      bounds = log_->Bounds();
      if (!bounds.ok()) return bounds.status();
      if (*position + 1 >= bounds->first) {
        record();
        continue;
      }
    }
    if (!entries.ok()) return entries.status();
    if (entries->empty()) break;  // Nothing past the position after all.
    for (const etcd::LogEntry& entry : *entries) {
      absl::Status applied = store_->ApplyReplicated(entry.seq, entry.bytes);
      if (!applied.ok()) {
        return absl::Status(applied.code(), absl::StrCat("replicated log: entry ", entry.seq, ": ",
                                                         applied.message()));
      }
      *position = entry.seq;
    }
    record();
  }
  return absl::OkStatus();
}

void LogFollower::Start() {
  if (thread_.joinable() || stop_.HasBeenNotified()) return;  // Once only.
  thread_ = std::thread([this] { Run(); });
}

void LogFollower::Stop() {
  if (!thread_.joinable()) return;
  if (!stop_.HasBeenNotified()) stop_.Notify();
  thread_.join();
}

LogFollower::Progress LogFollower::Current() const {
  absl::MutexLock lock(&mu_);
  return progress_;
}

void LogFollower::Run() {
  NameThisThread("fleet-follower");
  std::string warned;  // Said once while etcd stays unreachable, not every poll.
  while (!stop_.WaitForNotificationWithTimeout(poll_)) {
    absl::Status caught_up = CatchUp();
    if (caught_up.ok()) {
      warned.clear();
      continue;
    }
    if (absl::IsDataLoss(caught_up) || absl::IsOutOfRange(caught_up)) {
      FLEET_LOG(ERROR) << "following the replicated log stopped: " << caught_up;
      store_->EndReplicaPositionWaits();  // No call waits for an entry this will not apply.
      absl::MutexLock lock(&mu_);
      progress_.stopped = caught_up;
      return;
    }
    if (caught_up.ToString() != warned) {
      FLEET_LOG(WARNING) << "following the replicated log: " << caught_up;
      warned = caught_up.ToString();
    }
  }
}

}  // namespace fleet::replication
