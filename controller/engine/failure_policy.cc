#include "controller/engine/failure_policy.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "controller/engine/circuits.h"
#include "fleet/v1/names.h"

namespace fleet::engine {

absl::Duration HealWithin(const v1::FailurePolicy& policy) {
  const absl::Duration within = FromProtoDuration(policy.within());
  return within > absl::ZeroDuration() ? within : absl::Seconds(2);
}

absl::Time HealDue(const v1::Allocation& a, absl::Time now) {
  const v1::FailurePolicy& policy = a.request().on_failure();
  if (!policy.replace()) return absl::InfiniteFuture();
  const absl::Time since = a.has_degraded_since() ? FromProtoTime(a.degraded_since()) : now;
  return since + HealWithin(policy);
}

std::vector<FailedPart> FailedParts(const v1::Allocation& a, const CachedInventory& inventory) {
  std::vector<FailedPart> parts;
  // Nearly always nothing has failed: say so without indexing the site (every transaction
  // asks as it ends).
  const bool any_device =
      std::any_of(inventory.site.devices().begin(), inventory.site.devices().end(),
                  [](const v1::Device& d) { return d.health() == v1::DEVICE_HEALTH_FAILED; });
  const bool any_port =
      std::any_of(inventory.ports.begin(), inventory.ports.end(),
                  [](const v1::SwitchPort& p) { return p.oper_state() == v1::OPER_STATE_FAILED; });
  if (!any_device && !any_port) return parts;
  for (const std::string& m : a.members()) {
    const v1::Device* d = inventory.FindDevice(m);
    if (d != nullptr && d->health() == v1::DEVICE_HEALTH_FAILED) {
      parts.push_back({m, absl::StrCat("device ", m, " failed: ", d->health_reason())});
    }
  }
  std::map<std::string, const v1::OnicPort*> onic_ports;  // v1::PortName → its fibers.
  for (const v1::Onic& o : inventory.site.onics()) {
    for (const v1::OnicPort& p : o.ports()) onic_ports[v1::PortName(o.id(), p.index())] = &p;
  }
  std::map<std::string, const v1::SwitchPort*> switch_ports;  // v1::PortName → health.
  for (const v1::SwitchPort& p : inventory.ports) switch_ports[v1::PortName(p.ref())] = &p;
  std::set<std::string> named;  // Switch ports already in `parts`.
  for (const v1::Circuit& c : LiveCircuits(a)) {
    // The fibers the circuit's light takes: the source's tx, the destination's rx.
    for (const auto& [end, tx] : {std::pair{c.source(), true}, std::pair{c.destination(), false}}) {
      auto fibers = onic_ports.find(v1::PortName(end));
      if (fibers == onic_ports.end()) continue;
      const v1::SwitchPortRef& ref = tx ? fibers->second->tx() : fibers->second->rx();
      auto port = switch_ports.find(v1::PortName(ref));
      if (port == switch_ports.end() || port->second->oper_state() != v1::OPER_STATE_FAILED ||
          !named.insert(v1::PortName(ref)).second) {
        continue;
      }
      const std::string& member = inventory.DeviceOf(end.onic());
      parts.push_back({member, absl::StrCat("switch port ", v1::PortName(ref), " of ", member,
                                            " failed: ", port->second->oper_reason())});
    }
  }
  return parts;
}

std::set<std::string> UnreachableDevices(agent_registry::CommandSender* agents,
                                         const CachedInventory& inventory) {
  std::set<std::string> away;
  if (agents == nullptr) return away;
  for (const v1::Onic& o : inventory.site.onics()) {
    if (!agents->HasOwner(o.serial())) away.insert(o.device());
  }
  return away;
}

}  // namespace fleet::engine
