// The event log: every change the fleet made, in commit order, each naming who asked.
//
// Invariants: sequence numbers only grow and have no gaps (a rolled-back write takes its
// events back); the log is append-only, and retention prunes it from its oldest end only,
// never the newest event (controller/store/storage_control.h). Every write of the other
// aggregates appends its events in its own transaction (controller/store/store.h).
// Thread-safe.
#ifndef FLEET_CONTROLLER_STORE_EVENT_LOG_H_
#define FLEET_CONTROLLER_STORE_EVENT_LOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fleet/v1/admin.pb.h"

namespace fleet::store {

struct EventFilter {
  uint64_t after_sequence = 0;
  uint32_t limit = 1000;
  std::string object_kind;  // Empty: any.
  std::string object_id;    // Empty: any.
};

class EventLog {
 public:
  virtual ~EventLog() = default;

  // Appends `event` with the next sequence number and the store's clock time.
  virtual absl::Status AppendEvent(const v1::Event& event) = 0;
  // Events after `filter.after_sequence`, oldest first. A reader whose next events were
  // pruned gets the oldest kept ones: sequences still only grow.
  virtual absl::StatusOr<std::vector<v1::Event>> ListEvents(const EventFilter& filter) = 0;
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_EVENT_LOG_H_
