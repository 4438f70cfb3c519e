// etcd's space (controller/etcd/etcd_space.h) on a real three-member etcd 3.4 cluster: a
// member whose database file is mostly free pages after a compaction is defragmented, one
// member per pass and never etcd's leader (whose leadership is moved first); a member whose
// file is mostly data is left alone; and a cluster that ran
// out of its quota (NOSPACE: no write is taken) takes writes again once every member was
// defragmented and the alarm cleared.
#include "controller/etcd/etcd_space.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/etcd/etcd_cluster.h"
#include "tests/eventually.h"

namespace fleet::testing {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

class EtcdSpaceTest : public EtcdClusterTest {
 protected:
  void SetUp() override {
    EtcdClusterTest::SetUp();
    if (cluster_ != nullptr) client_ = Client();
  }

  // Puts `count` revisions of one key, `bytes` each; returns the first error.
  absl::Status Rewrite(const std::string& key, int count, int64_t bytes) {
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<int64_t> put = client_->Put(key, std::string(bytes, 'a' + i % 26));
      if (!put.ok()) return put.status();
    }
    return absl::OkStatus();
  }

  // Compacts every revision before the newest, which leaves their pages free in each file.
  void CompactAll() {
    absl::StatusOr<int64_t> revision = client_->Put("space/marker", "x");
    ASSERT_TRUE(revision.ok()) << revision.status();
    ASSERT_TRUE(client_->Compact(*revision).ok());
  }

  // Each member's file and the part of it in use, as the members say.
  std::string Sizes() {
    std::string out;
    for (const etcd::MemberStatus& m : client_->Members()) {
      absl::StrAppend(&out, m.endpoint, " ", m.db_size_bytes, "/", m.db_size_in_use_bytes, "; ");
    }
    return out;
  }

  // etcd's leader's endpoint, as the members say now; "" when none is known.
  std::string Leader() {
    std::vector<etcd::MemberStatus> members = client_->Members();
    for (const etcd::MemberStatus& m : members) {
      if (m.reachable.ok() && m.member_id == m.leader_id) return m.endpoint;
    }
    return "";
  }

  // Passes until one clears an alarm or `max_passes` were made: which members were
  // defragmented (each never etcd's leader at the time), how often the leadership moved.
  struct Passes {
    std::set<std::string> defragmented;
    int moves = 0;
    std::vector<uint64_t> disarmed;
  };
  Passes PassUntilDone(etcd::SpaceKeeper& keeper, int max_passes) {
    Passes out;
    for (int pass = 0; pass < max_passes && out.disarmed.empty(); ++pass) {
      const std::string leader = Leader();
      absl::StatusOr<etcd::SpacePass> done = keeper.Pass();
      EXPECT_TRUE(done.ok()) << done.status();
      if (!done.ok()) break;
      if (!done->defragmented.empty()) {
        EXPECT_NE(done->defragmented, leader) << "etcd's leader was defragmented";
        EXPECT_TRUE(out.defragmented.insert(done->defragmented).second) << done->defragmented;
        EXPECT_LT(done->bytes_after, done->bytes_before) << done->defragmented;
      }
      if (!done->moved_leader_from.empty()) {
        EXPECT_EQ(done->moved_leader_from, leader);
        EXPECT_TRUE(Eventually([&] {
          const std::string now = Leader();
          return !now.empty() && now != leader;
        })) << "the leadership did not move";
        ++out.moves;
      }
      out.disarmed = done->disarmed;
    }
    return out;
  }

  bool EveryMemberMostlyFree() {
    std::vector<etcd::MemberStatus> members = client_->Members();
    for (const etcd::MemberStatus& m : members) {
      if (!m.reachable.ok() || m.db_size_in_use_bytes * 2 >= m.db_size_bytes) return false;
    }
    return !members.empty();
  }

  std::unique_ptr<etcd::EtcdClient> client_;
};

TEST_F(EtcdSpaceTest, AMostlyFreeMemberIsDefragmentedOneAtATimeAndNoneTwice) {
  ASSERT_TRUE(Rewrite("space/k", 24, kMiB / 2).ok());
  CompactAll();
  // The compaction frees the old revisions' pages in the background, and bbolt counts them
  // free once a later write has committed.
  ASSERT_TRUE(Eventually([&] {
    EXPECT_TRUE(client_->Put("space/tick", "x").ok());
    absl::SleepFor(absl::Milliseconds(50));
    return EveryMemberMostlyFree();
  })) << Sizes();

  // Three defragmentations, and for etcd's leader's turn a move of its leadership first (more
  // than one when it goes to a member not yet defragmented).
  etcd::SpaceKeeper keeper(client_.get(), {.min_bytes = 4 * kMiB});
  const Passes passes = PassUntilDone(keeper, 8);
  EXPECT_EQ(passes.defragmented.size(), 3u) << Sizes();
  EXPECT_GE(passes.moves, 1);
  EXPECT_TRUE(passes.disarmed.empty());
  absl::StatusOr<etcd::SpacePass> after = keeper.Pass();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->defragmented, "") << Sizes();
  EXPECT_EQ(after->moved_leader_from, "") << Sizes();
  // The data is all there.
  absl::StatusOr<mvccpb::KeyValue> kept = client_->Get("space/k");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->value().size(), static_cast<size_t>(kMiB / 2));
}

TEST_F(EtcdSpaceTest, AMemberWhoseFileIsMostlyDataOrSmallIsLeftAlone) {
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(client_->Put(absl::StrCat("space/k", i), std::string(kMiB / 2, 'd')).ok());
  }
  etcd::SpaceKeeper small_files(client_.get(), {.min_bytes = 64 * kMiB});
  absl::StatusOr<etcd::SpacePass> done = small_files.Pass();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->defragmented, "") << Sizes();
  etcd::SpaceKeeper mostly_data(client_.get(), {.min_bytes = 1});
  done = mostly_data.Pass();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->defragmented, "") << Sizes();
}

class EtcdNoSpaceTest : public EtcdSpaceTest {
 protected:
  EtcdNoSpaceTest() { quota_bytes_ = 16 * kMiB; }
};

TEST_F(EtcdNoSpaceTest, AClusterPastItsQuotaTakesWritesAgainOnceEveryMemberWasDefragmented) {
  // Revisions of one key until etcd refuses: "mvcc: database space exceeded".
  absl::Status refused = Rewrite("space/k", 200, kMiB / 2);
  ASSERT_FALSE(refused.ok()) << "the quota was never reached: " << Sizes();
  EXPECT_TRUE(absl::StrContains(refused.message(), "space exceeded")) << refused;
  absl::StatusOr<std::vector<uint64_t>> alarms = client_->NoSpaceAlarms();
  ASSERT_TRUE(alarms.ok()) << alarms.status();
  EXPECT_FALSE(alarms->empty());
  // Compaction is allowed under the alarm; the pages it frees stay in the files.
  absl::StatusOr<mvccpb::KeyValue> newest = client_->Get("space/k");
  ASSERT_TRUE(newest.ok()) << newest.status();
  ASSERT_TRUE(client_->Compact(newest->mod_revision(), /*physical=*/true).ok());
  EXPECT_FALSE(client_->Put("space/other", "x").ok()) << "a write was taken under the alarm";

  etcd::SpaceKeeper keeper(client_.get(), {});  // Its default thresholds: waived under alarm.
  const Passes passes = PassUntilDone(keeper, 10);
  EXPECT_EQ(passes.defragmented.size(), 3u) << Sizes();
  EXPECT_FALSE(passes.disarmed.empty());
  EXPECT_FALSE(keeper.UnderAlarm());
  alarms = client_->NoSpaceAlarms();
  ASSERT_TRUE(alarms.ok()) << alarms.status();
  EXPECT_TRUE(alarms->empty());
  absl::StatusOr<int64_t> written = client_->Put("space/other", "x");
  EXPECT_TRUE(written.ok()) << written.status();
  absl::StatusOr<mvccpb::KeyValue> kept = client_->Get("space/k");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->mod_revision(), newest->mod_revision());
}

}  // namespace
}  // namespace fleet::testing
