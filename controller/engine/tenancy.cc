#include "controller/engine/tenancy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace fleet::engine {

bool Caller::ActsFor(const std::string& tenant) const {
  return !tenant_scoped() || std::find(tenants.begin(), tenants.end(), tenant) != tenants.end();
}

std::string Caller::Describe() const {
  std::string text = absl::StrCat("role ", auth::RoleName(role), " (", principal, ")");
  if (tenant_scoped()) absl::StrAppend(&text, ", acting for [", absl::StrJoin(tenants, ", "), "]");
  return text;
}

absl::StatusOr<v1::Allocation> Authorized(store::Store& store, const std::string& id,
                                          const Caller& caller) {
  if (id.empty()) return absl::InvalidArgumentError("id is empty");
  absl::StatusOr<v1::Allocation> a = store.GetAllocation(id);
  // Another tenant's allocation is answered exactly as a missing one: a job learns nothing
  // of what it may not see, not even that it exists.
  if (caller.tenant_scoped() && ((!a.ok() && a.status().code() == absl::StatusCode::kNotFound) ||
                                 (a.ok() && !caller.ActsFor(a->tenant())))) {
    return absl::NotFoundError(absl::StrCat("allocation ", id, " not found"));
  }
  return a;
}

absl::StatusOr<store::AllocationFilter> ListFilter(const v1::ListAllocationsRequest& request,
                                                   const Caller& caller) {
  store::AllocationFilter filter{request.tenant(), request.state(), request.include_released()};
  if (!caller.ActsFor(filter.tenant) && !filter.tenant.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat(caller.Describe(), " may not list tenant ", filter.tenant));
  }
  // A job acting for one tenant lists it in the store; for several, the engine keeps only
  // theirs from the listing (ListAllocations).
  if (caller.tenant_scoped() && filter.tenant.empty() && caller.tenants.size() == 1) {
    filter.tenant = caller.tenants.front();
  }
  return filter;
}

absl::Status RequireOperator(const Caller& caller, absl::string_view what) {
  if (caller.operator_role()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      caller.Describe(), " lacks permission ",
      auth::PermissionName(auth::Permission::kOperateFabric), ": ", what, " is for operators"));
}

absl::Status CheckWatch(store::Store& store, const std::string& id, const std::string& tenant,
                        const Caller& caller) {
  if (id.empty() == tenant.empty()) {
    return absl::InvalidArgumentError("name exactly one of id and tenant to watch");
  }
  if (!id.empty()) return Authorized(store, id, caller).status();
  if (!caller.ActsFor(tenant)) {
    return absl::PermissionDeniedError(
        absl::StrCat(caller.Describe(), " may not watch tenant ", tenant));
  }
  return absl::OkStatus();
}

}  // namespace fleet::engine
