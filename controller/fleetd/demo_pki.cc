#include "controller/fleetd/demo_pki.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
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
  ASSIGN_OR_RETURN(d.ca_, pki::MakeCa({.common_name = "FLEET demo CA (throwaway)"}));
  RETURN_IF_ERROR(WritePair(d.pki_dir_ + "/ca", d.ca_));
  d.ca_file_ = d.pki_dir_ + "/ca.pem";

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
