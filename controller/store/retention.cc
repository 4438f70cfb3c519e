#include "controller/store/retention.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/thread_name.h"

namespace fleet::store {
namespace {

std::string Kept(const RetentionLimits& limits) {
  std::string age = limits.max_age > absl::ZeroDuration()
                        ? absl::StrCat("younger than ", absl::FormatDuration(limits.max_age))
                        : "of any age";
  std::string count = limits.max_count > 0 ? absl::StrCat("the newest ", limits.max_count)
                                           : std::string("any number");
  return absl::StrCat(age, ", ", count);
}

}  // namespace

Retention::Retention(StorageControl* store, RetentionPolicy policy,
                     std::function<void(const RetentionPass&)> on_pass)
    : store_(store), policy_(std::move(policy)), on_pass_(std::move(on_pass)) {}

Retention::~Retention() { Stop(); }

void Retention::Start() {
  if (policy_.interval <= absl::ZeroDuration() || thread_.joinable() || stopping()) return;
  thread_ = std::thread([this] {
    NameThisThread("fleet-retention");
    Run();
  });
}

void Retention::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool Retention::stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool Retention::Pause(absl::Duration d) {
  if (d <= absl::ZeroDuration()) {
    std::this_thread::yield();
    return !stopping();
  }
  absl::MutexLock lock(&mu_);
  auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  mu_.AwaitWithTimeout(absl::Condition(&stop), d);
  return !stopping_;
}

void Retention::Run() {
  while (!stopping()) {
    const RetentionPass pass = RunPass();
    if (!Pause(pass.more && pass.status.ok() ? policy_.batch_pause : policy_.interval)) return;
  }
}

RetentionPass Retention::RunPass() {
  absl::MutexLock lock(&pass_mu_);
  RetentionPass pass = PassLocked();
  // Said once per run of failures, not every interval.
  if (!pass.status.ok() && !failing_) {
    FLEET_LOG(WARNING) << "retention pass failed: " << pass.status
                       << "; the state database grows until one succeeds";
  }
  failing_ = !pass.status.ok();
  if (on_pass_) on_pass_(pass);
  return pass;
}

RetentionPass Retention::PassLocked() {
  const absl::Time start = absl::Now();
  RetentionPass pass;
  const int batch = std::max(1, policy_.batch_rows);
  pass.status = PruneKind(
      [&](int rows) { return store_->PruneEvents(policy_.events, std::min(rows, batch)); },
      &pass.events_pruned, &pass);
  if (pass.status.ok()) {
    pass.status = PruneKind(
        [&](int rows) {
          return store_->PruneEndedAllocations(policy_.ended_allocations, std::min(rows, batch));
        },
        &pass.allocations_pruned, &pass);
  }
  if (pass.events_pruned + pass.allocations_pruned > 0) {
    // Said in the log, not the event log: an event per pass would itself be pruned by the
    // next pass at the count limit, and so on, one a pass on an idle site.
    FLEET_LOG(INFO) << "retention pruned " << pass.events_pruned << " events and "
                    << pass.allocations_pruned << " ended allocations in " << pass.batches
                    << " transactions; kept: events " << Kept(policy_.events)
                    << "; ended allocations " << Kept(policy_.ended_allocations);
    absl::Status reclaimed = Reclaim(&pass);
    if (pass.status.ok()) pass.status = reclaimed;
  }
  absl::StatusOr<StorageSize> size = store_->Storage();
  if (size.ok()) {
    pass.size = *size;
  } else if (pass.status.ok()) {
    pass.status = size.status();
  }
  pass.took = absl::Now() - start;
  return pass;
}

absl::Status Retention::PruneKind(const std::function<absl::StatusOr<int64_t>(int)>& prune,
                                  int64_t* pruned, RetentionPass* pass) {
  const int batch = std::max(1, policy_.batch_rows);
  const int64_t limit = std::max<int64_t>(batch, policy_.pass_max_rows);
  while (*pruned < limit) {
    if (stopping()) return absl::OkStatus();
    const int rows = static_cast<int>(std::min<int64_t>(batch, limit - *pruned));
    ASSIGN_OR_RETURN(const int64_t got, prune(rows));
    *pruned += got;
    if (got > 0) ++pass->batches;
    // A short batch found the oldest row that stays, or the end: nothing more to prune.
    if (got < rows) return absl::OkStatus();
    if (!Pause(policy_.batch_pause)) return absl::OkStatus();
  }
  pass->more = true;
  return absl::OkStatus();
}

absl::Status Retention::Reclaim(RetentionPass* pass) {
  const int step = std::max(1, policy_.vacuum_step_pages);
  while (!stopping()) {
    ASSIGN_OR_RETURN(const int64_t got, store_->ReclaimFreePages(step));
    pass->pages_reclaimed += got;
    if (got < step || !Pause(policy_.batch_pause)) return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace fleet::store
