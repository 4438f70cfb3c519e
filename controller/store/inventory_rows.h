// Rows of the inventory: how the SQLite store reads and writes switches, ports, hosts,
// devices, O-NICs with their fibers, and trunks on a connection, inside the caller's
// transaction. Reads return every object when `id` is empty, in id order.
#ifndef FLEET_CONTROLLER_STORE_INVENTORY_ROWS_H_
#define FLEET_CONTROLLER_STORE_INVENTORY_ROWS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/store/inventory_store.h"
#include "controller/store/sqlite.h"
#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::store {

absl::StatusOr<std::vector<v1::Switch>> SelectSwitches(Database& db, const std::string& id);
absl::StatusOr<std::vector<v1::SwitchPort>> SelectPorts(Database& db, const std::string& switch_id);
absl::StatusOr<std::vector<v1::Host>> SelectHosts(Database& db, const std::string& name);
absl::StatusOr<std::vector<v1::Device>> SelectDevices(Database& db, const std::string& id,
                                                      const DeviceFilter& filter);
absl::StatusOr<std::vector<v1::Onic>> SelectOnics(Database& db, const std::string& id,
                                                  const OnicFilter& filter);
absl::StatusOr<std::vector<v1::Trunk>> SelectTrunks(Database& db);

// Creates or updates a switch and its ports; refuses a resize or re-split that would strand a
// cross-connect of a circuit.
absl::Status UpsertSwitch(Database& db, const v1::Switch& s);
absl::Status UpsertHost(Database& db, const v1::Host& h);
absl::Status UpsertDevice(Database& db, const v1::Device& d);
// Creates or updates an O-NIC, its ports and its fibers; the caller deletes the old fibers.
absl::Status UpsertOnic(Database& db, const v1::Onic& o);
absl::Status InsertTrunk(Database& db, const v1::Trunk& t);

// An O-NIC port in a circuit keeps its fibers: refuses rewiring it, or dropping it from `o`.
absl::Status CheckOnicRewire(Database& db, const v1::Onic& o);
// A trunk carrying a circuit keeps its ports: refuses moving them.
absl::Status CheckTrunkRewire(Database& db, const v1::Trunk& t);
// What switch `switch_id` holds of FLEET's circuits (any phase, manual ones too): "8 circuits
// (allocations a-1, a-2)", or empty when none.
absl::StatusOr<std::string> CircuitsOnSwitch(Database& db, const std::string& switch_id);
// FAILED_PRECONDITION "trunk <id> carries circuit <c>" + `after` when a circuit uses it.
absl::Status RefuseTrunkInUse(Database& db, const std::string& trunk_id, const std::string& after);

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_INVENTORY_ROWS_H_
