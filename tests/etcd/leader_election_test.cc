// Leader election (controller/etcd/leader_election.h) between replicas on a real three-member
// etcd 3.4 cluster: one leads and the others name it; a resigning leader hands over at once; a
// leader cut off from etcd stops acting before another replica can lead, and its late writes
// are refused by etcd.
#include "controller/etcd/leader_election.h"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "tests/etcd/etcd_cluster.h"
#include "tests/integration/subprocess.h"

namespace fleet::testing {
namespace {

using etcd::EtcdClient;
using etcd::EtcdOptions;
using etcd::LeaderElection;
using etcd::LeaderOptions;

class LeaderElectionTest : public EtcdClusterTest {
 protected:
  static LeaderOptions Options(const std::string& name, absl::Duration ttl) {
    LeaderOptions options;
    options.name = name;
    options.lease_ttl = ttl;
    options.margin = absl::Milliseconds(500);
    options.retry = absl::Milliseconds(100);
    return options;
  }

  // Waits (real time: etcd's) until `done` holds; false after `limit`.
  template <typename Done>
  static bool Within(absl::Duration limit, Done done) {
    const absl::Time give_up = absl::Now() + limit;
    while (!done()) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }

  // Starts `a`, waits until it leads, then starts `b` and waits until it names `a` leader.
  static void LeadThenFollow(LeaderElection& a, const std::string& a_name, LeaderElection& b) {
    ASSERT_TRUE(a.Start().ok());
    ASSERT_TRUE(Within(absl::Seconds(10), [&] { return a.Current().leading; }));
    ASSERT_TRUE(b.Start().ok());
    ASSERT_TRUE(Within(absl::Seconds(10), [&] { return b.Current().leader == a_name; }));
  }
};

TEST_F(LeaderElectionTest, OneReplicaLeadsAndTheOtherNamesIt) {
  std::unique_ptr<EtcdClient> ca = Client({}, absl::Seconds(1));
  std::unique_ptr<EtcdClient> cb = Client({}, absl::Seconds(1));
  LeaderElection a(ca.get(), Options("10.0.0.1:50051", absl::Seconds(5)));
  LeaderElection b(cb.get(), Options("10.0.0.2:50051", absl::Seconds(5)));
  LeadThenFollow(a, "10.0.0.1:50051", b);
  if (HasFatalFailure()) return;

  EXPECT_TRUE(a.Fence().ok()) << a.Fence();
  EXPECT_FALSE(b.Current().leading);
  absl::Status refused = b.Fence();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(refused.message(), "10.0.0.1:50051 leads")) << refused;
  EXPECT_GT(a.Current().epoch, 0);
  EXPECT_EQ(ca->Get("fleet/leader")->create_revision(), a.Current().epoch);
  EXPECT_EQ(b.StillLeading().create_revision(), -1);  // A follower's compare never holds.
}

TEST_F(LeaderElectionTest, AResigningLeaderHandsOverWithoutWaitingOutItsLease) {
  std::unique_ptr<EtcdClient> ca = Client({}, absl::Seconds(1));
  std::unique_ptr<EtcdClient> cb = Client({}, absl::Seconds(1));
  int a_changes = 0;
  LeaderElection a(ca.get(), Options("a:1", absl::Seconds(30)), [&](bool) { ++a_changes; });
  LeaderElection b(cb.get(), Options("b:1", absl::Seconds(30)));
  LeadThenFollow(a, "a:1", b);
  if (HasFatalFailure()) return;

  const absl::Time stopped = absl::Now();
  a.Stop();
  EXPECT_FALSE(a.Fence().ok());
  // Well inside the 30 s lease: the revoked lease took the key with it.
  ASSERT_TRUE(Within(absl::Seconds(10), [&] { return b.Current().leading; }));
  EXPECT_LT(absl::Now() - stopped, absl::Seconds(10));
  EXPECT_TRUE(b.Fence().ok()) << b.Fence();
  EXPECT_EQ(cb->Get("fleet/leader")->value(), "b:1");
  EXPECT_EQ(a_changes, 2);  // Started leading, stopped.
}

// The safety the fence exists for: A leads while connected to etcd member 0 only; member 0
// dies, so A can no longer renew. A's fence must close before its lease can have expired in
// etcd, hence before B (connected to the other two members) can take the key; and a write A
// fenced on its epoch that reaches etcd afterwards is refused.
TEST_F(LeaderElectionTest, ALeaderCutOffFromEtcdStopsActingBeforeAnotherCanLead) {
  std::unique_ptr<EtcdClient> ca = Client({0}, absl::Seconds(1));
  std::unique_ptr<EtcdClient> cb = Client({1, 2}, absl::Seconds(1));
  LeaderElection a(ca.get(), Options("a:1", absl::Seconds(3)));
  LeaderElection b(cb.get(), Options("b:1", absl::Seconds(3)));
  LeadThenFollow(a, "a:1", b);
  if (HasFatalFailure()) return;
  const int64_t a_epoch = a.Current().epoch;
  const etcdserverpb::Compare a_fence = a.StillLeading();

  ASSERT_TRUE(cluster_->Kill(0).ok());
  absl::Time a_stopped_acting = absl::InfiniteFuture();
  absl::Time b_led = absl::InfiniteFuture();
  ASSERT_TRUE(Within(absl::Seconds(20), [&] {
    const absl::Time now = absl::Now();
    if (a_stopped_acting == absl::InfiniteFuture() && !a.Fence().ok()) a_stopped_acting = now;
    if (b_led == absl::InfiniteFuture() && b.Current().leading) b_led = now;
    return b_led != absl::InfiniteFuture();
  }));
  // By the margin at least: A's fence closes T - margin after its last renewal was sent,
  // etcd cannot let the lease go before T after it (10 ms: this loop's step).
  EXPECT_GE(b_led - a_stopped_acting, absl::Milliseconds(500) - absl::Milliseconds(20))
      << "A acted until " << a_stopped_acting << ", B led from " << b_led;
  std::cout << "A stopped acting " << absl::FormatDuration(b_led - a_stopped_acting)
            << " before B led" << std::endl;
  EXPECT_GT(b.Current().epoch, a_epoch);
  EXPECT_TRUE(b.Fence().ok()) << b.Fence();

  // A's write, fenced on its epoch, reaching etcd late (through B's connection here): refused.
  etcdserverpb::TxnRequest late;
  *late.add_compare() = a_fence;
  etcdserverpb::PutRequest* put = late.add_success()->mutable_request_put();
  put->set_key("fleet/log/9");
  put->set_value("from deposed a");
  absl::StatusOr<etcdserverpb::TxnResponse> answer = cb->Txn(late);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_FALSE(answer->succeeded());
  EXPECT_EQ(cb->Get("fleet/log/9").status().code(), absl::StatusCode::kNotFound);
  etcdserverpb::TxnRequest current;
  *current.add_compare() = b.StillLeading();
  *current.add_success() = late.success(0);
  EXPECT_TRUE(cb->Txn(current)->succeeded());
}

TEST_F(LeaderElectionTest, AHealthyLeaderRenewsAndItsFenceNeverCloses) {
  std::unique_ptr<EtcdClient> ca = Client({}, absl::Seconds(1));
  LeaderElection a(ca.get(), Options("a:1", absl::Seconds(2)));
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(Within(absl::Seconds(10), [&] { return a.Current().leading; }));
  const int64_t epoch = a.Current().epoch;
  // Three times the lease: it must have been renewed, and the fence open at every look.
  int closed = 0;
  Within(absl::Seconds(6), [&] {
    closed += a.Fence().ok() ? 0 : 1;
    return false;
  });
  EXPECT_EQ(closed, 0);
  EXPECT_EQ(a.Current().epoch, epoch);
  EXPECT_EQ(ca->Get("fleet/leader")->create_revision(), epoch);
}

TEST_F(LeaderElectionTest, ALeaderWhoseKeyIsDeletedStopsLeadingAndAnotherTakesOver) {
  std::unique_ptr<EtcdClient> ca = Client({}, absl::Seconds(1));
  std::unique_ptr<EtcdClient> cb = Client({}, absl::Seconds(1));
  LeaderElection a(ca.get(), Options("a:1", absl::Seconds(3)));
  LeaderElection b(cb.get(), Options("b:1", absl::Seconds(3)));
  LeadThenFollow(a, "a:1", b);
  if (HasFatalFailure()) return;

  ASSERT_TRUE(cb->Delete("fleet/leader").ok());  // An operator's hand, say.
  ASSERT_TRUE(Within(absl::Seconds(10), [&] { return !a.Current().leading; }));
  EXPECT_FALSE(a.Fence().ok());
  ASSERT_TRUE(
      Within(absl::Seconds(10), [&] { return a.Current().leading || b.Current().leading; }));
  EXPECT_NE(a.Current().leading, b.Current().leading);  // One of them, not both.
}

TEST(LeaderOptionsTest, OptionsThatCannotWorkAreRefusedNamingThem) {
  LeaderOptions options;
  options.name = "a:1";
  EXPECT_TRUE(LeaderElection::Check(options).ok());
  options.name = "";
  EXPECT_TRUE(absl::StrContains(LeaderElection::Check(options).message(), "leader name"));
  options.name = "a:1";
  options.margin = options.lease_ttl;
  absl::Status refused = LeaderElection::Check(options);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.message(), "margin")) << refused;
  options.margin = absl::Milliseconds(100);
  options.key = "";
  EXPECT_FALSE(LeaderElection::Check(options).ok());
}

}  // namespace
}  // namespace fleet::testing
