// The SQLite implementation of each aggregate of the store, all over one StoreConnection
// (which must outlive them). OpenSqliteStore (controller/store/store.h) composes them into a
// Store; the contracts are the interfaces'.
#ifndef FLEET_CONTROLLER_STORE_SQLITE_AGGREGATES_H_
#define FLEET_CONTROLLER_STORE_SQLITE_AGGREGATES_H_

#include <memory>

#include "controller/store/allocation_store.h"
#include "controller/store/commit_feed.h"
#include "controller/store/event_log.h"
#include "controller/store/inventory_store.h"
#include "controller/store/storage_control.h"
#include "controller/store/store_connection.h"

namespace fleet::store {

std::unique_ptr<InventoryStore> NewSqliteInventoryStore(StoreConnection& connection);
std::unique_ptr<AllocationStore> NewSqliteAllocationStore(StoreConnection& connection);
std::unique_ptr<EventLog> NewSqliteEventLog(StoreConnection& connection);
std::unique_ptr<CommitFeed> NewSqliteCommitFeed(StoreConnection& connection);
std::unique_ptr<StorageControl> NewSqliteStorageControl(StoreConnection& connection);

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_SQLITE_AGGREGATES_H_
