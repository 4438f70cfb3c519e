#include "controller/engine/tenancy.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fleet::engine {

Caller Caller::FromPrincipal(const std::string& principal) {
  Caller caller;
  caller.principal = principal;
  if (absl::StartsWith(principal, "job:")) caller.tenant = principal.substr(4);
  return caller;
}

absl::StatusOr<v1::Allocation> Authorized(store::Store& store, const std::string& id,
                                          const Caller& caller) {
  if (id.empty()) return absl::InvalidArgumentError("id is empty");
  ASSIGN_OR_RETURN(v1::Allocation a, store.GetAllocation(id));
  if (!caller.operator_role() && a.tenant() != caller.tenant) {
    return absl::PermissionDeniedError(
        absl::StrCat("allocation ", id, " does not belong to tenant ", caller.tenant));
  }
  return a;
}

absl::StatusOr<store::AllocationFilter> ListFilter(const v1::ListAllocationsRequest& request,
                                                   const Caller& caller) {
  store::AllocationFilter filter{request.tenant(), request.state(), request.include_released()};
  if (!caller.operator_role()) {
    if (!filter.tenant.empty() && filter.tenant != caller.tenant) {
      return absl::PermissionDeniedError(
          absl::StrCat("tenant ", caller.tenant, " may not list tenant ", filter.tenant));
    }
    filter.tenant = caller.tenant;
  }
  return filter;
}

absl::Status CheckWatch(store::Store& store, const std::string& id, const std::string& tenant,
                        const Caller& caller) {
  if (id.empty() == tenant.empty()) {
    return absl::InvalidArgumentError("name exactly one of id and tenant to watch");
  }
  if (!id.empty()) return Authorized(store, id, caller).status();
  if (!caller.operator_role() && tenant != caller.tenant) {
    return absl::PermissionDeniedError(
        absl::StrCat("tenant ", caller.tenant, " may not watch tenant ", tenant));
  }
  return absl::OkStatus();
}

}  // namespace fleet::engine
