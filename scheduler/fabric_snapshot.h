// An immutable picture of the fabric for planning: every O-NIC port with its fibers, whether
// it may carry a new circuit, and which allocation holds its tx and rx now. Built once from
// what the store returns; the planner reads it and never does I/O.
#ifndef FLEET_SCHEDULER_FABRIC_SNAPSHOT_H_
#define FLEET_SCHEDULER_FABRIC_SNAPSHOT_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::scheduler {

struct OnicPortState {
  std::string onic;
  uint32_t port = 0;
  std::string device;
  std::string host;
  v1::SwitchPortRef tx;  // The ingress its tx fiber enters.
  v1::SwitchPortRef rx;  // The egress its rx fiber leaves.
  // Why no new circuit may use this port ("drained", "failed", ...); empty when it may.
  std::string unusable;
  // The allocation whose desired circuit uses this port's tx / rx; empty when free.
  std::string tx_holder;
  std::string rx_holder;
};

class FabricSnapshot {
 public:
  // `site` as Store::LoadInventory gives it; `ports` every switch port (ListPorts); the
  // desired circuits; the live allocations (for their tenants).
  static FabricSnapshot Build(const v1::Inventory& site, const std::vector<v1::SwitchPort>& ports,
                              const std::vector<v1::Circuit>& circuits,
                              const std::vector<v1::Allocation>& allocations);

  bool HasDevice(const std::string& id) const { return devices_.contains(id); }
  bool HasOnic(const std::string& id) const { return onic_ports_.contains(id); }
  // Nullptr when the O-NIC or port does not exist.
  const OnicPortState* Port(const std::string& onic, uint32_t port) const;
  // Every port of a device's O-NICs, O-NICs by id, ports 1 then 2.
  std::vector<const OnicPortState*> DevicePorts(const std::string& device) const;
  // The tenant owning `allocation_id`, or "".
  std::string TenantOf(const std::string& allocation_id) const;

 private:
  std::map<std::string, v1::Device> devices_;
  std::map<std::string, std::vector<OnicPortState>> onic_ports_;  // By O-NIC id.
  std::map<std::string, std::vector<std::string>> device_onics_;  // Device → O-NIC ids.
  std::map<std::string, std::string> tenants_;                    // Allocation → tenant.
};

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_FABRIC_SNAPSHOT_H_
