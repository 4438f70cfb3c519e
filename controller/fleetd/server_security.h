// How fleetd's gRPC port is secured (docs/security.md): mutual TLS, with the gatekeeper
// (auth/authenticator.h) deciding every call; or, under --insecure only, plaintext.
//
// Rotation without restart: fleetd's own certificate and key are re-read by gRPC when their
// files change (polled every tls_reload_interval); the CA bundle and the policy are re-read
// when their files change too, and at once on Reload() (SIGHUP). A file that cannot be used
// leaves what is in force, logged and counted (fleet_auth_reloads_total{result="failed"}).
#ifndef FLEET_CONTROLLER_FLEETD_SERVER_SECURITY_H_
#define FLEET_CONTROLLER_FLEETD_SERVER_SECURITY_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "controller/auth/authenticator.h"
#include "controller/fleetd/config.h"
#include "controller/metrics/controller_metrics.h"
#include "fleet/v1/admin.pb.h"

namespace fleet::fleetd {

class ServerSecurity {
 public:
  // Reads the TLS files and the policy (config.insecure: none). INVALID_ARGUMENT or NOT_FOUND
  // naming the file that cannot be used. `metrics` and `clock` are not owned.
  static absl::StatusOr<std::unique_ptr<ServerSecurity>> Start(const FleetdConfig& config,
                                                               metrics::ControllerMetrics* metrics,
                                                               const Clock* clock);
  ~ServerSecurity();  // Stops watching the files.

  std::shared_ptr<grpc::ServerCredentials> credentials() const { return credentials_; }
  // The policy in force, which the services ask at every call; null under --insecure.
  auth::GrantSource* grants() const { return authenticator_.get(); }
  // Re-reads the CA bundle and the policy now; what is in force stays when they cannot be
  // used. OK under --insecure.
  absl::Status Reload();
  // The "security" component of fleetd's health: OK under mutual TLS, DEGRADED under
  // --insecure.
  v1::ComponentHealth Health() const;

 private:
  ServerSecurity() = default;
  void WatchFiles(absl::Duration interval);

  bool insecure_ = false;
  std::vector<std::string> watched_;  // The CA bundle and the policy.
  std::shared_ptr<auth::Authenticator> authenticator_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  absl::Notification stop_;
  std::thread watcher_;
};

}  // namespace fleet::fleetd

#endif  // FLEET_CONTROLLER_FLEETD_SERVER_SECURITY_H_
