// The one connection the SQLite store's aggregates share, serialized by one mutex: SQLite in
// WAL mode is fast enough for the controller's write rate, and one writer keeps transactions
// simple. It carries what spans the aggregates within a write: the events appended, the
// allocation images read back for watchers, and their publication once the write commits, to
// the commit feed and to the in-memory desired state.
#ifndef FLEET_CONTROLLER_STORE_STORE_CONNECTION_H_
#define FLEET_CONTROLLER_STORE_STORE_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/commit_point/commit_point.h"
#include "controller/store/changesets.h"
#include "controller/store/commit_log.h"
#include "controller/store/desired_index.h"
#include "controller/store/recent_commits.h"
#include "controller/store/sqlite.h"
#include "fleet/v1/admin.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::store {

class StoreConnection {
 public:
  // `last_sequence` is the newest event already in `db`, `position` the last entry of the
  // replicated log it holds; `allocations` and `manual` what its
  // desired state holds (DesiredIndex's constructor). `clock`, `commit_point` (may be null:
  // every write commits) and `commit_log` (may be null: no write is recorded) must outlive
  // this.
  StoreConnection(std::unique_ptr<Database> db, const Clock* clock, const CommitPoint* commit_point,
                  CommitLog* commit_log, uint64_t last_sequence, uint64_t position,
                  const std::vector<v1::Allocation>& allocations,
                  const std::vector<v1::Circuit>& manual);

  absl::Mutex& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }
  Database& db() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return *db_; }
  absl::Time Now() const { return clock_->Now(); }
  RecentCommits& recent() { return recent_; }
  const DesiredIndex& desired() const { return desired_; }
  // Store::InventoryVersion: read without the lock; bumped under it, after the commit of a
  // write that changed inventory, administrative state or health, so that a write made under
  // mu() which finds it unchanged knows no such change committed since it was read.
  uint64_t inventory_version() const { return inventory_version_.load(); }
  void InventoryChanged() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { inventory_version_.fetch_add(1); }
  // StorageControl::AwaitReplicaPosition: not under mu(), which a write holds while it waits
  // for the disk.
  uint64_t AwaitPosition(uint64_t entry, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(position_mu_);
  // LogReplica::EndReplicaPositionWaits.
  void EndPositionWaits() ABSL_LOCKS_EXCLUDED(position_mu_);
  // Not under mu(): the sync needs no connection, and commits go on while it runs.
  absl::Status SyncLog() ABSL_NO_THREAD_SAFETY_ANALYSIS { return db_->SyncLog(); }

  // Every write begins here, so that the sequence of an event left by a rolled-back write
  // is never published.
  absl::StatusOr<Transaction> Begin() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Passes the commit point (refused: the write is left to roll back, and nothing of it is
  // published), hands the write's changes to the commit log if there is one (refused, the
  // same), commits, updates the desired state, and then wakes watchers of the event log, if
  // the write appended events. Its allocation commits are published first, so a watcher that
  // sees its events finds them. A COMMIT that fails after the commit log took the changes
  // leaves this replica behind its log: every later Begin is refused FAILED_PRECONDITION
  // until the store is opened again (and catches up).
  absl::Status Commit(Transaction& txn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // LogReplica::ApplyReplicated.
  absl::Status ApplyReplicated(uint64_t entry, const std::string& bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Appends an event at the clock's time; an empty principal is recorded as "anonymous", an
  // unspecified severity as INFO.
  absl::Status AppendEvent(const std::string& kind, const std::string& object_kind,
                           const std::string& object_id, v1::EventSeverity severity,
                           const std::string& message, const std::string& principal)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Allocation `id` as the open transaction leaves it, kept as its image for watchers; null
  // when there is no such allocation.
  absl::StatusOr<std::shared_ptr<const v1::Allocation>> KeepImage(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // As KeepImage, for a write that changed the allocation: it must still be there.
  absl::StatusOr<v1::Allocation> Image(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The open transaction stored manual circuit `circuit`.
  void KeepManualCircuit(const v1::Circuit& circuit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The desired state learns what each write did from the images alone, so every write that
  // changes an allocation's circuits appends an event about it; Commit reads back the image
  // of each one the write did not read back after its last event.

 private:
  absl::Mutex mu_;
  std::unique_ptr<Database> db_ ABSL_GUARDED_BY(mu_);
  const Clock* const clock_;
  const CommitPoint* const commit_point_;
  CommitLog* const commit_log_;
  // The open transaction's changes, recorded when there is a commit log.
  std::optional<ChangeRecorder> recording_ ABSL_GUARDED_BY(mu_);
  // A commit failed after its changes went to the commit log (see Commit).
  bool behind_log_ ABSL_GUARDED_BY(mu_) = false;
  // The newest event appended by the open transaction: watchers learn of it only once it
  // has committed, since a rollback takes it back (and its sequence is reused).
  uint64_t uncommitted_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  // The allocations the open transaction appended events about, each with its image when
  // the write read it back after its last event.
  std::map<std::string, std::shared_ptr<const v1::Allocation>> uncommitted_images_
      ABSL_GUARDED_BY(mu_);
  std::vector<v1::Circuit> uncommitted_manual_ ABSL_GUARDED_BY(mu_);
  RecentCommits recent_;  // Its mutex is taken inside mu_.
  DesiredIndex desired_;  // Likewise.
  std::atomic<uint64_t> inventory_version_{1};
  // The database's schema, read at the first replicated write: fixed while it is open
  // (migrations run before), so no write reads it again.
  int schema_version_ ABSL_GUARDED_BY(mu_) = 0;
  // Moves the position forward (never back) and wakes AwaitPosition.
  void MovePosition(uint64_t entry) ABSL_LOCKS_EXCLUDED(position_mu_);

  // The replicated log's entry the database holds, moved once the entry's transaction has
  // committed and what it changed is visible to reads. Taken inside mu_.
  absl::Mutex position_mu_;
  uint64_t position_ ABSL_GUARDED_BY(position_mu_);
  bool position_waits_ended_ ABSL_GUARDED_BY(position_mu_) = false;
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_STORE_CONNECTION_H_
