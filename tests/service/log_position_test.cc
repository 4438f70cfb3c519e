// Read-your-writes on a replicated site (rpc_executor.h): every answer names the replicated
// log's entry the replica held, and a call naming an entry waits for it, briefly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tests/service/services_fixture.h"

namespace fleet::service {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A replicated fleetd's services, its store's position played by the test.
class LogPositionTest : public ServicesTest {
 protected:
  void SetUp() override {
    rpc_options_.await_position = [this](uint64_t entry, absl::Duration wait) {
      absl::MutexLock lock(&mu_);
      const auto reached = [this, entry]()
                               ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return position_ >= entry; };
      mu_.AwaitWithTimeout(absl::Condition(&reached), wait);
      return position_;
    };
    ServicesTest::SetUp();
  }
  void MoveTo(uint64_t entry) {
    absl::MutexLock lock(&mu_);
    position_ = entry;
  }
  // ListAllocations, with `min` as x-fleet-min-log-position unless empty.
  grpc::Status List(grpc::ClientContext& context, const std::string& min) {
    context.AddMetadata("x-fleet-principal", "operator:tester");
    if (!min.empty()) context.AddMetadata(kMinLogPositionMetadata, min);
    v1::ListAllocationsResponse response;
    return topology_stub_->ListAllocations(&context, {}, &response);
  }
  static std::string Position(const grpc::ClientContext& context) {
    auto sent = context.GetServerTrailingMetadata().find(kLogPositionMetadata);
    if (sent == context.GetServerTrailingMetadata().end()) return "(none)";
    return std::string(sent->second.data(), sent->second.size());
  }

  absl::Mutex mu_;
  uint64_t position_ ABSL_GUARDED_BY(mu_) = 7;
};

TEST_F(LogPositionTest, EveryAnswerNamesThePositionItWasServedAt) {
  grpc::ClientContext plain;
  ASSERT_TRUE(List(plain, "").ok());
  EXPECT_EQ(Position(plain), "7");
  grpc::ClientContext seen;
  ASSERT_TRUE(List(seen, "7").ok());
  EXPECT_EQ(Position(seen), "7");
  // A change answers with the position after its own entries.
  MoveTo(12);
  grpc::ClientContext change;
  change.AddMetadata("x-fleet-principal", "operator:tester");
  v1::ApplyInventoryResponse applied;
  ASSERT_TRUE(inventory_stub_->ApplyInventory(&change, {}, &applied).ok());
  EXPECT_EQ(Position(change), "12");
}

TEST_F(LogPositionTest, ACallAheadOfTheReplicaWaitsForItsEntry) {
  std::thread follower([this] {
    absl::SleepFor(absl::Milliseconds(100));
    MoveTo(9);
  });
  grpc::ClientContext context;
  grpc::Status status = List(context, "9");
  follower.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(Position(context), "9");
}

TEST_F(LogPositionTest, AReplicaThatStaysBehindRefusesNamingBothPositions) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status status = List(context, "9");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("holds the replicated log through entry 7"),
                    HasSubstr("has seen entry 9 (x-fleet-min-log-position)")));

  // Within a short deadline it answers before the deadline does.
  grpc::ClientContext hurried;
  hurried.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  EXPECT_EQ(List(hurried, "9").error_code(), grpc::StatusCode::UNAVAILABLE);
}

// Health does not wait for the caller's position on a replica that lags: it is how an
// operator learns that it lags.
TEST_F(LogPositionTest, HealthDoesNotWaitOnAReplicaBehindItsCaller) {
  grpc::ClientContext context;
  context.AddMetadata("x-fleet-principal", "operator:tester");
  context.AddMetadata(kMinLogPositionMetadata, "9");
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const v1::HealthRequest request;
  v1::HealthResponse health;
  // The replica stays at 7: a call held to the caller's 9 would be refused UNAVAILABLE.
  grpc::Status status = admin_stub_->Health(&context, request, &health);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(Position(context), "7");
  EXPECT_FALSE(health.components().empty());
}

TEST_F(LogPositionTest, APositionThatIsNotANumberIsRefusedNamingTheKey) {
  for (const std::string bad : {"abc", "-1", "9x", ""}) {
    grpc::ClientContext context;
    context.AddMetadata("x-fleet-principal", "operator:tester");
    context.AddMetadata(kMinLogPositionMetadata, bad);
    v1::ListAllocationsResponse response;
    grpc::Status status = topology_stub_->ListAllocations(&context, {}, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_THAT(status.error_message(),
                AllOf(HasSubstr("metadata x-fleet-min-log-position: '" + bad + "'"),
                      HasSubstr("a decimal number")))
        << bad;
  }
}

// A single fleetd has one store: no position is sent, and any minimum is met.
TEST_F(ServicesTest, ASingleFleetdSendsNoPositionAndIgnoresOne) {
  grpc::ClientContext context;
  context.AddMetadata("x-fleet-principal", "operator:tester");
  context.AddMetadata(kMinLogPositionMetadata, "999");
  v1::ListAllocationsResponse response;
  ASSERT_TRUE(topology_stub_->ListAllocations(&context, {}, &response).ok());
  EXPECT_EQ(context.GetServerTrailingMetadata().count(kLogPositionMetadata), 0u);
}

}  // namespace
}  // namespace fleet::service
