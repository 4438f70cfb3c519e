// The controller's durable state, one interface per aggregate:
//   inventory_store.h   the site: switches, ports, hosts, devices, O-NICs, trunks, drain;
//   allocation_store.h  allocations, desired circuits, pending removals, observed state;
//   event_log.h         the event log;
//   commit_feed.h       the committed tip of the log and allocation commits, for watchers;
//   storage_control.h   retention, free pages and durability of the database.
// Store is all of them over one database: a caller that needs one aggregate takes that
// interface (a Store converts to each).
//
// Contract for every implementation, across the aggregates:
// - Every write is one transaction: it commits whole or leaves nothing behind.
// - Each change appends at least one Event, in the same transaction, naming who asked.
// - Reads return NOT_FOUND naming the kind and id of a missing object.
// - Thread-safe: calls may come from any thread.
#ifndef FLEET_CONTROLLER_STORE_STORE_H_
#define FLEET_CONTROLLER_STORE_STORE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "controller/commit_point/commit_point.h"
#include "controller/store/allocation_store.h"
#include "controller/store/commit_feed.h"
#include "controller/store/commit_log.h"
#include "controller/store/event_log.h"
#include "controller/store/inventory_store.h"
#include "controller/store/storage_control.h"

namespace fleet::store {

class Store : public InventoryStore,
              public AllocationStore,
              public EventLog,
              public CommitFeed,
              public StorageControl {};

struct SqliteStoreOptions {
  std::string path;              // A file path, or ":memory:" for tests.
  const Clock* clock = nullptr;  // Not owned; must outlive the store.
  // Every write passes it just before it commits (commit_point.h); null: every write commits.
  // Not owned; must outlive the store.
  const CommitPoint* commit_point = nullptr;
  // A replicated store's leader: every write's changes go to it before the write commits
  // (commit_log.h); null: nothing is recorded. Not owned; must outlive the store.
  CommitLog* commit_log = nullptr;
  // A replica's (docs/ha.md, "An upgrade that adds a migration"): called once, before the
  // migrations, when the database is an older schema's and was a replica's (it has a log
  // position, migration 11), with the database as it is. It applies the replicated log's
  // entries past that position while they are of the database's schema, so that the
  // migration starts from the state the last leader of that schema left, and the entries of
  // the new schema follow it. Its error is OpenSqliteStore's, nothing migrated. Null: none.
  std::function<absl::Status(LogReplica& older)> before_migrating;
};

// Opens the database, applies pending schema migrations and returns the store.
absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const SqliteStoreOptions& options);

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_STORE_H_
