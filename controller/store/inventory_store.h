// The site's inventory: switches and their ports, hosts, devices, O-NICs with their fibers,
// and trunks, with the administrative state (drain) of ports, O-NICs and hosts.
//
// Invariants: ids are unique per kind; a fiber or trunk ends on a port of a known switch; no
// switch port carries two fibers. Fibers or trunks under a circuit cannot be rewired and a
// switch cannot shrink under one: such a write fails with FAILED_PRECONDITION naming the
// circuit. Each write is one transaction with its events (controller/store/store.h).
// Thread-safe.
#ifndef FLEET_CONTROLLER_STORE_INVENTORY_STORE_H_
#define FLEET_CONTROLLER_STORE_INVENTORY_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::store {

struct DeviceFilter {
  std::string host = {};                              // Empty: any.
  v1::DeviceKind kind = v1::DEVICE_KIND_UNSPECIFIED;  // Unspecified: any.
  std::string chassis = {};  // Empty: any; else pooled devices (no host) in that chassis.
};

// Every field narrows the query in the database, ports included, so a filtered list costs
// what it returns, not the site.
struct OnicFilter {
  std::string host = {};       // Empty: any.
  std::string switch_id = {};  // Empty: any; else O-NICs with a fiber on that switch.
  // Empty: any; else the O-NICs an agent there serves: of devices on that host, or of pooled
  // devices in that chassis.
  std::string place = {};
  std::string serial = {};  // Empty: any.
};

// Objects to create or replace, each keyed by its id. Produced by the inventory planner
// (controller/inventory) after validating the whole merged site.
struct InventoryWrite {
  v1::Inventory objects;
  std::vector<std::string> created;  // "kind id" of each object that is new, for the log.
  std::vector<std::string> updated;  // "kind id" of each object that changed.
  // Each object created or updated, an update field by field (for the apply's answer).
  std::vector<v1::ObjectChange> diff;
  // By "kind id" of an updated object, its changed fields ("address a -> b, port 1 -> 2"),
  // recorded in its event.
  std::map<std::string, std::string> changed_fields;
  // By switch id, the changes to how fleetd reaches it (address, port, protocol,
  // credentials, ...): refused while the switch holds circuits unless `force`.
  std::map<std::string, std::string> repointed_switches;
  bool force = false;
  bool dry_run = false;  // Check everything the write would be refused for; change nothing.
};

// What a drain or undrain names: exactly one of these.
struct DrainTargetRef {
  std::string switch_id;  // With port: a switch port.
  uint32_t port = 0;
  std::string onic;
  std::string host;
};

// A switch port's condition as fleetd's switch monitor read it.
struct PortHealth {
  v1::SwitchPortRef ref;
  v1::OperState state = v1::OPER_STATE_UP;  // UP, DEGRADED or FAILED.
  std::string reason;                       // The switch's words or the reading; "" when UP.
};

class InventoryStore {
 public:
  virtual ~InventoryStore() = default;

  // --- Reads. Lists are ordered by id (ports by number). ---
  virtual absl::StatusOr<std::vector<v1::Switch>> ListSwitches() = 0;
  virtual absl::StatusOr<v1::Switch> GetSwitch(const std::string& id) = 0;
  // Every port of `switch_id` (all switches when empty) with reservation, wiring and the
  // desired circuit using it.
  virtual absl::StatusOr<std::vector<v1::SwitchPort>> ListPorts(const std::string& switch_id) = 0;
  virtual absl::StatusOr<std::vector<v1::Host>> ListHosts() = 0;
  virtual absl::StatusOr<v1::Host> GetHost(const std::string& name) = 0;
  virtual absl::StatusOr<std::vector<v1::Device>> ListDevices(const DeviceFilter& filter) = 0;
  virtual absl::StatusOr<v1::Device> GetDevice(const std::string& id) = 0;
  virtual absl::StatusOr<std::vector<v1::Onic>> ListOnics(const OnicFilter& filter) = 0;
  virtual absl::StatusOr<v1::Onic> GetOnic(const std::string& id) = 0;
  virtual absl::StatusOr<std::vector<v1::Trunk>> ListTrunks() = 0;
  // The whole site as an Inventory, the form an inventory file takes.
  virtual absl::StatusOr<v1::Inventory> LoadInventory() = 0;

  // --- Writes. ---
  // Creates or replaces every object in `write.objects` in one transaction. Refuses with
  // FAILED_PRECONDITION, writing nothing, a change that would rewire an O-NIC port, shrink a
  // switch under a circuit, or repoint a switch holding circuits (`repointed_switches`,
  // unless `force`), naming the switch, the fields and the allocations. Administrative state
  // (drain) is kept across updates. With `dry_run`, the same checks and no change.
  virtual absl::Status WriteInventory(const InventoryWrite& write,
                                      const std::string& principal) = 0;
  // Deletes one object (`switch`, `host`, `device`, `onic`, `trunk`) and what belongs only to
  // it. FAILED_PRECONDITION, deleting nothing, while anything uses it. Returns "kind id" of
  // everything deleted.
  virtual absl::StatusOr<std::vector<std::string>> DeleteObject(const std::string& kind,
                                                                const std::string& name,
                                                                const std::string& principal) = 0;
  // Drains (or undrains) a switch port, an O-NIC or a host by setting its own admin state,
  // appending an event with `reason`; planning treats an O-NIC's ports and a host's devices
  // as drained with it. NOT_FOUND for an unknown target, INVALID_ARGUMENT unless exactly one
  // target is named. Idempotent.
  virtual absl::Status SetDrained(const DrainTargetRef& target, bool drained,
                                  const std::string& reason, const std::string& principal) = 0;

  // Records what the switch monitor saw of `changes`' ports (state, reason and the commit's
  // time), in one transaction with an event each (a warning unless UP), but none for a port's
  // first record when it is UP: a port found well is no news. A port never recorded reads
  // UNKNOWN. NOT_FOUND, writing nothing, for a port not in inventory; INVALID_ARGUMENT for a
  // state other than UP, DEGRADED or FAILED.
  virtual absl::Status SetPortHealth(const std::vector<PortHealth>& changes) = 0;
  // Sets a device's health with `reason` (required unless HEALTHY), appending an event;
  // HEALTHY clears what was set; SUSPECT leaves a FAILED device FAILED. NOT_FOUND for an unknown
  // device, INVALID_ARGUMENT for an unspecified health or a missing reason. Idempotent.
  virtual absl::Status SetDeviceHealth(const std::string& device, v1::DeviceHealth health,
                                       const std::string& reason, const std::string& principal) = 0;

  // The record fleetd keeps of the inventory file it last applied at start
  // (inventory::InventoryApplier::ApplyFile): opaque text to the store, empty when there is
  // none. Each replica's own, never in the replicated log (changesets.h, kLocalTables).
  virtual absl::StatusOr<std::string> AppliedInventoryFile() = 0;
  // Replaces that record, in a transaction of its own with no event.
  virtual absl::Status RecordAppliedInventoryFile(const std::string& record) = 0;

  // Changes whenever inventory, administrative state (drain) or health is committed, so readers can
  // cache what LoadInventory and ListPorts return; circuits and allocations do not change it.
  virtual uint64_t InventoryVersion() = 0;
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_INVENTORY_STORE_H_
