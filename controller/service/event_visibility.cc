#include "controller/service/event_visibility.h"

#include "absl/strings/str_cat.h"

namespace fleet::service {

absl::StatusOr<EventVisibility> EventVisibility::For(const engine::Caller& caller,
                                                     store::AllocationStore& store,
                                                     const std::string& object_kind) {
  if (!caller.tenant_scoped()) return EventVisibility(caller, store, object_kind);
  if (!object_kind.empty() && object_kind != "allocation") {
    return absl::PermissionDeniedError(absl::StrCat(
        caller.Describe(), " reads the events of its tenants' allocations only, not of kind ",
        object_kind));
  }
  return EventVisibility(caller, store, "allocation");
}

bool EventVisibility::Visible(const v1::Event& event) {
  if (!caller_.tenant_scoped()) return true;
  if (event.object_kind() != "allocation") return false;
  auto [it, fresh] = seen_.try_emplace(event.object_id(), false);
  if (fresh) {
    absl::StatusOr<v1::Allocation> a = store_->GetAllocation(event.object_id());
    it->second = a.ok() && caller_.ActsFor(a->tenant());
  }
  return it->second;
}

}  // namespace fleet::service
