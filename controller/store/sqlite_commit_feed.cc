// The SQLite implementation of CommitFeed (controller/store/commit_feed.h): the connection's
// RecentCommits, and reads of allocations stamped with the newest committed sequence.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "controller/store/allocation_rows.h"
#include "controller/store/sqlite_aggregates.h"

namespace fleet::store {
namespace {

class SqliteCommitFeed final : public CommitFeed {
 public:
  explicit SqliteCommitFeed(StoreConnection& connection) : connection_(connection) {}

  uint64_t LastEventSequence() override { return connection_.recent().LastSequence(); }

  // `deadline` is real time: a caller waits on behalf of a client, whose deadline is real.
  bool WaitForEvent(uint64_t after_sequence, absl::Time deadline) override {
    return connection_.recent().WaitForNewer(after_sequence, deadline);
  }

  void SetCommitListener(std::function<void()> listener) override {
    connection_.recent().SetListener(std::move(listener));
  }

  std::optional<std::vector<AllocationCommit>> AllocationCommitsAfter(uint64_t after) override {
    return connection_.recent().After(after);
  }

  std::optional<AllocationCommit> LastCommitted(const std::string& id) override {
    return connection_.recent().Last(id);
  }

  absl::StatusOr<AllocationCommit> ReadAllocation(const std::string& id) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(std::vector<AllocationCommit> found, ReadLocked(id, {}));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("allocation ", id, " not found"));
    return std::move(found.front());
  }

  absl::StatusOr<std::vector<AllocationCommit>> ReadAllocations(
      const AllocationFilter& filter) override {
    absl::MutexLock lock(&connection_.mu());
    return ReadLocked("", filter);
  }

 private:
  // The allocations SelectAllocations(id, filter) reads, each with the newest committed
  // sequence: under the connection's mutex no commit is under way, so that is exactly what
  // the read saw.
  absl::StatusOr<std::vector<AllocationCommit>> ReadLocked(const std::string& id,
                                                           const AllocationFilter& filter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(connection_.mu()) {
    ASSIGN_OR_RETURN(std::vector<v1::Allocation> found,
                     SelectAllocations(connection_.db(), id, filter));
    const uint64_t sequence = connection_.recent().LastSequence();
    std::vector<AllocationCommit> out;
    out.reserve(found.size());
    for (v1::Allocation& a : found) {
      std::string read_id = a.id();
      out.push_back(AllocationCommit{sequence, std::move(read_id),
                                     std::make_shared<const v1::Allocation>(std::move(a))});
    }
    return out;
  }

  StoreConnection& connection_;
};

}  // namespace

std::unique_ptr<CommitFeed> NewSqliteCommitFeed(StoreConnection& connection) {
  return std::make_unique<SqliteCommitFeed>(connection);
}

}  // namespace fleet::store
