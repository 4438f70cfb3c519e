#include "controller/store/changesets.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "controller/store/migrations.h"

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

// Debian's SQLite 3.40 loops for ever on a table header whose name runs past the end of the
// changeset (sessionChangesetBufferTblhdr; found by fuzz/fuzz_log_entry.cc), holding the
// store's lock, and crashes applying an update whose old row lacks its key. So the changeset
// is read here first, every length against what is left and every change for the values a
// session records (an insert's or delete's every column; an update's old key, and old and new
// of each column it changed), and SQLite is given only changesets that pass.
absl::Status CheckFraming(absl::string_view changeset) {
  const size_t size = changeset.size();
  size_t at = 0;
  std::set<std::string> tables;  // Named by a header so far, in lower case.
  const auto corrupt = [&](absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat("changeset: corrupt (", what, " at byte ", at, " of ", size, ")"));
  };
  // SQLite's varint: 7 bits a byte while the high bit is set; a ninth byte counts whole.
  const auto varint = [&](uint64_t& value) {
    value = 0;
    for (int i = 0; i < 9 && at < size; ++i) {
      const auto byte = static_cast<uint8_t>(changeset[at++]);
      if (i == 8) {
        value = (value << 8) | byte;
        return true;
      }
      value = (value << 7) | (byte & 0x7f);
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  };
  // SQLite is handed the size as an int.
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) return corrupt("its size");
  uint64_t columns = 0;      // Of the table the changes are in; 0 before the first table.
  absl::string_view in_key;  // Its key flags, one byte a column.
  while (at < size) {
    const auto op = static_cast<uint8_t>(changeset[at]);
    if (op == 'T') {
      ++at;
      // SQLite's own bounds: at least one column, at most 65,536.
      if (!varint(columns) || columns == 0 || columns > 65536) {
        return corrupt("a table's column count");
      }
      if (size - at < columns) return corrupt("a table's key flags");
      in_key = changeset.substr(at, columns);
      at += columns;
      const size_t name_end = changeset.find('\0', at);
      if (name_end == absl::string_view::npos) return corrupt("a table's name");
      // A session writes one header a table; SQLite, applying, would keep the first one's
      // layout for the changes under a second.
      if (!tables.insert(absl::AsciiStrToLower(changeset.substr(at, name_end - at))).second) {
        return corrupt("a second header for one table");
      }
      at = name_end + 1;
      continue;
    }
    if (columns == 0) return corrupt("a change before any table");
    uint64_t values = 0;
    if (op == SQLITE_INSERT || op == SQLITE_DELETE) {
      values = columns;
    } else if (op == SQLITE_UPDATE) {
      values = 2 * columns;  // The old row's, then the new row's.
    } else {
      return corrupt("a change's operation");
    }
    if (size - at < 2) return corrupt("a change's flags");
    at += 2;  // The operation, and whether it was indirect.
    std::vector<bool> recorded(values);
    for (uint64_t v = 0; v < values; ++v) {
      if (at >= size) return corrupt("a value");
      const auto type = static_cast<uint8_t>(changeset[at++]);
      recorded[v] = type != 0;
      // A session records no row with a NULL in its key.
      if (type == SQLITE_NULL && in_key[v % columns] != 0) return corrupt("a NULL in a key");
      uint64_t length = 0;
      switch (type) {
        case 0:  // Not recorded (an update's column that did not change).
        case SQLITE_NULL:
          break;
        case SQLITE_INTEGER:
        case SQLITE_FLOAT:
          if (size - at < 8) return corrupt("a number");
          at += 8;
          break;
        case SQLITE_TEXT:
        case SQLITE_BLOB:
          if (!varint(length) || length > size - at) return corrupt("a text or blob's length");
          at += length;
          break;
        default:
          return corrupt("a value's type");
      }
    }
    for (uint64_t c = 0; c < columns; ++c) {
      const bool whole = op != SQLITE_UPDATE, key = in_key[c] != 0;
      if (whole ? !recorded[c] : (key ? !recorded[c] : recorded[c] != recorded[columns + c])) {
        return corrupt(absl::StrCat("a change without column ", c, "'s value"));
      }
    }
  }
  return absl::OkStatus();
}

// SQLite skips, silently, the changes of a table it lacks, or whose columns or primary key
// differ; a replica must not. Checks each table the changeset names against this database's
// schema, column by column (which are in the key), and refuses the replica's own tables.
absl::Status CheckTables(Database& db, absl::string_view changeset) {
  RETURN_IF_ERROR(CheckFraming(changeset));
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
    // Each column's place in the key (0: not in it), as SQLite compares them when it applies;
    // shown as one letter a column, k in the key, c not.
    std::string theirs, ours, their_places, our_places;
    for (int i = 0; i < columns; ++i) {
      theirs += in_key[i] != 0 ? 'k' : 'c';
      their_places += static_cast<char>(in_key[i]);
    }
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
      our_places += static_cast<char>(layout->Int(0));
    }
    if (status.ok() && ours != theirs) {
      status = absl::DataLossError(
          absl::StrCat("changeset: table ", table, " has columns ", theirs, " in the change but ",
                       ours.empty() ? "no such table" : ours,
                       " here (k: in the primary key, c: not): replicas must run the same schema"));
    } else if (status.ok() && our_places != their_places) {
      status = absl::DataLossError(
          absl::StrCat("changeset: table ", table,
                       "'s primary key orders its columns otherwise in the change than here: "
                       "replicas must run the same schema"));
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

namespace {
constexpr absl::string_view kEntryHeader = "fleet-log-entry schema=";
// The newest schema of a fleetd that wrote bare changesets: a store past it refuses them.
constexpr int kLastSchemaOfBareEntries = 14;
constexpr absl::string_view kOtherSchema = "log entry: written at schema version ";
}  // namespace

std::string EncodeLogEntry(int schema_version, absl::string_view changeset) {
  return absl::StrCat(kEntryHeader, schema_version, "\n", changeset);
}

absl::Status ApplyLogEntry(Database& db, absl::string_view entry,
                           const std::function<absl::Status()>& then) {
  ASSIGN_OR_RETURN(int own, SchemaVersion(db));
  if (entry.empty() || entry.front() == 'T') {
    if (own > kLastSchemaOfBareEntries) {
      return absl::DataLossError(absl::StrCat(
          "log entry: a bare changeset, as fleetd wrote at schema version ",
          kLastSchemaOfBareEntries, " and before, and this replica's store is at ", own,
          "; replicas apply only entries of their own schema (docs/ha.md, upgrades); nothing "
          "applied"));
    }
    return ApplyChangeset(db, entry, then);
  }
  // The version: 1 to 9 digits, then the newline.
  int written = 0;
  size_t count = 0;
  if (absl::StartsWith(entry, kEntryHeader)) {
    const absl::string_view digits = entry.substr(kEntryHeader.size(), 10);
    count = std::min(digits.find_first_not_of("0123456789"), digits.size());
  }
  const size_t newline = kEntryHeader.size() + count;
  if (count == 0 || count > 9 || entry.size() <= newline || entry[newline] != '\n' ||
      !absl::SimpleAtoi(entry.substr(kEntryHeader.size(), count), &written)) {
    return absl::DataLossError(
        absl::StrCat("log entry: starts with '", absl::CHexEscape(entry.substr(0, 32)), "', not '",
                     kEntryHeader, "<version>' and a newline, or a changeset; nothing applied"));
  }
  if (written != own) {
    return absl::DataLossError(
        absl::StrCat(kOtherSchema, written, ", and this replica's store is at ", own,
                     "; replicas apply only entries of their own schema (docs/ha.md, upgrades); "
                     "nothing applied"));
  }
  return ApplyChangeset(db, entry.substr(newline + 1), then);
}

absl::Status CheckNextEntry(uint64_t entry, uint64_t applied) {
  if (entry == applied + 1) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("store: log entry ", entry,
                                                    " is not the next: this replica holds ",
                                                    applied, ", so ", applied + 1, " is"));
}

bool IsOfAnotherSchema(const absl::Status& status) {
  return absl::IsDataLoss(status) && absl::StrContains(status.message(), kOtherSchema);
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
