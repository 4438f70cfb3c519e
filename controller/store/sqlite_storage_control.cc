// The SQLite implementation of StorageControl (controller/store/storage_control.h); the SQL
// of pruning is in controller/store/pruning.h.
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "controller/store/changesets.h"
#include "controller/store/pruning.h"
#include "controller/store/sqlite_aggregates.h"

namespace fleet::store {
namespace {

class SqliteStorageControl final : public StorageControl {
 public:
  explicit SqliteStorageControl(StoreConnection& connection) : connection_(connection) {}

  absl::StatusOr<int64_t> PruneEvents(const RetentionLimits& limits, int max_rows) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    ASSIGN_OR_RETURN(int64_t pruned,
                     PruneEventBatch(connection_.db(), limits, connection_.Now(), max_rows));
    RETURN_IF_ERROR(connection_.Commit(txn));
    return pruned;
  }

  absl::StatusOr<int64_t> PruneEndedAllocations(const RetentionLimits& limits,
                                                int max_rows) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    ASSIGN_OR_RETURN(int64_t pruned,
                     PruneAllocationBatch(connection_.db(), limits, connection_.Now(), max_rows));
    RETURN_IF_ERROR(connection_.Commit(txn));
    return pruned;
  }

  absl::StatusOr<int64_t> ReclaimFreePages(int max_pages) override {
    absl::MutexLock lock(&connection_.mu());
    return connection_.db().IncrementalVacuum(max_pages);
  }

  absl::StatusOr<StorageSize> Storage() override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Database::Pages pages, connection_.db().PageCounts());
    return StorageSize{pages.page_size, pages.pages, pages.free_pages, pages.wal_bytes};
  }

  absl::Status Sync() override { return connection_.SyncLog(); }

  absl::Status ApplyReplicated(uint64_t entry, const std::string& bytes) override {
    absl::MutexLock lock(&connection_.mu());
    return connection_.ApplyReplicated(entry, bytes);
  }

  absl::StatusOr<uint64_t> ReplicaPosition() override {
    absl::MutexLock lock(&connection_.mu());
    return AppliedEntry(connection_.db());
  }

  uint64_t AwaitReplicaPosition(uint64_t entry, absl::Duration timeout) override {
    return connection_.AwaitPosition(entry, timeout);
  }

  void EndReplicaPositionWaits() override { connection_.EndPositionWaits(); }

  absl::StatusOr<uint64_t> SnapshotTo(const std::string& path) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(uint64_t position, AppliedEntry(connection_.db()));
    ASSIGN_OR_RETURN(Statement copy, connection_.db().Prepare("VACUUM INTO ?1"));
    copy.Bind(1, path);
    if (absl::Status s = copy.Step().status(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("store: snapshot to ", path, ": ", s.message()));
    }
    return position;
  }

 private:
  StoreConnection& connection_;
};

}  // namespace

std::unique_ptr<StorageControl> NewSqliteStorageControl(StoreConnection& connection) {
  return std::make_unique<SqliteStorageControl>(connection);
}

}  // namespace fleet::store
