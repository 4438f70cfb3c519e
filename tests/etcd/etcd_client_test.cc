// The etcd client (controller/etcd/etcd_client.h) against a real three-member etcd 3.4
// cluster on this machine (tests/etcd/etcd_cluster.h): mutual TLS, fencing by a leader key's
// create_revision, leases, a member lost, the quorum lost and given back.
#include "controller/etcd/etcd_client.h"

#include <cstdlib>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "tests/etcd/etcd_cluster.h"
#include "tests/integration/subprocess.h"

namespace fleet::testing {
namespace {

using etcd::CreateRevisionIs;
using etcd::EtcdClient;
using etcd::EtcdOptions;
using etcd::IsMemberFailure;

class EtcdClientTest : public EtcdClusterTest {
 protected:
  void SetUp() override {
    EtcdClusterTest::SetUp();
    if (cluster_ != nullptr) client_ = Client();
  }

  std::unique_ptr<EtcdClient> Connected(EtcdOptions options) {
    absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // A replica's attempt to become leader: the leader key, created on `lease` only if absent.
  // Returns the key's create_revision when this replica now holds it, 0 when another does.
  int64_t Campaign(EtcdClient& client, int64_t lease, const std::string& name) {
    etcdserverpb::TxnRequest txn;
    *txn.add_compare() = CreateRevisionIs("fleet/leader", 0);
    etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key("fleet/leader");
    put->set_value(name);
    put->set_lease(lease);
    absl::StatusOr<etcdserverpb::TxnResponse> response = client.Txn(txn);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok() || !response->succeeded()) return 0;
    absl::StatusOr<mvccpb::KeyValue> key = client.Get("fleet/leader");
    EXPECT_TRUE(key.ok()) << key.status();
    return key.ok() ? key->create_revision() : 0;
  }

  // A leader's write, fenced: applied only while the leader key is the one it created.
  bool FencedPut(EtcdClient& client, int64_t leader_revision, const std::string& key,
                 const std::string& value) {
    etcdserverpb::TxnRequest txn;
    *txn.add_compare() = CreateRevisionIs("fleet/leader", leader_revision);
    etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(value);
    absl::StatusOr<etcdserverpb::TxnResponse> response = client.Txn(txn);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() && response->succeeded();
  }

  std::unique_ptr<EtcdClient> client_;
};

// Which answers send a call on to the next member: a leader lost for a moment (etcd's own
// election after a member is killed) is not an answer about the request. Seen as UNKNOWN
// "context deadline exceeded" from etcd 3.4, which a replica once took for its key lost.
TEST(EtcdMemberFailureTest, OnlyAnswersAboutTheMemberSendTheCallOn) {
  EXPECT_TRUE(IsMemberFailure(absl::UnavailableError("etcdserver: no leader")));
  EXPECT_TRUE(IsMemberFailure(absl::DeadlineExceededError("Deadline Exceeded")));
  EXPECT_TRUE(IsMemberFailure(absl::UnknownError("context deadline exceeded")));
  EXPECT_FALSE(IsMemberFailure(absl::UnknownError("etcdserver: some other failure")));
  EXPECT_FALSE(IsMemberFailure(absl::NotFoundError("key fleet/leader")));
  EXPECT_FALSE(IsMemberFailure(absl::FailedPreconditionError("etcdserver: compacted")));
  EXPECT_FALSE(IsMemberFailure(absl::PermissionDeniedError("etcdserver: permission denied")));
  EXPECT_FALSE(IsMemberFailure(absl::OkStatus()));
}

TEST_F(EtcdClientTest, PutsAndReadsKeysAndPrefixesOverMutualTls) {
  ASSERT_TRUE(client_->Put("fleet/log/2", "two").ok());
  absl::StatusOr<int64_t> revision = client_->Put("fleet/log/1", "one");
  ASSERT_TRUE(revision.ok()) << revision.status();
  ASSERT_TRUE(client_->Put("fleet/other", "x").ok());

  absl::StatusOr<mvccpb::KeyValue> one = client_->Get("fleet/log/1");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->value(), "one");
  EXPECT_EQ(one->mod_revision(), *revision);
  absl::StatusOr<std::vector<mvccpb::KeyValue>> log = client_->GetPrefix("fleet/log/");
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[0].key(), "fleet/log/1");
  EXPECT_EQ((*log)[1].key(), "fleet/log/2");

  absl::StatusOr<mvccpb::KeyValue> missing = client_->Get("fleet/none");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "fleet/none")) << missing.status();
  absl::StatusOr<int64_t> deleted = client_->Delete("fleet/log/2");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 1);
  EXPECT_EQ(client_->GetPrefix("fleet/log/")->size(), 1u);
}

TEST_F(EtcdClientTest, AClientWithoutTheSitesCertificateIsRefused) {
  EtcdOptions stranger = cluster_->StrangerOptions();
  stranger.request_timeout = absl::Seconds(2);
  std::unique_ptr<EtcdClient> client = Connected(stranger);
  ASSERT_NE(client, nullptr);
  absl::StatusOr<int64_t> put = client->Put("fleet/leader", "intruder");
  EXPECT_EQ(put.status().code(), absl::StatusCode::kUnavailable) << put.status();
  EXPECT_TRUE(
      absl::StrContains(put.status().message(), "cannot connect or complete the TLS handshake"))
      << put.status();

  EtcdOptions plaintext = cluster_->ClientOptions();
  plaintext.ca_file = plaintext.cert_file = plaintext.key_file = "";
  plaintext.request_timeout = absl::Seconds(2);
  std::unique_ptr<EtcdClient> bare = Connected(plaintext);
  ASSERT_NE(bare, nullptr);
  EXPECT_FALSE(bare->Put("fleet/leader", "intruder").ok());

  EXPECT_EQ(client_->Get("fleet/leader").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(EtcdClientTest, OptionsThatCannotWorkAreRefusedNamingThem) {
  EtcdOptions none;
  EXPECT_TRUE(absl::StrContains(EtcdClient::Connect(none).status().message(), "endpoints"));
  EtcdOptions half = cluster_->ClientOptions();
  half.key_file = "";
  absl::Status refused = EtcdClient::Connect(half).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.message(), "all three")) << refused;
  EtcdOptions mismatched = cluster_->ClientOptions();
  mismatched.endpoints = {"http://" + cluster_->endpoint(0)};
  refused = EtcdClient::Connect(mismatched).status();
  EXPECT_TRUE(absl::StrContains(refused.message(), "says plaintext but the TLS files are given"))
      << refused;
  EtcdOptions unreadable = cluster_->ClientOptions();
  unreadable.cert_file = "/nonexistent/fleetd.pem";
  refused = EtcdClient::Connect(unreadable).status();
  EXPECT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.message(), "/nonexistent/fleetd.pem")) << refused;
}

// The fencing replicated fleetd relies on (docs/ha.md): a leader's writes compare the leader
// key's create_revision, so once its lease is gone and another replica holds the key, the old
// leader's writes do nothing, even though etcd still answers it.
TEST_F(EtcdClientTest, AWriteFencedOnTheLeaderKeyIsRefusedOnceAnotherReplicaLeads) {
  std::unique_ptr<EtcdClient> other = Client();
  absl::StatusOr<etcd::Lease> lease_a = client_->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease_a.ok()) << lease_a.status();
  absl::StatusOr<etcd::Lease> lease_b = other->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease_b.ok()) << lease_b.status();

  const int64_t a = Campaign(*client_, lease_a->id, "replica-a");
  ASSERT_GT(a, 0);
  EXPECT_EQ(Campaign(*other, lease_b->id, "replica-b"), 0);  // A leads; B is refused.
  EXPECT_TRUE(FencedPut(*client_, a, "fleet/log/1", "from a"));

  // A's lease ends (as when A stops renewing it): its key goes, B takes the lead.
  ASSERT_TRUE(client_->RevokeLease(lease_a->id).ok());
  const int64_t b = Campaign(*other, lease_b->id, "replica-b");
  ASSERT_GT(b, a);
  EXPECT_FALSE(FencedPut(*client_, a, "fleet/log/2", "from deposed a"));
  EXPECT_TRUE(FencedPut(*other, b, "fleet/log/2", "from b"));
  EXPECT_EQ(client_->Get("fleet/log/2")->value(), "from b");
  EXPECT_EQ(client_->Get("fleet/leader")->value(), "replica-b");
  // A lease that is gone is reported as such.
  EXPECT_EQ(client_->RevokeLease(lease_a->id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->KeepAlive(lease_a->id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(EtcdClientTest, ALeaseKeptAliveHoldsItsKeyAndOneLeftToExpireTakesItAway) {
  absl::StatusOr<etcd::Lease> lease = client_->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_GE(lease->ttl, absl::Seconds(2));
  ASSERT_TRUE(client_->Put("fleet/leader", "replica-a", lease->id).ok());
  absl::StatusOr<absl::Duration> left = client_->KeepAlive(lease->id);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_GT(*left, absl::ZeroDuration());
  EXPECT_EQ(client_->Get("fleet/leader")->lease(), lease->id);

  // Not renewed: etcd deletes the key once the lease's time is up (real time: etcd's own).
  const absl::Time give_up = absl::Now() + absl::Seconds(15);
  while (client_->Get("fleet/leader").ok() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(client_->Get("fleet/leader").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<absl::Duration> expired = client_->KeepAlive(lease->id);
  EXPECT_EQ(expired.status().code(), absl::StatusCode::kNotFound) << expired.status();
  EXPECT_TRUE(absl::StrContains(expired.status().message(), "expired")) << expired.status();
}

TEST_F(EtcdClientTest, AMemberLostIsSteppedOverAndReportedUnreachable) {
  ASSERT_TRUE(client_->Put("fleet/log/1", "one").ok());  // Member 0 answered: it is preferred.
  ASSERT_TRUE(cluster_->Kill(0).ok());
  // A write is sent to one member at most. If this client's connection to member 0 had not
  // yet seen it die, the write went out on it; and while the members elect a new etcd leader
  // (member 0 may have been it), a write a member took may hang until its deadline. Either
  // way it fails "outcome unknown" naming that member, the next starts from the next member,
  // and writes are soon served again.
  absl::StatusOr<int64_t> put = client_->Put("fleet/log/2", "two");
  for (int attempt = 0; !put.ok() && attempt < 5; ++attempt) {
    EXPECT_EQ(put.status().code(), absl::StatusCode::kUnavailable) << put.status();
    EXPECT_TRUE(absl::StrContains(put.status().message(), "outcome unknown")) << put.status();
    put = client_->Put("fleet/log/2", "two");
  }
  EXPECT_TRUE(put.ok()) << put.status();
  // A member known to be down is stepped over with nothing sent: this write goes on too.
  put = client_->Put("fleet/log/3", "three");
  EXPECT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(client_->Get("fleet/log/1")->value(), "one");

  std::vector<etcd::MemberStatus> members = client_->Members();
  ASSERT_EQ(members.size(), 3u);
  EXPECT_FALSE(members[0].reachable.ok());
  EXPECT_EQ(members[0].endpoint, cluster_->endpoint(0));
  ASSERT_TRUE(members[1].reachable.ok()) << members[1].reachable;
  ASSERT_TRUE(members[2].reachable.ok()) << members[2].reachable;
  EXPECT_NE(members[1].leader_id, 0u);
  EXPECT_EQ(members[1].leader_id, members[2].leader_id);
  EXPECT_EQ(absl::string_view(members[1].version).substr(0, 4), "3.4.");
}

TEST_F(EtcdClientTest, WithoutAQuorumWritesAreRefusedUnavailableAndResumeWhenItReturns) {
  ASSERT_TRUE(client_->Put("fleet/log/1", "one").ok());
  ASSERT_TRUE(cluster_->Kill(1).ok());
  ASSERT_TRUE(cluster_->Kill(2).ok());

  std::unique_ptr<EtcdClient> client = Client({}, absl::Seconds(2));
  const absl::Time start = absl::Now();
  absl::StatusOr<int64_t> put = client->Put("fleet/log/2", "two");
  const absl::Duration took = absl::Now() - start;
  // Member 0 took the write and could not commit it: whether it will be applied is unknown
  // (it would be, were the quorum back before its proposal is dropped), and it is not retried.
  EXPECT_EQ(put.status().code(), absl::StatusCode::kUnavailable) << put.status();
  EXPECT_TRUE(absl::StrContains(put.status().message(), "outcome unknown")) << put.status();
  EXPECT_TRUE(absl::StrContains(put.status().message(), "Put fleet/log/2")) << put.status();
  EXPECT_LT(took, absl::Seconds(4));  // Its 2 s deadline, with slack for a busy machine.
  absl::Status read = client->Get("fleet/log/1").status();
  EXPECT_EQ(read.code(), absl::StatusCode::kUnavailable) << read;
  EXPECT_TRUE(absl::StrContains(read.message(), "no member answered with a quorum")) << read;

  // One member back: a quorum of two again, and writes go through.
  absl::Status restarted = cluster_->Restart(1);
  ASSERT_TRUE(restarted.ok()) << restarted;
  put = client_->Put("fleet/log/3", "three");
  EXPECT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(client_->Get("fleet/log/1")->value(), "one");
}

TEST_F(EtcdClientTest, ARequestOverEtcdsSizeLimitIsRefusedWithoutRetryAndNamed) {
  const std::string large(2 << 20, 'x');  // etcd takes at most 1.5 MiB per request.
  absl::StatusOr<int64_t> put = client_->Put("fleet/log/big", large);
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.status().code(), absl::StatusCode::kUnavailable) << put.status();
  EXPECT_TRUE(absl::StrContains(put.status().message(), "Put fleet/log/big")) << put.status();
  EXPECT_EQ(client_->Get("fleet/log/big").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace fleet::testing
