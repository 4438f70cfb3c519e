#include "controller/replication/etcd_commit_log.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace fleet::replication {

namespace {

// Codes after which an append may or may not have been applied: etcd's client answers a
// write lost after it was sent as UNAVAILABLE; the rest are errors of the call itself.
bool OutcomeUnknown(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsUnknown(status) || absl::IsInternal(status);
}

}  // namespace

absl::Status EtcdCommitLog::Append(uint64_t entry, const std::string& bytes) {
  while (true) {
    absl::Status appended = log_->Append(election_->StillLeading(), entry, bytes);
    if (absl::IsAlreadyExists(appended)) {
      // The entry holds another write: this replica has not applied the log's head yet (a
      // new leader catching up, or an append of its own given up on that landed after all).
      return absl::UnavailableError(
          absl::StrCat("this replica is catching up with the replicated log (", appended.message(),
                       "); try again in a moment"));
    }
    // Every other answer says whether it is in the log: OK, or refused for good (not
    // leading, no space left in etcd, not allowed), and then it is not.
    if (!OutcomeUnknown(appended)) return appended;
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
