// The tenancy rule of engine.h ("Tenancy"), in one place: what a caller may see.
#ifndef FLEET_CONTROLLER_ENGINE_TENANCY_H_
#define FLEET_CONTROLLER_ENGINE_TENANCY_H_

#include <string>

#include "absl/status/statusor.h"
#include "controller/engine/caller.h"
#include "controller/store/store.h"

namespace fleet::engine {

// Allocation `id` as stored, if `caller` may see it.
absl::StatusOr<v1::Allocation> Authorized(store::Store& store, const std::string& id,
                                          const Caller& caller);
// The filter `caller` may list with, from the request's.
absl::StatusOr<store::AllocationFilter> ListFilter(const v1::ListAllocationsRequest& request,
                                                   const Caller& caller);
// OK for an operator; else PERMISSION_DENIED naming the caller's role and fabric.operate, the
// permission `what` (e.g. "drain") needs. The gatekeeper refuses such calls first under mutual
// TLS; this holds the engine to the same rule whoever calls it.
absl::Status RequireOperator(const Caller& caller, absl::string_view what);
// OK if `caller` may watch allocation `id` or tenant `tenant` (exactly one named).
absl::Status CheckWatch(store::Store& store, const std::string& id, const std::string& tenant,
                        const Caller& caller);

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_TENANCY_H_
