#include "controller/service/caller.h"

#include <algorithm>
#include <chrono>

#include "absl/time/clock.h"

namespace fleet::service {

std::string PrincipalOf(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kPrincipalMetadata);
  if (it == metadata.end() || it->second.empty()) return "anonymous";
  return std::string(it->second.data(), it->second.size());
}

engine::Caller CallerOf(const grpc::ServerContext& context) {
  engine::Caller caller = engine::Caller::FromPrincipal(PrincipalOf(context));
  // gRPC gives no deadline as the largest time_point, which absl::FromChrono maps to a time
  // centuries away.
  caller.deadline = absl::FromChrono(context.deadline());
  return caller;
}

absl::Time CommandDeadline(const grpc::ServerContext& context, absl::Duration at_most) {
  absl::Time deadline = absl::Now() + at_most;
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    deadline = std::min(deadline, absl::FromChrono(context.deadline()));
  }
  return deadline;
}

}  // namespace fleet::service
