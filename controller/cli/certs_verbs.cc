#include "controller/cli/certs_verbs.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/pki.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace fleet::cli {
namespace {

constexpr char kCaCertificate[] = "ca.pem";
constexpr char kCaKey[] = "ca.key";
constexpr int64_t kMaxDays = 36500;

const std::vector<std::string>& Subcommands() {
  static const auto* names = new std::vector<std::string>{"init-ca", "issue", "show"};
  return *names;
}

struct CertsArgs {
  std::string out;
  std::string site;
  std::string ca_dir;
  std::string identity;
  std::string server_names;
  int64_t days = 0;  // 0: the subcommand's default (3650 for a CA, 365 for a certificate).
  bool force = false;
};

void DeclareCertsFlags(FlagTable& f, CertsArgs& a) {
  f.File("out", &a.out,
         "init-ca: the CA's folder; issue: the path without extension (writes OUT.pem, OUT.key)");
  f.String("site", &a.site, "init-ca: the site's name, as in spiffe://SITE/... identities");
  f.File("ca-dir", &a.ca_dir, "issue: the folder init-ca wrote (ca.pem and ca.key)");
  f.String("identity", &a.identity,
           "issue: a client identity, spiffe://SITE/ROLE/NAME (ROLE operator, viewer, job or "
           "agent)");
  f.String("server-name", &a.server_names,
           "issue: a server certificate's DNS names and IP addresses, comma-separated");
  // 0 stands for the subcommand's own default, which the help names instead.
  f.Int("days", &a.days, "validity in days (default 3650 for a CA, 365 for a certificate)",
        /*shown_default=*/"");
  f.Bool("force", &a.force, "issue: replace OUT.pem and OUT.key when they exist (a CA never is)");
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

int Refused(const Session& s, const absl::Status& status) { return s.Failed(ToGrpcStatus(status)); }

absl::Status CheckDays(int64_t days) {
  if (days >= 0 && days <= kMaxDays) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--days: ", days, " is not between 1 and ", kMaxDays));
}

// Refuses to overwrite `paths` unless `force`.
absl::Status CheckFree(const std::vector<std::string>& paths, bool force) {
  for (const std::string& path : paths) {
    std::error_code error;
    if (force || !std::filesystem::exists(path, error)) continue;
    return absl::AlreadyExistsError(absl::StrCat(path, " exists; give --force to replace it"));
  }
  return absl::OkStatus();
}

// Writes the key first and the certificate second, so a reader that sees the new certificate
// finds the key that goes with it.
absl::Status WritePair(const pki::KeyAndCertificate& pair, const std::string& certificate_path,
                       const std::string& key_path) {
  if (absl::Status s = pki::WritePemFile(key_path, pair.private_key_pem, 0600); !s.ok()) return s;
  return pki::WritePemFile(certificate_path, pair.certificate_pem, 0644);
}

// A CA's pair is written only where there is none, even against another init-ca running at
// the same moment: certificates a CA issued would not verify against one made anew. A key left
// without its certificate is taken back.
absl::Status WriteNewCa(const pki::KeyAndCertificate& ca, const std::string& dir,
                        const std::string& certificate_path, const std::string& key_path) {
  absl::Status key = pki::WriteNewPemFile(key_path, ca.private_key_pem, 0600);
  if (key.code() == absl::StatusCode::kAlreadyExists) {
    return absl::AlreadyExistsError(absl::StrCat(
        dir, " already holds a CA (", kCaKey,
        "); a CA is never replaced: give another --out, or remove the folder yourself"));
  }
  if (!key.ok()) return key;
  absl::Status certificate = pki::WriteNewPemFile(certificate_path, ca.certificate_pem, 0644);
  if (!certificate.ok()) unlink(key_path.c_str());
  return certificate;
}

// The site a CA made by init-ca serves ("FLEET site CA SITE"), or "" for another CA.
std::string SiteOf(const std::string& ca_certificate_pem) {
  absl::StatusOr<pki::PeerCertificate> ca = pki::ReadCertificate(ca_certificate_pem, "CA");
  if (!ca.ok()) return "";
  absl::string_view name = ca->common_name;
  return absl::ConsumePrefix(&name, "FLEET site CA ") ? std::string(name) : "";
}

int InitCa(const Session& s, const CertsArgs& a) {
  if (a.out.empty() || a.site.empty()) {
    return UsageError(*s.err, "certs", "certs init-ca needs --out DIR and --site SITE");
  }
  if (!a.identity.empty() || !a.server_names.empty() || !a.ca_dir.empty()) {
    return UsageError(*s.err, "certs",
                      "certs init-ca takes --out, --site and --days; --identity, --server-name "
                      "and --ca-dir are for issue");
  }
  if (absl::Status days = CheckDays(a.days); !days.ok()) return Refused(s, days);
  if (a.force) {
    return UsageError(*s.err, "certs", "certs init-ca never replaces a CA: --force is for issue");
  }
  const std::string certificate_path = (std::filesystem::path(a.out) / kCaCertificate).string();
  const std::string key_path = (std::filesystem::path(a.out) / kCaKey).string();
  std::error_code error;
  std::filesystem::create_directories(a.out, error);
  if (error) {
    return Refused(
        s, absl::InternalError(absl::StrCat("cannot make folder ", a.out, ": ", error.message())));
  }
  const absl::Time now = s.clock->Now();
  absl::StatusOr<pki::KeyAndCertificate> ca =
      pki::MakeCa({.common_name = absl::StrCat("FLEET site CA ", a.site),
                   .not_before = now - absl::Minutes(5),
                   .not_after = now + absl::Hours(24) * (a.days > 0 ? a.days : 3650)});
  if (!ca.ok()) return Refused(s, ca.status());
  if (absl::Status written = WriteNewCa(*ca, a.out, certificate_path, key_path); !written.ok()) {
    return Refused(s, written);
  }
  *s.out << "CA for site " << a.site << ": " << certificate_path << " (give it to fleetd, agents "
         << "and clients), " << key_path << " (0600; keep it off fleetd's host)\n";
  return kExitOk;
}

// The identity's request: CN ROLE/NAME, the URI as the one SAN.
absl::StatusOr<pki::CertificateRequest> ClientRequest(const std::string& identity) {
  absl::string_view rest = identity;
  if (!absl::ConsumePrefix(&rest, "spiffe://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--identity: '", identity, "' is not spiffe://SITE/ROLE/NAME (docs/security.md)"));
  }
  std::vector<std::string> parts = absl::StrSplit(rest, '/');
  if (parts.size() < 3 || parts[0].empty() || parts[1].empty() || parts.back().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--identity: '", identity, "' is not spiffe://SITE/ROLE/NAME (docs/security.md)"));
  }
  const std::string& role = parts[1];
  if (role != "operator" && role != "viewer" && role != "job" && role != "agent") {
    return absl::InvalidArgumentError(absl::StrCat("--identity: role '", role, "' of '", identity,
                                                   "' is none of operator, viewer, job, agent"));
  }
  pki::CertificateRequest request;
  request.common_name = absl::StrJoin(parts.begin() + 1, parts.end(), "/");
  request.uris = {identity};
  return request;
}

// A server certificate's request: each name a DNS SAN, or an IP SAN when it parses as one; the
// first name is the CN.
absl::StatusOr<pki::CertificateRequest> ServerRequest(const std::string& names) {
  pki::CertificateRequest request;
  request.server = true;
  for (absl::string_view name : absl::StrSplit(names, ',', absl::SkipWhitespace())) {
    const std::string text(absl::StripAsciiWhitespace(name));
    unsigned char address[16];
    if (inet_pton(AF_INET, text.c_str(), address) == 1 ||
        inet_pton(AF_INET6, text.c_str(), address) == 1) {
      request.ip_addresses.push_back(text);
    } else if (text.find_first_of(":/ \t") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--server-name: '", text,
                       "' is neither an IP address nor a host name (no port, path or space)"));
    } else {
      request.dns_names.push_back(text);
    }
    if (request.common_name.empty()) request.common_name = text;
  }
  if (request.common_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--server-name: '", names, "' names no host"));
  }
  return request;
}

int Issue(const Session& s, const CertsArgs& a) {
  if (a.ca_dir.empty() || a.out.empty() || a.identity.empty() == a.server_names.empty()) {
    return UsageError(*s.err, "certs",
                      "certs issue needs --ca-dir DIR, --out PATH and one of --identity URI "
                      "(a client) or --server-name NAMES (fleetd)");
  }
  if (!a.site.empty()) {
    return UsageError(*s.err, "certs", "--site is for init-ca; issue takes the CA's --ca-dir");
  }
  if (absl::EndsWith(a.out, ".pem") || absl::EndsWith(a.out, ".key")) {
    return UsageError(*s.err, "certs",
                      absl::StrCat("--out '", a.out,
                                   "' is the path without extension: issue writes OUT.pem and "
                                   "OUT.key"));
  }
  if (absl::Status days = CheckDays(a.days); !days.ok()) return Refused(s, days);
  absl::StatusOr<pki::CertificateRequest> request =
      a.identity.empty() ? ServerRequest(a.server_names) : ClientRequest(a.identity);
  if (!request.ok()) return Refused(s, request.status());

  pki::KeyAndCertificate ca;
  const std::filesystem::path dir(a.ca_dir);
  absl::StatusOr<std::string> ca_certificate =
      pki::ReadPemFile((dir / kCaCertificate).string(), "CA certificate");
  if (!ca_certificate.ok()) return Refused(s, ca_certificate.status());
  absl::StatusOr<std::string> ca_key = pki::ReadPemFile((dir / kCaKey).string(), "CA key");
  if (!ca_key.ok()) return Refused(s, ca_key.status());
  ca.certificate_pem = *std::move(ca_certificate);
  ca.private_key_pem = *std::move(ca_key);
  if (!a.identity.empty()) {
    // spiffe://SITE/...: a CA made for another site would issue an identity no policy grants.
    const std::string site = SiteOf(ca.certificate_pem);
    absl::string_view rest = a.identity;
    absl::ConsumePrefix(&rest, "spiffe://");
    const absl::string_view identity_site = rest.substr(0, rest.find('/'));
    if (!site.empty() && identity_site != site) {
      return Refused(s, absl::InvalidArgumentError(absl::StrCat(
                            "--identity: site '", identity_site, "' of '", a.identity,
                            "' is not the site of the CA in ", a.ca_dir, " ('", site, "')")));
    }
  }

  const std::string certificate_path = a.out + ".pem";
  const std::string key_path = a.out + ".key";
  if (absl::Status free = CheckFree({certificate_path, key_path}, a.force); !free.ok()) {
    return Refused(s, free);
  }
  const absl::Time now = s.clock->Now();
  request->not_before = now - absl::Minutes(5);
  request->not_after = now + absl::Hours(24) * (a.days > 0 ? a.days : 365);
  absl::StatusOr<pki::KeyAndCertificate> issued = pki::Issue(ca, *request);
  if (!issued.ok()) return Refused(s, issued.status());
  if (absl::Status written = WritePair(*issued, certificate_path, key_path); !written.ok()) {
    return Refused(s, written);
  }
  *s.out << (request->server ? "server" : "client") << " certificate " << request->common_name
         << " until " << Rfc3339(request->not_after) << ": " << certificate_path << ", " << key_path
         << " (0600)\n";
  return kExitOk;
}

int Show(const Session& s, const std::string& path) {
  absl::StatusOr<std::string> pem = pki::ReadPemFile(path, "certificate");
  if (!pem.ok()) return Refused(s, pem.status());
  absl::StatusOr<pki::PeerCertificate> read = pki::ReadCertificate(*pem, path);
  if (!read.ok()) return Refused(s, read.status());
  const pki::PeerCertificate& c = *read;
  const absl::Time now = s.clock->Now();
  const char* validity = now < c.not_before  ? "not yet valid"
                         : now > c.not_after ? "expired"
                                             : "valid";
  nlohmann::ordered_json json = {{"subject", c.common_name},
                                 {"issuer", c.issuer},
                                 {"ca", c.ca},
                                 {"uris", c.uris},
                                 {"dns_names", c.dns_names},
                                 {"ip_addresses", c.ip_addresses},
                                 {"not_before", Rfc3339(c.not_before)},
                                 {"not_after", Rfc3339(c.not_after)},
                                 {"validity", validity},
                                 {"sha256", c.sha256}};
  switch (s.format) {
    case OutputFormat::kJson:
      *s.out << json.dump(2) << "\n";
      return kExitOk;
    case OutputFormat::kYaml: {
      YAML::Emitter yaml;
      yaml << YAML::BeginMap;
      for (const auto& [key, value] : json.items()) {
        yaml << YAML::Key << key << YAML::Value;
        if (value.is_array()) {
          yaml << YAML::Flow << value.get<std::vector<std::string>>();
        } else if (value.is_boolean()) {
          yaml << value.get<bool>();
        } else {
          yaml << value.get<std::string>();
        }
      }
      yaml << YAML::EndMap;
      *s.out << yaml.c_str() << "\n";
      return kExitOk;
    }
    case OutputFormat::kTable:
    case OutputFormat::kDot:  // Refused for this verb before it runs (ApplyGlobalFlags).
      break;
  }
  auto list = [](const std::vector<std::string>& names) {
    return names.empty() ? std::string("-") : absl::StrJoin(names, ", ");
  };
  *s.out << "Subject:   " << (c.common_name.empty() ? "-" : c.common_name)
         << (c.ca ? " (a CA)" : "") << "\n"
         << "Issuer:    " << c.issuer << "\n"
         << "URIs:      " << list(c.uris) << "\n"
         << "DNS names: " << list(c.dns_names) << "\n"
         << "IPs:       " << list(c.ip_addresses) << "\n"
         << "Valid:     " << Rfc3339(c.not_before) << " to " << Rfc3339(c.not_after) << " ("
         << validity << ")\n"
         << "SHA-256:   " << c.sha256 << "\n";
  return kExitOk;
}

int RunCerts(const Session& s, const CertsArgs& args, const Positional& p) {
  if (p.empty()) {
    return UsageError(
        *s.err, "certs",
        absl::StrCat("certs needs a subcommand: ", absl::StrJoin(Subcommands(), ", ")));
  }
  const std::string& sub = p[0];
  if (sub == "show") {
    if (p.size() != 2) {
      return UsageError(*s.err, "certs",
                        absl::StrCat("certs show needs one FILE, got ", Joined(p)));
    }
    return Show(s, p[1]);
  }
  if (sub != "init-ca" && sub != "issue") {
    return UsageError(*s.err, "certs",
                      absl::StrCat("unknown subcommand '", sub,
                                   "'; subcommands: ", absl::StrJoin(Subcommands(), ", ")));
  }
  if (p.size() != 1) {
    return UsageError(*s.err, "certs",
                      absl::StrCat("certs ", sub, " takes flags only, got ", Joined(p)));
  }
  return sub == "init-ca" ? InitCa(s, args) : Issue(s, args);
}

}  // namespace

Verb CertsVerb() {
  return {"certs",
          "fleetctl certs (init-ca | issue | show FILE) [flags]",
          "Make a site CA and issue or show certificates",
          "Make the site's CA and the certificates fleetd and its callers present (ECDSA\n"
          "P-256, OpenSSL's library). These commands never dial the server.\n\n"
          "  init-ca --out DIR --site SITE          DIR/ca.pem and DIR/ca.key (0600); never\n"
          "                                         replaces an existing CA\n"
          "  issue --ca-dir DIR --identity URI --out PATH\n"
          "                                         a client certificate: PATH.pem, PATH.key;\n"
          "                                         URI is spiffe://SITE/ROLE/NAME\n"
          "  issue --ca-dir DIR --server-name NAMES --out PATH\n"
          "                                         fleetd's certificate for the DNS names and\n"
          "                                         IP addresses it is dialled by\n"
          "  show FILE                              subject, issuer, names, validity\n\n"
          "--days sets the validity; --force lets issue replace PATH.pem and PATH.key.",
          WithFlags<CertsArgs>(DeclareCertsFlags, RunCerts),
          Subcommands(),
          /*dials=*/false};
}

}  // namespace fleet::cli
