// Counts and times every gRPC call fleetd serves (fleet_rpc_requests_total,
// fleet_rpc_duration_seconds), whichever service and API style handles it.
#ifndef FLEET_CONTROLLER_METRICS_RPC_INTERCEPTOR_H_
#define FLEET_CONTROLLER_METRICS_RPC_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "controller/metrics/controller_metrics.h"

namespace fleet::metrics {

// For ServerBuilder::experimental().SetInterceptorCreators. A call is counted when its status
// is sent; one the client abandons before that is not. `metrics` outlives the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewRpcMetricsInterceptor(
    ControllerMetrics* metrics);

}  // namespace fleet::metrics

#endif  // FLEET_CONTROLLER_METRICS_RPC_INTERCEPTOR_H_
