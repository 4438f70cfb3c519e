// Rows of allocations and circuits: how the SQLite store reads and writes them on a
// connection, inside the caller's transaction. Port exclusivity (invariant 1) is enforced by
// the schema's unique indexes; these functions name the holder when it refuses.
#ifndef FLEET_CONTROLLER_STORE_ALLOCATION_ROWS_H_
#define FLEET_CONTROLLER_STORE_ALLOCATION_ROWS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/store/allocation_store.h"
#include "controller/store/sqlite.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::store {

// Allocation `id` (every one `filter` selects when `id` is empty), with members and circuits.
// Sets the request_id column (migration 10) of every allocation written before it, from its
// stored request, in one transaction; the rows written since have it already.
absl::Status FillRequestIds(Database& db);

absl::StatusOr<std::vector<v1::Allocation>> SelectAllocations(Database& db, const std::string& id,
                                                              const AllocationFilter& filter);
absl::StatusOr<std::vector<v1::Circuit>> SelectCircuits(Database& db, const CircuitFilter& filter);

// The stored state of allocation `id`, in the store's text form; NOT_FOUND naming it.
absl::StatusOr<std::string> StoredState(Database& db, const std::string& id);

absl::Status InsertMembers(Database& db, const std::string& allocation_id,
                           const std::vector<std::string>& members);

// Stores circuit `c` (of `allocation_id`, or manual) and its cross-connects; a circuit that is
// not INACTIVE is desired and takes its ports.
absl::Status InsertCircuit(Database& db, const v1::Circuit& c, const std::string& allocation_id,
                           int position);

// Sets a circuit's state and reason; `was_desired`: whether it is in the desired set now. A
// circuit joining the desired set takes its ports from this commit on, so they must be free.
absl::Status SetCircuitState(Database& db, const std::string& circuit_id,
                             const AllocationUpdate::CircuitChange& change, bool was_desired);

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_ALLOCATION_ROWS_H_
