#include "scheduler/fabric_view.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/limits.h"
#include "scheduler/trunk_routing.h"

namespace fleet::scheduler {
namespace {

class View {
 public:
  View(const FabricSnapshot& snapshot, const FabricQuery& query)
      : snapshot_(snapshot), query_(query) {}

  // Whether `holder` may be used by the caller as its own: none, or the allocation asked about.
  bool Own(const std::string& holder) const {
    return holder.empty() || (!query_.own_allocation.empty() && holder == query_.own_allocation);
  }
  // Whether the caller sees `holder` by name: every holder for an unscoped caller, else only
  // an allocation of a tenant it acts for.
  bool Visible(const std::string& holder) const {
    if (query_.tenants.empty() || Own(holder)) return true;
    const std::string owner = snapshot_.TenantOf(holder);
    return !owner.empty() &&
           std::find(query_.tenants.begin(), query_.tenants.end(), owner) != query_.tenants.end();
  }
  // `holder` as the caller may see it.
  std::string HolderName(const std::string& holder) const {
    if (Visible(holder)) return holder;
    return absl::StartsWith(holder, kManualHolderPrefix) ? "a manual circuit" : "another tenant";
  }
  // Why a trunk `holder` holds is not free, worded as its ports' holders are.
  std::string HeldBy(const std::string& holder) const {
    if (!Visible(holder) && absl::StartsWith(holder, kManualHolderPrefix)) {
      return "in a manual circuit";
    }
    return "in a circuit of " + HolderName(holder);
  }
  // Another tenant's allocation (a manual circuit is no tenant's).
  bool AnotherTenants(const std::string& holder) const {
    return !Visible(holder) && !absl::StartsWith(holder, kManualHolderPrefix);
  }

  absl::Status CheckDevice(size_t i) const {
    const std::string& id = query_.devices[i];
    const std::string field = absl::StrCat(query_.field, "[", i, "]");
    if (!snapshot_.HasDevice(id)) {
      return absl::NotFoundError(absl::StrCat(field, ": device ", id, " not found"));
    }
    const std::vector<const OnicPortState*> ports = snapshot_.DevicePorts(id);
    auto ours = [&](const OnicPortState* st) {
      return !query_.own_allocation.empty() &&
             (st->tx_holder == query_.own_allocation || st->rx_holder == query_.own_allocation);
    };
    if (std::any_of(ports.begin(), ports.end(), ours)) return absl::OkStatus();
    for (const OnicPortState* st : ports) {
      if (AnotherTenants(st->tx_holder) || AnotherTenants(st->rx_holder)) {
        return absl::PermissionDeniedError(absl::StrCat(field, ": device ", id,
                                                        " is in another tenant's allocation (onic ",
                                                        st->onic, "/", st->port, ")"));
      }
    }
    return absl::OkStatus();
  }

  v1::FabricDevice Device(const std::string& id) const {
    v1::FabricDevice out;
    const v1::Device& device = snapshot_.devices().at(id);
    out.set_device(id);
    out.set_kind(device.kind());
    out.set_host(device.host());
    for (const OnicPortState* st : snapshot_.DevicePorts(id)) {
      v1::FabricPort& port = *out.add_ports();
      port.set_onic(st->onic);
      port.set_port(st->port);
      port.set_switch_id(st->tx.switch_id());
      if (!st->unusable.empty()) {
        port.set_use(v1::PORT_USE_UNUSABLE);
        port.set_reason(st->unusable);
      } else if (Own(st->tx_holder) && Own(st->rx_holder)) {
        port.set_use(st->tx_holder.empty() && st->rx_holder.empty() ? v1::PORT_USE_FREE
                                                                    : v1::PORT_USE_OWN);
        out.set_usable_ports(out.usable_ports() + 1);
      } else {
        port.set_use(v1::PORT_USE_HELD);
        const std::string& holder = Own(st->tx_holder) ? st->rx_holder : st->tx_holder;
        port.set_holder(HolderName(holder));
      }
    }
    return out;
  }

  // One circuit from a port of `source` with tx free to one of `destination` with rx free.
  v1::FabricPair Pair(const std::string& source, const std::string& destination) const {
    v1::FabricPair pair;
    pair.set_source(source);
    pair.set_destination(destination);
    std::vector<const OnicPortState*> senders, receivers;
    for (const OnicPortState* st : snapshot_.DevicePorts(source)) {
      if (st->unusable.empty() && Own(st->tx_holder)) senders.push_back(st);
    }
    for (const OnicPortState* st : snapshot_.DevicePorts(destination)) {
      if (st->unusable.empty() && Own(st->rx_holder)) receivers.push_back(st);
    }
    if (senders.empty() || receivers.empty()) {
      pair.set_reason(absl::StrCat("no usable port of ", senders.empty() ? source : destination,
                                   " has its ", senders.empty() ? "tx" : "rx", " free"));
      return pair;
    }
    // One route per pair of switches: which ports on a switch does not change the path.
    std::set<std::pair<std::string, std::string>> tried;
    std::optional<Route> best;
    std::string refusal;
    // The pair's names are in the answer already: the reason need not repeat them.
    const std::string what = "the circuit";
    for (const OnicPortState* s : senders) {
      for (const OnicPortState* r : receivers) {
        if (!tried.insert({s->tx.switch_id(), r->rx.switch_id()}).second) continue;
        TrunkRouter router(snapshot_, query_.max_switch_hops, "", query_.own_allocation,
                           [this](const std::string& holder) { return HeldBy(holder); });
        absl::StatusOr<Route> route = router.RouteCircuit(s->tx, r->rx, what);
        if (!route.ok()) {
          if (refusal.empty()) refusal = std::string(route.status().message());
          continue;
        }
        if (!best || route->trunks.size() < best->trunks.size()) best = *std::move(route);
      }
    }
    if (!best) {
      pair.set_reason(refusal);
      return pair;
    }
    pair.set_joinable(true);
    for (const v1::CrossConnect& x : best->cross_connects) pair.add_switches(x.switch_id());
    pair.set_trunk_hops(best->trunks.size());
    return pair;
  }

 private:
  const FabricSnapshot& snapshot_;
  const FabricQuery& query_;
};

}  // namespace

absl::Status CheckFabricDeviceCount(size_t devices, const std::string& field) {
  if (devices == 0) return absl::InvalidArgumentError(absl::StrCat(field, ": no device named"));
  if (devices > kMaxFabricDevices) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", devices, " devices; at most ",
                                                   kMaxFabricDevices, " (ask about a subset)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::GetFabricResponse> DescribeFabric(const FabricSnapshot& snapshot,
                                                     const FabricQuery& query) {
  RETURN_IF_ERROR(CheckFabricDeviceCount(query.devices.size(), query.field));
  RETURN_IF_ERROR(CheckSwitchHops(snapshot, query.max_switch_hops, "max_switch_hops"));
  std::set<std::string> seen;
  View view(snapshot, query);
  for (size_t i = 0; i < query.devices.size(); ++i) {
    RETURN_IF_ERROR(CheckName(absl::StrCat(query.field, "[", i, "]"), query.devices[i]));
    if (!seen.insert(query.devices[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(query.field, "[", i, "]: device ", query.devices[i], " is named twice"));
    }
    RETURN_IF_ERROR(view.CheckDevice(i));
  }
  // Counted as it grows, so that long names and paths are refused before the answer is whole.
  v1::GetFabricResponse out;
  size_t bytes = 0;
  auto counted = [&](const google::protobuf::Message& part) {
    bytes += part.ByteSizeLong() + 8;  // The part's tag and length, at most.
    if (bytes <= kMaxFabricAnswerBytes) return absl::OkStatus();
    return absl::ResourceExhaustedError(
        absl::StrCat(query.field, ": the answer for ", query.devices.size(), " devices is past ",
                     kMaxFabricAnswerBytes, " bytes; ask about fewer devices"));
  };
  for (const std::string& id : query.devices) {
    RETURN_IF_ERROR(counted(*out.add_devices() = view.Device(id)));
  }
  for (const std::string& source : query.devices) {
    for (const std::string& destination : query.devices) {
      if (source == destination) continue;
      RETURN_IF_ERROR(counted(*out.add_pairs() = view.Pair(source, destination)));
    }
  }
  return out;
}

}  // namespace fleet::scheduler
