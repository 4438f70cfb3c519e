#include "controller/engine/engine_context.h"

#include "common/log.h"

namespace fleet::engine {

void EngineContext::Fault(const std::string& point) const {
  if (options.fault_point) options.fault_point(point);
}

void EngineContext::Record(const std::string& kind, const std::string& object_kind,
                           const std::string& object_id, v1::EventSeverity severity,
                           const std::string& principal, const std::string& message) const {
  v1::Event event;
  event.set_kind(kind);
  event.set_object_kind(object_kind);
  event.set_object_id(object_id);
  event.set_severity(severity);
  event.set_principal(principal);
  event.set_message(message);
  if (absl::Status s = store->AppendEvent(event); !s.ok()) {
    FLEET_LOG(ERROR) << "cannot record event " << kind << " for " << object_kind << " " << object_id
                     << ": " << s;
  }
}

absl::StatusOr<v1::Allocation> EngineContext::Update(const store::AllocationUpdate& update,
                                                     const std::string& principal) const {
  absl::StatusOr<v1::Allocation> a = store->UpdateAllocation(update, principal);
  if (!a.ok()) {
    FLEET_LOG(ERROR) << "cannot record allocation " << update.id << ": " << a.status();
  }
  return a;
}

}  // namespace fleet::engine
