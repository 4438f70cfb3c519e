#include "controller/auth/authenticator.h"

#include <grpc/grpc_security_constants.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"

namespace fleet::auth {
namespace {

// Enough for every identity of a large site; past it the cache starts over.
constexpr size_t kMaxVerified = 4096;

std::string Property(const grpc::AuthContext& context, const char* name) {
  std::vector<grpc::string_ref> values = context.FindPropertyValues(name);
  return values.empty() ? std::string() : std::string(values.front().data(), values.front().size());
}

}  // namespace

absl::StatusOr<std::shared_ptr<Authenticator>> Authenticator::Create(
    const AuthFiles& files, metrics::ControllerMetrics* metrics, const Clock* clock) {
  std::shared_ptr<Authenticator> a(new Authenticator(files, metrics, clock));
  if (absl::Status loaded = a->Reload(); !loaded.ok()) return loaded;
  return a;
}

absl::Status Authenticator::Reload() {
  absl::Status status = [&]() -> absl::Status {
    absl::StatusOr<std::string> pem = pki::ReadPemFile(files_.ca, "CA bundle");
    if (!pem.ok()) return pem.status();
    absl::StatusOr<pki::TrustBundle> bundle = pki::TrustBundle::FromPem(*pem, files_.ca);
    if (!bundle.ok()) return bundle.status();
    absl::StatusOr<Policy> policy = Policy::ReadFile(files_.policy);
    if (!policy.ok()) return policy.status();
    absl::MutexLock lock(&mu_);
    bundle_ = std::make_shared<const pki::TrustBundle>(std::move(*bundle));
    policy_ = std::make_shared<const Policy>(std::move(*policy));
    loaded_at_ = clock_->Now();
    verified_.clear();
    return absl::OkStatus();
  }();
  if (metrics_ != nullptr) metrics_->AuthReloaded(status.ok() ? "ok" : "failed");
  return status;
}

std::string Authenticator::Describe() const {
  absl::MutexLock lock(&mu_);
  return absl::StrCat("mutual TLS; CA bundle ", files_.ca, ", policy ", files_.policy, " (",
                      policy_->size(), " grants), loaded ", absl::FormatTime(loaded_at_));
}

pki::Verification Authenticator::Verify(const std::string& leaf_pem, const std::string& chain_pem) {
  const absl::Time now = clock_->Now();
  std::shared_ptr<const pki::TrustBundle> bundle;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = verified_.find(leaf_pem); it != verified_.end()) {
      if (now >= it->second.not_before && now <= it->second.not_after) {
        return pki::Verification{pki::CertificateProblem::kNone, "", it->second};
      }
      verified_.erase(it);
    }
    bundle = bundle_;
  }
  pki::Verification v = bundle->Verify(leaf_pem, chain_pem, now);
  if (v.ok()) {
    absl::MutexLock lock(&mu_);
    if (bundle == bundle_) {  // Not across a reload: the new bundle may not trust it.
      if (verified_.size() >= kMaxVerified) verified_.clear();
      verified_[leaf_pem] = v.peer;
    }
  }
  return v;
}

Authenticator::Decision Authenticator::Decide(const std::string& method,
                                              const std::string& leaf_pem,
                                              const std::string& chain_pem) {
  return Judge(method, leaf_pem, chain_pem, metrics_);
}

GrantSource::Resolved Authenticator::Resolve(const std::string& method, const std::string& leaf_pem,
                                             const std::string& chain_pem) {
  const Decision d = Judge(method, leaf_pem, chain_pem, /*metrics=*/nullptr);
  Resolved r;
  r.identity = d.identity;
  if (d.status.ok() && d.authenticated) r.grant = d.grant;
  return r;
}

Authenticator::Decision Authenticator::Judge(const std::string& method, const std::string& leaf_pem,
                                             const std::string& chain_pem,
                                             metrics::ControllerMetrics* metrics) {
  auto refuse = [metrics](grpc::StatusCode code, const std::string& reason, std::string message) {
    if (metrics != nullptr) metrics->AuthRefused(reason);
    return grpc::Status(code, std::move(message));
  };
  Decision d;
  const std::optional<Permission> permission = PermissionOf(method);
  if (permission == Permission::kPublic) {
    d.status = grpc::Status::OK;
    return d;
  }
  const pki::Verification v = Verify(leaf_pem, chain_pem);
  if (!v.ok()) {
    d.status =
        refuse(grpc::StatusCode::UNAUTHENTICATED, pki::ProblemName(v.problem),
               absl::StrCat("fleetd needs a client certificate from the site CA: ", v.detail));
    return d;
  }
  d.identity = IdentityOf(v.peer.uris, v.peer.common_name);
  if (d.identity.empty()) {
    d.status =
        refuse(grpc::StatusCode::UNAUTHENTICATED, "no_identity",
               absl::StrCat("the client certificate names no identity: it needs exactly "
                            "one URI SAN (spiffe://SITE/ROLE/NAME) or, without one, a CN; "
                            "it has ",
                            v.peer.uris.size(), " URIs (", absl::StrJoin(v.peer.uris, ", "), ")"));
    return d;
  }
  d.authenticated = true;
  std::optional<Grant> grant;
  {
    absl::MutexLock lock(&mu_);
    grant = policy_->Resolve(d.identity);
  }
  const std::string needed = permission ? PermissionName(*permission) : "(none: unknown method)";
  if (!grant) {
    if (metrics != nullptr) metrics->AuthDenied("none", needed);
    d.status =
        grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                     absl::StrCat("identity ", d.identity, " holds no role in fleetd's policy; ",
                                  method, " needs permission ", needed));
    return d;
  }
  d.grant = *grant;
  if (!permission || !RoleHas(grant->role, *permission)) {
    if (metrics != nullptr) metrics->AuthDenied(RoleName(grant->role), needed);
    d.status = grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                            absl::StrCat("role ", RoleName(grant->role), " (", d.identity,
                                         ") lacks permission ", needed, " needed by ", method));
    return d;
  }
  d.status = grpc::Status::OK;
  return d;
}

grpc::Status Authenticator::Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                                    OutputMetadata*, OutputMetadata*) {
  auto path = auth_metadata.find(":path");
  const std::string method = path == auth_metadata.end()
                                 ? std::string()
                                 : std::string(path->second.data(), path->second.size());
  Decision d = Decide(method, Property(*context, GRPC_X509_PEM_CERT_PROPERTY_NAME),
                      Property(*context, GRPC_X509_PEM_CERT_CHAIN_PROPERTY_NAME));
  if (!d.status.ok()) {
    FLEET_LOG(DEBUG) << "refused " << method << ": " << d.status.error_message();
  }
  // Nothing is written to `context`: it is the connection's, shared by calls that may run
  // at once, and what it would say could be out of date by the next call.
  return d.status;
}

}  // namespace fleet::auth
