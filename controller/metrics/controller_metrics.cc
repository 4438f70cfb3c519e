#include "controller/metrics/controller_metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "fleet/v1/names.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::metrics {
namespace {

// What agents report for a port without light.
constexpr double kNoLightDbm = -99.0;

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

template <typename Builder>
auto& Register(Builder builder, prometheus::Registry& registry, const char* name,
               const char* help) {
  return builder.Name(name).Help(help).Register(registry);
}

// Gauges whose values another part reads out at scrape time.
class ScrapedGauges : public prometheus::Collectable {
 public:
  explicit ScrapedGauges(std::function<std::vector<ScrapedGauge>()> read)
      : read_(std::move(read)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families;
    for (const ScrapedGauge& gauge : read_()) {
      prometheus::MetricFamily& family = families.emplace_back();
      family.name = gauge.name;
      family.help = gauge.help;
      family.type = prometheus::MetricType::Gauge;
      family.metric.emplace_back().gauge.value = gauge.value;
    }
    return families;
  }

 private:
  const std::function<std::vector<ScrapedGauge>()> read_;
};

class StoreStateCollector : public prometheus::Collectable {
 public:
  StoreStateCollector(store::AllocationStore* allocations, store::StorageControl* storage)
      : allocations_(allocations), storage_(storage) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    absl::StatusOr<store::AllocationStore::StateCounts> counts = allocations_->CountByState();
    if (!counts.ok()) {
      // A scrape without these series is visible in Prometheus; a wrong zero would not be.
      FLEET_LOG(WARNING) << "metrics: counting allocations and circuits: " << counts.status();
      return {};
    }
    std::vector<prometheus::MetricFamily> families = {
        Family("fleet_allocations", "Allocations by state",
               v1::EnumTexts(v1::AllocationState_descriptor()), counts->allocations),
        Family("fleet_circuits", "Circuits of live allocations by state",
               v1::EnumTexts(v1::CircuitState_descriptor()), counts->circuits),
        Family("fleet_switch_ports", "Switch ports by health, as the switch monitor last saw",
               {"up", "degraded", "failed"}, counts->switch_ports),
        Family("fleet_devices", "Devices by health", {"healthy", "suspect", "failed"},
               counts->devices)};
    absl::StatusOr<store::StorageSize> size = storage_->Storage();
    if (!size.ok()) {
      FLEET_LOG(WARNING) << "metrics: reading the state database's size: " << size.status();
      return families;
    }
    families.push_back(Bytes("fleet_store_database_bytes",
                             "State database size: its pages times the page size, free ones "
                             "included",
                             size->bytes()));
    families.push_back(Bytes("fleet_store_free_bytes",
                             "State database pages free for reuse, not yet handed back",
                             size->free_pages * size->page_size));
    families.push_back(Bytes("fleet_store_wal_bytes", "State database write-ahead log file size",
                             size->wal_bytes));
    return families;
  }

 private:
  static prometheus::MetricFamily Bytes(const char* name, const char* help, int64_t bytes) {
    prometheus::MetricFamily family;
    family.name = name;
    family.help = help;
    family.type = prometheus::MetricType::Gauge;
    family.metric.emplace_back().gauge.value = static_cast<double>(bytes);
    return family;
  }

  // Every state gets a series, zero included, so a state's rate and absence read the same.
  static prometheus::MetricFamily Family(const char* name, const char* help,
                                         const std::vector<std::string>& states,
                                         const std::map<std::string, int64_t>& counts) {
    prometheus::MetricFamily family;
    family.name = name;
    family.help = help;
    family.type = prometheus::MetricType::Gauge;
    for (const std::string& state : states) {
      prometheus::ClientMetric& m = family.metric.emplace_back();
      m.label.push_back({"state", state});
      auto it = counts.find(state);
      m.gauge.value = it == counts.end() ? 0 : static_cast<double>(it->second);
    }
    return family;
  }

  store::AllocationStore* const allocations_;
  store::StorageControl* const storage_;
};

}  // namespace

ControllerMetrics::ControllerMetrics(prometheus::Registry& registry)
    : rpc_requests_(Register(prometheus::BuildCounter(), registry, "fleet_rpc_requests_total",
                             "gRPC calls finished, by service, method and status code")),
      rpc_duration_(Register(prometheus::BuildHistogram(), registry, "fleet_rpc_duration_seconds",
                             "Time from a gRPC call's arrival to its status")),
      stage_duration_(Register(prometheus::BuildHistogram(), registry,
                               "fleet_reconfiguration_stage_duration_seconds",
                               "Time of one stage of a reconfiguration")),
      reconfiguration_duration_(Register(prometheus::BuildHistogram(), registry,
                                         "fleet_reconfiguration_duration_seconds",
                                         "Request accepted to READY, DEGRADED or FAILED")
                                    .Add({}, DurationBuckets())),
      reconfigurations_(Register(prometheus::BuildCounter(), registry,
                                 "fleet_reconfigurations_total",
                                 "Reconfigurations finished, by outcome")),
      heals_(Register(prometheus::BuildCounter(), registry, "fleet_heals_total",
                      "Heals under a failure policy, by outcome")),
      heal_duration_(
          Register(prometheus::BuildHistogram(), registry, "fleet_heal_duration_seconds",
                   "Allocation DEGRADED to READY again with a spare")
              // From a failed part's tens of ms to a policy's minutes of waiting.
              .Add({},
                   prometheus::Histogram::BucketBoundaries{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                                                           10, 30, 60, 120, 300, 600, 1800})),
      releases_(Register(prometheus::BuildCounter(), registry, "fleet_releases_total",
                         "Allocations released, by reason")),
      switch_commands_(Register(prometheus::BuildCounter(), registry, "fleet_switch_commands_total",
                                "Commands sent to a switch")),
      switch_errors_(Register(prometheus::BuildCounter(), registry,
                              "fleet_switch_command_errors_total",
                              "Switch commands that failed: refused, timed out or unreachable")),
      switch_duration_(Register(prometheus::BuildHistogram(), registry,
                                "fleet_switch_command_duration_seconds",
                                "Time a switch command took, reply included")),
      etcd_duration_(Register(prometheus::BuildHistogram(), registry,
                              "fleet_ha_etcd_request_duration_seconds",
                              "Time a replica's call to etcd took, by kind (read, write)")),
      etcd_errors_(Register(prometheus::BuildCounter(), registry, "fleet_ha_etcd_errors_total",
                            "A replica's calls to etcd that failed, by kind (read, write)")),
      switch_up_(Register(prometheus::BuildGauge(), registry, "fleet_switch_up",
                          "1 when the last command reached the switch, 0 when it could not")),
      agents_connected_(Register(prometheus::BuildGauge(), registry, "fleet_agents_connected",
                                 "Agents with an open control stream")
                            .Add({})),
      agent_heartbeat_interval_(
          Register(prometheus::BuildGauge(), registry, "fleet_agent_heartbeat_interval_seconds",
                   "The interval heartbeats with agents are sent at now (it lengthens with "
                   "the agents connected or, when more, those inventory expects)")
              .Add({})),
      link_retrains_(Register(prometheus::BuildCounter(), registry, "fleet_link_retrains_total",
                              "Link retrains asked of agents, by outcome")),
      port_rx_power_(Register(prometheus::BuildGauge(), registry, "fleet_port_rx_power_dbm",
                              "Received optical power at an O-NIC port, as its agent reported")),
      reconcile_runs_(Register(prometheus::BuildCounter(), registry, "fleet_reconcile_runs_total",
                               "Reconciliations run, by trigger")),
      auth_refused_(Register(prometheus::BuildCounter(), registry, "fleet_auth_refused_total",
                             "Calls refused UNAUTHENTICATED, by reason (missing, expired, ...)")),
      auth_denied_(Register(prometheus::BuildCounter(), registry, "fleet_auth_denied_total",
                            "Calls refused PERMISSION_DENIED, by role and missing permission")),
      auth_reloads_(Register(prometheus::BuildCounter(), registry, "fleet_auth_reloads_total",
                             "Reloads of the CA bundle and the access policy, by result")),
      drift_found_(Register(prometheus::BuildCounter(), registry, "fleet_drift_found_total",
                            "Cross-connects that differed from the store, by kind")),
      drift_repaired_(Register(prometheus::BuildCounter(), registry, "fleet_drift_repaired_total",
                               "Drifted cross-connects repaired, by kind")),
      queue_refused_(Register(prometheus::BuildCounter(), registry, "fleet_queue_refused_total",
                              "Work refused because an engine queue was full, by queue")),
      admission_conflicts_(Register(prometheus::BuildCounter(), registry,
                                    "fleet_admission_conflicts_total",
                                    "Admissions whose plan lost a port or its inventory version "
                                    "to a concurrent commit, by conflict and outcome")),
      pruned_rows_(Register(prometheus::BuildCounter(), registry, "fleet_store_pruned_rows_total",
                            "Rows retention pruned from the state database, by kind")),
      retention_passes_(Register(prometheus::BuildCounter(), registry,
                                 "fleet_store_retention_passes_total",
                                 "Retention passes over the state database, by outcome")),
      retention_pass_duration_(Register(prometheus::BuildGauge(), registry,
                                        "fleet_store_retention_pass_duration_seconds",
                                        "Time the last retention pass took")
                                   .Add({})) {
  // Series that alerts and dashboards divide by exist from the start, at zero.
  for (const char* outcome : {"ready", "degraded", "failed"}) {
    reconfigurations_.Add({{"outcome", outcome}});
  }
  for (const char* outcome : {"healed", "degraded", "failed", "no_spare", "refused"}) {
    heals_.Add({{"outcome", outcome}});
  }
  for (const char* outcome : {"trained", "failed", "agent_gone"}) {
    link_retrains_.Add({{"outcome", outcome}});
  }
  for (const char* kind : {"missing", "wrong", "unknown"}) {
    drift_found_.Add({{"kind", kind}});
    drift_repaired_.Add({{"kind", kind}});
  }
  for (const char* queue : {"rpcs", "sync", "transactions"}) queue_refused_.Add({{"queue", queue}});
  for (const char* conflict : {"port", "inventory"}) {
    for (const char* outcome : {"replanned", "aborted"}) {
      admission_conflicts_.Add({{"conflict", conflict}, {"outcome", outcome}});
    }
  }
  for (const char* kind : {"events", "allocations"}) pruned_rows_.Add({{"kind", kind}});
  for (const char* outcome : {"ok", "failed"}) retention_passes_.Add({{"outcome", outcome}});
}

ControllerMetrics& ControllerMetrics::Discarded() {
  static prometheus::Registry* registry = new prometheus::Registry();
  static ControllerMetrics* metrics = new ControllerMetrics(*registry);
  return *metrics;
}

void ControllerMetrics::RpcFinished(absl::string_view full_method, absl::string_view code,
                                    absl::Duration took) {
  // "/fleet.v1.TopologyService/RequestTopology" → service TopologyService, method RequestTopology.
  absl::string_view service = full_method, method = full_method;
  if (const size_t slash = full_method.rfind('/'); slash != absl::string_view::npos) {
    method = full_method.substr(slash + 1);
    service = full_method.substr(0, slash);
    if (!service.empty() && service.front() == '/') service.remove_prefix(1);
    if (const size_t dot = service.rfind('.'); dot != absl::string_view::npos) {
      service.remove_prefix(dot + 1);
    }
  }
  const std::string s(service), m(method);
  rpc_requests_.Add({{"service", s}, {"method", m}, {"code", std::string(code)}}).Increment();
  rpc_duration_.Add({{"service", s}, {"method", m}}, DurationBuckets()).Observe(Seconds(took));
}

void ControllerMetrics::StageTook(const std::string& stage, absl::Duration took) {
  stage_duration_.Add({{"stage", stage}}, DurationBuckets()).Observe(Seconds(took));
}

void ControllerMetrics::ReconfigurationFinished(const std::string& outcome, absl::Duration took) {
  reconfigurations_.Add({{"outcome", outcome}}).Increment();
  reconfiguration_duration_.Observe(Seconds(took));
}

void ControllerMetrics::HealEnded(const std::string& outcome, absl::Duration degraded_for) {
  heals_.Add({{"outcome", outcome}}).Increment();
  if (outcome == "healed") heal_duration_.Observe(Seconds(degraded_for));
}

void ControllerMetrics::Released(const std::string& reason) {
  releases_.Add({{"reason", reason}}).Increment();
}

void ControllerMetrics::SwitchCommand(const std::string& switch_id, const std::string& protocol,
                                      const std::string& operation, absl::Duration took,
                                      absl::StatusCode result) {
  const prometheus::Labels labels = {
      {"switch", switch_id}, {"protocol", protocol}, {"operation", operation}};
  switch_commands_.Add(labels).Increment();
  switch_duration_.Add(labels, DurationBuckets()).Observe(Seconds(took));
  if (result != absl::StatusCode::kOk) switch_errors_.Add(labels).Increment();
  const bool unreachable =
      result == absl::StatusCode::kUnavailable || result == absl::StatusCode::kDeadlineExceeded;
  switch_up_.Add({{"switch", switch_id}}).Set(unreachable ? 0 : 1);
}

void ControllerMetrics::SetAgentsConnected(int connected) { agents_connected_.Set(connected); }

void ControllerMetrics::SetAgentHeartbeatInterval(absl::Duration interval) {
  agent_heartbeat_interval_.Set(absl::ToDoubleSeconds(interval));
}

void ControllerMetrics::LinkRetrains(const std::string& outcome, int count) {
  if (count > 0) link_retrains_.Add({{"outcome", outcome}}).Increment(count);
}

void ControllerMetrics::PortRxPower(const std::string& host, const std::string& onic_serial,
                                    uint32_t port, double dbm) {
  // Add and Remove of one series must not interleave: a Remove frees the gauge another
  // caller's Add returned.
  absl::MutexLock lock(&power_mu_);
  prometheus::Gauge& gauge =
      port_rx_power_.Add({{"host", host}, {"onic", onic_serial}, {"port", absl::StrCat(port)}});
  // A dark port (no circuit, or quiesced) has no power to show; a series at -99.99 dBm would
  // read as a failing receiver on every idle port.
  if (dbm <= kNoLightDbm) {
    port_rx_power_.Remove(&gauge);
  } else {
    gauge.Set(dbm);
  }
}

void ControllerMetrics::ReconcileRun(const std::string& trigger) {
  reconcile_runs_.Add({{"trigger", trigger}}).Increment();
}

void ControllerMetrics::AuthRefused(const std::string& reason) {
  auth_refused_.Add({{"reason", reason}}).Increment();
}

void ControllerMetrics::AuthDenied(const std::string& role, const std::string& permission) {
  auth_denied_.Add({{"role", role}, {"permission", permission}}).Increment();
}

void ControllerMetrics::AuthReloaded(const std::string& result) {
  auth_reloads_.Add({{"result", result}}).Increment();
}

void ControllerMetrics::Drift(const std::string& kind, int found, int repaired) {
  if (found > 0) drift_found_.Add({{"kind", kind}}).Increment(found);
  if (repaired > 0) drift_repaired_.Add({{"kind", kind}}).Increment(repaired);
}

void ControllerMetrics::QueueRefused(const std::string& queue) {
  queue_refused_.Add({{"queue", queue}}).Increment();
}

void ControllerMetrics::AdmissionConflict(const std::string& conflict, const std::string& outcome) {
  admission_conflicts_.Add({{"conflict", conflict}, {"outcome", outcome}}).Increment();
}

void ControllerMetrics::RetentionPassed(const store::RetentionPass& pass) {
  if (pass.events_pruned > 0) pruned_rows_.Add({{"kind", "events"}}).Increment(pass.events_pruned);
  if (pass.allocations_pruned > 0) {
    pruned_rows_.Add({{"kind", "allocations"}}).Increment(pass.allocations_pruned);
  }
  retention_passes_.Add({{"outcome", pass.status.ok() ? "ok" : "failed"}}).Increment();
  retention_pass_duration_.Set(Seconds(pass.took));
}

void ControllerMetrics::EtcdCall(const std::string& kind, absl::Duration took, bool ok) {
  etcd_duration_.Add({{"kind", kind}}, DurationBuckets()).Observe(Seconds(took));
  if (!ok) etcd_errors_.Add({{"kind", kind}}).Increment();
}

std::shared_ptr<prometheus::Collectable> NewScrapedGauges(
    std::function<std::vector<ScrapedGauge>()> read) {
  return std::make_shared<ScrapedGauges>(std::move(read));
}

std::shared_ptr<prometheus::Collectable> NewStoreStateCollector(store::AllocationStore* allocations,
                                                                store::StorageControl* storage) {
  return std::make_shared<StoreStateCollector>(allocations, storage);
}

}  // namespace fleet::metrics
