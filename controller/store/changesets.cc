#include "controller/store/changesets.h"

#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fleet::store {
namespace {

int Replicated(void* /*context*/, const char* table) {
  for (const char* local : kLocalTables) {
    if (std::strcmp(table, local) == 0) return 0;
  }
  return 1;
}

const char* OperationName(int op) {
  switch (op) {
    case SQLITE_INSERT:
      return "insert";
    case SQLITE_UPDATE:
      return "update";
    case SQLITE_DELETE:
      return "delete";
  }
  return "change";
}

const char* ConflictName(int type) {
  switch (type) {
    case SQLITE_CHANGESET_DATA:
      return "the row differs from what the writer changed";
    case SQLITE_CHANGESET_NOTFOUND:
      return "the row is missing";
    case SQLITE_CHANGESET_CONFLICT:
      return "a row with that key exists already";
    case SQLITE_CHANGESET_CONSTRAINT:
      return "it breaks a constraint";
    case SQLITE_CHANGESET_FOREIGN_KEY:
      return "it leaves a foreign key unsatisfied";
  }
  return "conflict";
}

// The first conflict met; every conflict aborts the whole apply.
struct Conflict {
  std::string what;
};

int AbortOnConflict(void* context, int type, sqlite3_changeset_iter* it) {
  auto* conflict = static_cast<Conflict*>(context);
  if (!conflict->what.empty()) return SQLITE_CHANGESET_ABORT;
  const char* table = nullptr;
  int columns = 0, op = 0, indirect = 0;
  // A foreign-key conflict is reported once, at the end, without a change to name.
  if (type != SQLITE_CHANGESET_FOREIGN_KEY &&
      sqlite3changeset_op(it, &table, &columns, &op, &indirect) == SQLITE_OK) {
    conflict->what = absl::StrCat(OperationName(op), " in table ", table, ": ", ConflictName(type));
  } else {
    conflict->what = ConflictName(type);
  }
  return SQLITE_CHANGESET_ABORT;
}

// SQLite skips, silently, the changes of a table it lacks, or whose columns or primary key
// differ; a replica must not. Checks each table the changeset names against this database's
// schema, column by column (which are in the key), and refuses the replica's own tables.
absl::Status CheckTables(Database& db, absl::string_view changeset) {
  sqlite3_changeset_iter* it = nullptr;
  int rc = sqlite3changeset_start(&it, static_cast<int>(changeset.size()),
                                  const_cast<char*>(changeset.data()));
  if (rc != SQLITE_OK) {
    return absl::DataLossError(
        absl::StrCat("changeset: not a changeset (", sqlite3_errstr(rc), ")"));
  }
  std::set<std::string> checked;
  absl::Status status;
  while (status.ok() && (rc = sqlite3changeset_next(it)) == SQLITE_ROW) {
    const char* table = nullptr;
    int columns = 0, op = 0, indirect = 0;
    unsigned char* in_key = nullptr;
    if (sqlite3changeset_op(it, &table, &columns, &op, &indirect) != SQLITE_OK ||
        sqlite3changeset_pk(it, &in_key, &columns) != SQLITE_OK) {
      break;
    }
    if (!checked.insert(table).second) continue;
    if (Replicated(nullptr, table) == 0) {
      status = absl::DataLossError(
          absl::StrCat("changeset: changes table ", table, ", which each replica keeps itself"));
      break;
    }
    std::string theirs, ours;  // One letter per column: k in the key, c not.
    for (int i = 0; i < columns; ++i) theirs += in_key[i] != 0 ? 'k' : 'c';
    absl::StatusOr<Statement> layout =
        db.Prepare("SELECT pk FROM pragma_table_info(?1) ORDER BY cid");
    if (!layout.ok()) {
      status = layout.status();
      break;
    }
    layout->Bind(1, table);
    while (status.ok()) {
      absl::StatusOr<bool> row = layout->Step();
      if (!row.ok()) status = row.status();
      if (!row.ok() || !*row) break;
      ours += layout->Int(0) > 0 ? 'k' : 'c';
    }
    if (status.ok() && ours != theirs) {
      status = absl::DataLossError(
          absl::StrCat("changeset: table ", table, " has columns ", theirs, " in the change but ",
                       ours.empty() ? "no such table" : ours,
                       " here (k: in the primary key, c: not): replicas must run the same schema"));
    }
  }
  const int finalized = sqlite3changeset_finalize(it);
  if (status.ok() && (rc != SQLITE_DONE || finalized != SQLITE_OK)) {
    status = absl::DataLossError(absl::StrCat(
        "changeset: corrupt (", sqlite3_errstr(rc == SQLITE_DONE ? finalized : rc), ")"));
  }
  return status;
}

}  // namespace

absl::StatusOr<ChangeRecorder> ChangeRecorder::Start(Database& db) {
  sqlite3_session* session = nullptr;
  int rc = sqlite3session_create(db.db_, "main", &session);
  if (rc != SQLITE_OK) return SqliteError(db.db_, rc, "start recording changes");
  sqlite3session_table_filter(session, Replicated, nullptr);
  rc = sqlite3session_attach(session, nullptr);  // Every table the filter lets through.
  if (rc != SQLITE_OK) {
    sqlite3session_delete(session);
    return SqliteError(db.db_, rc, "start recording changes");
  }
  return ChangeRecorder(session);
}

ChangeRecorder::~ChangeRecorder() {
  if (session_ != nullptr) sqlite3session_delete(session_);
}

absl::StatusOr<std::string> ChangeRecorder::Changeset() {
  int size = 0;
  void* bytes = nullptr;
  const int rc = sqlite3session_changeset(session_, &size, &bytes);
  if (rc != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("changeset of the transaction: ", sqlite3_errstr(rc)));
  }
  std::string out(static_cast<const char*>(bytes), static_cast<size_t>(size));
  sqlite3_free(bytes);
  return out;
}

absl::Status ApplyChangeset(Database& db, absl::string_view changeset,
                            const std::function<absl::Status()>& then) {
  if (sqlite3_get_autocommit(db.db_) == 0) {
    return absl::FailedPreconditionError(
        "changeset: applied inside an open transaction (foreign keys cannot be turned off)");
  }
  RETURN_IF_ERROR(CheckTables(db, changeset));
  // Off outside the transaction (the pragma is a no-op inside one), on again whatever happens.
  RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys = OFF"));
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db));
    Conflict conflict;
    const int rc = sqlite3changeset_apply(db.db_, static_cast<int>(changeset.size()),
                                          const_cast<char*>(changeset.data()),
                                          /*xFilter=*/nullptr, AbortOnConflict, &conflict);
    if (!conflict.what.empty()) {
      return absl::DataLossError(
          absl::StrCat("changeset: ", conflict.what, "; nothing of it was applied"));
    }
    if (rc != SQLITE_OK) return SqliteError(db.db_, rc, "apply a changeset");
    if (then) RETURN_IF_ERROR(then());
    return txn.Commit();
  }();
  absl::Status restored = db.Exec("PRAGMA foreign_keys = ON");
  return status.ok() ? restored : status;
}

absl::StatusOr<uint64_t> AppliedEntry(Database& db) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare("SELECT applied_entry FROM replica WHERE id = 1"));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? static_cast<uint64_t>(stmt.Int(0)) : 0;
}

absl::Status SetAppliedEntry(Database& db, uint64_t entry) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(R"sql(
    INSERT INTO replica (id, applied_entry) VALUES (1, ?1)
    ON CONFLICT (id) DO UPDATE SET applied_entry = excluded.applied_entry)sql"));
  return stmt.Bind(1, static_cast<int64_t>(entry)).Run();
}

}  // namespace fleet::store
