#include "controller/engine/inventory_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller/inventory/inventory.h"
#include "tests/store/store_test_util.h"

namespace fleet::engine {
namespace {

using store::testing_util::IsOk;
using store::testing_util::StatusIs;

class InventoryCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::OpenSqliteStore({":memory:", &clock_}).value();
    absl::StatusOr<v1::Inventory> site = inventory::ReadInventoryFile(
        std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-gen1.yaml");
    ASSERT_TRUE(site.ok()) << site.status();
    inventory::InventoryApplier applier(store_.get());
    ASSERT_THAT(applier.Apply(*site, false, "operator:test").status(), IsOk());
  }

  FakeClock clock_;
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
