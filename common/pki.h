// The site's certificates, made and checked with OpenSSL's library (libssl-dev): a site CA,
// the certificates it issues (fleetd's and the switch emulator's server certificates, and the
// client certificates of agents, operators, viewers and jobs), and the check fleetd makes of
// a client's certificate on every call. Everything is PEM text; keys are ECDSA P-256.
//
// Identities are URI SANs of the form spiffe://SITE/ROLE/NAME (docs/security.md); this file
// knows nothing of roles: it makes and reads certificates.
#ifndef FLEET_COMMON_PKI_H_
#define FLEET_COMMON_PKI_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fleet::pki {

// A certificate and its private key, PEM. For a CA, the pair that signs.
struct KeyAndCertificate {
  std::string certificate_pem;
  std::string private_key_pem;
};

struct CaRequest {
  std::string common_name;                                 // e.g. "FLEET site CA demo.fleet".
  absl::Time not_before = absl::Now() - absl::Minutes(5);  // Some slack for clock skew.
  absl::Time not_after = absl::Now() + absl::Hours(24 * 3650);
};

// A self-signed CA certificate (basicConstraints CA:TRUE, keyCertSign) with a fresh key.
// INVALID_ARGUMENT naming the field when the name is empty or not_after <= not_before.
absl::StatusOr<KeyAndCertificate> MakeCa(const CaRequest& request);

struct CertificateRequest {
  std::string common_name;                // Also the subject CN; may be empty when a SAN is set.
  std::vector<std::string> uris;          // URI SANs, e.g. "spiffe://demo.fleet/agent/server1".
  std::vector<std::string> dns_names;     // DNS SANs, e.g. "localhost".
  std::vector<std::string> ip_addresses;  // IP SANs, IPv4 or IPv6 text, e.g. "127.0.0.1".
  bool server = false;  // extendedKeyUsage serverAuth when true, clientAuth when false.
  absl::Time not_before = absl::Now() - absl::Minutes(5);
  absl::Time not_after = absl::Now() + absl::Hours(24 * 365);
};

// A certificate for `request` with a fresh key, signed by `ca` (not a CA itself). A random
// 128-bit serial. INVALID_ARGUMENT naming the field and value for a bad IP address, an empty
// DNS name, a URI without a scheme, no name at all, or not_after <= not_before;
// INVALID_ARGUMENT when `ca` does not parse, its key does not match its certificate, or its
// certificate is not a CA.
absl::StatusOr<KeyAndCertificate> Issue(const KeyAndCertificate& ca,
                                        const CertificateRequest& request);

// What fleetd learns from a client certificate that verified.
struct PeerCertificate {
  std::string common_name;
  std::vector<std::string> uris;          // URI SANs, in certificate order.
  std::vector<std::string> dns_names;     // DNS SANs.
  std::vector<std::string> ip_addresses;  // IP SANs, as text.
  std::string issuer;                     // The issuer's CN, else its whole name (RFC 2253).
  bool ca = false;                        // basicConstraints CA:TRUE.
  absl::Time not_before;
  absl::Time not_after;
  std::string sha256;  // Fingerprint of the DER certificate, lower-case hex.
};

// The first certificate of `pem`, read without verifying anything (for `fleetctl certs show`).
// INVALID_ARGUMENT "WHAT: ..." when there is none or it does not parse.
absl::StatusOr<PeerCertificate> ReadCertificate(const std::string& pem, const std::string& what);

// Why a client certificate was refused; the name is a metric label.
enum class CertificateProblem {
  kNone,
  kMissing,      // No certificate was presented.
  kMalformed,    // Not a PEM X.509 certificate.
  kExpired,      // Now is after notAfter.
  kNotYetValid,  // Now is before notBefore.
  kUntrusted,    // Does not chain to the trust bundle (another CA, self-signed, bad signature).
};
// "missing", "malformed", "expired", "not_yet_valid", "untrusted"; "none" for kNone.
const char* ProblemName(CertificateProblem problem);

struct Verification {
  CertificateProblem problem = CertificateProblem::kNone;
  // For a refusal, one line for the caller and the log, e.g. "client certificate expired at
  // 2026-01-01T00:00:00Z (CN=job/team-a)"; never key material.
  std::string detail;
  PeerCertificate peer;  // Set when problem == kNone.
  bool ok() const { return problem == CertificateProblem::kNone; }
};

// The CAs fleetd trusts for client certificates. Immutable once built; Verify is thread-safe.
class TrustBundle {
 public:
  // One or more PEM CA certificates. INVALID_ARGUMENT "WHAT: ..." when there is none, or when
  // one of them does not parse (a bundle is trusted whole or not at all).
  static absl::StatusOr<TrustBundle> FromPem(const std::string& ca_bundle_pem,
                                             const std::string& what);
  ~TrustBundle();
  TrustBundle(TrustBundle&&) noexcept;
  TrustBundle& operator=(TrustBundle&&) noexcept;

  // Verifies `leaf_pem` (with any intermediates in `chain_pem`, which may be empty or also hold
  // the leaf) against the bundle at time `now`: signature chain, validity period of every
  // certificate, and clientAuth usage when the leaf states extended usages. An empty
  // `leaf_pem` is kMissing.
  Verification Verify(const std::string& leaf_pem, const std::string& chain_pem,
                      absl::Time now) const;

 private:
  TrustBundle() = default;
  struct Store;
  Store* store_ = nullptr;  // Owned; an X509_STORE.
};

// Reads `path` whole. NOT_FOUND "cannot read WHAT PATH".
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what);
// Writes `text` to `path` atomically (a temporary file renamed over it) with `mode` (0600 for
// keys, 0644 for certificates). INTERNAL naming the path on failure.
absl::Status WritePemFile(const std::string& path, const std::string& text, int mode);
// The same, but never replaces a file: ALREADY_EXISTS "PATH exists; ..." when `path` exists,
// even when another process creates it meanwhile (the temporary file is hard-linked in).
absl::Status WriteNewPemFile(const std::string& path, const std::string& text, int mode);

}  // namespace fleet::pki

#endif  // FLEET_COMMON_PKI_H_
