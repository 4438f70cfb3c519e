// The site's inventory as of one Store::InventoryVersion: read once, shared by admissions and
// transactions until an inventory or drain change commits (which bumps the version).
#ifndef FLEET_CONTROLLER_ENGINE_INVENTORY_CACHE_H_
#define FLEET_CONTROLLER_ENGINE_INVENTORY_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "controller/store/inventory_store.h"
#include "fleet/v1/inventory.pb.h"
#include "scheduler/fabric_snapshot.h"

namespace fleet::engine {

// Immutable once loaded (shared by readers without a lock); the maps are its one index of
// O-NICs and devices, so no reader rebuilds them.
struct CachedInventory {
  uint64_t version = 0;
  v1::Inventory site;
  std::vector<v1::SwitchPort> ports;
  std::map<std::string, std::string> serials;    // O-NIC id → serial.
  std::map<std::string, std::string> device_of;  // O-NIC id → its device's id.
  std::map<std::string, int> device_index;       // Device id → its index in site.devices().

  // The device `id`, or null for an unknown one.
  const v1::Device* FindDevice(const std::string& id) const;
  // The id of the device O-NIC `onic` belongs to; "" for an unknown O-NIC.
  const std::string& DeviceOf(const std::string& onic) const;
  // Ports and trunks as planning sees them, without circuits: which may take new light.
  // Admission plans on it with the circuits added (FabricSnapshot::WithCircuits).
  scheduler::FabricSnapshot usability;
};

class InventoryCache {
 public:
  explicit InventoryCache(store::InventoryStore* store) : store_(store) {}

  // The inventory as of the store's version now (or newer), read again only when that
  // changed. One caller reads it at a time; the others wait for that read and take it when
  // it is new enough: on a big site a read is tens of megabytes, and every caller that saw a
  // change reading its own copy at once multiplied them. A read that fails is not shared:
  // its caller gets the error and each waiter reads for itself. So no caller may hold the
  // store's own lock while it calls this.
  absl::StatusOr<std::shared_ptr<const CachedInventory>> Current();
  // The serial of O-NIC `onic`; NOT_FOUND for an unknown one.
  absl::StatusOr<std::string> SerialOf(const std::string& onic);

 private:
  // Reads the inventory as of `version` (no lock held).
  absl::StatusOr<std::shared_ptr<const CachedInventory>> Read(uint64_t version);

  store::InventoryStore* const store_;
  absl::Mutex mu_;
  std::shared_ptr<const CachedInventory> current_ ABSL_GUARDED_BY(mu_);
  bool reading_ ABSL_GUARDED_BY(mu_) = false;  // A caller is reading the inventory.
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_INVENTORY_CACHE_H_
