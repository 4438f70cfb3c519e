#include "controller/engine/drain.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "controller/engine/circuits.h"
#include "controller/engine/tenancy.h"
#include "fleet/v1/names.h"

namespace fleet::engine {
namespace {

absl::StatusOr<store::DrainTargetRef> TargetOf(const v1::DrainTarget& target) {
  store::DrainTargetRef ref;
  switch (target.target_case()) {
    case v1::DrainTarget::kSwitchPort:
      ref.switch_id = target.switch_port().switch_id();
      ref.port = target.switch_port().port();
      if (ref.switch_id.empty() || ref.port == 0) {
        return absl::InvalidArgumentError("target.switch_port needs a switch_id and a port");
      }
      return ref;
    case v1::DrainTarget::kOnic:
      ref.onic = target.onic();
      break;
    case v1::DrainTarget::kHost:
      ref.host = target.host();
      break;
    default:
      return absl::InvalidArgumentError("target: name a switch port, an O-NIC or a host");
  }
  if (ref.onic.empty() && ref.host.empty()) return absl::InvalidArgumentError("target is empty");
  return ref;
}

std::string Describe(const store::DrainTargetRef& t) {
  if (!t.switch_id.empty()) return absl::StrCat("switch port ", t.switch_id, "/", t.port);
  if (!t.onic.empty()) return absl::StrCat("O-NIC ", t.onic);
  return absl::StrCat("host ", t.host);
}

}  // namespace

absl::StatusOr<std::set<std::string>> Drainer::Affected(const store::DrainTargetRef& target) {
  // The circuits that may touch the target, read through the circuit index by O-NIC or by
  // switch; a switch port's are then picked out by their cross-connects.
  std::vector<store::CircuitFilter> near;
  if (!target.host.empty()) {
    ASSIGN_OR_RETURN(std::vector<v1::Onic> onics, store_->ListOnics({target.host, ""}));
    for (const v1::Onic& o : onics) near.push_back({"", "", o.id()});
  }
  if (!target.onic.empty()) near.push_back({"", "", target.onic});
  if (!target.switch_id.empty()) near.push_back({target.switch_id, "", ""});
  std::set<std::string> affected;
  for (const store::CircuitFilter& filter : near) {
    ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, store_->ListCircuits(filter));
    for (const v1::Circuit& c : circuits) {
      if (c.allocation_id().empty()) continue;
      bool hit = filter.switch_id.empty();  // An O-NIC's circuits all touch it.
      for (const v1::CrossConnect& x : c.cross_connects()) {
        hit |= x.switch_id() == target.switch_id &&
               (x.ingress() == target.port || x.egress() == target.port);
      }
      if (hit) affected.insert(c.allocation_id());
    }
  }
  return affected;
}

absl::StatusOr<v1::DrainResponse> Drainer::Drain(const v1::DrainRequest& request,
                                                 const Caller& caller) {
  RETURN_IF_ERROR(RequireOperator(caller, "drain"));
  ASSIGN_OR_RETURN(store::DrainTargetRef target, TargetOf(request.target()));
  RETURN_IF_ERROR(store_->SetDrained(target, true, request.reason(), caller.principal));
  ASSIGN_OR_RETURN(const std::set<std::string> affected, Affected(target));
  v1::DrainResponse response;
  for (const std::string& id : affected) response.add_affected_allocations(id);
  if (!request.evict()) return response;
  const std::string reason = absl::StrCat("evicted: ", Describe(target), " was drained",
                                          request.reason().empty() ? "" : ": ", request.reason());
  // What the drain took out, as the planner now sees it (the drain bumped the inventory).
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, p_.inventory.Current());
  LostParts lost;
  lost.what = Describe(target);
  if (!target.switch_id.empty())
    lost.switch_ports.insert(v1::PortName(target.switch_id, target.port));
  for (const v1::Onic& o : inventory->site.onics()) {
    if (o.id() != target.onic) continue;
    for (const v1::OnicPort& p : o.ports()) {
      lost.switch_ports.insert(v1::PortName(p.tx()));
      lost.switch_ports.insert(v1::PortName(p.rx()));
    }
  }
  for (const v1::Device& d : inventory->site.devices()) {
    if (!target.host.empty() && d.host() == target.host) lost.devices.insert(d.id());
  }
  for (const std::string& id : affected) {
    v1::Eviction& eviction = *response.add_evictions();
    eviction.set_allocation_id(id);
    absl::Status moved = Move(id, lost, reason, caller, eviction);
    eviction.set_moved(moved.ok());
    if (moved.ok()) continue;
    eviction.set_reason(std::string(moved.message()));
    // A replacement whose transaction failed has taken the allocation down already.
    if (absl::StatusOr<v1::Allocation> a = store_->GetAllocation(id); a.ok() && Ended(a->state())) {
      continue;
    }
    const std::string busy =
        absl::StrCat("allocation ", id, " is busy; drain recorded, eviction incomplete");
    absl::Status released = releaser_->ReleaseWhenFree(
        id, caller, p_.ctx.clock->Now() + absl::Seconds(60), v1::ALLOCATION_STATE_FAILED,
        absl::StrCat(reason, " (not moved: ", moved.message(), ")"), busy, busy);
    if (released.ok()) continue;
    if (released.message() == busy) return released;  // It says what was done.
    return absl::Status(released.code(),
                        absl::StrCat("allocation ", id, ": drain recorded, eviction incomplete: ",
                                     released.message()));
  }
  return response;
}

absl::Status Drainer::Move(const std::string& id, const LostParts& lost, const std::string& reason,
                           const Caller& caller, v1::Eviction& eviction) {
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, p_.inventory.Current());
  ASSIGN_OR_RETURN(v1::Allocation a, store_->GetAllocation(id));
  const int before = a.replacements_size();
  const Hurt hurt = HurtBy(a, lost, *inventory);
  if (hurt.members.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no member of it is on ", lost.what, " (trunks only)"));
  }
  for (const std::string& member : hurt.members) {
    RETURN_IF_ERROR(members_->ReplaceFailed(id,
                                            {.member = member,
                                             .reason = reason,
                                             .same_switch_only = false,
                                             .degraded_for = absl::ZeroDuration(),
                                             .only_if_degraded = false},
                                            caller));
    // Its transaction holds the allocation until it ends; the next member waits for it.
    p_.pool.WaitUnclaimed({id}, p_.ctx.clock->Now() + MemberChanges::kClaimWait);
    ASSIGN_OR_RETURN(a, store_->GetAllocation(id));
    if (!Settled(a.state())) {
      return absl::AbortedError(
          absl::StrCat("replacing ", member, " left it ", v1::Name(a.state()), ": ", a.reason()));
    }
  }
  for (int i = before; i < a.replacements_size(); ++i) {
    *eviction.add_replacements() = a.replacements(i);
  }
  return absl::OkStatus();
}

absl::Status Drainer::Undrain(const v1::UndrainRequest& request, const Caller& caller) {
  RETURN_IF_ERROR(RequireOperator(caller, "undrain"));
  ASSIGN_OR_RETURN(store::DrainTargetRef target, TargetOf(request.target()));
  return store_->SetDrained(target, false, "", caller.principal);
}

}  // namespace fleet::engine
