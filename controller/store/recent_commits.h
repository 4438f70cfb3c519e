// The in-memory half of the commit feed (controller/store/commit_feed.h): the newest committed
// event's sequence, a wait for a newer one, and the most recent allocation commits. Filled by
// StoreConnection after each commit. Thread-safe, with a mutex of its own so that waiting
// watchers hold up no writer; a writer publishes while holding the connection's mutex.
#ifndef FLEET_CONTROLLER_STORE_RECENT_COMMITS_H_
#define FLEET_CONTROLLER_STORE_RECENT_COMMITS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/store/commit_feed.h"

namespace fleet::store {

class RecentCommits {
 public:
  // `last_sequence`: the newest event already in the database.
  explicit RecentCommits(uint64_t last_sequence);

  // A committed transaction whose newest event is `sequence`, with the allocations it
  // appended events about and each one's image (null when it read none back).
  void Publish(uint64_t sequence,
               std::map<std::string, std::shared_ptr<const v1::Allocation>> images);

  uint64_t LastSequence();
  // `deadline` is real time: a Clock stamps events but cannot wait.
  bool WaitForNewer(uint64_t after_sequence, absl::Time deadline);
  // As CommitFeed::SetCommitListener: called by Publish, after its lock is let go.
  void SetListener(std::function<void()> listener);
  std::optional<std::vector<AllocationCommit>> After(uint64_t after);
  std::optional<AllocationCommit> Last(const std::string& id);

 private:
  static constexpr size_t kKept = 1024;
  absl::Mutex mu_;
  uint64_t last_sequence_ ABSL_GUARDED_BY(mu_);
  // The most recent allocation commits, by sequence, and the newest sequence of those no
  // longer kept.
  std::deque<AllocationCommit> commits_ ABSL_GUARDED_BY(mu_);
  uint64_t floor_ ABSL_GUARDED_BY(mu_);
  // Held while the listener runs, so that replacing it waits for a call under way.
  absl::Mutex listener_mu_;
  std::function<void()> listener_ ABSL_GUARDED_BY(listener_mu_);
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_RECENT_COMMITS_H_
