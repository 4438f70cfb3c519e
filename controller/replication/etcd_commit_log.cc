#include "controller/replication/etcd_commit_log.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace fleet::replication {

absl::Status EtcdCommitLog::Append(uint64_t entry, const std::string& changeset) {
  while (true) {
    absl::Status appended = log_->Append(election_->StillLeading(), entry, changeset);
    // Answered: in the log (OK), or surely not (refused, or trimmed past: never for a store
    // that appends only after its own last entry).
    if (appended.ok() || absl::IsFailedPrecondition(appended) || absl::IsAborted(appended) ||
        absl::IsInvalidArgument(appended)) {
      return appended;
    }
    if (absl::Status fence = election_->Fence(); !fence.ok()) {
      return absl::UnavailableError(
          absl::StrCat("replicated log: entry ", entry, " may or may not be in the log (",
                       appended.message(), "), and this replica may no longer act (",
                       fence.message(), "); it learns which when it catches up from the log"));
    }
    absl::SleepFor(retry_);
  }
}

}  // namespace fleet::replication
