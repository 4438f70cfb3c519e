#include "controller/engine/switch_monitor.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "fleet/v1/names.h"
#include "switch_adapters/optical_switch.h"

namespace fleet::engine {

std::vector<store::PortHealth> SwitchMonitor::Pass() {
  absl::MutexLock pass(&pass_mu_);
  std::vector<store::PortHealth> recorded;
  absl::StatusOr<std::shared_ptr<const CachedInventory>> inventory = p_.inventory.Current();
  absl::StatusOr<std::vector<v1::Circuit>> circuits = p_.ctx.store->ListCircuits({});
  if (!inventory.ok() || !circuits.ok()) {
    FLEET_LOG(WARNING) << "switch monitor: "
                       << (inventory.ok() ? circuits.status() : inventory.status());
    return recorded;
  }
  // The egresses that carry light now, by switch, with their allocation: circuits trained
  // (or DEGRADED after they were) of allocations no transaction holds, whose light is not in
  // the middle of a change. The egresses of allocations in a change (claimed) are not judged
  // now: their light may be off for a retrain or a batch; they keep the health they had.
  const std::set<std::string> claimed = p_.pool.Claims();
  std::map<std::string, std::map<uint32_t, std::string>> lit;
  std::map<std::string, std::set<uint32_t>> unjudged;
  // Switch → port → the allocations whose circuits cross it, ingress or egress.
  std::map<std::string, std::map<uint32_t, std::set<std::string>>> crossing;
  for (const v1::Circuit& c : *circuits) {
    for (const v1::CrossConnect& x : c.cross_connects()) {
      for (uint32_t port : {x.ingress(), x.egress()}) {
        crossing[x.switch_id()][port].insert(c.allocation_id());
      }
    }
    const bool in_change = claimed.contains(c.allocation_id());
    if (!in_change && c.state() != v1::CIRCUIT_STATE_ACTIVE &&
        c.state() != v1::CIRCUIT_STATE_DEGRADED) {
      continue;
    }
    for (const v1::CrossConnect& x : c.cross_connects()) {
      if (in_change) {
        unjudged[x.switch_id()].insert(x.egress());
      } else {
        lit[x.switch_id()][x.egress()] = c.allocation_id();
      }
    }
  }
  std::map<std::string, std::vector<v1::SwitchPort>> stored;
  for (const v1::SwitchPort& p : (*inventory)->ports) stored[p.ref().switch_id()].push_back(p);
  // Each switch's changes are written, and acted on, as soon as it is read: a port FAILED on
  // the first switch does not wait for the others' reads. Ports read for the first time (no
  // event, nothing to act on) are written once at the end: each write is an inventory change,
  // and the next switch's driver is found through the cached inventory, which it reloads.
  std::vector<store::PortHealth> first_readings;
  // Allocations crossing a port this pass has acted on: a heal or retrain it set off may be
  // changing their light on a switch read later (before the change has even claimed them),
  // so their light is not judged for the rest of the pass.
  std::set<std::string> acted_on;
  for (const v1::Switch& sw : (*inventory)->site.switches()) {
    if (p_.pool.stopping()) break;  // A slow switch must not hold up Shutdown.
    const std::set<std::string> claimed_now = p_.pool.Claims();
    std::set<uint32_t> lit_egresses;
    std::set<uint32_t>& not_judged = unjudged[sw.id()];
    for (const auto& [egress, allocation] : lit[sw.id()]) {
      const bool changing = claimed_now.contains(allocation) || acted_on.contains(allocation);
      (changing ? not_judged : lit_egresses).insert(egress);
    }
    absl::StatusOr<Reading> reading = Read(sw, stored[sw.id()], lit_egresses, not_judged);
    {
      absl::MutexLock lock(&mu_);
      if (!reading.ok()) {
        if (unreadable_.insert(sw.id()).second) {
          FLEET_LOG(WARNING) << "switch monitor: switch " << sw.id()
                             << " not read; its ports keep their last health: " << reading.status();
        }
        continue;
      }
      unreadable_.erase(sw.id());
    }
    first_readings.insert(first_readings.end(), reading->first_readings.begin(),
                          reading->first_readings.end());
    if (Record(sw, reading->changes)) {
      recorded.insert(recorded.end(), reading->changes.begin(), reading->changes.end());
      for (const store::PortHealth& h : reading->changes) {
        const std::set<std::string>& there = crossing[sw.id()][h.ref.port()];
        acted_on.insert(there.begin(), there.end());
      }
    }
  }
  if (!first_readings.empty()) {
    if (absl::Status s = p_.ctx.store->SetPortHealth(first_readings); !s.ok()) {
      FLEET_LOG(WARNING) << "switch monitor: first port readings not stored: " << s;
    }
  }
  return recorded;
}

bool SwitchMonitor::Record(const v1::Switch& sw, const std::vector<store::PortHealth>& changes) {
  if (changes.empty()) return true;
  if (absl::Status s = p_.ctx.store->SetPortHealth(changes); !s.ok()) {
    FLEET_LOG(WARNING) << "switch monitor: port health of switch " << sw.id()
                       << " not stored: " << s;
    return false;
  }
  std::map<std::string, std::string> unhealthy;  // v1::PortName → what was read.
  std::set<std::string> well;
  for (const store::PortHealth& h : changes) {
    if (h.state != v1::OPER_STATE_UP) {
      unhealthy[v1::PortName(h.ref)] = absl::StrCat(v1::Name(h.state), ": ", h.reason);
    } else {
      well.insert(v1::PortName(h.ref));
    }
  }
  if (!unhealthy.empty()) recovery_->SwitchPortsUnhealthy(unhealthy);
  if (!well.empty()) recovery_->SwitchPortsWell(well);
  return true;
}

absl::StatusOr<SwitchMonitor::Reading> SwitchMonitor::Read(
    const v1::Switch& sw, const std::vector<v1::SwitchPort>& stored,
    const std::set<uint32_t>& lit_egresses, const std::set<uint32_t>& unjudged) {
  absl::StatusOr<SwitchProgrammer*> programmer = p_.programmers.For(sw.id());
  if (!programmer.ok()) return programmer.status();
  switch_adapters::OpticalSwitch& driver = (*programmer)->driver();
  absl::StatusOr<std::vector<switch_adapters::PortState>> states = driver.ReadPorts();
  if (!states.ok()) return states.status();
  std::map<uint32_t, store::PortHealth> now;  // Port → health read, UP unless said otherwise.
  for (const switch_adapters::PortState& s : *states) {
    if (s.status != switch_adapters::PortStatus::kFailed) continue;
    now[s.port] = {
        .ref = {}, .state = v1::OPER_STATE_FAILED, .reason = "the switch reports it failed"};
  }
  if (!lit_egresses.empty()) {
    absl::StatusOr<std::vector<switch_adapters::PortPower>> power =
        driver.ReadPower({lit_egresses.begin(), lit_egresses.end()});
    if (!power.ok()) return power.status();
    for (const switch_adapters::PortPower& p : *power) {
      if (!lit_egresses.contains(p.port) || p.dbm >= p_.ctx.options.low_power_dbm ||
          now.contains(p.port)) {
        continue;
      }
      now[p.port] = {.ref = {},
                     .state = v1::OPER_STATE_DEGRADED,
                     .reason = p.dbm <= switch_adapters::PortPower::kNoLight
                                   ? "no light under a trained circuit"
                                   : absl::StrFormat("%.2f dBm, below %.2f dBm", p.dbm,
                                                     p_.ctx.options.low_power_dbm)};
    }
  }
  Reading reading;
  for (const v1::SwitchPort& port : stored) {
    store::PortHealth health;
    if (auto it = now.find(port.ref().port()); it != now.end()) {
      health = it->second;
    } else if (unjudged.contains(port.ref().port())) {
      continue;  // Not failed, and its light not judged now: as it was.
    }
    health.ref = port.ref();
    // A port never read is UNKNOWN in the store: UP is no change for it, but is recorded, so
    // that the port reads as what it is.
    if (port.oper_state() == v1::OPER_STATE_UNKNOWN && health.state == v1::OPER_STATE_UP) {
      reading.first_readings.push_back(std::move(health));
      continue;
    }
    const v1::OperState was =
        port.oper_state() == v1::OPER_STATE_UNKNOWN ? v1::OPER_STATE_UP : port.oper_state();
    // State changes only: a reading that moves within DEGRADED is no news either.
    if (health.state != was) reading.changes.push_back(std::move(health));
  }
  return reading;
}

}  // namespace fleet::engine
