// What watchers follow without polling the database: the newest committed event, a wait for
// the next one, and the most recent allocation commits, kept in memory with the allocation as
// each commit left it.
//
// Invariants: a commit is published only once its transaction has committed, with its events;
// allocation commits come in sequence order, one per allocation and transaction. Thread-safe;
// waiting holds up no writer.
#ifndef FLEET_CONTROLLER_STORE_COMMIT_FEED_H_
#define FLEET_CONTROLLER_STORE_COMMIT_FEED_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/store/allocation_store.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::store {

// A committed transaction that appended events about allocation `id`: the sequence of its
// newest event, and the allocation as the transaction left it, read back inside it (null only
// for an event about an allocation that does not exist). Shared: watchers copy the commits,
// not the allocations.
struct AllocationCommit {
  uint64_t sequence = 0;
  std::string id;
  std::shared_ptr<const v1::Allocation> allocation;
};

class CommitFeed {
 public:
  virtual ~CommitFeed() = default;
  using AllocationCommit = store::AllocationCommit;  // As Store::AllocationCommit.

  // The sequence number of the newest committed event, 0 when there is none.
  virtual uint64_t LastEventSequence() = 0;
  // Blocks until an event newer than `after_sequence` has been committed (true) or
  // `deadline`, in real time, passes (false).
  virtual bool WaitForEvent(uint64_t after_sequence, absl::Time deadline) = 0;
  // Calls `listener` after each commit that appended events, once it is published, on the
  // committing thread and while that write still holds the store: it must only take note
  // (set a flag, signal) and return. Replaces the listener before; null removes it. Returns
  // once no call of the listener it replaced is under way.
  virtual void SetCommitListener(std::function<void()> listener) = 0;

  // Every allocation commit after event `after`, oldest first, so a watcher follows each
  // committed state without reading the database. nullopt when the feed no longer holds all
  // of them (it keeps the most recent 1024): then read the events and the allocations.
  virtual std::optional<std::vector<AllocationCommit>> AllocationCommitsAfter(uint64_t after) = 0;
  // The newest commit about allocation `id` the feed holds; nullopt when it holds none.
  virtual std::optional<AllocationCommit> LastCommitted(const std::string& id) = 0;
  // Allocation `id` as the database holds it now, with the sequence of the newest committed
  // event: the state every commit up to that sequence left, and none after it. NOT_FOUND for
  // an unknown allocation.
  virtual absl::StatusOr<AllocationCommit> ReadAllocation(const std::string& id) = 0;
  // The allocations `filter` selects as the database holds them now, each with the sequence
  // of the newest committed event, in ListAllocations' order: one read for a watch of many.
  virtual absl::StatusOr<std::vector<AllocationCommit>> ReadAllocations(
      const AllocationFilter& filter) = 0;
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_COMMIT_FEED_H_
