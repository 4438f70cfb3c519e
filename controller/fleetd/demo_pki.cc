#include "controller/fleetd/demo_pki.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace fleet::fleetd {
namespace {

// Written from scratch each start: the demo's identities and their roles.
constexpr char kDemoPolicy[] =
    R"(# The demo's access policy (fleetd --demo writes it; see docs/security.md).
grants:
  - identity: spiffe://demo.fleet/operator/*
    role: operator
  - identity: spiffe://demo.fleet/viewer/*
    role: viewer
  - identity: spiffe://demo.fleet/job/*
    role: job            # .../job/team-a acts for tenant team-a
  - identity: spiffe://demo.fleet/agent/*
    role: agent          # .../agent/server1 is the agent of server1
)";

absl::Status WritePair(const std::string& prefix, const pki::KeyAndCertificate& pair) {
  RETURN_IF_ERROR(pki::WritePemFile(prefix + ".pem", pair.certificate_pem, 0644));
  return pki::WritePemFile(prefix + ".key", pair.private_key_pem, 0600);
}

// The CA a demo made before in `pki_dir`, when it can still sign for a while: a restart on
// the same state directory keeps it, so certificates issued from it (`fleetctl certs issue
// --ca-dir STATE/pki`) go on working. NOT_FOUND when there is none; another error, naming
// the file and why, when the one there cannot be used.
absl::StatusOr<pki::KeyAndCertificate> KeptCa(const std::string& pki_dir) {
  const std::string cert_file = pki_dir + "/ca.pem";
  const std::string key_file = pki_dir + "/ca.key";
  if (!std::filesystem::exists(cert_file) && !std::filesystem::exists(key_file)) {
    return absl::NotFoundError("no demo CA yet");
  }
  pki::KeyAndCertificate ca;
  absl::StatusOr<std::string> cert = pki::ReadPemFile(cert_file, "the demo CA");
  absl::StatusOr<std::string> key = pki::ReadPemFile(key_file, "the demo CA's key");
  for (const absl::StatusOr<std::string>* read : {&cert, &key}) {
    if (!read->ok()) return absl::FailedPreconditionError(read->status().message());
  }
  ca.certificate_pem = *std::move(cert);
  ca.private_key_pem = *std::move(key);
  ASSIGN_OR_RETURN(const pki::PeerCertificate read,
                   pki::ReadCertificate(ca.certificate_pem, cert_file));
  if (!read.ca) return absl::FailedPreconditionError(absl::StrCat(cert_file, " is not a CA"));
  // It must outlive the certificates issued from it now (a year).
  const absl::Time needed = absl::Now() + absl::Hours(24 * 366);
  if (read.not_after < needed) {
    return absl::FailedPreconditionError(absl::StrCat(
        cert_file, " expires at ", absl::FormatTime(read.not_after), ", within a year"));
  }
  // Issuing proves the key is the certificate's.
  pki::CertificateRequest probe;
  probe.common_name = "probe";
  if (absl::Status signs = pki::Issue(ca, probe).status(); !signs.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(key_file, " cannot sign for ", cert_file, ": ", signs.message()));
  }
  return ca;
}

}  // namespace

absl::StatusOr<DemoPki> DemoPki::Make(FleetdConfig& config) {
  DemoPki d;
  d.state_dir_ = config.state_dir;
  d.pki_dir_ = (std::filesystem::path(config.state_dir) / "pki").string();
  std::error_code error;
  std::filesystem::create_directories(d.pki_dir_, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", d.pki_dir_, ": ", error.message()));
  }
  d.ca_file_ = d.pki_dir_ + "/ca.pem";
  absl::StatusOr<pki::KeyAndCertificate> kept = KeptCa(d.pki_dir_);
  if (kept.ok()) {
    d.ca_ = *std::move(kept);
  } else {
    if (!absl::IsNotFound(kept.status())) {
      FLEET_LOG(WARNING) << "demo: " << kept.status().message()
                         << "; making a new CA: certificates issued from the old one stop "
                            "working";
    }
    ASSIGN_OR_RETURN(d.ca_, pki::MakeCa({.common_name = "FLEET demo CA (throwaway)"}));
    RETURN_IF_ERROR(WritePair(d.pki_dir_ + "/ca", d.ca_));
  }

  pki::CertificateRequest server;
  server.common_name = "fleetd";
  server.uris = {absl::StrCat("spiffe://", kDemoSite, "/fleetd")};
  server.dns_names = {"localhost"};
  server.ip_addresses = {"127.0.0.1", "::1"};
  if (config.listen_address != "127.0.0.1" && config.listen_address != "0.0.0.0" &&
      config.listen_address != "::" && !config.listen_address.empty()) {
    const bool ip =
        config.listen_address.find_first_not_of("0123456789.:abcdef") == std::string::npos;
    (ip ? server.ip_addresses : server.dns_names).push_back(config.listen_address);
  }
  server.server = true;
  ASSIGN_OR_RETURN(pki::KeyAndCertificate fleetd, pki::Issue(d.ca_, server));
  RETURN_IF_ERROR(WritePair(d.pki_dir_ + "/fleetd", fleetd));
  RETURN_IF_ERROR(d.IssueClient("operator/demo", "operator"));
  RETURN_IF_ERROR(d.IssueClient("viewer/demo", "viewer"));
  RETURN_IF_ERROR(d.IssueClient("job/team-a", "job-team-a"));
  RETURN_IF_ERROR(pki::WritePemFile(d.pki_dir_ + "/policy.yaml", kDemoPolicy, 0644));

  config.tls_ca_file = d.ca_file_;
  config.tls_cert_file = d.pki_dir_ + "/fleetd.pem";
  config.tls_key_file = d.pki_dir_ + "/fleetd.key";
  config.policy_file = d.pki_dir_ + "/policy.yaml";
  return d;
}

absl::Status DemoPki::IssueClient(const std::string& identity, const std::string& name) const {
  pki::CertificateRequest request;
  request.common_name = identity;
  request.uris = {absl::StrCat("spiffe://", kDemoSite, "/", identity)};
  ASSIGN_OR_RETURN(pki::KeyAndCertificate pair, pki::Issue(ca_, request));
  return WritePair(absl::StrCat(pki_dir_, "/", name), pair);
}

absl::Status DemoPki::IssueEtcd() const {
  pki::CertificateRequest members;
  members.common_name = "etcd";
  members.dns_names = {"localhost"};
  members.ip_addresses = {"127.0.0.1"};
  members.server = true;
  ASSIGN_OR_RETURN(pki::KeyAndCertificate pair, pki::Issue(ca_, members));
  RETURN_IF_ERROR(WritePair(pki_dir_ + "/etcd-server", pair));
  return IssueClient("fleetd/etcd", "etcd-client");
}

absl::StatusOr<std::string> DemoPki::IssueAgent(const std::string& place) const {
  RETURN_IF_ERROR(IssueClient("agent/" + place, "agent-" + place));
  return absl::StrCat(pki_dir_, "/agent-", place);
}

absl::StatusOr<std::string> DemoPki::WriteFleetctlConfig(const std::string& grpc_address) const {
  std::string text = absl::StrCat(
      "# fleetctl contexts for this demo (fleetd --demo writes it): export FLEET_CONFIG=<this "
      "file>.\n# Paths are relative to this file.\ncurrent-context: demo\ncontexts:\n");
  for (const auto& [context, who] : {std::pair<const char*, const char*>{"demo", "operator"},
                                     {"demo-job", "job-team-a"},
                                     {"demo-viewer", "viewer"}}) {
    absl::StrAppend(&text, "  - name: ", context, "\n    server: ", grpc_address,
                    "\n    ca: pki/ca.pem\n    cert: pki/", who, ".pem\n    key: pki/", who,
                    ".key\n");
  }
  const std::string path = state_dir_ + "/fleetctl.yaml";
  RETURN_IF_ERROR(pki::WritePemFile(path, text, 0600));
  return path;
}

}  // namespace fleet::fleetd
