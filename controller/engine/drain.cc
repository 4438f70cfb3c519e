#include "controller/engine/drain.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "controller/engine/tenancy.h"

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
  std::set<std::string> host_onics;
  if (!target.host.empty()) {
    ASSIGN_OR_RETURN(std::vector<v1::Onic> onics, store_->ListOnics({target.host, ""}));
    for (const v1::Onic& o : onics) host_onics.insert(o.id());
  }
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
  std::set<std::string> affected;
  for (const v1::Circuit& c : circuits) {
    if (c.allocation_id().empty()) continue;
    bool hit = false;
    for (const v1::OnicPortRef& end : {c.source(), c.destination()}) {
      hit |= end.onic() == target.onic || host_onics.contains(end.onic());
    }
    for (const v1::CrossConnect& x : c.cross_connects()) {
      hit |= x.switch_id() == target.switch_id &&
             (x.ingress() == target.port || x.egress() == target.port);
    }
    if (hit) affected.insert(c.allocation_id());
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
  for (const std::string& id : affected) {
    const std::string busy =
        absl::StrCat("allocation ", id, " is busy; drain recorded, eviction incomplete");
    RETURN_IF_ERROR(releaser_->ReleaseWhenFree(id, caller, absl::Now() + absl::Seconds(60),
                                               v1::ALLOCATION_STATE_FAILED, reason, busy, busy));
  }
  return response;
}

absl::Status Drainer::Undrain(const v1::UndrainRequest& request, const Caller& caller) {
  RETURN_IF_ERROR(RequireOperator(caller, "undrain"));
  ASSIGN_OR_RETURN(store::DrainTargetRef target, TargetOf(request.target()));
  return store_->SetDrained(target, false, "", caller.principal);
}

}  // namespace fleet::engine
