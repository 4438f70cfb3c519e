#include "controller/engine/inventory_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

// The store as the cache reads it, counting whole-inventory reads; the first read after
// `HoldReads(n)` waits until n callers have asked, and `FailNext` fails the next one.
class CountingInventory : public store::InventoryStore {
 public:
  explicit CountingInventory(store::InventoryStore* store) : store_(store) {}

  void HoldReads(int callers) {
    absl::MutexLock lock(&mu_);
    hold_for_ = callers;
  }
  void Asked() {
    absl::MutexLock lock(&mu_);
    ++asked_;
  }
  void FailNext() {
    absl::MutexLock lock(&mu_);
    fail_next_ = true;
  }
  int reads() {
    absl::MutexLock lock(&mu_);
    return reads_;
  }

  absl::StatusOr<v1::Inventory> LoadInventory() override {
    {
      absl::MutexLock lock(&mu_);
      ++reads_;
      auto all_asked = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return asked_ >= hold_for_; };
      mu_.Await(absl::Condition(&all_asked));
      if (fail_next_) {
        fail_next_ = false;
        return absl::UnavailableError("the store is away");
      }
    }
    return store_->LoadInventory();
  }
  uint64_t InventoryVersion() override { return store_->InventoryVersion(); }
  absl::StatusOr<std::vector<v1::SwitchPort>> ListPorts(const std::string& id) override {
    return store_->ListPorts(id);
  }
  absl::StatusOr<std::vector<v1::Switch>> ListSwitches() override { return store_->ListSwitches(); }
  absl::StatusOr<v1::Switch> GetSwitch(const std::string& id) override {
    return store_->GetSwitch(id);
  }
  absl::StatusOr<std::vector<v1::Host>> ListHosts() override { return store_->ListHosts(); }
  absl::StatusOr<v1::Host> GetHost(const std::string& name) override {
    return store_->GetHost(name);
  }
  absl::StatusOr<std::vector<v1::Device>> ListDevices(const store::DeviceFilter& f) override {
    return store_->ListDevices(f);
  }
  absl::StatusOr<v1::Device> GetDevice(const std::string& id) override {
    return store_->GetDevice(id);
  }
  absl::StatusOr<std::vector<v1::Onic>> ListOnics(const store::OnicFilter& f) override {
    return store_->ListOnics(f);
  }
  absl::StatusOr<v1::Onic> GetOnic(const std::string& id) override { return store_->GetOnic(id); }
  absl::StatusOr<std::vector<v1::Trunk>> ListTrunks() override { return store_->ListTrunks(); }
  absl::Status WriteInventory(const store::InventoryWrite& w, const std::string& p) override {
    return store_->WriteInventory(w, p);
  }
  absl::StatusOr<std::vector<std::string>> DeleteObject(const std::string& kind,
                                                        const std::string& name,
                                                        const std::string& p) override {
    return store_->DeleteObject(kind, name, p);
  }
  absl::Status SetDrained(const store::DrainTargetRef& t, bool drained, const std::string& reason,
                          const std::string& p) override {
    return store_->SetDrained(t, drained, reason, p);
  }
  absl::Status SetPortHealth(const std::vector<store::PortHealth>& changes) override {
    return store_->SetPortHealth(changes);
  }
  absl::Status SetDeviceHealth(const std::string& device, v1::DeviceHealth health,
                               const std::string& reason, const std::string& p) override {
    return store_->SetDeviceHealth(device, health, reason, p);
  }
  absl::StatusOr<std::string> AppliedInventoryFile() override {
    return store_->AppliedInventoryFile();
  }
  absl::Status RecordAppliedInventoryFile(const std::string& record) override {
    return store_->RecordAppliedInventoryFile(record);
  }

 private:
  store::InventoryStore* const store_;
  absl::Mutex mu_;
  int reads_ ABSL_GUARDED_BY(mu_) = 0;
  int asked_ ABSL_GUARDED_BY(mu_) = 0;
  int hold_for_ ABSL_GUARDED_BY(mu_) = 0;
  bool fail_next_ ABSL_GUARDED_BY(mu_) = false;
};

// Callers that see a change at once share one read of it: on a big site each read is tens of
// megabytes, and each caller reading its own copy multiplied them. The one read is held until
// every caller has asked, so all of them are waiting while it runs.
TEST_F(InventoryCacheTest, CallersThatSeeAChangeAtOnceShareOneRead) {
  CountingInventory counted(store_.get());
  InventoryCache cache(&counted);
  ASSERT_TRUE(cache.Current().ok());
  ASSERT_EQ(counted.reads(), 1);
  store::DrainTargetRef target;
  target.onic = "gpu1-n0";
  ASSERT_THAT(store_->SetDrained(target, true, "dirty connector", "operator:test"), IsOk());
  constexpr int kCallers = 8;
  counted.HoldReads(kCallers);
  std::vector<std::shared_ptr<const CachedInventory>> seen(kCallers);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      counted.Asked();
      seen[i] = cache.Current().value();
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(counted.reads(), 2);
  for (int i = 0; i < kCallers; ++i) {
    EXPECT_EQ(seen[i], seen[0]) << "caller " << i << " read its own copy";
    EXPECT_EQ(seen[i]->version, store_->InventoryVersion());
  }
}

// A read that fails is its caller's error; the next caller reads again.
TEST_F(InventoryCacheTest, AFailedReadIsNotKept) {
  CountingInventory counted(store_.get());
  InventoryCache cache(&counted);
  counted.FailNext();
  EXPECT_THAT(cache.Current().status(),
              StatusIs(absl::StatusCode::kUnavailable, ::testing::HasSubstr("away")));
  absl::StatusOr<std::shared_ptr<const CachedInventory>> next = cache.Current();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ((*next)->version, store_->InventoryVersion());
  EXPECT_EQ(counted.reads(), 2);
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
