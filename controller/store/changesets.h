// A store transaction's changes as bytes, and those bytes applied on another replica: what
// the replicated log carries (docs/ha.md). Built on SQLite's session extension (Debian's
// libsqlite3 is built with it): a changeset lists each changed row of a table with a primary
// key, by key, with its old and new values.
//
// What a changeset does not carry, and replicas must therefore agree on by other means:
// - the schema (the migrations): a log entry names it (EncodeLogEntry, ApplyLogEntry, below),
//   and a changeset for a table or column a replica lacks fails to apply (DATA_LOSS), never
//   half-applies;
// - rows of a table without a primary key: fleetd has none (ChangesetsTest checks every
//   table of the current schema, so a new one without a key fails a test, not a takeover);
// - the replica's own bookkeeping, `kLocalTables`, which is never recorded.
#ifndef FLEET_CONTROLLER_STORE_CHANGESETS_H_
#define FLEET_CONTROLLER_STORE_CHANGESETS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "controller/store/sqlite.h"

struct sqlite3_session;

namespace fleet::store {

// Tables each replica keeps for itself: which log entry it has applied, and which inventory
// file it applied at start.
inline constexpr const char* kLocalTables[] = {"replica", "inventory_file"};

// Records every change made through `db` to a table with a primary key (kLocalTables
// excepted), from Start until destruction; Changeset() returns what it recorded so far. A
// change undone within the recording (a row inserted and deleted again, a rolled-back
// savepoint) is not in it. One recorder per transaction: start it after BEGIN, take the
// changeset before COMMIT.
class ChangeRecorder {
 public:
  static absl::StatusOr<ChangeRecorder> Start(Database& db);
  ChangeRecorder(ChangeRecorder&& other) noexcept : session_(other.session_) {
    other.session_ = nullptr;
  }
  ChangeRecorder& operator=(ChangeRecorder&&) = delete;
  ~ChangeRecorder();

  // The changes so far; empty when nothing changed.
  absl::StatusOr<std::string> Changeset();

 private:
  explicit ChangeRecorder(sqlite3_session* session) : session_(session) {}
  sqlite3_session* session_;
};

// Applies `changeset` to `db` in one transaction of its own, runs `then` (may be null) in that
// same transaction (a replica records there which entry it applied), and commits. Foreign keys
// are off while it applies, since a changeset already holds what the writer's cascades did.
// Every change must find the database as the writer left it before: a row to update or
// delete that is missing or differs, a row to insert that exists, a constraint broken, or a
// table or column unknown here, rolls all of it back and answers DATA_LOSS naming the table,
// the kind of change and the conflict. `db` must have no transaction open.
absl::Status ApplyChangeset(Database& db, absl::string_view changeset,
                            const std::function<absl::Status()>& then = nullptr);

// A log entry as a store writes it (docs/ha.md): a line naming the writer's schema version
// (its database's last migration, `PRAGMA user_version`), then the changeset:
//   "fleet-log-entry schema=14\n" + changeset
// Replicas apply only entries of their own schema: a migration that changed only data leaves
// the columns alike, so the column checks alone would let replicas on different migrations
// diverge silently.
std::string EncodeLogEntry(int schema_version, absl::string_view changeset);

// ApplyChangeset of `entry`'s changeset, once its schema is `db`'s. DATA_LOSS, nothing
// applied, for an entry of another schema (naming both versions) or bytes that are not an
// entry. A bare changeset, as entries were before they named their schema (SQLite starts a
// changeset with a table's 'T'; an empty one changes nothing), is applied under the column
// checks alone, and only by a store of a schema that wrote them (14 and before).
absl::Status ApplyLogEntry(Database& db, absl::string_view entry,
                           const std::function<absl::Status()>& then = nullptr);

// Whether `status`, from ApplyLogEntry (as it is, or with a prefix added), refused an entry for
// being of another schema than the database's, rather than for not fitting it.
bool IsOfAnotherSchema(const absl::Status& status);

// OK when `entry` is the one after `applied`, the last entry a store holds; else
// FAILED_PRECONDITION naming both (a store applies the log's entries in order).
absl::Status CheckNextEntry(uint64_t entry, uint64_t applied);

// The last log entry `db` reflects (0: none), and its update, to be made in the transaction
// that applies or appends that entry (the table `replica`, migration 11).
absl::StatusOr<uint64_t> AppliedEntry(Database& db);
absl::Status SetAppliedEntry(Database& db, uint64_t entry);

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_CHANGESETS_H_
