#include "controller/engine/switch_programmer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "testing/fake_optical_switch.h"
#include "tests/eventually.h"

namespace fleet::engine {
namespace {

using switch_adapters::CrossConnect;
using switch_adapters::CrossConnectBatch;
using ::testing::HasSubstr;

// A fleet::testing::FakeOpticalSwitch whose first Apply waits until released, so a test can queue
// work behind a batch in flight.
class GatedSwitch : public fleet::testing::FakeOpticalSwitch {
 public:
  GatedSwitch() : fleet::testing::FakeOpticalSwitch(16, 16) {}
  switch_adapters::ApplyResult Apply(const CrossConnectBatch& batch) override {
    applies_.fetch_add(1);
    if (!entered_.HasBeenNotified()) {
      entered_.Notify();
      release_.WaitForNotification();
    }
    return fleet::testing::FakeOpticalSwitch::Apply(batch);
  }
  absl::Notification entered_, release_;
  std::atomic<int> applies_{0};
};

const std::thread::id kMain = std::this_thread::get_id();

CrossConnectBatch Add(uint32_t ingress, uint32_t egress) {
  CrossConnectBatch b;
  b.add.push_back({ingress, egress});
  return b;
}

TEST(SwitchProgrammerTest, ChangesArrivingDuringABatchGoOutTogether) {
  GatedSwitch sw;
  SwitchProgrammer programmer("ocs1", &sw);
  std::thread first([&] { EXPECT_TRUE(programmer.Program(Add(1, 17)).status.ok()); });
  sw.entered_.WaitForNotification();
  std::vector<std::thread> queued;
  std::vector<ProgramOutcome> outcomes(3);
  for (int i = 0; i < 3; ++i) {
    queued.emplace_back([&, i] { outcomes[i] = programmer.Program(Add(2 + i, 18 + i)); });
  }
  // The three wait behind the gate; once it opens they leave as one batch.
  while (true) {
    absl::SleepFor(absl::Milliseconds(1));  // Yield until the three are queued.
    if (programmer.queued() == 3) break;
  }
  sw.release_.Notify();
  first.join();
  for (std::thread& t : queued) t.join();
  for (const ProgramOutcome& o : outcomes) {
    EXPECT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.batch_size, 3);
  }
  EXPECT_EQ(programmer.batches(), 2);
  EXPECT_EQ(sw.ReadCrossConnects()->size(), 4u);
}

TEST(SwitchProgrammerTest, EachCallersGoingRunsOnceAsItsBatchGoesOut) {
  GatedSwitch sw;
  SwitchProgrammer programmer("ocs1", &sw);
  std::atomic<int> first_going{0}, second_going{0};
  std::atomic<int> applies_when_first_went{-1}, applies_when_second_went{-1};
  std::thread first([&] {
    programmer.Program(Add(1, 17), [&] {
      applies_when_first_went = sw.applies_.load();
      ++first_going;
    });
  });
  sw.entered_.WaitForNotification();
  EXPECT_EQ(first_going.load(), 1);
  EXPECT_EQ(applies_when_first_went.load(), 0);  // Before its batch went to the switch.
  std::thread second([&] {
    programmer.Program(Add(2, 18), [&] {
      applies_when_second_went = sw.applies_.load();
      ++second_going;
    });
  });
  EXPECT_TRUE(fleet::testing::Eventually([&] { return programmer.queued() == 1; }));
  // Queued behind the batch in flight: its batch has not gone, so neither has it.
  EXPECT_EQ(second_going.load(), 0);
  sw.release_.Notify();
  first.join();
  second.join();
  EXPECT_EQ(first_going.load(), 1);
  EXPECT_EQ(second_going.load(), 1);
  EXPECT_EQ(applies_when_second_went.load(), 1);  // After the first batch, before its own.
  EXPECT_EQ(sw.applies_.load(), 2);
}

TEST(SwitchProgrammerTest, SubmittedChangesGoOutOnTheSwitchsOwnThread) {
  fleet::testing::FakeOpticalSwitch sw(16, 16);
  SwitchProgrammer programmer("ocs1", &sw);
  std::vector<std::thread::id> senders;  // Each appended before its Wait returns.
  for (uint32_t i = 1; i <= 3; ++i) {
    SwitchProgrammer::Pending pending = programmer.Submit(Add(i, 16 + i), [&] {
      EXPECT_NE(std::this_thread::get_id(), kMain);
      senders.push_back(std::this_thread::get_id());
    });
    EXPECT_TRUE(programmer.Wait(pending).status.ok());
  }
  ASSERT_EQ(senders.size(), 3u);
  EXPECT_EQ(senders[0], senders[1]);
  EXPECT_EQ(senders[1], senders[2]);
  // A caller of Program that finds the switch free sends on its own thread.
  std::thread::id sender;
  EXPECT_TRUE(
      programmer.Program(Add(4, 20), [&] { sender = std::this_thread::get_id(); }).status.ok());
  EXPECT_EQ(sender, kMain);
}

TEST(SwitchProgrammerTest, AnExclusiveSectionAndTheBatchBehindItTakeTurns) {
  GatedSwitch sw;
  SwitchProgrammer programmer("ocs1", &sw);
  // A batch holds the switch; an exclusive section and another batch queue behind it.
  SwitchProgrammer::Pending first = programmer.Submit(Add(1, 17));
  sw.entered_.WaitForNotification();
  std::vector<std::string> order;  // Appended with the switch held: one at a time.
  std::thread exclusive([&] {
    programmer.Exclusive([&](switch_adapters::OpticalSwitch&) { order.push_back("exclusive"); });
  });
  ASSERT_TRUE(
      fleet::testing::Eventually([&] { return programmer.ExclusiveWaitingForTest() == 1; }));
  SwitchProgrammer::Pending second =
      programmer.Submit(Add(2, 18), [&] { order.push_back("batch"); });
  std::thread again([&] {
    programmer.Exclusive([&](switch_adapters::OpticalSwitch&) { order.push_back("exclusive"); });
  });
  // Both sections wait before the gate opens; the batch between them still goes second.
  ASSERT_TRUE(
      fleet::testing::Eventually([&] { return programmer.ExclusiveWaitingForTest() == 2; }));
  sw.release_.Notify();
  EXPECT_TRUE(programmer.Wait(first).status.ok());
  EXPECT_TRUE(programmer.Wait(second).status.ok());
  exclusive.join();
  again.join();
  // The waiting section went before the queued batch, which went before the next section.
  EXPECT_EQ(order, (std::vector<std::string>{"exclusive", "batch", "exclusive"}));
}

TEST(SwitchProgrammerTest, FailedBatchIsRolledBackAndEachChangeSetRetriedAlone) {
  fleet::testing::FakeOpticalSwitch sw(16, 16);
  sw.ForceCrossConnect({9, 20});  // Holds egress 20: a change set that wants it must fail.
  SwitchProgrammer programmer("ocs1", &sw);
  ProgramOutcome bad = programmer.Program(Add(1, 20));
  EXPECT_FALSE(bad.status.ok());
  EXPECT_THAT(std::string(bad.status.message()), HasSubstr("20"));

  sw.FailNextApplyAfter(1);
  CrossConnectBatch two;
  two.add = {{2, 18}, {3, 19}};
  ProgramOutcome partial = programmer.Program(two);
  EXPECT_FALSE(partial.status.ok());
  EXPECT_TRUE(partial.rolled_back);
  EXPECT_EQ(sw.ReadCrossConnects().value(), std::vector<CrossConnect>({{9, 20}}));
}

TEST(SwitchProgrammerTest, AChangeSetAppliedAgainAfterAFailedBatchSaysItWasRetried) {
  GatedSwitch sw;
  sw.ForceCrossConnect({9, 20});  // Holds egress 20: the change set that wants it fails.
  SwitchProgrammer programmer("ocs1", &sw);
  std::thread first([&] { EXPECT_TRUE(programmer.Program(Add(1, 17)).status.ok()); });
  sw.entered_.WaitForNotification();
  ProgramOutcome good, bad;
  std::thread queued_good([&] { good = programmer.Program(Add(2, 18)); });
  std::thread queued_bad([&] { bad = programmer.Program(Add(3, 20)); });
  while (programmer.queued() < 2) absl::SleepFor(absl::Milliseconds(1));
  sw.release_.Notify();
  first.join();
  queued_good.join();
  queued_bad.join();
  // Together they failed and were undone; alone, the good one landed, its light interrupted.
  EXPECT_TRUE(good.status.ok()) << good.status;
  EXPECT_TRUE(good.retried);
  EXPECT_FALSE(bad.status.ok());
  EXPECT_EQ(sw.ReadCrossConnects()->size(), 3u);
}

}  // namespace
}  // namespace fleet::engine
