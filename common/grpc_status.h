// The one place absl::Status and grpc::Status are converted (gRPC 1.51 has no converter).
#ifndef FLEET_COMMON_GRPC_STATUS_H_
#define FLEET_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace fleet {

// Canonical codes share their numbers in both libraries; the message is carried as is.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace fleet

#endif  // FLEET_COMMON_GRPC_STATUS_H_
