#include "controller/fleetd/server_security.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <sys/stat.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/thread_name.h"

namespace fleet::fleetd {
namespace {

// When a file last changed, to notice a rotation; zero when it cannot be read.
std::pair<int64_t, int64_t> Stamp(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {0, 0};
  return {static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_size)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerSecurity>> ServerSecurity::Start(
    const FleetdConfig& config, metrics::ControllerMetrics* metrics, const Clock* clock) {
  std::unique_ptr<ServerSecurity> s(new ServerSecurity());
  if (config.insecure) {
    s->insecure_ = true;
    s->credentials_ = grpc::InsecureServerCredentials();
    return s;
  }
  // gRPC reads these itself, and would only log a file it cannot use: read first, so fleetd
  // does not start without them.
  for (const auto& [path, what] :
       {std::pair<std::string, const char*>{config.tls_cert_file, "tls_cert_file"},
        {config.tls_key_file, "tls_key_file"}}) {
    absl::StatusOr<std::string> pem = pki::ReadPemFile(path, what);
    if (!pem.ok()) return pem.status();
    if (pem->find("-----BEGIN ") == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": not PEM"));
    }
  }
  absl::StatusOr<std::shared_ptr<auth::Authenticator>> authenticator =
      auth::Authenticator::Create({config.tls_ca_file, config.policy_file}, metrics, clock);
  if (!authenticator.ok()) return authenticator.status();
  s->authenticator_ = *authenticator;

  const int refresh =
      static_cast<int>(std::max<int64_t>(1, absl::ToInt64Seconds(config.tls_reload_interval)));
  auto certificates = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      config.tls_key_file, config.tls_cert_file, refresh);
  grpc::experimental::TlsServerCredentialsOptions options(certificates);
  options.watch_identity_key_cert_pairs();
  // The certificate is asked for but checked by the gatekeeper, so that a refusal is a status
  // naming why (expired, another CA, none) rather than a failed handshake.
  options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_BUT_DONT_VERIFY);
  s->credentials_ = grpc::experimental::TlsServerCredentials(options);
  s->credentials_->SetAuthMetadataProcessor(s->authenticator_);
  s->watched_ = {config.tls_ca_file, config.policy_file};
  s->watcher_ = std::thread([raw = s.get(), interval = config.tls_reload_interval] {
    NameThisThread("fleet-tls-watch");
    raw->WatchFiles(interval);
  });
  return s;
}

ServerSecurity::~ServerSecurity() {
  stop_.Notify();
  if (watcher_.joinable()) watcher_.join();
}

absl::Status ServerSecurity::Reload() {
  if (insecure_) return absl::OkStatus();
  absl::Status status = authenticator_->Reload();
  if (status.ok()) {
    FLEET_LOG(INFO) << "reloaded the CA bundle and the policy: " << authenticator_->Describe();
  } else {
    FLEET_LOG(ERROR) << "cannot reload; the CA bundle and the policy in force stay: " << status;
  }
  return status;
}

void ServerSecurity::WatchFiles(absl::Duration interval) {
  std::map<std::string, std::pair<int64_t, int64_t>> seen;
  for (const std::string& path : watched_) seen[path] = Stamp(path);
  while (!stop_.WaitForNotificationWithTimeout(interval)) {
    bool changed = false;
    for (const std::string& path : watched_) {
      const auto now = Stamp(path);
      changed |= now != seen[path];
      seen[path] = now;
    }
    if (changed) (void)Reload();
  }
}

v1::ComponentHealth ServerSecurity::Health() const {
  v1::ComponentHealth c;
  c.set_name("security");
  if (insecure_) {
    c.set_state(v1::ComponentHealth::STATE_DEGRADED);
    c.set_detail(
        "INSECURE: plaintext gRPC (fleetd --insecure); callers name themselves and anyone who "
        "reaches the port may do anything");
  } else {
    c.set_state(v1::ComponentHealth::STATE_OK);
    c.set_detail(authenticator_->Describe());
  }
  return c;
}

}  // namespace fleet::fleetd
