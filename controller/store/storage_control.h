// The database under every aggregate: pruning history past its keeping, handing free pages
// back to the file system, and making commits durable against a power loss.
//
// Retention (controller/store/retention.h) runs the pruning in the background. Each pruning
// call is one short transaction, so that a request's commit waits for one batch at most; a
// call that prunes fewer than `max_rows` found nothing more to prune. Thread-safe.
#ifndef FLEET_CONTROLLER_STORE_STORAGE_CONTROL_H_
#define FLEET_CONTROLLER_STORE_STORAGE_CONTROL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fleet::store {

// What retention keeps of one kind of history (the event log, or ended allocations): the
// rest may be pruned. Zero in a field means no limit of that kind.
struct RetentionLimits {
  // Older than this by the store's clock goes: an event by its time, an ended allocation by
  // its last update, which is when it ended.
  absl::Duration max_age = absl::ZeroDuration();
  // Beyond the newest `max_count` goes.
  int64_t max_count = 0;
};

// The database's size, for metrics and retention.
struct StorageSize {
  int64_t page_size = 0;
  int64_t pages = 0;       // Free ones included.
  int64_t free_pages = 0;  // Not yet handed back to the file system.
  int64_t wal_bytes = 0;   // The write-ahead log file; 0 without one.
  int64_t bytes() const { return page_size * pages; }
};

// What a replicated log's follower moves (replication/log_follower.h, docs/ha.md): a
// replica's position in the log, and the applying of the entries past it. A store open at
// its schema is one (StorageControl); so is an older database before its migration
// (SqliteStoreOptions::before_migrating).
class LogReplica {
 public:
  virtual ~LogReplica() = default;

  // A follower replica (docs/ha.md): applies entry `entry` of the replicated log, `bytes` as
  // its leader's store wrote them (changesets.h, EncodeLogEntry), in one transaction that also
  // moves this store's position; an open store then shows readers and watchers the change as
  // the leader's own commit did (the desired state, the commit feed). Every replica applies what
  // the log holds past its position, the leader too after a takeover (its own writes move its
  // position). OK at once for an entry it holds already; FAILED_PRECONDITION when `entry` is
  // past the one after its position; DATA_LOSS when the entry is of another schema or its
  // changeset does not fit this database (changesets.h). Either way nothing is applied.
  virtual absl::Status ApplyReplicated(uint64_t entry, const std::string& bytes) = 0;
  // The last entry of the replicated log this store holds (0: none).
  virtual absl::StatusOr<uint64_t> ReplicaPosition() = 0;
  // From now on StorageControl::AwaitReplicaPosition returns the position at once, and the
  // calls waiting in it return now (nothing waits on an older database's position): called once the
  // replica applies no more entries (shutdown, or following the log stopped for good), so that no
  // call waits for an entry that will not come. Permanent; any thread, any number of times.
  virtual void EndReplicaPositionWaits() = 0;
};

class StorageControl : public LogReplica {
 public:
  // Deletes up to `max_rows` of the oldest events `limits` no longer keeps (by count: those
  // below the newest `max_count` sequence numbers), oldest first and only while every older
  // one goes too, never the newest event. Raises the log's retention cut-off first: the
  // database refuses the deletion of any event at or above it.
  virtual absl::StatusOr<int64_t> PruneEvents(const RetentionLimits& limits, int max_rows) = 0;
  // Deletes up to `max_rows` of the oldest ended (RELEASED or FAILED) allocations `limits` no
  // longer keeps, oldest end first, with their rows in other tables (members, stage timings
  // and release intent are theirs). The count is over every ended allocation. Never one that
  // is live, nor an ended one still holding circuits or pending removals (the switch may hold
  // those cross-connects): those stay until the engine has cleared them.
  virtual absl::StatusOr<int64_t> PruneEndedAllocations(const RetentionLimits& limits,
                                                        int max_rows) = 0;
  // Hands up to `max_pages` free pages back to the file system, in a transaction of its own;
  // returns how many went.
  virtual absl::StatusOr<int64_t> ReclaimFreePages(int max_pages) = 0;
  // The database's size now.
  virtual absl::StatusOr<StorageSize> Storage() = 0;

  // Commits survive a crash of fleetd as soon as they return, but a power loss of the host
  // may take the last ones (synchronous=NORMAL). Sync makes every commit so far survive that
  // too; the services call it before they answer a change, so what a client was told is done
  // stays done (docs/engine.md, "Durability"). Cheap when nothing was committed since the
  // last sync; concurrent calls share one sync.
  virtual absl::Status Sync() = 0;

  // ReplicaPosition as the last committed write or applied entry left it, from memory (no
  // read of the database, and no wait for a write in progress): once it is at least `entry`,
  // or when `timeout` has passed, the position then. For reads that must see a change made
  // on another replica (read-your-writes, docs/ha.md).
  virtual uint64_t AwaitReplicaPosition(uint64_t entry, absl::Duration timeout) = 0;
  // Writes a copy of the whole database to `path`, which must not exist (SQLite's VACUUM
  // INTO: compact, and a database on its own, with no write-ahead log), and returns the
  // position it holds: the state after that entry of the replicated log (the log's snapshot,
  // docs/ha.md). Every other read and write of the store waits while the copy is made.
  virtual absl::StatusOr<uint64_t> SnapshotTo(const std::string& path) = 0;
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_STORAGE_CONTROL_H_
