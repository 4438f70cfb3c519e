// Who is calling an RPC, read from its request: the one place fleetd's services learn the
// caller's identity and how long it waits.
#ifndef FLEET_CONTROLLER_SERVICE_CALLER_H_
#define FLEET_CONTROLLER_SERVICE_CALLER_H_

#include <grpcpp/server_context.h>

#include <string>

#include "absl/time/time.h"
#include "controller/engine/engine.h"

namespace fleet::service {

// The request metadata naming the caller, e.g. `operator:alice` or `job:TENANT`.
inline constexpr char kPrincipalMetadata[] = "x-fleet-principal";

// The caller's principal from request metadata, or "anonymous"; recorded with every change.
std::string PrincipalOf(const grpc::ServerContext& context);

// The engine's view of the caller: its principal (and so its tenant), and its RPC's deadline.
engine::Caller CallerOf(const grpc::ServerContext& context);

// When a command done for the caller must be answered: its RPC's deadline, at most `at_most`
// from now.
absl::Time CommandDeadline(const grpc::ServerContext& context, absl::Duration at_most);

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_CALLER_H_
