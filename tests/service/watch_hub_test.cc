// The watch hub behind WatchAllocation and WatchEvents, over a real loopback gRPC server: open
// watches hold no thread, every one of them is sent each change, a client that leaves is
// forgotten, and a stop ends them all.
#include "controller/service/watch_hub.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/eventually.h"
#include "tests/process_threads.h"
#include "tests/service/services_fixture.h"

namespace fleet::service {
namespace {

using fleet::testing::ProcessThreads;

struct Watcher {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReader<v1::WatchAllocationResponse>> stream;
};

class WatchHubTest : public ServicesTest {
 protected:
  std::unique_ptr<grpc::ClientReader<v1::WatchAllocationResponse>> Open(
      grpc::ClientContext* context, const std::string& id) {
    v1::WatchAllocationRequest request;
    request.set_id(id);
    return topology_stub_->WatchAllocation(context, request);
  }
  // A watch of alloc-1, once its first state is read.
  Watcher Watch() {
    Watcher w{Context(), nullptr};
    w.context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    w.stream = Open(w.context.get(), "alloc-1");
    v1::WatchAllocationResponse first;
    EXPECT_TRUE(w.stream->Read(&first));
    EXPECT_EQ(first.allocation().state(), v1::ALLOCATION_STATE_READY);
    return w;
  }
  void Move(v1::AllocationState state) {
    store::AllocationUpdate update;
    update.id = "alloc-1";
    update.state = state;
    // An allocation that ends holds no circuit.
    update.remove_circuits = state == v1::ALLOCATION_STATE_RELEASED;
    ASSERT_TRUE(store_->UpdateAllocation(update, "operator:tester").ok());
  }
};

TEST_F(WatchHubTest, TwoHundredOpenWatchesHoldNoThreadAndEachIsSentEveryChange) {
  ApplyGen1();
  CreateLinkAllocation();
  // One watch first, so that gRPC's own threads (pollers, executors) are already running.
  std::vector<Watcher> watchers;
  watchers.push_back(Watch());
  const int before = ProcessThreads();
  for (int i = 1; i < 200; ++i) watchers.push_back(Watch());
  const int open = ProcessThreads();
  EXPECT_EQ(watches_->open_streams(), 200u);
  // With a thread per stream (the sync API), this grew by 199.
  EXPECT_LT(open - before, 20) << before << " threads before, " << open << " with 200 watches";

  Move(v1::ALLOCATION_STATE_DEGRADED);
  Move(v1::ALLOCATION_STATE_READY);
  for (Watcher& w : watchers) {
    v1::WatchAllocationResponse update;
    ASSERT_TRUE(w.stream->Read(&update));
    EXPECT_EQ(update.allocation().state(), v1::ALLOCATION_STATE_DEGRADED);
    ASSERT_TRUE(w.stream->Read(&update));
    EXPECT_EQ(update.allocation().state(), v1::ALLOCATION_STATE_READY);
  }

  // Clients that leave are forgotten.
  for (Watcher& w : watchers) w.context->TryCancel();
  for (Watcher& w : watchers) EXPECT_EQ(w.stream->Finish().error_code(), grpc::CANCELLED);
  EXPECT_TRUE(fleet::testing::Eventually([&] { return watches_->open_streams() == 0; }));
}

TEST_F(WatchHubTest, AStopEndsEveryWatchUnavailableAndRefusesNewOnes) {
  ApplyGen1();
  CreateLinkAllocation();
  Watcher w = Watch();
  auto events_context = Context();
  std::unique_ptr<grpc::ClientReader<v1::Event>> events =
      admin_stub_->WatchEvents(events_context.get(), v1::WatchEventsRequest());
  v1::Event event;
  ASSERT_TRUE(events->Read(&event));  // The first of the log (the inventory's).

  watches_->Stop();
  v1::WatchAllocationResponse update;
  EXPECT_FALSE(w.stream->Read(&update));
  grpc::Status ended = w.stream->Finish();
  EXPECT_EQ(ended.error_code(), grpc::UNAVAILABLE);
  EXPECT_EQ(ended.error_message(), "fleetd is stopping");
  while (events->Read(&event)) {
  }
  EXPECT_EQ(events->Finish().error_code(), grpc::UNAVAILABLE);

  auto late = Context();
  std::unique_ptr<grpc::ClientReader<v1::WatchAllocationResponse>> refused =
      Open(late.get(), "alloc-1");
  EXPECT_FALSE(refused->Read(&update));
  EXPECT_EQ(refused->Finish().error_code(), grpc::UNAVAILABLE);
}

// Refused by the tenancy check, the watch's first step on the hub: it ends with the reason,
// and the hub forgets it.
TEST_F(WatchHubTest, AWatchRefusedBeforeFollowingEndsWithTheReason) {
  auto context = Context();
  std::unique_ptr<grpc::ClientReader<v1::WatchAllocationResponse>> stream =
      Open(context.get(), "nosuch");
  v1::WatchAllocationResponse update;
  EXPECT_FALSE(stream->Read(&update));
  EXPECT_EQ(stream->Finish().error_code(), grpc::NOT_FOUND);
  EXPECT_TRUE(fleet::testing::Eventually([&] { return watches_->open_streams() == 0; }));
}

// The hub's first step ends the watch: its one message is written, then OK, and the hub
// forgets it.
TEST_F(WatchHubTest, AWatchOfAnEndedAllocationIsSentItsLastStateAndEnds) {
  ApplyGen1();
  CreateLinkAllocation();
  Move(v1::ALLOCATION_STATE_RELEASING);
  Move(v1::ALLOCATION_STATE_RELEASED);
  auto context = Context();
  std::unique_ptr<grpc::ClientReader<v1::WatchAllocationResponse>> stream =
      Open(context.get(), "alloc-1");
  v1::WatchAllocationResponse update;
  ASSERT_TRUE(stream->Read(&update));
  EXPECT_EQ(update.allocation().state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_FALSE(stream->Read(&update));
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_TRUE(fleet::testing::Eventually([&] { return watches_->open_streams() == 0; }));
}

TEST_F(WatchHubTest, WatchEventsOfOneKindAndObjectSendsOnlyThose) {
  ApplyGen1();
  CreateLinkAllocation();
  auto context = Context();
  v1::WatchEventsRequest request;
  request.set_object_kind("allocation");
  request.set_object_id("alloc-1");
  std::unique_ptr<grpc::ClientReader<v1::Event>> events =
      admin_stub_->WatchEvents(context.get(), request);
  Move(v1::ALLOCATION_STATE_DEGRADED);
  v1::Event event;
  for (int i = 0; i < 2; ++i) {  // Its creation, then the change; no inventory event.
    ASSERT_TRUE(events->Read(&event));
    EXPECT_EQ(event.object_kind(), "allocation");
    EXPECT_EQ(event.object_id(), "alloc-1");
  }
  context->TryCancel();
  while (events->Read(&event)) {
  }
  EXPECT_EQ(events->Finish().error_code(), grpc::CANCELLED);
}

}  // namespace
}  // namespace fleet::service
