// Schema migrations and connection settings of the SQLite layer (controller/store/migrations.h,
// controller/store/sqlite.h), and how OpenSqliteStore applies them.
#include "controller/store/migrations.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "controller/store/changesets.h"
#include "controller/store/sqlite.h"
#include "controller/store/store.h"
#include "testing/fake_clock.h"
#include "tests/eventually.h"
#include "tests/store/store_test_util.h"

namespace fleet::store {
namespace {

using ::fleet::store::testing_util::ByteDifference;
using ::fleet::store::testing_util::IsOk;
using ::fleet::store::testing_util::QueryText;
using ::fleet::store::testing_util::ReadBytes;
using ::fleet::store::testing_util::ScratchDir;
using ::fleet::store::testing_util::StatusIs;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::SizeIs;

int LatestVersion() { return Migrations().back().version; }

bool TableExists(Database& db, const std::string& table) {
  absl::StatusOr<Statement> stmt =
      db.Prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
  if (!stmt.ok()) return false;
  stmt->Bind(1, table);
  absl::StatusOr<bool> row = stmt->Step();
  return row.ok() && *row;
}

// Writes a database in SQLite's default rollback-journal mode, bypassing Database::Open.
void WriteRollbackJournalDatabase(const std::string& path, int user_version) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  const std::string sql = absl::StrCat(
      "CREATE TABLE keep (v TEXT); INSERT INTO keep VALUES ('from a newer fleetd');"
      "PRAGMA user_version = ",
      user_version, ";");
  char* error = nullptr;
  int rc = sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, &error);
  EXPECT_EQ(rc, SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  ASSERT_EQ(sqlite3_close(raw), SQLITE_OK);
}

TEST(MigrationsTest, VersionsAreConsecutiveFromOne) {
  const std::vector<Migration>& migrations = Migrations();
  ASSERT_FALSE(migrations.empty());
  for (size_t i = 0; i < migrations.size(); ++i) {
    EXPECT_EQ(migrations[i].version, static_cast<int>(i + 1)) << migrations[i].name;
    EXPECT_FALSE(migrations[i].name.empty()) << "migration " << migrations[i].version;
  }
}

TEST(MigrationsTest, FreshDatabaseEndsAtLatestVersion) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  ASSERT_OK_AND_ASSIGN(int before, SchemaVersion(*db));
  EXPECT_EQ(before, 0);
  ASSERT_THAT(Migrate(*db, Migrations()), IsOk());
  ASSERT_OK_AND_ASSIGN(int after, SchemaVersion(*db));
  EXPECT_EQ(after, LatestVersion());
  for (const char* table :
       {"switches", "switch_ports", "hosts", "devices", "onics", "onic_ports", "fibers", "trunks",
        "allocations", "circuits", "cross_connects", "events"}) {
    EXPECT_TRUE(TableExists(*db, table)) << table;
  }
}

// Reading a device lists its O-NICs: the lookup goes through an index, not a scan of every
// O-NIC per device (quadratic in the site).
TEST(MigrationsTest, ADevicesOnicsAreFoundThroughAnIndex) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  ASSERT_THAT(Migrate(*db, Migrations()), IsOk());
  ASSERT_OK_AND_ASSIGN(
      Statement plan,
      db->Prepare("EXPLAIN QUERY PLAN SELECT id FROM onics WHERE device_id = 'd1' ORDER BY id"));
  std::string details;
  while (true) {
    ASSERT_OK_AND_ASSIGN(bool row, plan.Step());
    if (!row) break;
    details += plan.Text(3) + "\n";
  }
  EXPECT_THAT(details, HasSubstr("USING COVERING INDEX onics_by_device (device_id=?)"));
  EXPECT_THAT(details, ::testing::Not(HasSubstr("TEMP B-TREE")));  // No sort either.
}

// An agent's registration lists the O-NICs at its place (a host, or a chassis of pooled
// devices) and then each by serial, as SelectOnics asks: each through an index, not a scan of
// every device and O-NIC.
TEST(MigrationsTest, TheOnicsAtAPlaceAndBySerialAreFoundThroughIndexes) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  ASSERT_THAT(Migrate(*db, Migrations()), IsOk());
  auto plan_of = [&](const std::string& where) {
    absl::StatusOr<Statement> plan = db->Prepare(
        "EXPLAIN QUERY PLAN SELECT o.id FROM onics o JOIN devices d ON d.id = o.device_id "
        "WHERE " +
        where);
    EXPECT_TRUE(plan.ok()) << plan.status();
    std::string details;
    while (plan.ok()) {
      absl::StatusOr<bool> row = plan->Step();
      if (!row.ok() || !*row) break;
      details += plan->Text(3) + "\n";
    }
    return details;
  };
  const std::string place = plan_of(
      "d.id IN (SELECT id FROM devices WHERE host = ?1 UNION "
      "SELECT id FROM devices WHERE chassis = ?1 AND COALESCE(host, '') = '')");
  EXPECT_THAT(place, HasSubstr("INDEX devices_by_host (host=?)"));
  EXPECT_THAT(place, HasSubstr("INDEX devices_by_chassis (chassis=?)"));
  EXPECT_THAT(place, HasSubstr("onics_by_device (device_id=?)"));
  EXPECT_THAT(place, ::testing::Not(HasSubstr("SCAN o")));
  const std::string serial = plan_of("o.serial = ?1");
  EXPECT_THAT(serial, HasSubstr("INDEX sqlite_autoindex_onics_2 (serial=?)"));
  EXPECT_THAT(serial, ::testing::Not(HasSubstr("SCAN")));
}

TEST(MigrationsTest, OpenSqliteStoreMigratesFreshFileToLatest) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("state.db");
  fleet::testing::FakeClock clock;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                         OpenSqliteStore({.path = path, .clock = &clock}));
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path));
  ASSERT_OK_AND_ASSIGN(int version, SchemaVersion(*db));
  EXPECT_EQ(version, LatestVersion());
}

// An upgrade of a replica (docs/ha.md): the database is a schema behind this build's, and the
// log holds entries of its schema, then of the new one. What before_migrating applies lands
// at the old schema; the migration follows; the new schema's entries apply after it.
class ReplicaUpgradeTest : public ::testing::Test {
 protected:
  static std::vector<Migration> Older() { return {Migrations().begin(), Migrations().end() - 1}; }

  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    path_ = dir_.File("replica.db");
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> replica, Database::Open(path_));
    ASSERT_THAT(Migrate(*replica, Older()), IsOk());
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> writer, Database::Open(":memory:"));
    ASSERT_THAT(Migrate(*writer, Older()), IsOk());
    const int older = Older().back().version;
    for (const char* host : {"h1", "h2"}) {
      entries_.push_back(EncodeLogEntry(
          older, testing_util::Recorded(
                     *writer, absl::StrCat("INSERT INTO hosts (name, address) VALUES ('", host,
                                           "', '10.1.0.1')"))));
    }
    ASSERT_THAT(Migrate(*writer, Migrations()), IsOk());
    entries_.push_back(EncodeLogEntry(
        LatestVersion(),
        testing_util::Recorded(*writer,
                               "INSERT INTO hosts (name, address) VALUES ('h3', '10.1.0.3')")));
  }

  // What a replica's before_migrating does: the entries in order, until one is refused.
  absl::Status ApplyUntilRefused(LogReplica& older) {
    ++calls_;
    for (size_t i = 0; i < entries_.size(); ++i) {
      absl::Status applied = older.ApplyReplicated(i + 1, entries_[i]);
      if (!applied.ok()) {
        refusal_ = applied;
        break;
      }
    }
    absl::StatusOr<uint64_t> position = older.ReplicaPosition();
    position_before_migrating_ = position.value_or(0);
    return position.status();
  }

  ScratchDir dir_;
  std::string path_;
  std::vector<std::string> entries_;  // Entry i + 1 of the log.
  fleet::testing::FakeClock clock_;
  int calls_ = 0;
  absl::Status refusal_;
  uint64_t position_before_migrating_ = 0;
};

TEST_F(ReplicaUpgradeTest, TheEntriesOfTheOlderSchemaApplyBeforeTheMigrationAndTheNewOnesAfter) {
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Store> store,
      OpenSqliteStore({.path = path_, .clock = &clock_, .before_migrating = [&](LogReplica& older) {
                         return ApplyUntilRefused(older);
                       }}));
  EXPECT_EQ(calls_, 1);
  EXPECT_EQ(position_before_migrating_, 2u);
  EXPECT_THAT(refusal_,
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr(absl::StrCat("written at schema version ", LatestVersion()))));
  ASSERT_OK_AND_ASSIGN(uint64_t position, store->ReplicaPosition());
  EXPECT_EQ(position, 2u);
  EXPECT_THAT(store->ApplyReplicated(3, entries_[2]), IsOk());
  for (const char* host : {"h1", "h2", "h3"}) {
    EXPECT_THAT(store->GetHost(host), IsOk()) << host;
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path_));
  ASSERT_OK_AND_ASSIGN(int version, SchemaVersion(*db));
  EXPECT_EQ(version, LatestVersion());
}

TEST_F(ReplicaUpgradeTest, WithoutItTheOlderSchemasEntriesAreRefusedAfterTheMigration) {
  // What before_migrating prevents: migrated first, the replica cannot apply the log's next
  // entry, and stops following.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                       OpenSqliteStore({.path = path_, .clock = &clock_}));
  EXPECT_THAT(store->ApplyReplicated(1, entries_[0]),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("written at schema version")));
  EXPECT_THAT(store->GetHost("h1"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("h1")));
}

TEST_F(ReplicaUpgradeTest, ItsErrorLeavesTheDatabaseUnmigrated) {
  const absl::Status unreachable = absl::UnavailableError("etcd unreachable");
  EXPECT_THAT(OpenSqliteStore({.path = path_,
                               .clock = &clock_,
                               .before_migrating = [&](LogReplica&) { return unreachable; }}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("etcd unreachable")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path_));
  ASSERT_OK_AND_ASSIGN(int version, SchemaVersion(*db));
  EXPECT_EQ(version, Older().back().version);
}

TEST_F(ReplicaUpgradeTest, ItIsCalledOnlyForAnOlderReplicasDatabase) {
  auto count = [&](LogReplica&) {
    ++calls_;
    return absl::OkStatus();
  };
  // A new database, and one from before databases had a log position (migration 11).
  const std::string before_replicas = dir_.File("before-replicas.db");
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(before_replicas));
    ASSERT_THAT(Migrate(*db, {Migrations().begin(), Migrations().begin() + 10}), IsOk());
  }
  for (const std::string& path : {dir_.File("new.db"), before_replicas}) {
    ASSERT_OK_AND_ASSIGN(
        std::unique_ptr<Store> store,
        OpenSqliteStore({.path = path, .clock = &clock_, .before_migrating = count}));
  }
  EXPECT_EQ(calls_, 0);
  // One of this build's schema.
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                         OpenSqliteStore({.path = path_, .clock = &clock_}));
  }
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Store> store,
      OpenSqliteStore({.path = path_, .clock = &clock_, .before_migrating = count}));
  EXPECT_EQ(calls_, 0);
}

TEST(MigrationsTest, ReopeningAppliesNothingAndKeepsData) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("state.db");
  fleet::testing::FakeClock clock;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                         OpenSqliteStore({.path = path, .clock = &clock}));
    InventoryWrite write;
    v1::Host* host = write.objects.add_hosts();
    host->set_name("h1");
    host->set_address("10.1.0.1");
    write.created = {"host h1"};
    ASSERT_THAT(store->WriteInventory(write, "operator:alice"), IsOk());
  }
  // Re-running migration 1 would fail (its tables exist), so a successful reopen that keeps
  // the data shows nothing was applied again.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                       OpenSqliteStore({.path = path, .clock = &clock}));
  ASSERT_OK_AND_ASSIGN(v1::Host host, store->GetHost("h1"));
  EXPECT_EQ(host.address(), "10.1.0.1");
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Event> events, store->ListEvents({}));
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].object_id(), "h1");

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path));
  ASSERT_OK_AND_ASSIGN(int version, SchemaVersion(*db));
  EXPECT_EQ(version, LatestVersion());
  EXPECT_THAT(Migrate(*db, Migrations()), IsOk());
  EXPECT_EQ(QueryText(*db, "SELECT count(*) FROM hosts"), "1");
}

TEST(MigrationsTest, MigrateAppliesOnlyPendingMigrations) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  // Migration 1 is not idempotent: applying it twice would fail.
  const Migration first{1, "create a", "CREATE TABLE a (x INTEGER) STRICT;"};
  const Migration second{2, "create b", "CREATE TABLE b (y INTEGER) STRICT;"};
  ASSERT_THAT(Migrate(*db, {first}), IsOk());
  ASSERT_OK_AND_ASSIGN(int v1_version, SchemaVersion(*db));
  EXPECT_EQ(v1_version, 1);
  ASSERT_THAT(Migrate(*db, {first, second}), IsOk());
  ASSERT_OK_AND_ASSIGN(int v2_version, SchemaVersion(*db));
  EXPECT_EQ(v2_version, 2);
  EXPECT_TRUE(TableExists(*db, "a"));
  EXPECT_TRUE(TableExists(*db, "b"));
  ASSERT_THAT(Migrate(*db, {first, second}), IsOk());
  ASSERT_OK_AND_ASSIGN(int again, SchemaVersion(*db));
  EXPECT_EQ(again, 2);
}

TEST(MigrationsTest, BrokenMigrationFailsNamingItAndRollsBack) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  const std::vector<Migration> migrations = {
      {1, "create widgets", "CREATE TABLE widgets (id TEXT PRIMARY KEY) STRICT;"},
      // The first statement is fine, the second is not: the first must not survive.
      {2, "add gadgets then typo",
       "CREATE TABLE gadgets (id TEXT PRIMARY KEY) STRICT; CREAT TABEL oops (x);"},
      {3, "never reached", "CREATE TABLE later (id TEXT) STRICT;"},
  };
  absl::Status status = Migrate(*db, migrations);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("migration 2"), HasSubstr("add gadgets then typo")));
  ASSERT_OK_AND_ASSIGN(int version, SchemaVersion(*db));
  EXPECT_EQ(version, 1);
  EXPECT_TRUE(TableExists(*db, "widgets"));
  EXPECT_FALSE(TableExists(*db, "gadgets"));
  EXPECT_FALSE(TableExists(*db, "later"));
  // The connection is usable afterwards: no transaction was left open.
  EXPECT_THAT(db->Exec("INSERT INTO widgets VALUES ('w1')"), IsOk());
}

TEST(MigrationsTest, NewerDatabaseIsRefusedAndLeftByteForByteUnchanged) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("state.db");
  const int newer = LatestVersion() + 1000;
  {
    // As a newer fleetd would leave it: our schema, some data, a higher user_version.
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path));
    ASSERT_THAT(Migrate(*db, Migrations()), IsOk());
    ASSERT_THAT(db->Exec("INSERT INTO hosts (name) VALUES ('h-newer')"), IsOk());
    ASSERT_THAT(db->Exec(absl::StrCat("PRAGMA user_version = ", newer)), IsOk());
  }
  const std::string before = ReadBytes(path);
  ASSERT_FALSE(before.empty());

  fleet::testing::FakeClock clock;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path, .clock = &clock});
  EXPECT_THAT(store,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(absl::StrCat(newer)),
                             ContainsRegex(absl::StrCat("[^0-9]", LatestVersion(), "[^0-9]")))));
  EXPECT_EQ(ByteDifference(before, ReadBytes(path)), "") << "the refused database was modified";
}

// Regression: Database::Open once switched the file to WAL before the version check, so a
// refused newer database in rollback-journal mode had its header rewritten (byte 18 went from
// 1 to 2; failed at commit 2d876cd). migrations.h promises such a database is left untouched.
TEST(MigrationsTest, NewerRollbackJournalDatabaseIsLeftByteForByteUnchanged) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("state.db");
  const int newer = LatestVersion() + 1000;
  WriteRollbackJournalDatabase(path, newer);
  const std::string before = ReadBytes(path);
  ASSERT_FALSE(before.empty());

  fleet::testing::FakeClock clock;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path, .clock = &clock});
  EXPECT_THAT(store,
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(absl::StrCat(newer))));
  EXPECT_EQ(ByteDifference(before, ReadBytes(path)), "") << "the refused database was modified";
}

TEST(MigrationsTest, MigrateRefusesNewerVersionWithoutChangingIt) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  ASSERT_THAT(db->Exec("PRAGMA user_version = 7"), IsOk());
  const std::vector<Migration> migrations = {
      {1, "one", "CREATE TABLE one (x INTEGER) STRICT;"},
      {2, "two", "CREATE TABLE two (x INTEGER) STRICT;"},
  };
  EXPECT_THAT(Migrate(*db, migrations),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(ContainsRegex("[^0-9]7[^0-9]"), ContainsRegex("[^0-9]2[^0-9]"))));
  ASSERT_OK_AND_ASSIGN(int version, SchemaVersion(*db));
  EXPECT_EQ(version, 7);
  EXPECT_FALSE(TableExists(*db, "one"));
}

TEST(MigrationsTest, CheckNotNewerAcceptsOlderAndCurrentAndRefusesNewer) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  const std::vector<Migration> migrations = {{1, "one", "CREATE TABLE one (x INTEGER) STRICT;"},
                                             {2, "two", "CREATE TABLE two (x INTEGER) STRICT;"}};
  EXPECT_THAT(CheckNotNewer(*db, migrations), IsOk());
  ASSERT_THAT(db->Exec("PRAGMA user_version = 2"), IsOk());
  EXPECT_THAT(CheckNotNewer(*db, migrations), IsOk());
  ASSERT_THAT(db->Exec("PRAGMA user_version = 3"), IsOk());
  EXPECT_THAT(CheckNotNewer(*db, migrations),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(ContainsRegex("[^0-9]3[^0-9]"), ContainsRegex("[^0-9]2[^0-9]"))));
  EXPECT_FALSE(TableExists(*db, "one"));  // It only reads.
}

TEST(SqliteTest, FileDatabaseHasWalAndForeignKeys) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("state.db");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path));
  EXPECT_EQ(QueryText(*db, "PRAGMA foreign_keys"), "1");
  ASSERT_THAT(db->EnableWriteAheadLog(), IsOk());
  EXPECT_EQ(QueryText(*db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(QueryText(*db, "PRAGMA foreign_keys"), "1");
}

TEST(SqliteTest, OpeningADatabaseDoesNotChangeItsJournalMode) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("state.db");
  WriteRollbackJournalDatabase(path, 3);
  const std::string before = ReadBytes(path);
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path));
    EXPECT_EQ(QueryText(*db, "PRAGMA journal_mode"), "delete");
    EXPECT_EQ(QueryText(*db, "SELECT v FROM keep"), "from a newer fleetd");
  }
  EXPECT_EQ(ByteDifference(before, ReadBytes(path)), "");
}

TEST(SqliteTest, WriteAheadLogIsANoOpInMemory) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  EXPECT_THAT(db->EnableWriteAheadLog(), IsOk());
  EXPECT_EQ(QueryText(*db, "PRAGMA journal_mode"), "memory");
}

TEST(SqliteTest, StoreLeavesItsFileInWalMode) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("state.db");
  fleet::testing::FakeClock clock;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                         OpenSqliteStore({.path = path, .clock = &clock}));
  }
  // A plain connection (no pragmas of ours) sees the journal mode persisted in the file.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(raw);
}

// A sync covers every commit before it, and one that finds nothing new does not touch the
// disk: the services call it before every answer to a change.
TEST(SqliteTest, SyncLogSyncsOnlyWhenSomethingWasCommittedSinceTheLastSync) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(dir.File("state.db")));
  ASSERT_THAT(db->EnableWriteAheadLog(), IsOk());
  ASSERT_THAT(db->Exec("CREATE TABLE t (x INTEGER)"), IsOk());
  const auto commit = [&](int x) {
    ASSERT_OK_AND_ASSIGN(Transaction txn, Transaction::Begin(*db));
    ASSERT_THAT(db->Exec(absl::StrCat("INSERT INTO t VALUES (", x, ")")), IsOk());
    ASSERT_THAT(txn.Commit(), IsOk());
  };
  commit(1);
  commit(2);
  ASSERT_THAT(db->SyncLog(), IsOk());
  EXPECT_EQ(db->log_syncs(), 1);
  ASSERT_THAT(db->SyncLog(), IsOk());  // Nothing new: no sync.
  {
    ASSERT_OK_AND_ASSIGN(Transaction rolled_back, Transaction::Begin(*db));
    ASSERT_THAT(db->Exec("INSERT INTO t VALUES (3)"), IsOk());
  }
  ASSERT_THAT(db->SyncLog(), IsOk());  // A rollback commits nothing.
  EXPECT_EQ(db->log_syncs(), 1);
  commit(4);
  ASSERT_THAT(db->SyncLog(), IsOk());
  EXPECT_EQ(db->log_syncs(), 2);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> memory, Database::Open(":memory:"));
  EXPECT_THAT(memory->SyncLog(), IsOk());  // Nothing to sync without a file.
}

TEST(SqliteTest, ForeignKeysAreEnforced) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  EXPECT_EQ(QueryText(*db, "PRAGMA foreign_keys"), "1");
  ASSERT_THAT(Migrate(*db, Migrations()), IsOk());
  // A device on a host that does not exist.
  EXPECT_THAT(db->Exec("INSERT INTO devices (id, kind, host) VALUES ('d1', 'cpu', 'nope')"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("FOREIGN KEY")));
  EXPECT_EQ(QueryText(*db, "SELECT count(*) FROM devices"), "0");
}

TEST(SqliteTest, TransactionRollsBackUnlessCommitted) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  ASSERT_THAT(db->Exec("CREATE TABLE t (x INTEGER)"), IsOk());
  {
    ASSERT_OK_AND_ASSIGN(Transaction txn, Transaction::Begin(*db));
    ASSERT_THAT(db->Exec("INSERT INTO t VALUES (1)"), IsOk());
  }
  EXPECT_EQ(QueryText(*db, "SELECT count(*) FROM t"), "0");
  {
    ASSERT_OK_AND_ASSIGN(Transaction txn, Transaction::Begin(*db));
    ASSERT_THAT(db->Exec("INSERT INTO t VALUES (2)"), IsOk());
    ASSERT_THAT(txn.Commit(), IsOk());
  }
  EXPECT_EQ(QueryText(*db, "SELECT group_concat(x) FROM t"), "2");
}

TEST(SqliteTest, StatementBindsAndReadsBack) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  ASSERT_THAT(db->Exec("CREATE TABLE t (s TEXT, i INTEGER, d REAL, b BLOB, n TEXT)"), IsOk());
  {
    ASSERT_OK_AND_ASSIGN(Statement insert,
                         db->Prepare("INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)"));
    const std::string blob("a\0b", 3);
    ASSERT_THAT(insert.Bind(1, "it's; DROP TABLE t")
                    .Bind(2, int64_t{1} << 40)
                    .Bind(3, 0.25)
                    .BindBlob(4, blob)
                    .BindNull(5)
                    .Run(),
                IsOk());
  }
  ASSERT_OK_AND_ASSIGN(Statement select, db->Prepare("SELECT s, i, d, b, n FROM t"));
  ASSERT_OK_AND_ASSIGN(bool row, select.Step());
  ASSERT_TRUE(row);
  EXPECT_EQ(select.Text(0), "it's; DROP TABLE t");
  EXPECT_EQ(select.Int(1), int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(select.Double(2), 0.25);
  EXPECT_EQ(select.Text(3), std::string("a\0b", 3));
  EXPECT_TRUE(select.IsNull(4));
  EXPECT_FALSE(select.IsNull(0));
  ASSERT_OK_AND_ASSIGN(bool more, select.Step());
  EXPECT_FALSE(more);
}

TEST(SqliteTest, BadBindIndexIsReportedAtStep) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(":memory:"));
  ASSERT_OK_AND_ASSIGN(Statement stmt, db->Prepare("SELECT ?1"));
  stmt.Bind(5, int64_t{1});  // Out of range.
  EXPECT_FALSE(stmt.Step().ok());
}

TEST(SqliteTest, OpenSqliteStoreNeedsAClock) {
  EXPECT_THAT(OpenSqliteStore({.path = ":memory:", .clock = nullptr}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("clock")));
}

TEST(SqliteTest, UnopenablePathFailsNamingIt) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("no/such/dir/state.db");
  fleet::testing::FakeClock clock;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path, .clock = &clock});
  EXPECT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr(path));
  EXPECT_FALSE(std::filesystem::exists(path));
}

// Commits never checkpoint the write-ahead log: past `checkpoint_pages` a thread of the
// database's own does, beside the writer. The main file grows only when a checkpoint copies
// the log into it.
TEST(SqliteTest, TheLogIsCheckpointedInTheBackgroundNeverByACommit) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  // A database with table t whose log is checkpointed past `pages`; `before` is the size of
  // its main file then. Each fill row is about a page, in a commit of its own.
  auto open = [&](const std::string& name, int pages,
                  uintmax_t* before) -> absl::StatusOr<std::unique_ptr<Database>> {
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(dir.File(name));
    if (!db.ok()) return db.status();
    if (absl::Status s = (*db)->EnableWriteAheadLog(pages); !s.ok()) return s;
    if (absl::Status s = (*db)->Exec("CREATE TABLE t (x BLOB)"); !s.ok()) return s;
    *before = std::filesystem::file_size(dir.File(name));
    return db;
  };
  auto fill = [](Database& db, int rows) {
    for (int i = 0; i < rows; ++i) {
      ASSERT_THAT(db.Exec("INSERT INTO t VALUES (zeroblob(4000))"), IsOk());
    }
  };
  uintmax_t before = 0;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, open("far.db", 1000000, &before));
    // Past SQLite's own limit of 1000 pages, at which the commit crossing it would copy the
    // log into the main file.
    fill(*db, 1200);
    EXPECT_EQ(std::filesystem::file_size(dir.File("far.db")), before);
    EXPECT_EQ(db->background_checkpoints(), 0);
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, open("near.db", 16, &before));
  fill(*db, 40);
  EXPECT_TRUE(fleet::testing::Eventually([&] {
    return db->background_checkpoints() > 0 &&
           std::filesystem::file_size(dir.File("near.db")) > before;
  }));
  EXPECT_EQ(QueryText(*db, "SELECT count(*) FROM t"), "40");
}

TEST(SqliteTest, ACheckpointLimitBelowOnePageIsRefused) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  for (const std::string& path : {dir.File("state.db"), std::string(":memory:")}) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path));
    EXPECT_THAT(db->EnableWriteAheadLog(0),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("checkpoint_pages")))
        << path;
  }
}

}  // namespace
}  // namespace fleet::store
