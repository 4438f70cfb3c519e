// The SQL of retention: one batch of pruning on the store's connection, inside a transaction
// the caller (SqliteStore) holds. The contracts are StorageControl::PruneEvents and
// StorageControl::PruneEndedAllocations (controller/store/storage_control.h).
#ifndef FLEET_CONTROLLER_STORE_PRUNING_H_
#define FLEET_CONTROLLER_STORE_PRUNING_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/store/sqlite.h"
#include "controller/store/storage_control.h"

namespace fleet::store {

// Raises `event_retention.prune_below` past the oldest events `limits` no longer keeps (at
// most `max_rows` of them) and deletes them. `now` is the store's clock.
absl::StatusOr<int64_t> PruneEventBatch(Database& db, const RetentionLimits& limits, absl::Time now,
                                        int max_rows);

// Deletes at most `max_rows` of the oldest ended allocations `limits` no longer keeps; their
// rows in child tables go with them by the schema's ON DELETE CASCADE.
absl::StatusOr<int64_t> PruneAllocationBatch(Database& db, const RetentionLimits& limits,
                                             absl::Time now, int max_rows);

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_PRUNING_H_
