// Who is calling an RPC, read from its request: the one place fleetd's services learn the
// caller's identity and how long it waits.
//
// Under mutual TLS the gatekeeper (auth/authenticator.h) has already checked the call on the
// policy in force and put the certificate's identity in the connection's AuthContext; the
// role, tenants and host are asked of the policy in force (`grants`) now, at each call, so a
// reload reaches connections already open. Request metadata is ignored. Only on a plaintext server
// (fleetd --insecure) does the caller name itself, in the `x-fleet-principal` metadata:
// `job:TENANT` is a job acting for TENANT, `viewer:NAME` a viewer, `agent:HOST` the agent of HOST,
// anything else (or nothing) an operator, as before there was authentication.
#ifndef FLEET_CONTROLLER_SERVICE_CALLER_H_
#define FLEET_CONTROLLER_SERVICE_CALLER_H_

#include <grpcpp/server_context.h>

#include <string>

#include "absl/time/time.h"
#include "controller/agent_registry/agent_registry.h"
#include "controller/auth/policy.h"
#include "controller/engine/caller.h"

namespace fleet::service {

// The request metadata naming the caller on a plaintext server, e.g. `operator:alice`.
inline constexpr char kPrincipalMetadata[] = "x-fleet-principal";

// The caller's identity, recorded with every change: the certificate's identity under mutual
// TLS (e.g. spiffe://site/operator/alice); on a plaintext server the principal from metadata,
// or "anonymous".
std::string PrincipalOf(const grpc::ServerContext& context);

// The engine's view of the caller: identity, role, tenants (from `grants`, the policy in
// force; null on a plaintext server), and its RPC's deadline. A TLS caller that holds no grant
// (now, or ever) is a job of no tenant: it can see and change nothing.
engine::Caller CallerOf(const grpc::ServerContext& context, const auth::GrantSource* grants);

// The agent stream's caller: its identity and, when authenticated, the one host it may
// register as under `grants` when the stream opens.
agent_registry::AgentPeer AgentPeerOf(const grpc::ServerContext& context,
                                      const auth::GrantSource* grants);

// When a command done for the caller must be answered: its RPC's deadline, at most `at_most`
// from now.
absl::Time CommandDeadline(const grpc::ServerContext& context, absl::Duration at_most);

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_CALLER_H_
