// One SwitchProgrammer (programming queue) per switch, and a change programmed across
// several switches at once.
#ifndef FLEET_CONTROLLER_ENGINE_SWITCH_PROGRAMMERS_H_
#define FLEET_CONTROLLER_ENGINE_SWITCH_PROGRAMMERS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/engine/inventory_cache.h"
#include "controller/engine/switch_programmer.h"
#include "controller/switch_registry/switch_registry.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::engine {

class SwitchProgrammers {
 public:
  SwitchProgrammers(InventoryCache* inventory, switch_registry::SwitchRegistry* switches)
      : inventory_(inventory), switches_(switches) {}

  // The programmer of switch `switch_id` (found in the cached inventory, not read from the
  // store on the way to the switch). A rebuilt driver (the switch's address changed) gets a
  // fresh one; the one it replaces is kept, as a transaction may still be inside it.
  absl::StatusOr<SwitchProgrammer*> For(const std::string& switch_id);

  // Programs each switch's part of `removes` (first) and `adds` at once, the first switch's
  // led on the caller's thread and each other's handed to its switch's own thread
  // (SwitchProgrammer), and waits for them all; on error the switches are rolled back
  // and the message returned (every failing switch's). The times stored are the slowest switch's
  // (the max with what the pointers hold), since the switches work at once. `retried` (if set) is
  // told whether any switch applied the changes twice (its combined batch failed for another
  // request's part), so the light at their ports was interrupted. `going` (if set) runs once, as
  // the first switch's batch goes out (SwitchProgrammer), or not at all if no switch was sent the
  // changes.
  absl::Status Program(const std::vector<v1::Circuit>& removes,
                       const std::vector<v1::Circuit>& adds, absl::Duration* program_time,
                       absl::Duration* verify_time, bool* retried = nullptr,
                       const std::function<void()>& going = {});

  struct Queue {
    int batches = 0;  // Sent so far.
    int queued = 0;   // Change sets waiting for the next batch.
  };
  // Each switch's programming queue, by switch id.
  std::map<std::string, Queue> Queues();

 private:
  InventoryCache* const inventory_;
  switch_registry::SwitchRegistry* const switches_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<SwitchProgrammer>> programmers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<SwitchProgrammer>> retired_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, switch_adapters::OpticalSwitch*> drivers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_SWITCH_PROGRAMMERS_H_
