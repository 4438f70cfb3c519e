#include "controller/service/caller.h"

#include <grpc/grpc_security_constants.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "controller/auth/properties.h"

namespace fleet::service {
namespace {

std::vector<std::string> Properties(const grpc::AuthContext& auth, const char* name) {
  std::vector<std::string> out;
  for (const grpc::string_ref& v : auth.FindPropertyValues(name))
    out.emplace_back(v.data(), v.size());
  return out;
}

// How the call reached fleetd.
enum class Transport {
  kAuthenticated,  // Mutual TLS, passed the gatekeeper: the grant is in the AuthContext.
  kUnchecked,      // TLS without the gatekeeper's mark: trusted with nothing.
  kPlaintext,      // fleetd --insecure: the caller names itself.
};

Transport TransportOf(const std::shared_ptr<const grpc::AuthContext>& auth) {
  if (auth == nullptr) return Transport::kPlaintext;  // A context not from a real call.
  if (!auth->FindPropertyValues(auth::kIdentityProperty).empty()) return Transport::kAuthenticated;
  std::vector<std::string> security = Properties(*auth, GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  return !security.empty() && security.front() == GRPC_SSL_TRANSPORT_SECURITY_TYPE
             ? Transport::kUnchecked
             : Transport::kPlaintext;
}

std::string MetadataPrincipal(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kPrincipalMetadata);
  if (it == metadata.end() || it->second.empty()) return "anonymous";
  return std::string(it->second.data(), it->second.size());
}

std::string First(const std::vector<std::string>& values) {
  return values.empty() ? std::string() : values.front();
}

std::optional<auth::Grant> GrantOf(const std::string& identity, const auth::GrantSource* grants) {
  if (grants == nullptr) return std::nullopt;
  return grants->GrantOf(identity);
}

}  // namespace

std::string PrincipalOf(const grpc::ServerContext& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  switch (TransportOf(auth)) {
    case Transport::kAuthenticated:
      return First(Properties(*auth, auth::kIdentityProperty));
    case Transport::kUnchecked:
      return "unauthenticated";
    case Transport::kPlaintext:
      break;
  }
  return MetadataPrincipal(context);
}

engine::Caller CallerOf(const grpc::ServerContext& context, const auth::GrantSource* grants) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  engine::Caller caller;
  switch (TransportOf(auth)) {
    case Transport::kAuthenticated: {
      const std::string identity = First(Properties(*auth, auth::kIdentityProperty));
      // Revoked since the gatekeeper let the call in: a job of no tenant, as the header says.
      caller = engine::Caller::Job(identity, {});
      if (std::optional<auth::Grant> grant = GrantOf(identity, grants)) {
        caller.role = grant->role;
        caller.tenants = std::move(grant->tenants);
      }
      break;
    }
    case Transport::kUnchecked:
      caller = engine::Caller::Job("unauthenticated", {});
      break;
    case Transport::kPlaintext: {
      caller.principal = MetadataPrincipal(context);
      const std::string& p = caller.principal;
      if (absl::StartsWith(p, "job:")) {
        caller.role = auth::Role::kJob;
        caller.tenants = {p.substr(4)};
      } else if (absl::StartsWith(p, "viewer:")) {
        caller.role = auth::Role::kViewer;
      } else if (absl::StartsWith(p, "agent:")) {
        caller.role = auth::Role::kAgent;
      }
      break;
    }
  }
  // gRPC gives no deadline as the largest time_point, which absl::FromChrono maps to a time
  // centuries away.
  caller.deadline = absl::FromChrono(context.deadline());
  return caller;
}

agent_registry::AgentPeer AgentPeerOf(const grpc::ServerContext& context,
                                      const auth::GrantSource* grants) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  agent_registry::AgentPeer peer;
  switch (TransportOf(auth)) {
    case Transport::kAuthenticated: {
      peer.identity = First(Properties(*auth, auth::kIdentityProperty));
      std::optional<auth::Grant> grant = GrantOf(peer.identity, grants);
      if (grant && grant->role == auth::Role::kAgent) peer.host = grant->host;
      peer.authenticated = true;
      break;
    }
    case Transport::kUnchecked:
      peer.identity = "unauthenticated";
      peer.authenticated = true;  // And no host: it may register as none.
      break;
    case Transport::kPlaintext:
      peer.identity = MetadataPrincipal(context);
      break;
  }
  return peer;
}

absl::Time CommandDeadline(const grpc::ServerContext& context, absl::Duration at_most) {
  absl::Time deadline = absl::Now() + at_most;
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    deadline = std::min(deadline, absl::FromChrono(context.deadline()));
  }
  return deadline;
}

}  // namespace fleet::service
