// fleetd's Prometheus metrics (docs/metrics.md is the list), registered on one registry and
// updated by the parts that see the events: the RPC interceptor, the engine, the switch
// registry's drivers and the agent registry. Thread-safe. Label values are bounded by the site
// (switches, stages, outcomes, O-NIC ports), never by allocations or requests.
#ifndef FLEET_CONTROLLER_METRICS_CONTROLLER_METRICS_H_
#define FLEET_CONTROLLER_METRICS_CONTROLLER_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics_endpoint.h"
#include "controller/store/allocation_store.h"
#include "controller/store/retention.h"
#include "controller/store/storage_control.h"

namespace fleet::metrics {

class ControllerMetrics {
 public:
  // Registers every family on `registry`, which must outlive this object.
  explicit ControllerMetrics(prometheus::Registry& registry);

  // An instance on a registry nobody serves: for parts built without an exported one (tests,
  // tools), so they need no null checks.
  static ControllerMetrics& Discarded();

  // A gRPC call finished. `full_method` is gRPC's "/fleet.v1.TopologyService/RequestTopology".
  void RpcFinished(absl::string_view full_method, absl::string_view code, absl::Duration took);

  // One stage of a reconfiguration (plan, persist, quiesce, program, verify, retrain).
  void StageTook(const std::string& stage, absl::Duration took);
  // A reconfiguration ended: outcome `ready`, `degraded` or `failed`.
  void ReconfigurationFinished(const std::string& outcome, absl::Duration took);
  // A heal under a failure policy ended: `healed` (READY with the spare; `degraded_for` is
  // DEGRADED to READY), `degraded` or `failed` (its transaction's end), `no_spare` or
  // `refused` (not started).
  void HealEnded(const std::string& outcome, absl::Duration degraded_for);
  // An allocation reached RELEASED: reason `requested`, `lease_expired` or `evicted`.
  void Released(const std::string& reason);

  // A command to a switch finished (ok or not). Marks the switch up or down: a refusal the
  // switch answered still proves it reachable, so only UNAVAILABLE and DEADLINE_EXCEEDED
  // mark it down.
  void SwitchCommand(const std::string& switch_id, const std::string& protocol,
                     const std::string& operation, absl::Duration took, absl::StatusCode result);

  void SetAgentsConnected(int connected);
  void SetAgentHeartbeatInterval(absl::Duration interval);
  // Link retrains: outcome `trained`, `failed` or `agent_gone`.
  void LinkRetrains(const std::string& outcome, int count);
  // The rx power an agent reported at an O-NIC port; a port without light (-99.99 dBm) has
  // its series removed.
  void PortRxPower(const std::string& host, const std::string& onic_serial, uint32_t port,
                   double dbm);

  // A reconciliation ran: trigger `start`, `periodic` or `operator`.
  void ReconcileRun(const std::string& trigger);
  // Drift of `kind` (`missing`, `wrong`, `unknown`): found, and of those, repaired.
  void Drift(const std::string& kind, int found, int repaired);
  // Work refused because the engine's bounded queue `queue` (`sync`, `transactions`) was full.
  void QueueRefused(const std::string& queue);
  // An admission's plan lost a race to a concurrent commit (`conflict`: `port`, a port it
  // planned on was taken; `inventory`, a drain or health change committed), and it planned
  // again or, past its attempts, was refused (`outcome`: `replanned`, `aborted`).
  void AdmissionConflict(const std::string& conflict, const std::string& outcome);

  // A retention pass of the state database ended (store::Retention's on_pass).
  void RetentionPassed(const store::RetentionPass& pass);
  // A call refused UNAUTHENTICATED (`reason`: missing, malformed, expired, not_yet_valid,
  // untrusted, no_identity), or PERMISSION_DENIED for lack of `permission` (role "none" when
  // the policy grants the identity nothing).
  void AuthRefused(const std::string& reason);
  void AuthDenied(const std::string& role, const std::string& permission);
  // A reload of the CA bundle and the policy: "ok" or "failed" (the old ones stay).
  void AuthReloaded(const std::string& result);
  // A call of a replica to etcd (docs/ha.md) of `kind` ("read" or "write") took `took` in
  // all, members tried included, and ended `ok` or not.
  void EtcdCall(const std::string& kind, absl::Duration took, bool ok);

 private:
  prometheus::Family<prometheus::Counter>& rpc_requests_;
  prometheus::Family<prometheus::Histogram>& rpc_duration_;
  prometheus::Family<prometheus::Histogram>& stage_duration_;
  prometheus::Histogram& reconfiguration_duration_;
  prometheus::Family<prometheus::Counter>& reconfigurations_;
  prometheus::Family<prometheus::Counter>& heals_;
  prometheus::Histogram& heal_duration_;
  prometheus::Family<prometheus::Counter>& releases_;
  prometheus::Family<prometheus::Counter>& switch_commands_;
  prometheus::Family<prometheus::Counter>& switch_errors_;
  prometheus::Family<prometheus::Histogram>& switch_duration_;
  prometheus::Family<prometheus::Histogram>& etcd_duration_;
  prometheus::Family<prometheus::Counter>& etcd_errors_;
  prometheus::Family<prometheus::Gauge>& switch_up_;
  prometheus::Gauge& agents_connected_;
  prometheus::Gauge& agent_heartbeat_interval_;
  prometheus::Family<prometheus::Counter>& link_retrains_;
  absl::Mutex power_mu_;  // Serializes updates of port_rx_power_, which removes series.
  prometheus::Family<prometheus::Gauge>& port_rx_power_;
  prometheus::Family<prometheus::Counter>& reconcile_runs_;
  prometheus::Family<prometheus::Counter>& auth_refused_;
  prometheus::Family<prometheus::Counter>& auth_denied_;
  prometheus::Family<prometheus::Counter>& auth_reloads_;
  prometheus::Family<prometheus::Counter>& drift_found_;
  prometheus::Family<prometheus::Counter>& drift_repaired_;
  prometheus::Family<prometheus::Counter>& queue_refused_;
  prometheus::Family<prometheus::Counter>& admission_conflicts_;
  prometheus::Family<prometheus::Counter>& pruned_rows_;
  prometheus::Family<prometheus::Counter>& retention_passes_;
  prometheus::Gauge& retention_pass_duration_;
};

// `fleet_allocations` and `fleet_circuits` by state, and the state database's size
// (`fleet_store_database_bytes`, `fleet_store_free_bytes`, `fleet_store_wal_bytes`), read
// from the store at scrape time so they can never drift from it. Register it on the exposer.
std::shared_ptr<prometheus::Collectable> NewStoreStateCollector(store::AllocationStore* allocations,
                                                                store::StorageControl* storage);

// Gauges read at scrape time from `read`, for state another part keeps (a replica's role and
// lag): one unlabelled series per entry. Register it on the exposer.
struct ScrapedGauge {
  std::string name;
  std::string help;
  double value = 0;
};
std::shared_ptr<prometheus::Collectable> NewScrapedGauges(
    std::function<std::vector<ScrapedGauge>()> read);

}  // namespace fleet::metrics

#endif  // FLEET_CONTROLLER_METRICS_CONTROLLER_METRICS_H_
