#include "controller/store/sqlite.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "common/thread_name.h"

namespace fleet::store {

absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
      return absl::FailedPreconditionError(message);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  if (cache_ != nullptr) {
    cache_->Return(stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
}

Statement& Statement::Bind(int index, absl::string_view text) {
  int rc =
      sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) bind_error_ = rc;
  return *this;
}

Statement& Statement::Bind(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) bind_error_ = rc;
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) bind_error_ = rc;
  return *this;
}

Statement& Statement::BindBlob(int index, absl::string_view bytes) {
  int rc = sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()),
                             SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) bind_error_ = rc;
  return *this;
}

Statement& Statement::BindNull(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) bind_error_ = rc;
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  if (bind_error_ != SQLITE_OK) {
    return SqliteError(db_, bind_error_, absl::StrCat("binding ", sqlite3_sql(stmt_)));
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, sqlite3_sql(stmt_));
}

absl::Status Statement::Run() {
  absl::StatusOr<bool> row = Step();
  if (!row.ok()) return row.status();
  return absl::OkStatus();
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = SQLITE_OK;
}

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  int size = sqlite3_column_bytes(stmt_, column);
  return text ? std::string(reinterpret_cast<const char*>(text), size) : std::string();
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::Double(int column) const { return sqlite3_column_double(stmt_, column); }

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteError(db, rc, absl::StrCat("opening state database ", path));
    sqlite3_close(db);
    return status;
  }
  std::unique_ptr<Database> database(new Database(db, path));
  sqlite3_busy_timeout(db, 5000);
  sqlite3_extended_result_codes(db, 1);
  if (absl::Status s = database->Exec("PRAGMA foreign_keys = ON"); !s.ok()) return s;
  return database;
}

// Runs WAL checkpoints on its own thread and connection when the writer's commits ask for
// one (sqlite3_wal_hook, which also turns off SQLite's checkpoint inside the commit). A
// PASSIVE checkpoint copies what no reader still needs and never blocks the writer; a log
// it could not copy whole is finished by the next one.
class Database::Checkpointer {
 public:
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Start(sqlite3* writer,
                                                             const std::string& path, int pages) {
    sqlite3* own = nullptr;
    const int rc =
        sqlite3_open_v2(path.c_str(), &own, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      absl::Status status =
          SqliteError(own, rc, absl::StrCat("opening ", path, " for checkpoints"));
      sqlite3_close(own);
      return status;
    }
    sqlite3_busy_timeout(own, 5000);
    auto checkpointer = std::unique_ptr<Checkpointer>(new Checkpointer(own, path, pages));
    sqlite3_wal_hook(writer, &Checkpointer::Committed, checkpointer.get());
    checkpointer->thread_ = std::thread([c = checkpointer.get()] {
      NameThisThread("fleet-checkpoint");
      c->Run();
    });
    return checkpointer;
  }
  ~Checkpointer() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
    sqlite3_close(own_);
  }
  // Unhooks the writer: no commit may call into this once it is gone.
  void Detach(sqlite3* writer) { sqlite3_wal_hook(writer, nullptr, nullptr); }
  int64_t runs() {
    absl::MutexLock lock(&mu_);
    return runs_;
  }

 private:
  Checkpointer(sqlite3* own, std::string path, int pages)
      : own_(own), path_(std::move(path)), pages_(pages) {}

  // Called by SQLite on the writer's thread after each commit, with the log's size in pages.
  static int Committed(void* self, sqlite3*, const char*, int pages) {
    auto* c = static_cast<Checkpointer*>(self);
    if (pages >= c->pages_) {
      absl::MutexLock lock(&c->mu_);
      c->wanted_ = true;
    }
    return SQLITE_OK;
  }

  void Run() {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wanted_ || stopping_; };
        mu_.Await(absl::Condition(&woken));
        if (stopping_) return;
        wanted_ = false;
      }
      // A read first: a connection knows the file is in WAL mode only once it has read it.
      sqlite3_exec(own_, "PRAGMA schema_version", nullptr, nullptr, nullptr);
      int log = 0, copied = 0;
      const int rc =
          sqlite3_wal_checkpoint_v2(own_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
      // BUSY: another checkpoint ran (the final one at close); the log is copied next time.
      // Anything else repeats at the next commit past the limit, and the log grows meanwhile:
      // said once per run of failures, not at every commit.
      const bool failed = rc != SQLITE_OK && rc != SQLITE_BUSY;
      if (failed && !failing_) {
        FLEET_LOG(WARNING) << "checkpoint of " << path_ << " failed: " << sqlite3_errmsg(own_)
                           << "; the write-ahead log grows until one succeeds";
      }
      failing_ = failed;
      absl::MutexLock lock(&mu_);
      ++runs_;
    }
  }

  sqlite3* const own_;
  const std::string path_;
  const int pages_;
  std::thread thread_;
  bool failing_ = false;  // The last checkpoint failed (the thread's own).
  absl::Mutex mu_;
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t runs_ ABSL_GUARDED_BY(mu_) = 0;
};

Database::Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

Database::~Database() {
  if (checkpointer_ != nullptr) {
    checkpointer_->Detach(db_);
    checkpointer_.reset();  // Its connection closes first; this one's close checkpoints last.
  }
  for (auto& [sql, stmt] : idle_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
  if (log_fd_ >= 0) ::close(log_fd_);
}

void Database::Return(sqlite3_stmt* stmt) {
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  idle_.emplace(sql_of_.at(stmt), stmt);
}

absl::Status Database::EnableWriteAheadLog(int checkpoint_pages) {
  if (checkpoint_pages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint_pages must be at least 1, not ", checkpoint_pages));
  }
  // In memory, or a private temporary file (""): no file another connection could open.
  if (path_ == ":memory:" || path_.empty()) return absl::OkStatus();
  if (absl::Status s = Exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"); !s.ok()) {
    return s;
  }
  if (checkpointer_ != nullptr) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<Checkpointer>> started =
      Checkpointer::Start(db_, path_, checkpoint_pages);
  if (!started.ok()) {
    // The database works without it: commits checkpoint, as SQLite does by default.
    FLEET_LOG(WARNING) << started.status() << "; commits will checkpoint the log themselves";
    sqlite3_wal_autocheckpoint(db_, checkpoint_pages);
    return absl::OkStatus();
  }
  checkpointer_ = std::move(*started);
  return absl::OkStatus();
}

int64_t Database::background_checkpoints() const {
  return checkpointer_ == nullptr ? 0 : checkpointer_->runs();
}

absl::StatusOr<bool> Database::EnableIncrementalVacuum() {
  constexpr int64_t kIncremental = 2;  // PRAGMA auto_vacuum's value for INCREMENTAL.
  // On a database without pages yet this sets the mode; on one with tables it only records
  // the wish, which the next VACUUM carries out.
  if (absl::Status s = Exec("PRAGMA auto_vacuum = INCREMENTAL"); !s.ok()) return s;
  auto mode = [this]() -> absl::StatusOr<int64_t> {
    absl::StatusOr<Statement> stmt = Prepare("PRAGMA auto_vacuum");
    if (!stmt.ok()) return stmt.status();
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::InternalError("PRAGMA auto_vacuum returned no row");
    return stmt->Int(0);
  };
  absl::StatusOr<int64_t> before = mode();
  if (!before.ok()) return before.status();
  if (*before == kIncremental) return false;
  FLEET_LOG(INFO) << "rewriting " << path_
                  << " once (VACUUM) to turn on incremental vacuum; this takes a while for a "
                     "large database";
  if (absl::Status s = Exec("VACUUM"); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("VACUUM of ", path_,
                                               " for incremental "
                                               "auto-vacuum: ",
                                               s.message()));
  }
  absl::StatusOr<int64_t> after = mode();
  if (!after.ok()) return after.status();
  if (*after != kIncremental) {
    return absl::InternalError(absl::StrCat("auto_vacuum of ", path_, " is ", *after,
                                            " after VACUUM, not incremental (2)"));
  }
  return true;
}

absl::StatusOr<int64_t> Database::IncrementalVacuum(int pages) {
  if (pages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("incremental vacuum pages must be at least 1, not ", pages));
  }
  absl::StatusOr<Pages> before = PageCounts();
  if (!before.ok()) return before.status();
  if (before->free_pages == 0) return 0;
  // PRAGMA takes no bound parameters; `pages` is our own integer, not input.
  if (absl::Status s = Exec(absl::StrCat("PRAGMA incremental_vacuum(", pages, ")")); !s.ok()) {
    return s;
  }
  absl::StatusOr<Pages> after = PageCounts();
  if (!after.ok()) return after.status();
  return before->pages - after->pages;
}

absl::StatusOr<Database::Pages> Database::PageCounts() {
  Pages pages;
  for (auto [pragma, out] : {std::pair{"PRAGMA page_size", &pages.page_size},
                             std::pair{"PRAGMA page_count", &pages.pages},
                             std::pair{"PRAGMA freelist_count", &pages.free_pages}}) {
    absl::StatusOr<Statement> stmt = Prepare(pragma);
    if (!stmt.ok()) return stmt.status();
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::InternalError(absl::StrCat(pragma, " returned no row"));
    *out = stmt->Int(0);
  }
  if (path_ != ":memory:" && !path_.empty()) {
    std::error_code absent;  // No log: not in WAL mode, or removed at the last close.
    const uintmax_t size = std::filesystem::file_size(path_ + "-wal", absent);
    if (!absent) pages.wal_bytes = static_cast<int64_t>(size);
  }
  return pages;
}

absl::StatusOr<Statement> Database::Prepare(absl::string_view sql) {
  if (auto it = idle_.find(std::string(sql)); it != idle_.end()) {
    sqlite3_stmt* stmt = it->second;
    idle_.erase(it);
    return Statement(db_, stmt, this);
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, absl::StrCat("preparing ", sql));
  sql_of_.emplace(stmt, std::string(sql));
  return Statement(db_, stmt, this);
}

absl::Status Database::Exec(const std::string& sql) {
  char* error = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = error ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    return SqliteError(nullptr, rc, message);
  }
  return absl::OkStatus();
}

absl::StatusOr<Transaction> Transaction::Begin(Database& db) {
  if (absl::Status s = db.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (db_ == nullptr) return;
  if (absl::Status s = db_->Exec("ROLLBACK"); !s.ok()) {
    FLEET_LOG(ERROR) << "rollback failed: " << s;
  }
}

absl::Status Transaction::Commit() {
  absl::Status s = db_->Exec("COMMIT");
  if (s.ok()) {
    db_->commits_.fetch_add(1, std::memory_order_release);
    db_ = nullptr;
  }
  return s;
}

absl::Status Database::SyncLog() {
  const uint64_t wanted = commits_.load(std::memory_order_acquire);
  absl::MutexLock lock(&sync_mu_);
  // After a failed fdatasync the kernel may have dropped the pages it could not write and
  // marked them clean, so a later sync that succeeds would prove nothing: the failure stays.
  if (!sync_failure_.ok()) return sync_failure_;
  if (synced_commits_ >= wanted || path_ == ":memory:" || path_.empty()) return absl::OkStatus();
  // Everything committed by now is covered by this sync, not only what this caller wanted.
  const uint64_t covered = commits_.load(std::memory_order_acquire);
  if (log_fd_ < 0) {
    log_fd_ = ::open((path_ + "-wal").c_str(), O_RDONLY | O_CLOEXEC);
    // Without a log (not in WAL mode) SQLite syncs the commits themselves.
    if (log_fd_ < 0 && errno == ENOENT) return absl::OkStatus();
    if (log_fd_ < 0) {
      return absl::InternalError(absl::StrCat("cannot open the write-ahead log of ", path_,
                                              " to sync it: ", std::strerror(errno)));
    }
    // The log's directory entry too, once: a new file is not found after a power loss
    // unless its directory was synced.
    const std::string dir = std::filesystem::path(path_).parent_path().string();
    const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      (void)::fsync(dir_fd);
      ::close(dir_fd);
    }
  }
  if (::fdatasync(log_fd_) != 0) {
    sync_failure_ = absl::InternalError(
        absl::StrCat("cannot sync the write-ahead log of ", path_, ": ", std::strerror(errno),
                     "; nothing more is made durable until fleetd restarts"));
    FLEET_LOG(ERROR) << sync_failure_;
    return sync_failure_;
  }
  synced_commits_ = covered;
  log_syncs_.fetch_add(1);
  return absl::OkStatus();
}

}  // namespace fleet::store
