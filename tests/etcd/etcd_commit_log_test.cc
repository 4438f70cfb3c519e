// A leader's store whose writes go to the replicated log on a real three-member etcd 3.4
// cluster before they commit (controller/replication/etcd_commit_log.h): the log, applied to
// an empty replica, gives back the leader's database row for row; a replica that does not
// lead writes nothing; without quorum a write is refused within about a lease TTL, nothing
// of it kept, and writes go on when quorum returns.
#include "controller/replication/etcd_commit_log.h"
#include "controller/replication/log_follower.h"
#include "controller/replication/replica.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "controller/etcd/leader_election.h"
#include "controller/etcd/replicated_log.h"
#include "controller/store/changesets.h"
#include "controller/store/migrations.h"
#include "controller/store/store.h"
#include "testing/fake_clock.h"
#include "tests/etcd/etcd_cluster.h"
#include "tests/integration/subprocess.h"
#include "tests/store/store_test_util.h"

namespace fleet::testing {
namespace {

using store::testing_util::CpuToGpu;
using store::testing_util::Dump;
using store::testing_util::kOperator;
using store::testing_util::MakeAllocation;
using store::testing_util::SmallSite;

class EtcdCommitLogTest : public EtcdClusterTest {
 protected:
  void SetUp() override {
    EtcdClusterTest::SetUp();
    if (cluster_ == nullptr) return;
    client_ = Client({}, absl::Seconds(1));
    ASSERT_NE(client_, nullptr);
    etcd::LeaderOptions options;
    options.name = "a:1";
    options.lease_ttl = absl::Seconds(3);
    options.margin = absl::Milliseconds(500);
    election_ = std::make_unique<etcd::LeaderElection>(client_.get(), options);
    log_ = std::make_unique<etcd::ReplicatedLog>(client_.get());
    commit_log_ = std::make_unique<replication::EtcdCommitLog>(log_.get(), election_.get());
    path_ = FreshDirectory("store") + "/fleet.db";
    absl::StatusOr<std::unique_ptr<store::Store>> opened =
        store::OpenSqliteStore({.path = path_, .clock = &clock_, .commit_log = commit_log_.get()});
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
  }

  void TearDown() override {
    store_.reset();
    if (election_ != nullptr) election_->Stop();
  }

  void Lead() {
    ASSERT_TRUE(election_->Start().ok());
    ASSERT_TRUE(Eventually([&] { return election_->Fence().ok(); }, absl::Seconds(10)));
  }

  // The log from its first entry, applied to an empty database.
  std::string LogApplied() {
    absl::StatusOr<std::unique_ptr<store::Database>> replica = store::Database::Open(":memory:");
    EXPECT_TRUE(replica.ok()) << replica.status();
    if (!replica.ok()) return "";
    EXPECT_TRUE(store::Migrate(**replica, store::Migrations()).ok());
    absl::StatusOr<std::vector<etcd::LogEntry>> entries = log_->Read(1);
    EXPECT_TRUE(entries.ok()) << entries.status();
    for (const etcd::LogEntry& e : entries.value_or(std::vector<etcd::LogEntry>{})) {
      absl::Status applied = store::ApplyLogEntry(
          **replica, e.bytes, [&] { return store::SetAppliedEntry(**replica, e.seq); });
      EXPECT_TRUE(applied.ok()) << "entry " << e.seq << ": " << applied;
    }
    return Dump(**replica);
  }

  std::string StoreDump() {
    absl::StatusOr<std::unique_ptr<store::Database>> db = store::Database::Open(path_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? Dump(**db) : "";
  }

  uint64_t Head() {
    absl::StatusOr<etcd::LogBounds> bounds = log_->Bounds();
    EXPECT_TRUE(bounds.ok()) << bounds.status();
    return bounds.ok() ? bounds->head : 0;
  }

  FakeClock clock_;
  std::unique_ptr<etcd::EtcdClient> client_;
  std::unique_ptr<etcd::LeaderElection> election_;
  std::unique_ptr<etcd::ReplicatedLog> log_;
  std::unique_ptr<replication::EtcdCommitLog> commit_log_;
  std::string path_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(EtcdCommitLogTest, TheLeadersWritesAreInTheLogAndRebuildItsDatabase) {
  Lead();
  ASSERT_TRUE(store_->WriteInventory(SmallSite(), kOperator).ok());
  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                    {"h1-cpu0", "gpu0"}, {CpuToGpu()});
  ASSERT_TRUE(store_->CreateAllocation(a, kOperator).ok());
  store::AllocationUpdate ready;
  ready.id = "a1";
  ready.state = v1::ALLOCATION_STATE_READY;
  ASSERT_TRUE(store_->UpdateAllocation(ready, kOperator).ok());

  EXPECT_EQ(Head(), 3u);
  const std::string leader = StoreDump();
  EXPECT_TRUE(absl::StrContains(leader, "allocations")) << leader;
  EXPECT_EQ(LogApplied(), leader);
}

TEST_F(EtcdCommitLogTest, AReplicaThatDoesNotLeadWritesNothing) {
  // Another replica leads.
  etcd::LeaderOptions other;
  other.name = "b:1";
  other.lease_ttl = absl::Seconds(3);
  etcd::LeaderElection b(client_.get(), other);
  ASSERT_TRUE(b.Start().ok());
  ASSERT_TRUE(Eventually([&] { return b.Current().leading; }, absl::Seconds(10)));
  ASSERT_TRUE(election_->Start().ok());

  const std::string before = StoreDump();
  absl::Status refused = store_->WriteInventory(SmallSite(), kOperator);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "does not lead")) << refused;
  EXPECT_EQ(StoreDump(), before);
  EXPECT_EQ(Head(), 0u);
  b.Stop();
}

TEST_F(EtcdCommitLogTest, WithoutQuorumAWriteIsRefusedWholeAndWritesGoOnWhenItReturns) {
  Lead();
  ASSERT_TRUE(store_->WriteInventory(SmallSite(), kOperator).ok());
  const std::string before = StoreDump();

  ASSERT_TRUE(cluster_->Kill(1).ok());
  ASSERT_TRUE(cluster_->Kill(2).ok());
  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                    {"h1-cpu0", "gpu0"}, {CpuToGpu()});
  const absl::Time start = absl::Now();
  absl::Status refused = store_->CreateAllocation(a, kOperator);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "may or may not be in the log")) << refused;
  EXPECT_LT(took, absl::Seconds(10)) << "refused only after " << took;
  RecordProperty("refused_after_ms", static_cast<int>(absl::ToInt64Milliseconds(took)));
  EXPECT_EQ(StoreDump(), before) << "a refused write was kept";

  ASSERT_TRUE(cluster_->Restart(1).ok());
  ASSERT_TRUE(cluster_->Restart(2).ok());
  ASSERT_TRUE(Eventually([&] { return election_->Fence().ok(); }, absl::Seconds(30)))
      << "the replica did not lead again";
  absl::Status again = store_->CreateAllocation(a, kOperator);
  ASSERT_TRUE(again.ok()) << again;
  EXPECT_EQ(Head(), 2u);
  EXPECT_EQ(LogApplied(), StoreDump());
}

// Two replicas, each with its own store, commit log, election and follower loop: the leader's
// writes reach the follower's store; after a handover the new leader writes and the old one
// follows. The whole data path of replicated fleetd short of fleetd itself.
TEST_F(EtcdCommitLogTest, TwoReplicasFollowEachOtherAcrossAHandover) {
  Lead();
  std::unique_ptr<etcd::EtcdClient> b_client = Client({}, absl::Seconds(1));
  etcd::LeaderOptions b_options;
  b_options.name = "b:1";
  b_options.lease_ttl = absl::Seconds(3);
  b_options.margin = absl::Milliseconds(500);
  etcd::LeaderElection b_election(b_client.get(), b_options);
  etcd::ReplicatedLog b_log(b_client.get());
  replication::EtcdCommitLog b_commit_log(&b_log, &b_election);
  const std::string b_path = FreshDirectory("b") + "/fleet.db";
  absl::StatusOr<std::unique_ptr<store::Store>> b_store =
      store::OpenSqliteStore({.path = b_path, .clock = &clock_, .commit_log = &b_commit_log});
  ASSERT_TRUE(b_store.ok()) << b_store.status();
  replication::LogFollower a_follower(log_.get(), store_.get());
  replication::LogFollower b_follower(&b_log, b_store->get());
  a_follower.Start();
  b_follower.Start();
  ASSERT_TRUE(b_election.Start().ok());

  ASSERT_TRUE(store_->WriteInventory(SmallSite(), kOperator).ok());
  v1::Allocation a1 = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                     {"h1-cpu0", "gpu0"}, {CpuToGpu()});
  ASSERT_TRUE(store_->CreateAllocation(a1, kOperator).ok());
  EXPECT_TRUE(Eventually([&] { return (*b_store)->GetAllocation("a1").ok(); }, absl::Seconds(10)))
      << "the follower never saw the leader's allocation";
  EXPECT_TRUE(Eventually([&] { return b_follower.Current().position == 2; }, absl::Seconds(10)));
  EXPECT_EQ(b_follower.Current().head, 2u);  // Never below the position, whatever the timing.
  // The follower writes nothing of its own.
  v1::Allocation a2 = MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PROGRAMMING,
                                     {"h1-cpu0", "gpu0"}, {CpuToGpu("c-b")});
  EXPECT_EQ((*b_store)->CreateAllocation(a2, kOperator).code(),
            absl::StatusCode::kFailedPrecondition);

  // Handover: a resigns, b leads, writes; a follows.
  election_->Stop();
  ASSERT_TRUE(Eventually([&] { return b_election.Fence().ok(); }, absl::Seconds(10)));
  absl::Status written =
      (*b_store)->UpdateAllocation(store::testing_util::ReleaseOf("a1"), kOperator).status();
  ASSERT_TRUE(written.ok()) << written;
  EXPECT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::Allocation> seen = store_->GetAllocation("a1");
        return seen.ok() && seen->state() == v1::ALLOCATION_STATE_RELEASED;
      },
      absl::Seconds(10)))
      << "the old leader never saw the new leader's write";
  EXPECT_TRUE(a_follower.Current().stopped.ok()) << a_follower.Current().stopped;
  a_follower.Stop();
  b_follower.Stop();
  b_election.Stop();
  absl::StatusOr<std::unique_ptr<store::Database>> b_db = store::Database::Open(b_path);
  ASSERT_TRUE(b_db.ok());
  EXPECT_EQ(Dump(**b_db), StoreDump());
  EXPECT_EQ(LogApplied(), StoreDump());
}

// An upgrade that adds a migration (docs/ha.md): a replica's database is a schema behind this
// build's; the store opens it through a Replica's CatchUpBeforeMigrating.
class UpgradedReplicaTest : public EtcdCommitLogTest {
 protected:
  static std::vector<store::Migration> Older() {
    return {store::Migrations().begin(), store::Migrations().end() - 1};
  }

  // A replica on `etcd` and a database of the older schema for it; false on failure.
  bool Prepare(const etcd::EtcdOptions& etcd, const std::string& name) {
    replication::ReplicaOptions options;
    options.etcd = etcd;
    options.advertise = "c:1";
    absl::StatusOr<std::unique_ptr<replication::Replica>> replica =
        replication::Replica::Create(options);
    EXPECT_TRUE(replica.ok()) << replica.status();
    if (!replica.ok()) return false;
    replica_ = std::move(*replica);
    older_path_ = FreshDirectory(name) + "/fleet.db";
    absl::StatusOr<std::unique_ptr<store::Database>> db = store::Database::Open(older_path_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() && store::Migrate(**db, Older()).ok();
  }

  absl::StatusOr<std::unique_ptr<store::Store>> OpenUpgraded() {
    return store::OpenSqliteStore(
        {.path = older_path_, .clock = &clock_, .before_migrating = [&](store::LogReplica& db) {
           return replica_->CatchUpBeforeMigrating(db);
         }});
  }

  void TearDown() override {
    if (replica_ != nullptr) replica_->Stop();
    EtcdCommitLogTest::TearDown();
  }

  std::unique_ptr<replication::Replica> replica_;
  std::string older_path_;
};

// The log holds entries of the older schema, then of the new one, as when the replica was
// stopped while the last leader of the old release still wrote. Before the store migrates, the
// replica applies the old schema's entries from etcd; after it, following applies the rest.
TEST_F(UpgradedReplicaTest, TheOlderSchemasEntriesApplyBeforeItMigratesAndTheRestAfter) {
  Lead();
  absl::StatusOr<std::unique_ptr<store::Database>> writer = store::Database::Open(":memory:");
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(store::Migrate(**writer, Older()).ok());
  auto host = [&](const std::string& name) {
    return store::testing_util::Recorded(
        **writer, "INSERT INTO hosts (name, address) VALUES ('" + name + "', '10.1.0.1')");
  };
  for (uint64_t seq : {1, 2}) {
    ASSERT_TRUE(
        log_->Append(election_->StillLeading(), seq,
                     store::EncodeLogEntry(Older().back().version, host(absl::StrCat("h", seq))))
            .ok());
  }
  ASSERT_TRUE(store::Migrate(**writer, store::Migrations()).ok());
  ASSERT_TRUE(log_->Append(election_->StillLeading(), 3,
                           store::EncodeLogEntry(store::Migrations().back().version, host("h3")))
                  .ok());

  ASSERT_TRUE(Prepare(cluster_->ClientOptions(), "upgraded"));
  absl::StatusOr<std::unique_ptr<store::Store>> upgraded = OpenUpgraded();
  ASSERT_TRUE(upgraded.ok()) << upgraded.status();
  EXPECT_EQ((*upgraded)->ReplicaPosition().value_or(0), 2u);
  replica_->Follow(upgraded->get());
  EXPECT_EQ((*upgraded)->ReplicaPosition().value_or(0), 3u);
  for (const char* name : {"h1", "h2", "h3"}) {
    EXPECT_TRUE((*upgraded)->GetHost(name).ok()) << name;
  }
  replica_->Stop();  // Before the store it follows into goes.
}

TEST_F(UpgradedReplicaTest, OneThatCannotReadTheLogIsNotMigrated) {
  etcd::EtcdOptions unreachable = cluster_->ClientOptions();
  unreachable.endpoints = {"127.0.0.1:1"};  // Nothing listens there.
  unreachable.request_timeout = absl::Seconds(1);
  ASSERT_TRUE(Prepare(unreachable, "unread"));
  absl::StatusOr<std::unique_ptr<store::Store>> refused = OpenUpgraded();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "before migrating"))
      << refused.status();
  absl::StatusOr<std::unique_ptr<store::Database>> db = store::Database::Open(older_path_);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(store::SchemaVersion(**db).value_or(0), Older().back().version);
}

}  // namespace
}  // namespace fleet::testing
