// Which events a caller may read (ListEvents, WatchEvents): every one, except for a job, which
// reads only the events of its own tenants' allocations.
#ifndef FLEET_CONTROLLER_SERVICE_EVENT_VISIBILITY_H_
#define FLEET_CONTROLLER_SERVICE_EVENT_VISIBILITY_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "controller/engine/caller.h"
#include "controller/store/allocation_store.h"
#include "fleet/v1/common.pb.h"

namespace fleet::service {

class EventVisibility {
 public:
  // For `caller` reading events of `object_kind` (empty: any). A job asking for a kind other
  // than allocation is PERMISSION_DENIED naming its role and the rule. `store` is not owned.
  static absl::StatusOr<EventVisibility> For(const engine::Caller& caller,
                                             store::AllocationStore& store,
                                             const std::string& object_kind);

  // The kind to ask the event log for: the request's, or allocation for a job.
  const std::string& object_kind() const { return object_kind_; }
  // Whether the caller may read `event`. For a job, looks up (once per allocation) whose the
  // event's allocation is; an allocation no longer stored is nobody's.
  bool Visible(const v1::Event& event);

 private:
  EventVisibility(const engine::Caller& caller, store::AllocationStore& store, std::string kind)
      : caller_(caller), store_(&store), object_kind_(std::move(kind)) {}
  engine::Caller caller_;
  store::AllocationStore* store_;
  std::string object_kind_;
  std::map<std::string, bool> seen_;  // Allocation id → visible.
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_EVENT_VISIBILITY_H_
