#include "onic_agent/agent_metrics.h"

#include "absl/strings/str_cat.h"
#include "common/metrics_endpoint.h"

namespace fleet::onic_agent {
namespace {

// What backends report for a port without light.
constexpr double kNoLightDbm = -99.0;

}  // namespace

AgentMetrics::AgentMetrics(prometheus::Registry& registry, const std::string& version)
    : connected_(prometheus::BuildGauge()
                     .Name("fleet_agent_connected")
                     .Help("1 while the control stream to fleetd is open")
                     .Register(registry)
                     .Add({})),
      commands_(prometheus::BuildCounter()
                    .Name("fleet_agent_commands_total")
                    .Help("Commands from fleetd, by command and outcome")
                    .Register(registry)),
      retrain_duration_(prometheus::BuildHistogram()
                            .Name("fleet_agent_retrain_duration_seconds")
                            .Help("Time one port took to retrain, light check included")
                            .Register(registry)
                            .Add({}, metrics::DurationBuckets())),
      link_up_(prometheus::BuildGauge()
                   .Name("fleet_agent_link_up")
                   .Help("1 when the port's link is up with light from its expected peer")
                   .Register(registry)),
      rx_power_(prometheus::BuildGauge()
                    .Name("fleet_agent_rx_power_dbm")
                    .Help("Received optical power the agent last read at the port")
                    .Register(registry)) {
  prometheus::BuildGauge()
      .Name("fleet_agent_build_info")
      .Help("fleet-onic-agent build; the value is always 1")
      .Register(registry)
      .Add({{"version", version}})
      .Set(1);
}

AgentMetrics& AgentMetrics::Discarded() {
  static prometheus::Registry* registry = new prometheus::Registry();
  static AgentMetrics* metrics = new AgentMetrics(*registry, "");
  return *metrics;
}

void AgentMetrics::SetConnected(bool connected) { connected_.Set(connected ? 1 : 0); }

void AgentMetrics::CommandFinished(const std::string& command, bool ok) {
  commands_.Add({{"command", command}, {"outcome", ok ? "ok" : "failed"}}).Increment();
}

void AgentMetrics::RetrainTook(absl::Duration took) {
  retrain_duration_.Observe(absl::ToDoubleSeconds(took));
}

void AgentMetrics::PortObserved(const v1::LinkState& link) {
  if (link.onic_serial().empty() || link.port() == 0) return;
  const prometheus::Labels labels = {{"onic", link.onic_serial()},
                                     {"port", absl::StrCat(link.port())}};
  // Add and Remove of one series must not interleave: a Remove frees the gauge another
  // caller's Add returned.
  absl::MutexLock lock(&power_mu_);
  link_up_.Add(labels).Set(link.status() == v1::LINK_STATUS_UP ? 1 : 0);
  prometheus::Gauge& power = rx_power_.Add(labels);
  if (link.rx_power_dbm() <= kNoLightDbm) {
    rx_power_.Remove(&power);
  } else {
    power.Set(link.rx_power_dbm());
  }
}

}  // namespace fleet::onic_agent
