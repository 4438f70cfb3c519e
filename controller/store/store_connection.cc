#include "controller/store/store_connection.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "controller/store/allocation_rows.h"
#include "controller/store/migrations.h"
#include "fleet/v1/names.h"

namespace fleet::store {

StoreConnection::StoreConnection(std::unique_ptr<Database> db, const Clock* clock,
                                 const CommitPoint* commit_point, CommitLog* commit_log,
                                 uint64_t last_sequence, uint64_t position,
                                 const std::vector<v1::Allocation>& allocations,
                                 const std::vector<v1::Circuit>& manual)
    : db_(std::move(db)),
      clock_(clock),
      commit_point_(commit_point),
      commit_log_(commit_log),
      recent_(last_sequence),
      desired_(allocations, manual),
      position_(position) {}

void StoreConnection::MovePosition(uint64_t entry) {
  absl::MutexLock lock(&position_mu_);
  position_ = std::max(position_, entry);
}

uint64_t StoreConnection::AwaitPosition(uint64_t entry, absl::Duration timeout) {
  absl::MutexLock lock(&position_mu_);
  const auto reached = [this, entry]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(position_mu_) {
    return position_ >= entry || position_waits_ended_;
  };
  position_mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  return position_;
}

void StoreConnection::EndPositionWaits() {
  absl::MutexLock lock(&position_mu_);
  position_waits_ended_ = true;  // The waiters' condition is true: unlocking wakes them.
}

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
  // Taken whatever happens next: a session left attached would outlive its transaction.
  std::optional<ChangeRecorder> recording = std::exchange(recording_, std::nullopt);
  if (commit_point_ != nullptr) RETURN_IF_ERROR(commit_point_->Pass(Effect::kStoreWrite));
  // Every allocation the write appended an event about gets its image, so that the desired
  // state and watchers learn what it left; null after this means the allocation is gone.
  for (auto& [id, image] : uncommitted_images_) {
    if (image == nullptr) {
      ASSIGN_OR_RETURN(image, KeepImage(id));
    }
  }
  uint64_t logged = 0;  // The write's entry in the replicated log, once its changes are there.
  if (recording.has_value()) {
    ASSIGN_OR_RETURN(std::string changeset, recording->Changeset());
    recording.reset();
    if (!changeset.empty()) {
      ASSIGN_OR_RETURN(uint64_t applied, AppliedEntry(*db_));
      if (schema_version_ == 0) {
        ASSIGN_OR_RETURN(schema_version_, SchemaVersion(*db_));
      }
      RETURN_IF_ERROR(commit_log_->Append(applied + 1, EncodeLogEntry(schema_version_, changeset)));
      logged = applied + 1;
      if (absl::Status s = SetAppliedEntry(*db_, applied + 1); !s.ok()) {
        behind_log_ = true;
        return s;
      }
    }
  }
  if (absl::Status committed = txn.Commit(); !committed.ok()) {
    if (logged != 0) behind_log_ = true;
    return committed;
  }
  // Moved once what the write did is visible to every read (the desired state, the feed): a
  // read woken by the new position must find it.
  absl::Cleanup move_position = [this, logged] {
    if (logged != 0) MovePosition(logged);
  };
  desired_.Apply(uncommitted_images_, uncommitted_manual_);
  uncommitted_manual_.clear();
  if (uncommitted_sequence_ != 0) {
    recent_.Publish(uncommitted_sequence_, std::move(uncommitted_images_));
    uncommitted_sequence_ = 0;
  }
  uncommitted_images_.clear();
  return absl::OkStatus();
}

absl::Status StoreConnection::ApplyReplicated(uint64_t entry, const std::string& bytes) {
  // A leader's own writes move its position too: an entry it holds already (its follower
  // loop read the position before a write of its own moved it) is done.
  ASSIGN_OR_RETURN(uint64_t applied, AppliedEntry(*db_));
  if (entry <= applied) {
    MovePosition(applied);  // An earlier try committed and then failed (changesets.h).
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckNextEntry(entry, applied));
  const uint64_t before = recent_.LastSequence();
  RETURN_IF_ERROR(ApplyLogEntry(*db_, bytes, [&] { return SetAppliedEntry(*db_, entry); }));
  behind_log_ = false;  // Whatever a failed commit left out, the log has brought in.
  // Committed: the position moves however the rest ends, but only after the rest, so that a
  // read woken by it finds the change in the desired state and the feed.
  absl::Cleanup move_position = [this, entry] { MovePosition(entry); };
  // What the change did, learned as the leader's own commit learned it: every write that
  // changes an allocation or stores a manual circuit appends an event naming it.
  uncommitted_images_.clear();
  uncommitted_manual_.clear();
  ASSIGN_OR_RETURN(Statement named, db_->Prepare(R"sql(
    SELECT object_kind, object_id, sequence FROM events WHERE sequence > ?1 ORDER BY sequence)sql"));
  named.Bind(1, static_cast<int64_t>(before));
  uint64_t newest = 0;
  std::vector<std::string> circuits;
  while (true) {
    ASSIGN_OR_RETURN(bool row, named.Step());
    if (!row) break;
    const std::string kind = named.Text(0);
    if (kind == "allocation") uncommitted_images_[named.Text(1)] = nullptr;
    if (kind == "circuit") circuits.push_back(named.Text(1));
    newest = static_cast<uint64_t>(named.Int(2));
  }
  for (auto& [id, image] : uncommitted_images_) {
    ASSIGN_OR_RETURN(image, KeepImage(id));
  }
  for (const std::string& id : circuits) {
    ASSIGN_OR_RETURN(Statement source,
                     db_->Prepare("SELECT src_onic FROM circuits WHERE id = ?1 AND manual = 1"));
    source.Bind(1, id);
    ASSIGN_OR_RETURN(bool manual, source.Step());
    if (!manual) continue;
    ASSIGN_OR_RETURN(std::vector<v1::Circuit> stored,
                     SelectCircuits(*db_, CircuitFilter{.onic = source.Text(0)}));
    for (v1::Circuit& c : stored) {
      if (c.id() == id) uncommitted_manual_.push_back(std::move(c));
    }
  }
  desired_.Apply(uncommitted_images_, uncommitted_manual_);
  uncommitted_manual_.clear();
  InventoryChanged();  // Inventory, drain or health may have changed: a follower cannot tell.
  if (newest != 0) recent_.Publish(newest, std::move(uncommitted_images_));
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
