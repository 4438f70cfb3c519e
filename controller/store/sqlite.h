// A thin RAII layer over the SQLite C API: a connection, prepared statements and
// transactions. Only prepared statements with bound parameters are used; SQL text is never
// built from values.
#ifndef FLEET_CONTROLLER_STORE_SQLITE_H_
#define FLEET_CONTROLLER_STORE_SQLITE_H_

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace fleet::store {

class Database;

class Statement {
 public:
  // `cache`, when set, takes the statement back for reuse instead of finalizing it.
  Statement(sqlite3* db, sqlite3_stmt* stmt, Database* cache = nullptr)
      : db_(db), stmt_(stmt), cache_(cache) {}
  Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_), cache_(other.cache_) {
    other.stmt_ = nullptr;
  }
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  ~Statement();

  // Parameters are 1-based, as in SQLite.
  Statement& Bind(int index, absl::string_view text);
  Statement& Bind(int index, const char* text) { return Bind(index, absl::string_view(text)); }
  Statement& Bind(int index, const std::string& text) {
    return Bind(index, absl::string_view(text));
  }
  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, double value);
  Statement& BindBlob(int index, absl::string_view bytes);
  Statement& BindNull(int index);

  // Advances: true when a row is ready, false when done; an error status on failure.
  absl::StatusOr<bool> Step();
  // Runs a statement that returns no rows.
  absl::Status Run();
  // Clears bindings and rewinds, to run the statement again.
  void Reset();

  std::string Text(int column) const;
  int64_t Int(int column) const;
  double Double(int column) const;
  bool IsNull(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  Database* cache_;
  int bind_error_ = SQLITE_OK;
};

class Database {
 public:
  // Opens (creating if absent) `path`; ":memory:" for a private in-memory database.
  // Turns on foreign keys and a busy timeout; changes nothing in the file.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Switches a file database to WAL journaling (persistent: it rewrites the file header).
  // A no-op for ":memory:" and "" (a temporary file); `checkpoint_pages` must be at least 1.
  // Checkpoints (copying the log into the database file, with an fsync of each) run on a
  // thread of their own, with its own connection, once a commit leaves `checkpoint_pages`
  // pages or more in the log; no commit does one. SQLite's default would run it inside the
  // commit that reached 1000 pages, which then took milliseconds instead of a fraction of
  // one: every twentieth reconfiguration or so paid for the others. If that connection cannot
  // be opened, commits checkpoint as by default (logged). A second call changes nothing.
  absl::Status EnableWriteAheadLog(int checkpoint_pages = 1000);
  // Checkpoints the background thread has run (each may copy part of the log).
  int64_t background_checkpoints() const;

  // Turns on incremental auto-vacuum, so that IncrementalVacuum can hand free pages back to
  // the file system. Call outside any transaction, before EnableWriteAheadLog (switching to
  // WAL writes the header of a new file, after which the mode is fixed). A new database gets
  // the mode before its first table; an existing one without it is rewritten once by VACUUM,
  // which takes time and temporary disk space in proportion to its size. Returns whether that
  // rewrite ran; a second call changes nothing.
  absl::StatusOr<bool> EnableIncrementalVacuum();
  // Returns up to `pages` free pages to the file system in one transaction of its own (pages
  // at the end of the file move into free ones first); returns how many went. In WAL mode the
  // file itself shrinks when the checkpoint that copies that transaction runs.
  absl::StatusOr<int64_t> IncrementalVacuum(int pages);
  struct Pages {
    int64_t page_size = 0;
    int64_t pages = 0;       // The database's size in pages, free ones included.
    int64_t free_pages = 0;  // On the free list: reused by writes, or given back by a vacuum.
    int64_t wal_bytes = 0;   // The write-ahead log file's size; 0 without one.
  };
  absl::StatusOr<Pages> PageCounts();

  // Makes every commit so far durable across a power loss of the host, not only a crash of
  // fleetd. With synchronous=NORMAL a commit in WAL mode is written to the log but not
  // synced; this fdatasyncs the log. It needs no connection, so commits go on meanwhile; a
  // call that finds no commit since the last sync returns at once, and callers at the same
  // time share one fdatasync (group commit). Thread-safe. Nothing to do without a log file
  // (":memory:", ""). A failed sync fails every later one too, until the database is opened
  // again: the kernel may have dropped what it could not write.
  absl::Status SyncLog();
  // The fdatasyncs SyncLog has run.
  int64_t log_syncs() const { return log_syncs_.load(); }

  // Compiled statements are kept and reused by their SQL text: compiling costs more than
  // running most of the store's statements. Not thread-safe, like the connection.
  absl::StatusOr<Statement> Prepare(absl::string_view sql);
  // Runs one or more statements without parameters (schema, pragmas).
  absl::Status Exec(const std::string& sql);
  int64_t Changes() const { return sqlite3_changes64(db_); }
  // The rowid of the last row this connection inserted (an event's sequence, say).
  int64_t LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
  const std::string& path() const { return path_; }

 private:
  friend class Statement;
  friend class ChangeRecorder;  // changesets.h: sessions and apply work on the connection.
  friend absl::Status ApplyChangeset(Database& db, absl::string_view changeset,
                                     const std::function<absl::Status()>& then);
  friend class Transaction;  // Counts commits for SyncLog.
  class Checkpointer;
  Database(sqlite3* db, std::string path);
  void Return(sqlite3_stmt* stmt);  // A finished statement, reset, back to the cache.
  sqlite3* db_;
  std::string path_;
  std::unique_ptr<Checkpointer> checkpointer_;  // Set by EnableWriteAheadLog; ends first.
  std::unordered_multimap<std::string, sqlite3_stmt*> idle_;  // By the SQL given to Prepare.
  std::unordered_map<sqlite3_stmt*, std::string> sql_of_;
  std::atomic<uint64_t> commits_{0};
  std::atomic<int64_t> log_syncs_{0};
  absl::Mutex sync_mu_;  // One fdatasync at a time; the others wait and share it.
  uint64_t synced_commits_ ABSL_GUARDED_BY(sync_mu_) = 0;
  int log_fd_ ABSL_GUARDED_BY(sync_mu_) = -1;            // The WAL file, opened at the first sync.
  absl::Status sync_failure_ ABSL_GUARDED_BY(sync_mu_);  // Once set, every sync fails.
};

// Maps an SQLite result code to a canonical status: constraint violations become
// FAILED_PRECONDITION, busy/locked UNAVAILABLE, the rest INTERNAL.
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what);

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless Commit() succeeded.
// Immediate so a writer takes the write lock before reading what it will change.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(Database& db);
  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction(const Transaction&) = delete;
  ~Transaction();
  absl::Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_SQLITE_H_
