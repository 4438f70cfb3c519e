#include "scheduler/fabric_snapshot.h"

#include <algorithm>
#include <memory>
#include <set>

#include "fleet/v1/names.h"

namespace fleet::scheduler {
namespace {

std::string Key(const v1::SwitchPortRef& ref) { return v1::PortName(ref); }

}  // namespace

FabricSnapshot FabricSnapshot::Build(const v1::Inventory& site,
                                     const std::vector<v1::SwitchPort>& ports,
                                     const std::vector<v1::Circuit>& circuits,
                                     const std::vector<v1::Allocation>& allocations,
                                     const std::vector<PowerReading>& power) {
  auto inventory = std::make_shared<Site>();
  std::set<std::string> drained_hosts;
  for (const v1::Host& h : site.hosts()) {
    inventory->host_devices[h.name()];
    if (h.admin_state() == v1::ADMIN_STATE_DRAINED) drained_hosts.insert(h.name());
  }
  for (const v1::Device& d : site.devices()) {
    inventory->devices[d.id()] = d;
    if (!d.host().empty()) inventory->host_devices[d.host()].push_back(d.id());
  }
  std::map<std::string, std::string> switch_cluster;
  for (const v1::Switch& sw : site.switches()) switch_cluster[sw.id()] = sw.cluster();
  std::map<std::string, const v1::SwitchPort*> switch_ports;
  for (const v1::SwitchPort& p : ports) switch_ports[Key(p.ref())] = &p;
  // Why a switch port cannot take a new circuit, or "".
  auto switch_port_problem = [&](const v1::SwitchPortRef& ref) -> std::string {
    auto it = switch_ports.find(Key(ref));
    if (it == switch_ports.end()) return "switch port " + Key(ref) + " is unknown";
    if (it->second->admin_state() == v1::ADMIN_STATE_DRAINED)
      return "switch port " + Key(ref) + " is drained";
    if (it->second->oper_state() == v1::OPER_STATE_FAILED)
      return "switch port " + Key(ref) + " has failed";
    return "";
  };
  for (const v1::Onic& o : site.onics()) {
    auto found = inventory->devices.find(o.device());
    const v1::Device* device = found != inventory->devices.end() ? &found->second : nullptr;
    inventory->device_onics[o.device()].push_back(o.id());
    std::vector<OnicPortState>& states = inventory->onic_ports[o.id()];
    for (const v1::OnicPort& p : o.ports()) {
      OnicPortState st;
      st.onic = o.id();
      st.port = p.index();
      st.device = o.device();
      st.host = device ? device->host() : "";
      st.tx = p.tx();
      st.rx = p.rx();
      if (auto it = switch_cluster.find(p.tx().switch_id()); it != switch_cluster.end()) {
        st.cluster = it->second;
      }
      if (device && device->health() == v1::DEVICE_HEALTH_FAILED) {
        st.unusable = "device " + o.device() + " has failed (" + device->health_reason() + ")";
      } else if (device && device->admin_state() == v1::ADMIN_STATE_DRAINED) {
        st.unusable = "device " + o.device() + " is drained";
      } else if (!st.host.empty() && drained_hosts.contains(st.host)) {
        st.unusable = "host " + st.host + " is drained";
      } else if (o.admin_state() == v1::ADMIN_STATE_DRAINED) {
        st.unusable = "onic " + o.id() + " is drained";
      } else if (p.admin_state() == v1::ADMIN_STATE_DRAINED) {
        st.unusable = "onic " + o.id() + " port " + std::to_string(p.index()) + " is drained";
      } else if (p.oper_state() == v1::OPER_STATE_FAILED) {
        st.unusable = "onic " + o.id() + " port " + std::to_string(p.index()) + " has failed";
      } else if (std::string tx = switch_port_problem(p.tx()); !tx.empty()) {
        st.unusable = tx;
      } else if (std::string rx = switch_port_problem(p.rx()); !rx.empty()) {
        st.unusable = rx;
      }
      states.push_back(std::move(st));
    }
  }
  for (auto& [device, onics] : inventory->device_onics) std::sort(onics.begin(), onics.end());
  for (auto& [host, devices] : inventory->host_devices) std::sort(devices.begin(), devices.end());
  SiteLimits& limits = inventory->limits;
  limits.devices = inventory->devices.size();
  limits.switches = static_cast<size_t>(site.switches_size());
  std::map<std::string, size_t> device_ports;
  for (const auto& [onic, states] : inventory->onic_ports) {
    limits.onic_ports += states.size();
    if (!states.empty()) device_ports[states.front().device] += states.size();
  }
  for (const auto& [device, n] : device_ports) {
    limits.max_device_ports = std::max(limits.max_device_ports, n);
  }
  for (const PowerReading& r : power) {
    auto it = inventory->onic_ports.find(r.onic);
    if (it == inventory->onic_ports.end()) continue;
    for (OnicPortState& st : it->second) {
      if (st.port == r.port) st.rx_power_dbm = r.rx_power_dbm;
    }
  }
  FabricSnapshot s;
  s.site_ = std::move(inventory);
  for (const v1::Trunk& t : site.trunks()) {
    TrunkState st;
    st.id = t.id();
    st.from = t.from();
    st.to = t.to();
    st.unusable = switch_port_problem(t.from());
    if (st.unusable.empty()) st.unusable = switch_port_problem(t.to());
    s.trunks_[{t.from().switch_id(), t.to().switch_id()}].push_back(std::move(st));
  }
  for (auto& [group, trunks] : s.trunks_) {
    std::sort(trunks.begin(), trunks.end(),
              [](const TrunkState& a, const TrunkState& b) { return a.id < b.id; });
  }
  s.AddCircuits(circuits, allocations);
  return s;
}

FabricSnapshot FabricSnapshot::WithCircuits(const std::vector<v1::Circuit>& circuits,
                                            const std::vector<v1::Allocation>& allocations) const {
  FabricSnapshot s = *this;
  s.AddCircuits(circuits, allocations);
  return s;
}

void FabricSnapshot::AddCircuits(const std::vector<v1::Circuit>& circuits,
                                 const std::vector<v1::Allocation>& allocations) {
  std::map<std::string, TrunkState*> trunk_by_id;
  for (auto& [group, trunks] : trunks_) {
    for (TrunkState& t : trunks) trunk_by_id[t.id] = &t;
  }
  for (const v1::Circuit& c : circuits) {
    // An inactive phase's circuit holds its ports too: its allocation may switch to that
    // phase at any time, and a phase switch is never refused for capacity.
    const std::string holder = c.manual() ? kManualHolderPrefix + c.id() : c.allocation_id();
    for (const auto& [end, tx] :
         {std::pair{&c.source(), true}, std::pair{&c.destination(), false}}) {
      auto held = held_.find({end->onic(), end->port()});
      if (held == held_.end()) {
        const OnicPortState* st = Port(end->onic(), end->port());
        if (st == nullptr) continue;
        held = held_.emplace(std::pair{end->onic(), end->port()}, *st).first;
      }
      (tx ? held->second.tx_holder : held->second.rx_holder) = holder;
    }
    for (const std::string& id : c.trunks()) {
      if (auto it = trunk_by_id.find(id); it != trunk_by_id.end()) it->second->holder = holder;
    }
  }
  for (const v1::Allocation& a : allocations) tenants_[a.id()] = a.tenant();
}

const OnicPortState* FabricSnapshot::Port(const std::string& onic, uint32_t port) const {
  if (auto held = held_.find({onic, port}); held != held_.end()) return &held->second;
  auto it = site_->onic_ports.find(onic);
  if (it == site_->onic_ports.end()) return nullptr;
  for (const OnicPortState& st : it->second) {
    if (st.port == port) return &st;
  }
  return nullptr;
}

std::vector<const OnicPortState*> FabricSnapshot::DevicePorts(const std::string& device) const {
  std::vector<const OnicPortState*> out;
  auto it = site_->device_onics.find(device);
  if (it == site_->device_onics.end()) return out;
  for (const std::string& onic : it->second) {
    for (const OnicPortState& st : site_->onic_ports.at(onic)) out.push_back(Port(onic, st.port));
  }
  return out;
}

std::vector<std::string> FabricSnapshot::HostDevices(const std::string& host) const {
  auto it = site_->host_devices.find(host);
  return it == site_->host_devices.end() ? std::vector<std::string>() : it->second;
}

std::vector<const TrunkState*> FabricSnapshot::Trunks(const std::string& from,
                                                      const std::string& to) const {
  std::vector<const TrunkState*> out;
  auto it = trunks_.find({from, to});
  if (it == trunks_.end()) return out;
  for (const TrunkState& t : it->second) out.push_back(&t);
  return out;
}

std::vector<std::string> FabricSnapshot::TrunkNeighbours(const std::string& from) const {
  std::vector<std::string> out;
  for (auto it = trunks_.lower_bound({from, ""}); it != trunks_.end() && it->first.first == from;
       ++it) {
    out.push_back(it->first.second);
  }
  return out;
}

std::string FabricSnapshot::TenantOf(const std::string& allocation_id) const {
  auto it = tenants_.find(allocation_id);
  return it == tenants_.end() ? "" : it->second;
}

}  // namespace fleet::scheduler
