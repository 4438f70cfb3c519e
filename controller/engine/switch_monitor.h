// The switch monitor (docs/engine.md, "Health"): fleetd's own eyes on the switches, beside
// the agents'. Each pass reads, per switch, every port's status and the power at the egresses
// of circuits that carry light now (ACTIVE or DEGRADED, of allocations no change holds and
// the pass has not acted on: the egresses of one that a change holds, or that crosses a port
// whose news this pass acted on, keep their health unless the switch says FAILED), over the
// switch's adapter (TL1 or REST alike), between batches of nobody: the driver
// serializes its calls, so a read waits for a batch in flight and never splits one.
//
//   the switch reports a port FAILED        → FAILED, with the switch's word
//   an egress reads below `low_power_dbm`    → DEGRADED, with the reading
//   otherwise                               → UP
//
// Only changes are written (InventoryStore::SetPortHealth, per switch as it is read, with an
// event each), and a port's first reading (UP too, without an event, so that it reads UP
// rather than UNKNOWN; all of a pass's at its end); a port newly FAILED or DEGRADED degrades the
// live circuits crossing it at once (LinkRecovery::SwitchPortsUnhealthy), whose retry heals or
// retrains them; one well again makes the retries of DEGRADED allocations crossing it due
// (SwitchPortsWell); new circuits avoid FAILED ports (the planner reads health from the store). A
// switch that cannot be read keeps its ports' last health; the failure is logged once per switch
// until it reads again.
#ifndef FLEET_CONTROLLER_ENGINE_SWITCH_MONITOR_H_
#define FLEET_CONTROLLER_ENGINE_SWITCH_MONITOR_H_

#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "controller/engine/engine_parts.h"
#include "controller/engine/link_recovery.h"
#include "controller/store/inventory_store.h"

namespace fleet::engine {

class SwitchMonitor {
 public:
  SwitchMonitor(const EngineParts& parts, LinkRecovery* recovery)
      : p_(parts), recovery_(recovery) {}

  // One pass over every switch; returns the health changes it recorded (tests read them).
  // Passes run one at a time; one stops between switches once fleetd is stopping.
  std::vector<store::PortHealth> Pass();

 private:
  // What one read of a switch found to record.
  struct Reading {
    std::vector<store::PortHealth> changes;         // State changes.
    std::vector<store::PortHealth> first_readings;  // Ports never recorded, read UP.
  };
  // The reading of switch `sw`, from its ports as stored (`stored`), `lit_egresses` (those
  // that carry light now) and `unjudged` (those of allocations in a change).
  absl::StatusOr<Reading> Read(const v1::Switch& sw, const std::vector<v1::SwitchPort>& stored,
                               const std::set<uint32_t>& lit_egresses,
                               const std::set<uint32_t>& unjudged);

  // Stores the health `changes` read on switch `sw` and acts on them; false if the store
  // refused them.
  bool Record(const v1::Switch& sw, const std::vector<store::PortHealth>& changes);

  const EngineParts p_;
  LinkRecovery* const recovery_;
  absl::Mutex pass_mu_;  // Held for a whole pass: two at once would record changes twice.
  absl::Mutex mu_;
  std::set<std::string> unreadable_ ABSL_GUARDED_BY(mu_);  // Switches whose last read failed.
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_SWITCH_MONITOR_H_
