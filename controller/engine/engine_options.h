// How the engine is tuned, and the fault points of a transaction (for tests).
#ifndef FLEET_CONTROLLER_ENGINE_ENGINE_OPTIONS_H_
#define FLEET_CONTROLLER_ENGINE_ENGINE_OPTIONS_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "controller/metrics/controller_metrics.h"
#include "fleet/v1/admin.pb.h"

namespace fleet::engine {

struct EngineOptions {
  absl::Duration default_lease = absl::Hours(1);
  absl::Duration max_lease = absl::Hours(24 * 7);
  absl::Duration quiesce_timeout = absl::Seconds(5);
  absl::Duration retrain_timeout = absl::Seconds(10);
  // How long an armed retrain (sent as the switch is programmed, to agents that can see
  // light arrive) waits for its light; past it the agent answers untrained and fleetd
  // retrains the link once the switch is verified. Longer than a batch normally takes.
  // 0: retrains are never armed.
  absl::Duration armed_light_wait = absl::Seconds(5);
  // Backoff of retrain retries for DEGRADED allocations and of failed removals.
  absl::Duration retry_initial = absl::Seconds(1);
  absl::Duration retry_max = absl::Seconds(60);
  // Each retry's backoff wait is scaled by what this returns (called under the sync queue's
  // lock); unset: 1, no jitter. fleetd draws it from [0.8, 1.2), so allocations that failed
  // together do not all come back at once; tests leave it unset and see exact times.
  std::function<double()> retry_jitter;
  // At most this many allocations wait in the sync queue (sync_queue.h) at once; past it a
  // mark is refused and counted, and the periodic reconciliation marks it again.
  size_t max_sync_queue = 100000;
  // Workers that run transactions, syncs and releases (WorkerPool); more wait for one. 0: 16
  // per core, at least 32 (they mostly wait for switches and agents).
  int workers = 0;
  // Admissions planning at once (Admission; member changes plan apart, under its lock); more
  // wait for a turn. 0: one per core: planning is mostly CPU, and on a busy machine more at
  // once only make every one of them later.
  int parallel_plans = 0;
  // Requests waiting for a worker past which a new one is refused RESOURCE_EXHAUSTED.
  size_t max_queued_transactions = 1024;
  // Periodic reconciliation (report policy unless `unknown_policy` says otherwise); 0: off.
  absl::Duration reconcile_interval = absl::Seconds(60);
  v1::UnknownCrossConnectPolicy unknown_policy = v1::UNKNOWN_CROSS_CONNECT_POLICY_REPORT;
  // How often the switch monitor reads each switch's port status and the power at the egresses
  // of trained circuits (SwitchMonitor); 0: never.
  absl::Duration monitor_interval = absl::Seconds(2);
  // An egress of a trained circuit that reads less light than this is DEGRADED.
  double low_power_dbm = -20.0;
  // A device whose O-NIC fails this many retrains in a row is marked SUSPECT; 0: never.
  uint32_t suspect_after_failed_retrains = 3;
  // How often the background loop looks at leases and retries. (A failed part's retry, which
  // heals, does not wait for it: it starts as the failure is recorded.)
  absl::Duration tick = absl::Milliseconds(100);
  // The loop also wakes when the sync queue's next retry falls due, if sooner than its tick.
  // Off only in tests that drive retries by hand on a fake clock (whose due times are not
  // real time).
  bool wake_for_due_retries = true;
  // Called at each stage boundary of a transaction with the stage's name (see
  // kFaultPoints); tests use it to kill fleetd at a precise point.
  std::function<void(const std::string& point)> fault_point;
  // Where stage timings, outcomes, releases, retrains and drift are counted; null: nowhere.
  metrics::ControllerMetrics* metrics = nullptr;
  // Makes a new allocation's id; unset: "a-" and 8 random hex digits. An id already taken is
  // asked again, a few times. Tests set their own, so what they see is reproducible.
  std::function<std::string()> new_allocation_id;
};

// The points at which EngineOptions::fault_point is called, in transaction order.
inline constexpr const char* kFaultPoints[] = {
    "planned",     // Admission or a member change planned (once per plan); nothing committed.
                   // A member change's is called under Admission::mu(): its callback must
                   // not call into the engine.
    "persisted",   // Intent committed (PENDING), nothing touched.
    "quiesced",    // Ports quiesced, switch untouched; PROGRAMMING committed or landing if
                   // ports had to be quiesced, else not yet started.
    "programmed",  // Switch programmed and verified (armed links training); TRAINING not yet
                   // committed.
    "training",    // TRAINING committed; links training, not yet all answered.
    "trained",     // Links retrained; READY not yet committed.
    "ready",       // READY committed.
    "releasing",   // RELEASING committed; switch untouched.
    "removed",     // Cross-connects removed from the switch; RELEASED not yet committed.
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_ENGINE_OPTIONS_H_
