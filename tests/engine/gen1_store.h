// The real SQLite store, in memory, holding the FLEET Gen1 inventory
// (deploy/inventory/fleet-gen1.yaml): the site the engine's tests run on.
#ifndef FLEET_TESTS_ENGINE_GEN1_STORE_H_
#define FLEET_TESTS_ENGINE_GEN1_STORE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/clock.h"
#include "controller/inventory/inventory.h"
#include "controller/store/store.h"
#include "testing/fake_clock.h"
#include "tests/store/store_test_util.h"

namespace fleet::engine {

// Opens the store on `clock` (its writes passing `commit_point`, if set) into `store` and
// applies the Gen1 inventory, which `site` (if set) is given. Call with
// ASSERT_NO_FATAL_FAILURE.
inline void OpenGen1Store(fleet::testing::FakeClock* clock, std::unique_ptr<store::Store>* store,
                          v1::Inventory* site = nullptr,
                          const CommitPoint* commit_point = nullptr) {
  *store = store::OpenSqliteStore({":memory:", clock, commit_point}).value();
  absl::StatusOr<v1::Inventory> gen1 = inventory::ReadInventoryFile(
      std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-gen1.yaml");
  ASSERT_TRUE(gen1.ok()) << gen1.status();
  if (site != nullptr) *site = *gen1;
  inventory::InventoryApplier applier(store->get());
  ASSERT_THAT(applier.Apply(*gen1, {}, "operator:test").status(), store::testing_util::IsOk());
}

}  // namespace fleet::engine

#endif  // FLEET_TESTS_ENGINE_GEN1_STORE_H_
