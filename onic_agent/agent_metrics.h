// The agent's Prometheus metrics (docs/metrics.md, fleet-onic-agent table). Thread-safe.
#ifndef FLEET_ONIC_AGENT_AGENT_METRICS_H_
#define FLEET_ONIC_AGENT_AGENT_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fleet/v1/agent.pb.h"

namespace fleet::onic_agent {

class AgentMetrics {
 public:
  // Registers every family (and fleet_agent_build_info at 1) on `registry`, which must
  // outlive this object.
  AgentMetrics(prometheus::Registry& registry, const std::string& version);

  // An instance on a registry nobody serves, for agents run without an endpoint.
  static AgentMetrics& Discarded();

  void SetConnected(bool connected);
  // A command from fleetd finished; `command` is quiesce, retrain, read_port or blink.
  void CommandFinished(const std::string& command, bool ok);
  void RetrainTook(absl::Duration took);
  // The port's state after a command or a monitor read: up, and the rx power when there is
  // light (a dark port has no power series).
  void PortObserved(const v1::LinkState& link);

 private:
  prometheus::Gauge& connected_;
  prometheus::Family<prometheus::Counter>& commands_;
  prometheus::Histogram& retrain_duration_;
  prometheus::Family<prometheus::Gauge>& link_up_;
  absl::Mutex power_mu_;  // Serializes updates of rx_power_, which removes series.
  prometheus::Family<prometheus::Gauge>& rx_power_;
};

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_AGENT_METRICS_H_
