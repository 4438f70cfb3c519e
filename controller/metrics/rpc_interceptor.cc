#include "controller/metrics/rpc_interceptor.h"

#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"

namespace fleet::metrics {
namespace {

using grpc::experimental::InterceptionHookPoints;

class RpcMetrics : public grpc::experimental::Interceptor {
 public:
  RpcMetrics(grpc::experimental::ServerRpcInfo* info, ControllerMetrics* metrics)
      : method_(info->method() != nullptr ? info->method() : "unknown"),
        metrics_(metrics),
        start_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      // gRPC's codes are absl's, value for value; absl names them as gRPC does (NOT_FOUND).
      const auto code = static_cast<absl::StatusCode>(methods->GetSendStatus().error_code());
      metrics_->RpcFinished(method_, absl::StatusCodeToString(code), absl::Now() - start_);
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  ControllerMetrics* const metrics_;
  const absl::Time start_;
};

class RpcMetricsFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsFactory(ControllerMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcMetrics(info, metrics_);
  }

 private:
  ControllerMetrics* const metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewRpcMetricsInterceptor(
    ControllerMetrics* metrics) {
  return std::make_unique<RpcMetricsFactory>(metrics);
}

}  // namespace fleet::metrics
