// What fleetd and the agent share about serving Prometheus metrics: the duration buckets and
// the HTTP endpoint.
#ifndef FLEET_COMMON_METRICS_ENDPOINT_H_
#define FLEET_COMMON_METRICS_ENDPOINT_H_

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/histogram.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fleet::metrics {

// The buckets of every duration histogram, 100 µs to 30 s: sub-millisecond control work,
// tens of milliseconds of switching and 100 ms of link training all resolve.
const prometheus::Histogram::BucketBoundaries& DurationBuckets();

// `/metrics` over HTTP on ADDRESS:PORT (port 0 picks a free one), serving `collectables`,
// which it keeps alive. Stops in milliseconds when destroyed.
class MetricsEndpoint {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& address, int port,
      std::vector<std::shared_ptr<prometheus::Collectable>> collectables);
  ~MetricsEndpoint();

  // HOST:PORT it listens on, the port picked when 0 was asked for.
  const std::string& address() const { return address_; }

 private:
  MetricsEndpoint() = default;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string host_;
  int port_ = 0;
  std::string address_;
};

}  // namespace fleet::metrics

#endif  // FLEET_COMMON_METRICS_ENDPOINT_H_
