#include "controller/store/store_connection.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "controller/store/allocation_rows.h"
#include "fleet/v1/names.h"

namespace fleet::store {

StoreConnection::StoreConnection(std::unique_ptr<Database> db, const Clock* clock,
                                 const CommitPoint* commit_point, CommitLog* commit_log,
                                 uint64_t last_sequence,
                                 const std::vector<v1::Allocation>& allocations,
                                 const std::vector<v1::Circuit>& manual)
    : db_(std::move(db)),
      clock_(clock),
      commit_point_(commit_point),
      commit_log_(commit_log),
      recent_(last_sequence),
      desired_(allocations, manual) {}

absl::StatusOr<Transaction> StoreConnection::Begin() {
  uncommitted_sequence_ = 0;
  uncommitted_images_.clear();
  uncommitted_manual_.clear();
  recording_.reset();
  if (behind_log_) {
    return absl::FailedPreconditionError(
        "store: a commit failed after its changes went to the replicated log; this replica "
        "is behind its log and writes nothing until it is opened again and catches up");
  }
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(*db_));
  if (commit_log_ != nullptr) {
    ASSIGN_OR_RETURN(ChangeRecorder recorder, ChangeRecorder::Start(*db_));
    recording_.emplace(std::move(recorder));
  }
  return txn;
}

absl::Status StoreConnection::Commit(Transaction& txn) {
  if (commit_point_ != nullptr) RETURN_IF_ERROR(commit_point_->Pass(Effect::kStoreWrite));
  // Every allocation the write appended an event about gets its image, so that the desired
  // state and watchers learn what it left; null after this means the allocation is gone.
  for (auto& [id, image] : uncommitted_images_) {
    if (image == nullptr) {
      ASSIGN_OR_RETURN(image, KeepImage(id));
    }
  }
  bool logged = false;  // The write's changes are in the replicated log.
  if (recording_.has_value()) {
    ASSIGN_OR_RETURN(std::string changeset, recording_->Changeset());
    recording_.reset();
    if (!changeset.empty()) {
      ASSIGN_OR_RETURN(uint64_t applied, AppliedEntry(*db_));
      RETURN_IF_ERROR(commit_log_->Append(applied + 1, changeset));
      logged = true;
      if (absl::Status s = SetAppliedEntry(*db_, applied + 1); !s.ok()) {
        behind_log_ = true;
        return s;
      }
    }
  }
  if (absl::Status committed = txn.Commit(); !committed.ok()) {
    behind_log_ = logged;
    return committed;
  }
  desired_.Apply(uncommitted_images_, uncommitted_manual_);
  uncommitted_manual_.clear();
  if (uncommitted_sequence_ != 0) {
    recent_.Publish(uncommitted_sequence_, std::move(uncommitted_images_));
    uncommitted_sequence_ = 0;
  }
  uncommitted_images_.clear();
  return absl::OkStatus();
}

absl::Status StoreConnection::AppendEvent(const std::string& kind, const std::string& object_kind,
                                          const std::string& object_id, v1::EventSeverity severity,
                                          const std::string& message,
                                          const std::string& principal) {
  ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
    INSERT INTO events (time_us, principal, kind, object_kind, object_id, severity, message)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7))sql"));
  RETURN_IF_ERROR(
      stmt.Bind(1, absl::ToUnixMicros(clock_->Now()))
          .Bind(2, principal.empty() ? std::string("anonymous") : principal)
          .Bind(3, kind)
          .Bind(4, object_kind)
          .Bind(5, object_id)
          .Bind(6, v1::Name(severity == v1::EVENT_SEVERITY_UNSPECIFIED ? v1::EVENT_SEVERITY_INFO
                                                                       : severity))
          .Bind(7, message)
          .Run());
  uncommitted_sequence_ = static_cast<uint64_t>(db_->LastInsertRowId());
  // Any image of it read before this event is out of date.
  if (object_kind == "allocation") uncommitted_images_[object_id] = nullptr;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const v1::Allocation>> StoreConnection::KeepImage(
    const std::string& id) {
  ASSIGN_OR_RETURN(std::vector<v1::Allocation> found, SelectAllocations(*db_, id, {}));
  if (found.empty()) return nullptr;
  auto image = std::make_shared<const v1::Allocation>(std::move(found.front()));
  uncommitted_images_[id] = image;
  return image;
}

void StoreConnection::KeepManualCircuit(const v1::Circuit& circuit) {
  uncommitted_manual_.push_back(circuit);
}

absl::StatusOr<v1::Allocation> StoreConnection::Image(const std::string& id) {
  ASSIGN_OR_RETURN(std::shared_ptr<const v1::Allocation> image, KeepImage(id));
  if (image == nullptr) {
    return absl::InternalError(absl::StrCat("allocation ", id, " vanished while updated"));
  }
  return *image;
}

}  // namespace fleet::store
