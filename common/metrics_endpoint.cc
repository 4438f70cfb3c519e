#include "common/metrics_endpoint.h"

#include "absl/strings/str_cat.h"
#include "common/knock_while_stopping.h"

namespace fleet::metrics {

const prometheus::Histogram::BucketBoundaries& DurationBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
  return kBuckets;
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& address, int port,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  try {
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(absl::StrCat(address, ":", port));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ":", port, ": ", e.what()));
  }
  endpoint->collectables_ = std::move(collectables);
  for (const auto& c : endpoint->collectables_) endpoint->exposer_->RegisterCollectable(c);
  const std::vector<int> ports = endpoint->exposer_->GetListeningPorts();
  endpoint->host_ = address;
  endpoint->port_ = ports.empty() ? port : ports[0];
  endpoint->address_ = absl::StrCat(address, ":", endpoint->port_);
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() {
  // civetweb would otherwise take a second to notice it is being stopped.
  StopWhileKnocking(host_, port_, [this] { exposer_.reset(); });
}

}  // namespace fleet::metrics
