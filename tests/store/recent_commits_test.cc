// RecentCommits (controller/store/recent_commits.h): the in-memory commits the watches follow.
#include "controller/store/recent_commits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fleet::store {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::IsEmpty;
using ::testing::Optional;

using Images = std::map<std::string, std::shared_ptr<const v1::Allocation>>;

std::shared_ptr<const v1::Allocation> Allocation(const std::string& id, v1::AllocationState s) {
  auto a = std::make_shared<v1::Allocation>();
  a->set_id(id);
  a->set_state(s);
  return a;
}

TEST(RecentCommitsTest, StartsAtTheNewestEventOfTheDatabaseWithNoCommits) {
  RecentCommits recent(7);
  EXPECT_EQ(recent.LastSequence(), 7u);
  EXPECT_THAT(recent.After(7), Optional(IsEmpty()));
  EXPECT_EQ(recent.After(6), std::nullopt);  // Commits before the start were never kept.
  EXPECT_EQ(recent.Last("a1"), std::nullopt);
}

TEST(RecentCommitsTest, KeepsOneCommitPerAllocationAndTransactionInOrder) {
  RecentCommits recent(0);
  recent.Publish(3,
                 Images{{"a1", Allocation("a1", v1::ALLOCATION_STATE_PENDING)}, {"a2", nullptr}});
  recent.Publish(5, Images{{"a1", Allocation("a1", v1::ALLOCATION_STATE_READY)}});
  EXPECT_EQ(recent.LastSequence(), 5u);
  std::optional<std::vector<AllocationCommit>> all = recent.After(0);
  ASSERT_TRUE(all.has_value());
  EXPECT_THAT(*all, ElementsAre(Field(&AllocationCommit::sequence, 3u),
                                Field(&AllocationCommit::sequence, 3u),
                                Field(&AllocationCommit::sequence, 5u)));
  EXPECT_EQ((*all)[1].id, "a2");
  EXPECT_EQ((*all)[1].allocation, nullptr);
  EXPECT_THAT(recent.After(3), Optional(ElementsAre(Field(&AllocationCommit::sequence, 5u))));
  std::optional<AllocationCommit> last = recent.Last("a1");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->allocation->state(), v1::ALLOCATION_STATE_READY);
}

TEST(RecentCommitsTest, APublicationWithoutAllocationsOnlyMovesTheSequence) {
  RecentCommits recent(2);
  recent.Publish(4, Images{});
  EXPECT_EQ(recent.LastSequence(), 4u);
  EXPECT_THAT(recent.After(2), Optional(IsEmpty()));
}

TEST(RecentCommitsTest, ForgetsTheOldestBeyond1024AndSaysSo) {
  RecentCommits recent(0);
  for (uint64_t sequence = 1; sequence <= 1030; ++sequence) {
    recent.Publish(sequence, Images{{"a1", nullptr}});
  }
  EXPECT_EQ(recent.After(5), std::nullopt);
  std::optional<std::vector<AllocationCommit>> kept = recent.After(6);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->size(), 1024u);
  EXPECT_EQ(kept->front().sequence, 7u);
}

TEST(RecentCommitsTest, WaitAnswersAtOnceOrWhenACommitIsPublished) {
  RecentCommits recent(1);
  EXPECT_TRUE(recent.WaitForNewer(0, absl::InfinitePast()));
  EXPECT_FALSE(recent.WaitForNewer(1, absl::InfinitePast()));
  std::thread writer([&recent] {
    absl::SleepFor(absl::Milliseconds(10));
    recent.Publish(2, Images{});
  });
  EXPECT_TRUE(recent.WaitForNewer(1, absl::Now() + absl::Seconds(60)));
  writer.join();
}

}  // namespace
}  // namespace fleet::store
