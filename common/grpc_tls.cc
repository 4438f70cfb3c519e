#include "common/grpc_tls.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fleet {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", what, " ", path, ": ", std::strerror(errno)));
  }
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path, ": a directory"));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  // An empty file would only fail later, at the handshake, without naming the file.
  if (text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is empty"));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsFiles& files) {
  struct Field {
    const char* name;
    const char* what;
    const std::string& path;
  };
  const Field fields[] = {{"ca", "CA bundle", files.ca},
                          {"cert", "client certificate", files.cert},
                          {"key", "client key", files.key}};
  if (files.insecure) {
    std::vector<std::string> given;
    for (const Field& field : fields) {
      if (!field.path.empty()) given.push_back(absl::StrCat(field.name, " ", field.path));
    }
    if (!given.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("insecure (plaintext) was asked for but TLS files were given (",
                       absl::StrJoin(given, ", "), "): choose one"));
    }
    return grpc::InsecureChannelCredentials();
  }
  for (const Field& field : fields) {
    if (field.path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no ", field.what, " (", field.name,
                       ") given: TLS needs ca, cert and key, or insecure for plaintext"));
    }
  }
  grpc::SslCredentialsOptions options;
  absl::StatusOr<std::string> ca = ReadPem(files.ca, "CA bundle");
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert = ReadPem(files.cert, "client certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(files.key, "client key");
  if (!key.ok()) return key.status();
  options.pem_root_certs = *std::move(ca);
  options.pem_cert_chain = *std::move(cert);
  options.pem_private_key = *std::move(key);
  return grpc::SslCredentials(options);
}

}  // namespace fleet
