#include "controller/engine/inventory_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <latch>
#include <thread>
#include <vector>

#include "testing/fake_clock.h"
#include "tests/engine/gen1_store.h"
#include "tests/store/store_test_util.h"

namespace fleet::engine {
namespace {

using store::testing_util::IsOk;
using store::testing_util::StatusIs;

class InventoryCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(OpenGen1Store(&clock_, &store_)); }

  fleet::testing::FakeClock clock_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(InventoryCacheTest, TheInventoryIsReadOncePerVersion) {
  InventoryCache cache(store_.get());
  absl::StatusOr<std::shared_ptr<const CachedInventory>> first = cache.Current();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->version, store_->InventoryVersion());
  EXPECT_FALSE((*first)->site.onics().empty());
  EXPECT_FALSE((*first)->ports.empty());
  EXPECT_EQ(cache.Current().value(), *first);
  // A drain is an administrative change: the next read sees it.
  store::DrainTargetRef target;
  target.onic = "gpu1-n0";
  ASSERT_THAT(store_->SetDrained(target, true, "dirty connector", "operator:test"), IsOk());
  std::shared_ptr<const CachedInventory> second = cache.Current().value();
  EXPECT_NE(second, *first);
  EXPECT_EQ(second->version, store_->InventoryVersion());
  EXPECT_EQ(cache.Current().value(), second);
}

// Callers that see a change at once share one read of it: on a big site each read is tens of
// megabytes, and each caller reading its own copy multiplied them.
TEST_F(InventoryCacheTest, CallersThatSeeAChangeAtOnceShareOneRead) {
  InventoryCache cache(store_.get());
  ASSERT_TRUE(cache.Current().ok());
  store::DrainTargetRef target;
  target.onic = "gpu1-n0";
  ASSERT_THAT(store_->SetDrained(target, true, "dirty connector", "operator:test"), IsOk());
  constexpr int kCallers = 8;
  std::vector<std::shared_ptr<const CachedInventory>> seen(kCallers);
  std::latch start(kCallers);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      start.arrive_and_wait();
      seen[i] = cache.Current().value();
    });
  }
  for (std::thread& t : callers) t.join();
  for (int i = 0; i < kCallers; ++i) {
    EXPECT_EQ(seen[i], seen[0]) << "caller " << i << " read its own copy";
    EXPECT_EQ(seen[i]->version, store_->InventoryVersion());
  }
}

TEST_F(InventoryCacheTest, SerialsAreLookedUpByONicId) {
  InventoryCache cache(store_.get());
  absl::StatusOr<std::string> serial = cache.SerialOf("gpu1-n0");
  ASSERT_TRUE(serial.ok()) << serial.status();
  EXPECT_EQ(*serial, "FLT-GPU1-N0");
  EXPECT_THAT(cache.SerialOf("nope").status(),
              StatusIs(absl::StatusCode::kNotFound, ::testing::HasSubstr("nope")));
}

}  // namespace
}  // namespace fleet::engine
