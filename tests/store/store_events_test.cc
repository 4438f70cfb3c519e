// EventLog (controller/store/event_log.h) on SQLite: filters, stamps and defaults, an
// append-only log, and sequences under concurrent writers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "controller/store/store.h"
#include "tests/store/store_test_util.h"

// Filters are built with designated initializers naming only the fields a test sets; the
// others keep their documented defaults, which is what this warning would flag.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace fleet::store {
namespace {

using namespace ::fleet::store::testing_util;  // The fixture, its builders and matchers.

// ---------------------------------------------------------------------------------------
// Events

TEST_F(StoreTest, ListEventsFiltersByObjectAndSequenceAndLimit) {
  WriteSite();
  std::vector<v1::Event> switches = Events({.object_kind = "switch"});
  ASSERT_THAT(switches, SizeIs(2));
  EXPECT_EQ(switches[0].object_id(), "s1");
  EXPECT_EQ(switches[1].object_id(), "s2");
  std::vector<v1::Event> s2 = Events({.object_kind = "switch", .object_id = "s2"});
  ASSERT_THAT(s2, SizeIs(1));
  EXPECT_EQ(s2[0].sequence(), switches[1].sequence());
  std::vector<v1::Event> by_id = Events({.object_id = "n-cpu"});
  ASSERT_THAT(by_id, SizeIs(1));
  EXPECT_EQ(by_id[0].object_kind(), "onic");

  std::vector<v1::Event> all = Events();
  ASSERT_THAT(all, SizeIs(9));
  std::vector<v1::Event> tail = Events({.after_sequence = all[6].sequence()});
  ASSERT_THAT(tail, SizeIs(2));
  EXPECT_EQ(tail[0].sequence(), all[7].sequence());
  EXPECT_THAT(Events({.after_sequence = all[8].sequence()}), IsEmpty());
  EXPECT_THAT(Events({.limit = 0}), SizeIs(9));  // 0 means the default limit, not none.

  std::vector<v1::Event> page = Events({.limit = 3});
  ASSERT_THAT(page, SizeIs(3));
  EXPECT_EQ(page[2].sequence(), all[2].sequence());
  std::vector<v1::Event> next = Events({.after_sequence = page[2].sequence(), .limit = 3});
  ASSERT_THAT(next, SizeIs(3));
  EXPECT_EQ(next[0].sequence(), all[3].sequence());
}

TEST_F(StoreTest, AppendEventStampsStoreClockAndDefaults) {
  clock_.Advance(absl::Milliseconds(1234));
  v1::Event event;
  event.set_kind("agent.mismatch");
  event.set_object_kind("agent");
  event.set_object_id("h1");
  event.set_severity(v1::EVENT_SEVERITY_ALARM);
  event.set_message("agent h1 reports serial SN-X not in inventory");
  event.set_principal("agent:h1");
  event.set_sequence(999);                                      // Ignored.
  *event.mutable_time() = Stamp(absl::FromUnixSeconds(12345));  // Ignored.
  ASSERT_THAT(store_->AppendEvent(event), IsOk());
  v1::Event defaults;
  defaults.set_kind("fleetd.started");
  defaults.set_message("started");
  ASSERT_THAT(store_->AppendEvent(defaults), IsOk());

  std::vector<v1::Event> events = Events();
  ASSERT_THAT(events, SizeIs(2));
  v1::Event expected = event;
  expected.set_sequence(events[0].sequence());
  *expected.mutable_time() = Stamp(clock_.Now());
  EXPECT_THAT(events[0], EqualsProto(expected));
  EXPECT_NE(events[0].sequence(), 999u);
  EXPECT_GT(events[1].sequence(), events[0].sequence());
  EXPECT_EQ(events[1].principal(), "anonymous");
  EXPECT_EQ(events[1].severity(), v1::EVENT_SEVERITY_INFO);
}

TEST_F(StoreTest, EventLogIsAppendOnly) {
  ASSERT_TRUE(dir_.ok());
  const std::string path = dir_.File("state.db");
  OpenStore(path);
  WriteSite();
  const std::vector<v1::Event> before = Events();
  ASSERT_THAT(before, SizeIs(9));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path));
  EXPECT_THAT(db->Exec("UPDATE events SET principal = 'someone-else'"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("append-only")));
  EXPECT_THAT(db->Exec("DELETE FROM events WHERE sequence = 1"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("append-only")));
  EXPECT_THAT(db->Exec("DELETE FROM events"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("append-only")));

  const std::vector<v1::Event> after = Events();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_THAT(after[i], EqualsProto(before[i]));
  // Appending through the store still works after the refused changes.
  ASSERT_THAT(store_->DeleteObject("trunk", "t1", kOperator), IsOk());
  EXPECT_THAT(Events(), SizeIs(10));
}

TEST_F(StoreTest, ConcurrentWritersGetDistinctIncreasingSequences) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < kPerThread; ++i) {
        v1::Event e;
        e.set_kind("test.concurrent");
        e.set_object_id(absl::StrCat(t, "-", i));
        e.set_message("x");
        EXPECT_THAT(store_->AppendEvent(e), IsOk());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<v1::Event> events = Events();
  ASSERT_THAT(events, SizeIs(kThreads * kPerThread));
  std::set<std::string> ids;
  for (size_t i = 0; i < events.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(events[i].sequence(), events[i - 1].sequence());
    }
    ids.insert(events[i].object_id());
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kThreads * kPerThread));
}

}  // namespace
}  // namespace fleet::store
