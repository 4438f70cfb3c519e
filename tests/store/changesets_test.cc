// Changesets (controller/store/changesets.h): a transaction's changes recorded on one database
// and applied to another leave the two identical, cascades and the event log's sequence
// included; a changeset that does not fit the replica is refused whole; the replica's own
// position is never replicated; and every table of the schema can be replicated at all.
#include "controller/store/changesets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "controller/store/migrations.h"
#include "controller/store/sqlite.h"
#include "tests/store/store_test_util.h"

namespace fleet::store {
namespace {

using namespace std::string_literals;

using ::fleet::store::testing_util::Column;
using ::fleet::store::testing_util::Dump;
using ::fleet::store::testing_util::IsOk;
using ::fleet::store::testing_util::QueryText;
using ::fleet::store::testing_util::Recorded;
using ::fleet::store::testing_util::StatusIs;
using ::fleet::store::testing_util::Tables;
using ::testing::HasSubstr;

std::unique_ptr<Database> Migrated() {
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(":memory:");
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return nullptr;
  EXPECT_THAT(Migrate(**db, Migrations()), IsOk());
  return std::move(*db);
}

constexpr char kSite[] = R"sql(
  INSERT INTO switches (id, model, ingress_ports, egress_ports, address, protocol)
    VALUES ('sw1', 'polatis', 4, 4, '10.0.0.1', 'tl1');
  INSERT INTO switch_ports (switch_id, port, direction) VALUES
    ('sw1', 1, 'ingress'), ('sw1', 2, 'ingress'), ('sw1', 5, 'egress'), ('sw1', 6, 'egress');
  INSERT INTO hosts (name) VALUES ('h1');
  INSERT INTO devices (id, kind, host) VALUES ('gpu1', 'gpu', 'h1'), ('gpu2', 'gpu', 'h1');
  INSERT INTO onics (id, device_id, serial) VALUES ('n1', 'gpu1', 's1'), ('n2', 'gpu2', 's2');
  INSERT INTO onic_ports (onic_id, port) VALUES ('n1', 1), ('n2', 1);
  INSERT INTO fibers VALUES ('n1', 1, 'tx', 'sw1', 1), ('n2', 1, 'rx', 'sw1', 5);
  INSERT INTO observed_cross_connects VALUES ('sw1', 1, 5, 100);
)sql";

constexpr char kAllocation[] = R"sql(
  INSERT INTO allocations (id, tenant, state, request, created_us, updated_us, lease_expires_us)
    VALUES ('a1', 't', 'ready', x'0a01', 1, 1, 2);
  INSERT INTO allocation_members VALUES ('a1', 0, 'gpu1'), ('a1', 1, 'gpu2');
  INSERT INTO circuits (id, allocation_id, src_onic, src_port, dst_onic, dst_port, state)
    VALUES ('c1', 'a1', 'n1', 1, 'n2', 1, 'active');
  INSERT INTO cross_connects (circuit_id, hop, switch_id, ingress, egress)
    VALUES ('c1', 0, 'sw1', 1, 5);
  INSERT INTO events (time_us, principal, kind, object_kind, object_id, severity, message)
    VALUES (1, 'p', 'allocated', 'allocation', 'a1', 'info', 'ready');
)sql";

TEST(ChangesetsTest, EveryTableOfTheSchemaHasAPrimaryKeyAndNoTriggerWrites) {
  std::unique_ptr<Database> db = Migrated();
  ASSERT_NE(db, nullptr);
  for (const std::string& table : Tables(*db)) {
    if (table.rfind("sqlite_", 0) == 0) continue;
    // Sessions record only tables with a declared primary key: one without is not replicated.
    EXPECT_EQ(QueryText(*db, absl::StrCat("SELECT count(*) > 0 FROM pragma_table_info('", table,
                                          "') WHERE pk > 0")),
              "1")
        << "table " << table << " has no primary key: its rows would not be replicated";
    // STRICT keeps NULL out of key columns too; a row with a NULL in its key is not recorded.
    EXPECT_THAT(
        QueryText(*db, absl::StrCat("SELECT sql FROM sqlite_master WHERE name = '", table, "'")),
        HasSubstr("STRICT"))
        << "table " << table;
  }
  // A trigger that wrote rows would write them again on a replica applying the changeset.
  for (std::string sql : Column(*db, "SELECT sql FROM sqlite_master WHERE type = 'trigger'")) {
    for (char& c : sql) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const size_t body = sql.find("BEGIN");
    ASSERT_NE(body, std::string::npos) << sql;
    for (const char* write : {"INSERT", "UPDATE", "DELETE", "REPLACE"}) {
      EXPECT_THAT(sql.substr(body), ::testing::Not(HasSubstr(write)))
          << "a trigger that writes: " << sql;
    }
  }
}

TEST(ChangesetsTest, AReplicaApplyingEachChangesetEndsIdenticalToTheWriter) {
  std::unique_ptr<Database> writer = Migrated(), replica = Migrated();
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(replica, nullptr);
  const std::vector<std::string> transactions = {
      kSite,
      kAllocation,
      // Updates, and an event whose sequence the replica must continue from.
      R"sql(UPDATE switch_ports SET admin_state = 'drained' WHERE port = 2;
            UPDATE circuits SET state = 'degraded', reason = 'link down' WHERE id = 'c1';
            INSERT INTO events (time_us, principal, kind, severity, message)
              VALUES (2, 'p', 'degraded', 'warning', 'link down');)sql",
      // Cascades: the allocation's members, circuits and their cross-connects go with it.
      "DELETE FROM allocations WHERE id = 'a1';",
      // A row inserted and deleted in one transaction leaves nothing to replicate.
      "INSERT INTO hosts (name) VALUES ('h2'); DELETE FROM hosts WHERE name = 'h2';",
      // The switch's ports and observed cross-connects cascade too (its fibers first).
      "DELETE FROM fibers; DELETE FROM switches WHERE id = 'sw1';",
  };
  for (const std::string& sql : transactions) {
    const std::string changeset = Recorded(*writer, sql);
    ASSERT_THAT(ApplyChangeset(*replica, changeset), IsOk()) << sql;
    EXPECT_EQ(Dump(*replica), Dump(*writer)) << "after: " << sql;
  }
  EXPECT_EQ(QueryText(*replica, "SELECT count(*) FROM cross_connects"), "0");
  EXPECT_EQ(QueryText(*replica, "SELECT seq FROM sqlite_sequence WHERE name = 'events'"), "2");
  EXPECT_EQ(QueryText(*replica, "PRAGMA foreign_keys"), "1");  // On again after applying.
  EXPECT_TRUE(Recorded(*writer, "SELECT 1;").empty());
}

TEST(ChangesetsTest, AChangesetThatDoesNotFitTheReplicaIsRefusedWhole) {
  std::unique_ptr<Database> writer = Migrated(), replica = Migrated();
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(replica, nullptr);
  ASSERT_THAT(ApplyChangeset(*replica, Recorded(*writer, kSite)), IsOk());
  const std::string before = Dump(*replica);

  // The replica has diverged: the writer's next change meets a row that differs.
  ASSERT_THAT(replica->Exec("UPDATE hosts SET address = 'elsewhere' WHERE name = 'h1'"), IsOk());
  const std::string diverged = Dump(*replica);
  absl::Status refused = ApplyChangeset(
      *replica, Recorded(*writer,
                         "INSERT INTO hosts (name) VALUES ('h3');"
                         "UPDATE hosts SET address = '10.0.0.9' WHERE name = 'h1';"));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kDataLoss,
                                HasSubstr("update in table hosts: the row differs")));
  EXPECT_EQ(Dump(*replica), diverged) << "a refused changeset applied in part";
  EXPECT_NE(diverged, before);

  // A row the writer inserts exists on the replica already.
  ASSERT_THAT(replica->Exec("INSERT INTO hosts (name) VALUES ('h4')"), IsOk());
  EXPECT_THAT(ApplyChangeset(*replica, Recorded(*writer, "INSERT INTO hosts (name) VALUES ('h4')")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("a row with that key exists")));

  // A table the replica lacks, or with other columns: SQLite alone would skip it silently.
  ASSERT_THAT(writer->Exec("CREATE TABLE extra (id INTEGER PRIMARY KEY, v TEXT)"), IsOk());
  EXPECT_THAT(ApplyChangeset(*replica, Recorded(*writer, "INSERT INTO extra VALUES (1, 'x')")),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("table extra has columns kc in the change but no such table")));
  ASSERT_THAT(writer->Exec("ALTER TABLE hosts ADD COLUMN rack TEXT NOT NULL DEFAULT ''"), IsOk());
  EXPECT_THAT(
      ApplyChangeset(*replica, Recorded(*writer, "INSERT INTO hosts (name) VALUES ('h5')")),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("replicas must run the same schema")));
  EXPECT_THAT(ApplyChangeset(*replica, "not a changeset"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("changeset: corrupt")));
  // Framing SQLite 3.40 would loop for ever on or crash at, or read past the end: refused
  // before SQLite reads it.
  const std::string host = Recorded(*writer, "INSERT INTO hosts (name) VALUES ('h6')");
  const std::pair<std::string, std::string> corrupt[] = {
      {"T\x01\x01hosts"s, "a table's name"},
      {"Te\x01t-"s, "a table's key flags"},
      {host.substr(0, host.size() - 1), "a text or blob's length"},
      {"\x12\x00\x05"s, "a change before any table"},
      {"T\x01\x01hosts\x00\x12\x00\x03\x7fh"s, "a text or blob's length"},
      {"T\x01\x01hosts\x00T\x01\x01HOSTS\x00"s, "a second header for one table"},
      {"T\x01\x01hosts\x00\x12\x00\x05"s, "a NULL in a key"},
      {"T\x02\x01\x00hosts\x00\x17\x00\x00\x03\x01x\x00\x03\x01y"s,
       "a change without column 0's value"},
  };
  for (const auto& [bad, why] : corrupt) {
    EXPECT_THAT(ApplyChangeset(*replica, bad),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr(absl::StrCat("corrupt (", why))))
        << absl::CHexEscape(bad);
  }
  // A key of the same columns in another order: SQLite would skip the table's changes.
  ASSERT_THAT(writer->Exec("CREATE TABLE pair (a TEXT, b TEXT, PRIMARY KEY (a, b)) STRICT"),
              IsOk());
  ASSERT_THAT(replica->Exec("CREATE TABLE pair (a TEXT, b TEXT, PRIMARY KEY (b, a)) STRICT"),
              IsOk());
  EXPECT_THAT(ApplyChangeset(*replica, Recorded(*writer, "INSERT INTO pair VALUES ('x', 'y')")),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("pair's primary key orders its columns otherwise")));
  EXPECT_EQ(QueryText(*replica, "SELECT count(*) FROM pair"), "0");
  EXPECT_EQ(QueryText(*replica, "SELECT count(*) FROM hosts WHERE name IN ('h3', 'h5')"), "0");
}

TEST(ChangesetsTest, TheReplicasPositionIsItsOwnAndMovesWithTheApply) {
  std::unique_ptr<Database> writer = Migrated(), replica = Migrated();
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(replica, nullptr);
  EXPECT_EQ(AppliedEntry(*replica).value_or(99), 0u);
  // The writer records its own position in the same transaction: it is not in the changeset.
  std::string changeset = Recorded(*writer,
                                   "INSERT INTO hosts (name) VALUES ('h1');"
                                   "INSERT INTO replica (id, applied_entry) VALUES (1, 7);");
  ASSERT_THAT(ApplyChangeset(*replica, changeset), IsOk());
  EXPECT_EQ(AppliedEntry(*replica).value_or(99), 0u) << "the writer's position was replicated";
  EXPECT_EQ(QueryText(*replica, "SELECT count(*) FROM hosts"), "1");
  // With its position moved by the caller, in the same transaction.
  changeset = Recorded(*writer, "INSERT INTO hosts (name) VALUES ('h1b');");
  ASSERT_THAT(ApplyChangeset(*replica, changeset, [&] { return SetAppliedEntry(*replica, 7); }),
              IsOk());
  EXPECT_EQ(AppliedEntry(*replica).value_or(0), 7u);
  EXPECT_EQ(QueryText(*replica, "SELECT count(*) FROM hosts"), "2");

  // What runs after the apply fails: neither the change nor the position is kept.
  changeset = Recorded(*writer, "INSERT INTO hosts (name) VALUES ('h2');");
  EXPECT_THAT(ApplyChangeset(*replica, changeset,
                             [&]() -> absl::Status {
                               EXPECT_THAT(SetAppliedEntry(*replica, 8), IsOk());
                               return absl::InternalError("the log said no");
                             }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("the log said no")));
  EXPECT_EQ(AppliedEntry(*replica).value_or(0), 7u);
  EXPECT_EQ(QueryText(*replica, "SELECT count(*) FROM hosts"), "2");
}

// A log entry names its writer's schema: a replica applies only entries of its own, since a
// migration that changed only data leaves the columns alike for the column checks.
TEST(ChangesetsTest, ALogEntryAppliesOnlyOnAReplicaOfItsSchema) {
  std::unique_ptr<Database> writer = Migrated(), replica = Migrated();
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(replica, nullptr);
  const int schema = SchemaVersion(*writer).value_or(0);
  ASSERT_GT(schema, 0);
  const std::string h1 = Recorded(*writer, "INSERT INTO hosts (name) VALUES ('h1');");
  EXPECT_THAT(EncodeLogEntry(schema, h1),
              ::testing::StartsWith(absl::StrCat("fleet-log-entry schema=", schema, "\n")));
  ASSERT_THAT(ApplyLogEntry(*replica, EncodeLogEntry(schema, h1),
                            [&] { return SetAppliedEntry(*replica, 1); }),
              IsOk());
  EXPECT_EQ(QueryText(*replica, "SELECT group_concat(name) FROM hosts"), "h1");
  EXPECT_EQ(AppliedEntry(*replica).value_or(0), 1u);

  // Written by a fleetd one migration ahead, or one behind: refused whole, naming both.
  const std::string h2 = Recorded(*writer, "INSERT INTO hosts (name) VALUES ('h2');");
  for (int other : {schema + 1, schema - 1}) {
    EXPECT_THAT(ApplyLogEntry(*replica, EncodeLogEntry(other, h2),
                              [&] { return SetAppliedEntry(*replica, 2); }),
                StatusIs(absl::StatusCode::kDataLoss,
                         HasSubstr(absl::StrCat("written at schema version ", other,
                                                ", and this replica's store is at ", schema))));
  }
  // Bytes that are neither an entry nor a changeset, the header's number included.
  for (const std::string& bad :
       {std::string("not an entry"), std::string("fleet-log-entry schema=x\n"),
        std::string("fleet-log-entry schema=+14\n"), std::string("fleet-log-entry schema=\n"),
        std::string("fleet-log-entry schema=1234567890\n"),
        absl::StrCat("fleet-log-entry schema=", schema)}) {
    EXPECT_THAT(ApplyLogEntry(*replica, bad),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr("nothing applied")))
        << bad;
  }
  EXPECT_EQ(QueryText(*replica, "SELECT group_concat(name) FROM hosts"), "h1");
  EXPECT_EQ(AppliedEntry(*replica).value_or(0), 1u);

  // An entry written before entries named their schema (a bare changeset) applies on a store
  // of the schema those fleetds had (14 and before), and on none newer.
  ASSERT_THAT(replica->Exec("PRAGMA user_version = 14"), IsOk());
  ASSERT_THAT(ApplyLogEntry(*replica, h2), IsOk());
  EXPECT_EQ(
      QueryText(*replica, "SELECT group_concat(name) FROM (SELECT name FROM hosts ORDER BY name)"),
      "h1,h2");
  const std::string h3 = Recorded(*writer, "INSERT INTO hosts (name) VALUES ('h3');");
  ASSERT_THAT(replica->Exec("PRAGMA user_version = 15"), IsOk());
  EXPECT_THAT(ApplyLogEntry(*replica, h3),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("a bare changeset")));
  EXPECT_EQ(QueryText(*replica, "SELECT count(*) FROM hosts"), "2");
}

}  // namespace
}  // namespace fleet::store
