// fleetd's gatekeeper under mutual TLS: on every call, before any service sees it, checks the
// client certificate against the site's CA bundle, finds the identity's grant in the access
// policy, and checks that its role holds the permission the method needs (permissions.h).
// A refusal is UNAUTHENTICATED (no, expired, not-yet-valid or foreign certificate) or
// PERMISSION_DENIED (naming the role and the permission missing), counted in metrics. Every
// call is decided on the CA bundle and policy in force when it arrives, on a connection
// opened before a reload too. Nothing is written to the call's AuthContext (gRPC shares it
// among a connection's calls): service/caller asks Resolve for the caller's identity and
// grant, decided again for the service's method on the files in force then, so the role
// and tenants it acts with follow the policy in force as well. Request metadata never names
// the caller.
//
// The handshake itself asks for a client certificate without verifying it, so that a refusal
// reaches the client as a status naming the reason rather than as a failed connection.
#ifndef FLEET_CONTROLLER_AUTH_AUTHENTICATOR_H_
#define FLEET_CONTROLLER_AUTH_AUTHENTICATOR_H_

#include <grpcpp/security/auth_metadata_processor.h>

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/pki.h"
#include "controller/auth/policy.h"
#include "controller/metrics/controller_metrics.h"

namespace fleet::auth {

struct AuthFiles {
  std::string ca;      // PEM bundle of the CAs whose client certificates are accepted.
  std::string policy;  // The access policy (policy.h).
};

class Authenticator final : public grpc::AuthMetadataProcessor, public GrantSource {
 public:
  // Reads both files: NOT_FOUND or INVALID_ARGUMENT naming the file when one cannot be used.
  // `metrics` may be null; `clock` is not owned and tells certificate validity.
  static absl::StatusOr<std::shared_ptr<Authenticator>> Create(const AuthFiles& files,
                                                               metrics::ControllerMetrics* metrics,
                                                               const Clock* clock);

  // Re-reads the CA bundle and the policy. When either cannot be used, the ones in force stay
  // and the error names the file. Calls under way keep the decision they got; every later
  // call, on any connection, gets one from the new files.
  absl::Status Reload() ABSL_LOCKS_EXCLUDED(mu_);
  // One line for `fleetctl health`: the grants in force and when they were loaded.
  std::string Describe() const ABSL_LOCKS_EXCLUDED(mu_);

  struct Decision {
    grpc::Status status;  // OK, UNAUTHENTICATED or PERMISSION_DENIED.
    std::string identity;
    Grant grant;  // When OK and the method is not public.
    bool authenticated = false;
  };
  // The decision for a call of `method` (a full name) with this leaf certificate and chain
  // (PEM; empty when none was presented). Counts refusals. Thread-safe.
  Decision Decide(const std::string& method, const std::string& leaf_pem,
                  const std::string& chain_pem) ABSL_LOCKS_EXCLUDED(mu_);

  // GrantSource: Decide() again, counting nothing.
  Resolved Resolve(const std::string& method, const std::string& leaf_pem,
                   const std::string& chain_pem) override ABSL_LOCKS_EXCLUDED(mu_);

  // grpc::AuthMetadataProcessor: Decide() on the call's path and certificate; `context` is
  // read, never written. Never blocks: certificates already seen are remembered until they
  // expire or the bundle changes.
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  Authenticator(AuthFiles files, metrics::ControllerMetrics* metrics, const Clock* clock)
      : files_(std::move(files)), metrics_(metrics), clock_(clock) {}
  // The certificate's verification, from the cache when it is still valid now.
  pki::Verification Verify(const std::string& leaf_pem, const std::string& chain_pem)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Decide(), counting refusals in `metrics` (null: nowhere).
  Decision Judge(const std::string& method, const std::string& leaf_pem,
                 const std::string& chain_pem, metrics::ControllerMetrics* metrics)
      ABSL_LOCKS_EXCLUDED(mu_);

  const AuthFiles files_;
  metrics::ControllerMetrics* const metrics_;
  const Clock* const clock_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const pki::TrustBundle> bundle_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Policy> policy_ ABSL_GUARDED_BY(mu_);
  absl::Time loaded_at_ ABSL_GUARDED_BY(mu_);
  // Verified leaf certificates (PEM → what they say), for the bundle in force; bounded.
  std::map<std::string, pki::PeerCertificate> verified_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::auth

#endif  // FLEET_CONTROLLER_AUTH_AUTHENTICATOR_H_
