#include "controller/service/caller.h"

#include <grpc/grpc_security_constants.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/match.h"
#include "absl/time/clock.h"

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
  kTls,        // Mutual TLS: the gatekeeper let it in; `grants` decides who it is.
  kPlaintext,  // fleetd --insecure: the caller names itself.
};

// How fleetd serves: with a gatekeeper (`grants`) every call came over mutual TLS and was let
// in by it; without one (--insecure), callers name themselves. Decided by how the server was
// started, never by what a call says of itself.
Transport TransportOf(const auth::GrantSource* grants) {
  return grants != nullptr ? Transport::kTls : Transport::kPlaintext;
}

std::string MetadataPrincipal(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kPrincipalMetadata);
  if (it == metadata.end() || it->second.empty()) return "anonymous";
  return std::string(it->second.data(), it->second.size());
}

std::string First(const std::vector<std::string>& values) {
  return values.empty() ? std::string() : values.front();
}

// The gatekeeper's decision for `method`, taken again now from the connection's certificate
// (none when the call carries no auth context: trusted with nothing).
auth::GrantSource::Resolved Resolve(const grpc::AuthContext* auth, auth::GrantSource* grants,
                                    const std::string& method) {
  if (auth == nullptr) return {};
  return grants->Resolve(method, First(Properties(*auth, GRPC_X509_PEM_CERT_PROPERTY_NAME)),
                         First(Properties(*auth, GRPC_X509_PEM_CERT_CHAIN_PROPERTY_NAME)));
}

std::string IdentityOr(const std::string& identity) {
  return identity.empty() ? std::string("unauthenticated") : identity;
}

}  // namespace

std::string PrincipalOf(const grpc::ServerContextBase& context, auth::GrantSource* grants,
                        const std::string& method) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (TransportOf(grants) == Transport::kTls) {
    return IdentityOr(Resolve(auth.get(), grants, method).identity);
  }
  return MetadataPrincipal(context);
}

engine::Caller CallerOf(const grpc::ServerContextBase& context, auth::GrantSource* grants,
                        const std::string& method) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  engine::Caller caller;
  switch (TransportOf(grants)) {
    case Transport::kTls: {
      auth::GrantSource::Resolved resolved = Resolve(auth.get(), grants, method);
      caller = engine::Caller::Job(IdentityOr(resolved.identity), {});
      if (resolved.grant) {
        caller.role = resolved.grant->role;
        caller.tenants = std::move(resolved.grant->tenants);
      }
      break;
    }
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

agent_registry::AgentPeer AgentPeerOf(const grpc::ServerContextBase& context,
                                      auth::GrantSource* grants) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  agent_registry::AgentPeer peer;
  switch (TransportOf(grants)) {
    case Transport::kTls: {
      auth::GrantSource::Resolved resolved =
          Resolve(auth.get(), grants, "/fleet.v1.AgentService/Connect");
      peer.identity = IdentityOr(resolved.identity);
      // Only an agent grant names a host; anyone else may register as none.
      if (resolved.grant && resolved.grant->role == auth::Role::kAgent) {
        peer.host = resolved.grant->host;
      }
      peer.authenticated = true;
      break;
    }
    case Transport::kPlaintext:
      peer.identity = MetadataPrincipal(context);
      break;
  }
  return peer;
}

absl::Time CommandDeadline(const grpc::ServerContextBase& context, absl::Duration at_most) {
  absl::Time deadline = absl::Now() + at_most;
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    deadline = std::min(deadline, absl::FromChrono(context.deadline()));
  }
  return deadline;
}

}  // namespace fleet::service
