// Who is calling an RPC, read from its request: the one place fleetd's services learn the
// caller's identity and how long it waits.
//
// Under mutual TLS the gatekeeper (auth/authenticator.h) has already let the call in; the
// identity and grant the services act on are decided again here, for the service's own
// method, on the CA bundle and policy in force now (`grants`), from the client certificate
// on the connection: nothing about the caller is kept on the connection, so a reload
// reaches connections already open, and a grant changed between the gatekeeper and the
// service gives no more than the new policy allows the method. Request metadata is ignored.
// Only on a plaintext server (fleetd --insecure, `grants` null) does the caller name itself,
// in the `x-fleet-principal` metadata: `job:TENANT` is a job acting for TENANT,
// `viewer:NAME` a viewer, `agent:HOST` the agent of HOST, anything else (or nothing) an
// operator, as before there was authentication.
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

// The caller of `method` (a full name, /fleet.v1.Service/Method), recorded with every change:
// the certificate's identity under mutual TLS (e.g. spiffe://site/operator/alice;
// "unauthenticated" when it no longer verifies); on a plaintext server the principal from
// metadata, or "anonymous".
std::string PrincipalOf(const grpc::ServerContextBase& context, auth::GrantSource* grants,
                        const std::string& method);

// The engine's view of the caller of `method`: identity, role, tenants, and its RPC's
// deadline. A TLS caller whose grant does not hold the method's permission now (revoked, or
// demoted, since the gatekeeper let it in) is a job of no tenant: it can see and change
// nothing.
engine::Caller CallerOf(const grpc::ServerContextBase& context, auth::GrantSource* grants,
                        const std::string& method);

// The agent stream's caller: its identity and, when authenticated, the one host it may
// register as under `grants` when the stream opens (none once it holds no agent grant).
agent_registry::AgentPeer AgentPeerOf(const grpc::ServerContextBase& context,
                                      auth::GrantSource* grants);

// When a command done for the caller must be answered: its RPC's deadline, at most `at_most`
// from now.
absl::Time CommandDeadline(const grpc::ServerContextBase& context, absl::Duration at_most);

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_CALLER_H_
