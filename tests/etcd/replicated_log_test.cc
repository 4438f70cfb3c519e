// The replicated log (controller/etcd/replicated_log.h) on a real three-member etcd 3.4
// cluster: entries read back whole and in order, larger ones in parts; appends fenced on the
// leader key, never applied twice and never out of order; trims that keep a snapshot to catch
// up from and compact etcd's history; a handover between two elected replicas.
#include "controller/etcd/replicated_log.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "controller/etcd/leader_election.h"
#include "tests/etcd/etcd_cluster.h"
#include "tests/integration/subprocess.h"

namespace fleet::testing {
namespace {

using etcd::CreateRevisionIs;
using etcd::LogBounds;
using etcd::LogEntry;
using etcd::ReplicatedLog;
using etcd::Snapshot;

const size_t kPart = etcd::LogOptions().part_bytes;

// Bytes no two parts share, so a part out of place would show.
std::string Pattern(size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + i / 4099) & 0xff);
  return bytes;
}

class ReplicatedLogTest : public EtcdClusterTest {
 protected:
  void SetUp() override {
    EtcdClusterTest::SetUp();
    if (cluster_ == nullptr) return;
    client_ = Client();
    ASSERT_NE(client_, nullptr);
    ASSERT_TRUE(client_->Put("fleet/leader", "a").ok());
    absl::StatusOr<mvccpb::KeyValue> leader = client_->Get("fleet/leader");
    ASSERT_TRUE(leader.ok()) << leader.status();
    fence_ = CreateRevisionIs("fleet/leader", leader->create_revision());
    log_ = std::make_unique<ReplicatedLog>(client_.get());
  }

  // Appends entries from..through, each "entry <n>".
  void AppendRange(uint64_t from, uint64_t through) {
    for (uint64_t seq = from; seq <= through; ++seq) {
      absl::Status appended = log_->Append(fence_, seq, absl::StrCat("entry ", seq));
      ASSERT_TRUE(appended.ok()) << appended;
    }
  }

  std::vector<uint64_t> SeqsFrom(uint64_t from) {
    absl::StatusOr<std::vector<LogEntry>> entries = log_->Read(from);
    EXPECT_TRUE(entries.ok()) << entries.status();
    std::vector<uint64_t> seqs;
    for (const LogEntry& e : entries.value_or(std::vector<LogEntry>{})) {
      EXPECT_EQ(e.bytes, absl::StrCat("entry ", e.seq));
      seqs.push_back(e.seq);
    }
    return seqs;
  }

  std::vector<std::string> Keys(const std::string& prefix) {
    absl::StatusOr<std::vector<mvccpb::KeyValue>> kvs = client_->GetPrefix(prefix);
    EXPECT_TRUE(kvs.ok()) << kvs.status();
    std::vector<std::string> keys;
    for (const mvccpb::KeyValue& kv : kvs.value_or(std::vector<mvccpb::KeyValue>{})) {
      keys.push_back(kv.key());
    }
    return keys;
  }

  LogBounds Bounds() {
    absl::StatusOr<LogBounds> bounds = log_->Bounds();
    EXPECT_TRUE(bounds.ok()) << bounds.status();
    return bounds.value_or(LogBounds{});
  }

  std::unique_ptr<etcd::EtcdClient> client_;
  etcdserverpb::Compare fence_;
  std::unique_ptr<ReplicatedLog> log_;
};

TEST_F(ReplicatedLogTest, EntriesAreReadBackWholeAndInOrderLargeOnesInParts) {
  EXPECT_EQ(Bounds().head, 0u);
  EXPECT_TRUE(SeqsFrom(1).empty());
  AppendRange(1, 3);
  const std::string large = Pattern(2 * kPart + 12345);  // three parts
  ASSERT_TRUE(log_->Append(fence_, 4, large).ok());
  ASSERT_TRUE(log_->Append(fence_, 5, "").ok());  // An empty entry is an entry.

  absl::StatusOr<std::vector<LogEntry>> all = log_->Read(1);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 5u);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ((*all)[i].bytes, absl::StrCat("entry ", i + 1));
  EXPECT_EQ((*all)[3].seq, 4u);
  EXPECT_TRUE((*all)[3].bytes == large)
      << "the large entry came back altered, " << (*all)[3].bytes.size() << " bytes";
  EXPECT_EQ((*all)[4].seq, 5u);
  EXPECT_EQ((*all)[4].bytes, "");

  // From the middle; past the head; a byte budget still gives one entry, whatever its size.
  absl::StatusOr<std::vector<LogEntry>> tail = log_->Read(4);
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0].seq, 4u);
  EXPECT_TRUE(SeqsFrom(6).empty());
  absl::StatusOr<std::vector<LogEntry>> budget = log_->Read(4, 1);
  ASSERT_TRUE(budget.ok()) << budget.status();
  ASSERT_EQ(budget->size(), 1u);
  EXPECT_EQ((*budget)[0].bytes.size(), large.size());
}

TEST_F(ReplicatedLogTest, AReadOfManyEntriesSpansRoundsAndKeepsOrder) {
  AppendRange(1, 150);  // More than one round of parts.
  std::vector<uint64_t> seqs = SeqsFrom(1);
  ASSERT_EQ(seqs.size(), 150u);
  for (uint64_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i + 1);
}

TEST_F(ReplicatedLogTest, AnAppendOutOfOrderOrNotFromTheLeaderIsRefusedAndChangesNothing) {
  AppendRange(1, 2);
  absl::Status skipped = log_->Append(fence_, 4, "entry 4");
  EXPECT_EQ(skipped.code(), absl::StatusCode::kFailedPrecondition) << skipped;
  EXPECT_TRUE(absl::StrContains(skipped.message(), "head is 2, so the next entry is 3")) << skipped;

  // A replica that does not lead: its fence never holds (LeaderElection::StillLeading).
  absl::Status follower = log_->Append(CreateRevisionIs("fleet/leader", -1), 3, "entry 3");
  EXPECT_EQ(follower.code(), absl::StatusCode::kFailedPrecondition) << follower;
  EXPECT_TRUE(absl::StrContains(follower.message(), "does not lead")) << follower;
  // A large entry's first parts are fenced too.
  follower = log_->Append(CreateRevisionIs("fleet/leader", -1), 3, Pattern(kPart + 1));
  EXPECT_TRUE(absl::StrContains(follower.message(), "does not lead")) << follower;
  EXPECT_TRUE(Keys("fleet/log/e/" + std::string(19, '0') + "3/").empty());

  EXPECT_EQ(log_->Append(fence_, 0, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Bounds().head, 2u);
  EXPECT_EQ(SeqsFrom(1), (std::vector<uint64_t>{1, 2}));
}

// An Append whose answer was lost is made again by its caller: it lands once.
TEST_F(ReplicatedLogTest, AnAppendMadeAgainIsAppliedOnceAndAnotherEntryInItsPlaceIsRefused) {
  AppendRange(1, 3);
  absl::Status again = log_->Append(fence_, 3, "entry 3");
  EXPECT_TRUE(again.ok()) << again;
  const std::string large = Pattern(kPart + 7);
  ASSERT_TRUE(log_->Append(fence_, 4, large).ok());
  again = log_->Append(fence_, 4, large);
  EXPECT_TRUE(again.ok()) << again;
  EXPECT_EQ(Bounds().head, 4u);
  absl::StatusOr<std::vector<LogEntry>> four = log_->Read(1);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->size(), 4u);

  absl::Status other = log_->Append(fence_, 3, "something else");
  EXPECT_EQ(other.code(), absl::StatusCode::kAlreadyExists) << other;
  EXPECT_TRUE(absl::StrContains(other.message(), "entry 3 was appended with other bytes")) << other;
  absl::StatusOr<std::vector<LogEntry>> third = log_->Read(3, 1);
  ASSERT_TRUE(third.ok() && !third->empty()) << third.status();
  EXPECT_EQ((*third)[0].bytes, "entry 3");
}

TEST_F(ReplicatedLogTest, TrimKeepsASnapshotToCatchUpFromAndCompactsEtcdsHistory) {
  AppendRange(1, 10);
  absl::Status early = log_->Trim(fence_, 5);
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition) << early;
  EXPECT_TRUE(absl::StrContains(early.message(), "past the newest snapshot (0)")) << early;
  EXPECT_EQ(log_->ReadSnapshot().status().code(), absl::StatusCode::kNotFound);

  const std::string state = Pattern(2 * kPart + 3);
  ASSERT_TRUE(log_->PutSnapshot(fence_, {6, state}).ok());
  const int64_t before_trim = client_->Put("fleet/probe", "x").value_or(0);
  absl::Status trimmed = log_->Trim(fence_, 6);
  ASSERT_TRUE(trimmed.ok()) << trimmed;
  EXPECT_EQ(Bounds().first, 7u);
  EXPECT_EQ(log_->Trim(fence_, 6).code(), absl::StatusCode::kOk);  // Done already.

  // A reader at entry 3 is told to catch up from the snapshot, and does.
  absl::StatusOr<std::vector<LogEntry>> behind = log_->Read(3);
  EXPECT_EQ(behind.status().code(), absl::StatusCode::kOutOfRange) << behind.status();
  EXPECT_TRUE(absl::StrContains(behind.status().message(), "the first kept is 7"))
      << behind.status();
  absl::StatusOr<Snapshot> snapshot = log_->ReadSnapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->seq, 6u);
  EXPECT_TRUE(snapshot->bytes == state);
  EXPECT_EQ(SeqsFrom(snapshot->seq + 1), (std::vector<uint64_t>{7, 8, 9, 10}));
  EXPECT_TRUE(Keys("fleet/log/e/" + std::string(19, '0') + "1/").empty());

  // etcd's history before the trim is compacted: a read at an older revision is refused.
  etcdserverpb::TxnRequest old;
  etcdserverpb::RangeRequest* range = old.add_success()->mutable_request_range();
  range->set_key("fleet/probe");
  range->set_revision(before_trim - 1);
  absl::StatusOr<etcdserverpb::TxnResponse> answer = client_->Txn(old);
  EXPECT_FALSE(answer.ok());
  EXPECT_TRUE(absl::StrContains(answer.status().message(), "compacted")) << answer.status();

  // A newer snapshot replaces the older, whose parts go.
  ASSERT_TRUE(log_->PutSnapshot(fence_, {9, "state at 9"}).ok());
  absl::StatusOr<Snapshot> newer = log_->ReadSnapshot();
  ASSERT_TRUE(newer.ok()) << newer.status();
  EXPECT_EQ(newer->bytes, "state at 9");
  EXPECT_TRUE(Keys("fleet/log/snapshot/" + std::string(19, '0') + "6/").empty());
  absl::Status stale = log_->PutSnapshot(fence_, {8, "older"});
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition) << stale;
  absl::Status ahead = log_->PutSnapshot(fence_, {11, "ahead"});
  EXPECT_EQ(ahead.code(), absl::StatusCode::kInvalidArgument) << ahead;
  EXPECT_TRUE(absl::StrContains(ahead.message(), "its head is 10")) << ahead;
}

// Small parts and short rounds, so that entries span parts and round trips end inside them.
TEST_F(ReplicatedLogTest, EntriesSpanningPartsAndRoundTripsReadBackWholeAndWithinBudget) {
  ReplicatedLog small(client_.get(), {.part_bytes = 8, .read_round_parts = 5});
  const std::vector<std::string> entries = {"abc",      Pattern(20), "", Pattern(17),
                                            Pattern(8), Pattern(41), "z"};
  for (size_t i = 0; i < entries.size(); ++i) {
    ASSERT_TRUE(small.Append(fence_, i + 1, entries[i]).ok()) << i;
  }
  absl::StatusOr<std::vector<LogEntry>> all = small.Read(1);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ((*all)[i].seq, i + 1);
    EXPECT_TRUE((*all)[i].bytes == entries[i]) << "entry " << i + 1 << " came back altered";
  }
  // A budget: whole entries, never past it, except a first entry larger than it.
  absl::StatusOr<std::vector<LogEntry>> some = small.Read(1, 24);
  ASSERT_TRUE(some.ok()) << some.status();
  ASSERT_EQ(some->size(), 3u);  // 3 + 20 + 0 bytes; the next (17) would pass 24.
  absl::StatusOr<std::vector<LogEntry>> big = small.Read(6, 10);
  ASSERT_TRUE(big.ok()) << big.status();
  ASSERT_EQ(big->size(), 1u);
  EXPECT_EQ((*big)[0].bytes.size(), 41u);
}

// A leader deposed in the middle of a large append leaves parts under the next entry's key:
// the next leader's entry there is read back as it wrote it, with none of them.
TEST_F(ReplicatedLogTest, PartsLeftByADeposedLeadersTryAreClearedByTheNextAppend) {
  ReplicatedLog small(client_.get(), {.part_bytes = 8, .read_round_parts = 5});
  ASSERT_TRUE(small.Append(fence_, 1, "first").ok());
  const std::string stale = "fleet/log/e/" + std::string(19, '0') + "2/";
  for (const char* part : {"0000", "0001", "0002"}) {
    ASSERT_TRUE(client_->Put(stale + part, "stale!!!").ok());
  }
  ASSERT_TRUE(small.Append(fence_, 2, "fresh").ok());
  absl::StatusOr<std::vector<LogEntry>> read = small.Read(2);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].bytes, "fresh");
  EXPECT_EQ(Keys(stale).size(), 1u);
}

// A leader whose append's answer was lost, and which stopped leading since, makes the append
// again: it is told the entry is in the log, not that it was refused.
TEST_F(ReplicatedLogTest, AnAppendMadeAgainAfterLosingTheLeadIsToldItIsInTheLog) {
  AppendRange(1, 2);
  const etcdserverpb::Compare deposed = CreateRevisionIs("fleet/leader", -1);
  absl::Status again = log_->Append(deposed, 2, "entry 2");
  EXPECT_TRUE(again.ok()) << again;
  absl::Status next = log_->Append(deposed, 3, "entry 3");
  EXPECT_EQ(next.code(), absl::StatusCode::kFailedPrecondition) << next;
  EXPECT_TRUE(absl::StrContains(next.message(), "does not lead")) << next;
}

TEST_F(ReplicatedLogTest, ASnapshotStoredAgainIsOkAndLeftoversOfFailedOnesGo) {
  AppendRange(1, 6);
  const std::string orphan = "fleet/log/snapshot/" + std::string(19, '0') + "4/0000";
  ASSERT_TRUE(client_->Put(orphan, "a failed try at 4").ok());
  ASSERT_TRUE(log_->PutSnapshot(fence_, {5, "state at 5"}).ok());
  absl::Status again = log_->PutSnapshot(fence_, {5, "state at 5"});
  EXPECT_TRUE(again.ok()) << again;
  EXPECT_EQ(log_->PutSnapshot(fence_, {5, "other"}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Keys(orphan).empty()) << "a failed snapshot's parts were kept";
  EXPECT_EQ(Keys("fleet/log/snapshot/").size(), 2u);  // current, and 5's one part.
}

// Two elected replicas: the leader appends, the follower's appends are refused; after a
// handover the new leader continues from the head, and the old one's late append is refused.
TEST_F(ReplicatedLogTest, AfterAHandoverTheNewLeaderContinuesAndTheOldOneIsFencedOut) {
  std::unique_ptr<etcd::EtcdClient> a_client = Client(), b_client = Client();
  ASSERT_TRUE(client_->Delete("fleet/leader").ok());
  etcd::LeaderOptions options;
  options.key = "fleet/leader";
  options.lease_ttl = absl::Seconds(3);
  options.name = "a:1";
  etcd::LeaderElection a(a_client.get(), options);
  options.name = "b:1";
  etcd::LeaderElection b(b_client.get(), options);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(Eventually([&] { return a.Current().leading; }, absl::Seconds(10)));
  ASSERT_TRUE(b.Start().ok());

  ReplicatedLog a_log(a_client.get()), b_log(b_client.get());
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_TRUE(a_log.Append(a.StillLeading(), seq, absl::StrCat("entry ", seq)).ok());
  }
  EXPECT_EQ(b_log.Append(b.StillLeading(), 4, "entry 4").code(),
            absl::StatusCode::kFailedPrecondition);
  const etcdserverpb::Compare a_fence = a.StillLeading();

  a.Stop();  // Resigns.
  ASSERT_TRUE(Eventually([&] { return b.Current().leading; }, absl::Seconds(10)));
  absl::StatusOr<LogBounds> bounds = b_log.Bounds();
  ASSERT_TRUE(bounds.ok()) << bounds.status();
  EXPECT_EQ(bounds->head, 3u);
  ASSERT_TRUE(b_log.Append(b.StillLeading(), 4, "entry 4").ok());
  absl::Status late = a_log.Append(a_fence, 5, "entry 5 from a");
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_EQ(SeqsFrom(1), (std::vector<uint64_t>{1, 2, 3, 4}));
  b.Stop();
}

}  // namespace
}  // namespace fleet::testing
