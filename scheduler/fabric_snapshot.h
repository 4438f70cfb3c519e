// An immutable picture of the fabric for planning: every O-NIC port with its fibers, whether
// it may carry a new circuit, and which allocation holds its tx and rx now. Built once from
// what the store returns; the planner reads it and never does I/O.
#ifndef FLEET_SCHEDULER_FABRIC_SNAPSHOT_H_
#define FLEET_SCHEDULER_FABRIC_SNAPSHOT_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::scheduler {

// How a holder that is an operator's manual circuit is named: this, then the circuit's id.
inline constexpr char kManualHolderPrefix[] = "manual circuit ";

struct OnicPortState {
  std::string onic;
  uint32_t port = 0;
  std::string device;
  std::string host;
  v1::SwitchPortRef tx;  // The ingress its tx fiber enters.
  v1::SwitchPortRef rx;  // The egress its rx fiber leaves.
  // Why no new circuit may use this port ("drained", "failed", ...); empty when it may.
  std::string unusable;
  // The allocation whose circuit (of any phase, active or not) uses this port's tx / rx
  // (kManualHolderPrefix and its id for a manual circuit); empty when free.
  std::string tx_holder;
  std::string rx_holder;
  // The cluster of the switch its tx fiber enters ("" when the switch names none).
  std::string cluster;
  // The light its rx last measured, when an agent reported it; member selection prefers
  // devices whose ports read more light.
  std::optional<double> rx_power_dbm;

  // Usable, with neither side in a desired circuit.
  bool Free() const { return unusable.empty() && tx_holder.empty() && rx_holder.empty(); }
};

// A trunk fiber from one switch's egress to another switch's ingress. It carries one circuit.
struct TrunkState {
  std::string id;
  v1::SwitchPortRef from;  // The egress the fiber leaves.
  v1::SwitchPortRef to;    // The ingress of the other switch it enters.
  // Why no new circuit may use it (a drained or failed port at either end); empty when it may.
  std::string unusable;
  // The allocation (or kManualHolderPrefix and the id) whose circuit, of any phase, crosses
  // it; empty when none does.
  std::string holder;
};

// An O-NIC port's measured receive power, as the agents report it.
struct PowerReading {
  std::string onic;
  uint32_t port = 0;
  double rx_power_dbm = 0;
};

// What the inventory holds, to bound requests by (limits.h).
struct SiteLimits {
  size_t devices = 0;
  size_t onic_ports = 0;        // Every O-NIC port of every device.
  size_t max_device_ports = 0;  // The most O-NIC ports one device has.
  size_t switches = 0;
};

class FabricSnapshot {
 public:
  // `site` as Store::LoadInventory gives it; `ports` every switch port (ListPorts); the
  // desired circuits; the live allocations (for their tenants); optionally the last power
  // readings (readings of unknown ports are ignored).
  static FabricSnapshot Build(const v1::Inventory& site, const std::vector<v1::SwitchPort>& ports,
                              const std::vector<v1::Circuit>& circuits,
                              const std::vector<v1::Allocation>& allocations,
                              const std::vector<PowerReading>& power = {});
  // This snapshot (built without circuits) with `circuits` holding their ports and trunks and
  // `allocations`' tenants known: the same as Build with them, without going over the
  // inventory again. Admission keeps the snapshot of the inventory and adds the circuits.
  FabricSnapshot WithCircuits(const std::vector<v1::Circuit>& circuits,
                              const std::vector<v1::Allocation>& allocations) const;

  bool HasDevice(const std::string& id) const { return site_->devices.contains(id); }
  bool HasOnic(const std::string& id) const { return site_->onic_ports.contains(id); }
  // Nullptr when the O-NIC or port does not exist.
  const OnicPortState* Port(const std::string& onic, uint32_t port) const;
  // Every port of a device's O-NICs, O-NICs by id, ports 1 then 2.
  std::vector<const OnicPortState*> DevicePorts(const std::string& device) const;
  // The tenant owning `allocation_id`, or "".
  std::string TenantOf(const std::string& allocation_id) const;
  // Every device, by id.
  const std::map<std::string, v1::Device>& devices() const { return site_->devices; }
  bool HasHost(const std::string& name) const { return site_->host_devices.contains(name); }
  // The devices of a host (its CPUs), by id; empty for an unknown host.
  std::vector<std::string> HostDevices(const std::string& host) const;
  // The trunk group from switch `from` to switch `to`: its trunks by id, empty when none.
  std::vector<const TrunkState*> Trunks(const std::string& from, const std::string& to) const;
  // The switches a trunk from `from` reaches, by id.
  std::vector<std::string> TrunkNeighbours(const std::string& from) const;
  bool HasTrunks() const { return !trunks_.empty(); }
  const SiteLimits& limits() const { return site_->limits; }

 private:
  // What the inventory says, with no circuit: shared, never changed, by every snapshot
  // WithCircuits makes from one Build, so that admission copies only what circuits hold.
  struct Site {
    std::map<std::string, v1::Device> devices;
    std::map<std::string, std::vector<OnicPortState>> onic_ports;  // By O-NIC id.
    std::map<std::string, std::vector<std::string>> device_onics;  // Device → O-NIC ids.
    std::map<std::string, std::vector<std::string>> host_devices;  // Host → device ids.
    SiteLimits limits;
  };

  // Marks the ports and trunks of `circuits` as held and records the tenants.
  void AddCircuits(const std::vector<v1::Circuit>& circuits,
                   const std::vector<v1::Allocation>& allocations);

  std::shared_ptr<const Site> site_ = std::make_shared<const Site>();
  // The ports circuits hold, with their holders set, in place of the site's entry.
  std::map<std::pair<std::string, uint32_t>, OnicPortState> held_;
  std::map<std::string, std::string> tenants_;  // Allocation → tenant.
  // Trunk groups: (from switch, to switch) → trunks by id. Copied with their holders: a site
  // has few.
  std::map<std::pair<std::string, std::string>, std::vector<TrunkState>> trunks_;
};

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_FABRIC_SNAPSHOT_H_
