#include "controller/cli/leader_endpoint.h"

#include <grpcpp/grpcpp.h>

#include <optional>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/leader_health.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace fleet::cli {

std::vector<std::string> SplitEndpoints(const std::string& server) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(server, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(part));
  }
  if (out.empty()) out.push_back(server);
  return out;
}

std::string ChooseEndpoint(const std::vector<std::string>& endpoints,
                           const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                           absl::Duration timeout) {
  if (endpoints.size() <= 1) return endpoints.empty() ? "" : endpoints.front();
  struct Probe {
    std::unique_ptr<grpc::health::v1::Health::Stub> stub;
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status status;
    bool done = false;
  };
  std::vector<Probe> probes(endpoints.size());
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(kLeaderHealthService);
  absl::Mutex mu;
  size_t pending = endpoints.size();
  const auto deadline = absl::ToChronoTime(absl::Now() + timeout);
  for (size_t i = 0; i < endpoints.size(); ++i) {
    Probe& probe = probes[i];
    probe.stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(endpoints[i], credentials));
    probe.context.set_deadline(deadline);
    probe.stub->async()->Check(&probe.context, &request, &probe.response,
                               [&probe, &mu, &pending](grpc::Status status) {
                                 absl::MutexLock lock(&mu);
                                 probe.status = std::move(status);
                                 probe.done = true;
                                 --pending;
                               });
  }
  {
    // Every call ends by its deadline; the first SERVING in list order does not need the rest,
    // but they are waited for so that none outlives the probes it writes to.
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](size_t* n) { return *n == 0; }, &pending));
  }
  std::optional<size_t> answered;
  for (size_t i = 0; i < probes.size(); ++i) {
    const Probe& probe = probes[i];
    if (!probe.status.ok()) continue;
    if (probe.response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return endpoints[i];
    }
    if (!answered) answered = i;
  }
  return endpoints[answered.value_or(0)];
}

}  // namespace fleet::cli
