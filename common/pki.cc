#include "common/pki.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fleet::pki {
namespace {

// Every OpenSSL object is owned by one of these.
template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using Asn1IntegerPtr = std::unique_ptr<ASN1_INTEGER, Deleter<ASN1_INTEGER_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using ExtensionPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
void FreeCertificates(STACK_OF(X509) * certificates) { sk_X509_pop_free(certificates, X509_free); }
using CertificatesPtr = std::unique_ptr<STACK_OF(X509), Deleter<FreeCertificates>>;

// OpenSSL's queued errors as one line (and the queue emptied), or `fallback` when none.
std::string OpenSslErrors(const char* fallback = "no OpenSSL error reported") {
  std::vector<std::string> lines;
  char text[256];
  while (unsigned long code = ERR_get_error()) {
    ERR_error_string_n(code, text, sizeof text);
    lines.emplace_back(text);
  }
  return lines.empty() ? fallback : absl::StrJoin(lines, "; ");
}

absl::Status OpenSslFailure(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", OpenSslErrors()));
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

absl::Status CheckValidity(absl::Time not_before, absl::Time not_after) {
  if (not_after <= not_before) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not_after ", Rfc3339(not_after), " must be later than not_before ", Rfc3339(not_before)));
  }
  return absl::OkStatus();
}

absl::StatusOr<KeyPtr> NewKey() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (key == nullptr) return OpenSslFailure("cannot make an EC P-256 key");
  return key;
}

absl::StatusOr<std::string> ToPem(X509* certificate) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_X509(bio.get(), certificate) != 1) {
    return OpenSslFailure("cannot write a certificate as PEM");
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

absl::StatusOr<std::string> ToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslFailure("cannot write a private key as PEM");
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

BioPtr ReadOnlyBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The first certificate in `pem`, or null (with OpenSSL's errors queued).
X509Ptr ParseCertificate(const std::string& pem) {
  BioPtr bio = ReadOnlyBio(pem);
  if (bio == nullptr) return nullptr;
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

// Every certificate in `pem`, in order. INVALID_ARGUMENT "WHAT: ..." when a block does not
// parse; an input without any certificate gives an empty stack.
absl::StatusOr<CertificatesPtr> ParseCertificates(const std::string& pem, absl::string_view what) {
  CertificatesPtr certificates(sk_X509_new_null());
  BioPtr bio = ReadOnlyBio(pem);
  if (certificates == nullptr || bio == nullptr) return OpenSslFailure(what);
  ERR_clear_error();
  while (X509Ptr certificate{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) {
    if (sk_X509_push(certificates.get(), certificate.get()) == 0) return OpenSslFailure(what);
    certificate.release();  // The stack owns it now.
  }
  // The loop ends at end of input ("no start line") or at a block that is broken.
  const unsigned long last = ERR_peek_last_error();
  if (ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
    ERR_clear_error();
  } else if (last != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a certificate does not parse: ", OpenSslErrors()));
  }
  return certificates;
}

void SetTime(ASN1_TIME* field, absl::Time t) { ASN1_TIME_set(field, absl::ToTimeT(t)); }

absl::Time FromAsn1(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return absl::InfinitePast();
  return absl::FromTimeT(timegm(&tm));
}

// Adds an extension written in OpenSSL's configuration syntax, e.g. "critical,CA:TRUE".
absl::Status AddExtension(X509* certificate, X509V3_CTX* ctx, int nid, const char* value) {
  ExtensionPtr extension(X509V3_EXT_conf_nid(nullptr, ctx, nid, value));
  if (extension == nullptr || X509_add_ext(certificate, extension.get(), -1) != 1) {
    return OpenSslFailure(absl::StrCat("cannot add ", OBJ_nid2sn(nid), " ", value));
  }
  return absl::OkStatus();
}

absl::Status AddName(GENERAL_NAMES* names, int type, ASN1_STRING* value) {
  GENERAL_NAME* name = GENERAL_NAME_new();
  if (name == nullptr) {
    ASN1_STRING_free(value);
    return OpenSslFailure("cannot make a subjectAltName");
  }
  GENERAL_NAME_set0_value(name, type, value);
  if (sk_GENERAL_NAME_push(names, name) == 0) {
    GENERAL_NAME_free(name);
    return OpenSslFailure("cannot make a subjectAltName");
  }
  return absl::OkStatus();
}

absl::Status AddText(GENERAL_NAMES* names, int type, const std::string& text) {
  ASN1_IA5STRING* value = ASN1_IA5STRING_new();
  if (value == nullptr || ASN1_STRING_set(value, text.data(), static_cast<int>(text.size())) != 1) {
    ASN1_IA5STRING_free(value);
    return OpenSslFailure("cannot make a subjectAltName");
  }
  return AddName(names, type, value);
}

// The subjectAltName of `request`, after checking each entry; critical when the subject is
// empty (RFC 5280 4.2.1.6).
absl::Status AddAltNames(X509* certificate, const CertificateRequest& request) {
  GeneralNamesPtr names(GENERAL_NAMES_new());
  if (names == nullptr) return OpenSslFailure("cannot make a subjectAltName");
  for (size_t i = 0; i < request.uris.size(); ++i) {
    if (request.uris[i].find(':') == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("uris[", i, "] '", request.uris[i], "' is not a URI (SCHEME:...)"));
    }
    if (absl::Status s = AddText(names.get(), GEN_URI, request.uris[i]); !s.ok()) return s;
  }
  for (size_t i = 0; i < request.dns_names.size(); ++i) {
    if (request.dns_names[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("dns_names[", i, "] is empty"));
    }
    if (absl::Status s = AddText(names.get(), GEN_DNS, request.dns_names[i]); !s.ok()) return s;
  }
  for (size_t i = 0; i < request.ip_addresses.size(); ++i) {
    ASN1_OCTET_STRING* ip = a2i_IPADDRESS(request.ip_addresses[i].c_str());
    if (ip == nullptr) {
      ERR_clear_error();
      return absl::InvalidArgumentError(absl::StrCat(
          "ip_addresses[", i, "] '", request.ip_addresses[i], "' is not an IPv4 or IPv6 address"));
    }
    if (absl::Status s = AddName(names.get(), GEN_IPADD, ip); !s.ok()) return s;
  }
  if (sk_GENERAL_NAME_num(names.get()) == 0) return absl::OkStatus();
  const int critical = request.common_name.empty() ? 1 : 0;
  if (X509_add1_ext_i2d(certificate, NID_subject_alt_name, names.get(), critical,
                        X509V3_ADD_DEFAULT) != 1) {
    return OpenSslFailure("cannot add subjectAltName");
  }
  return absl::OkStatus();
}

// A version-3 certificate for `key` with a random 128-bit serial, `common_name` (if any) as
// subject, and the validity period; not yet signed.
absl::StatusOr<X509Ptr> NewCertificate(EVP_PKEY* key, const std::string& common_name,
                                       absl::Time not_before, absl::Time not_after) {
  X509Ptr certificate(X509_new());
  BignumPtr serial(BN_new());
  if (certificate == nullptr || serial == nullptr ||
      BN_rand(serial.get(), 128, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY) != 1) {
    return OpenSslFailure("cannot make a certificate");
  }
  Asn1IntegerPtr serial_number(BN_to_ASN1_INTEGER(serial.get(), nullptr));
  if (serial_number == nullptr || X509_set_version(certificate.get(), X509_VERSION_3) != 1 ||
      X509_set_serialNumber(certificate.get(), serial_number.get()) != 1 ||
      X509_set_pubkey(certificate.get(), key) != 1) {
    return OpenSslFailure("cannot make a certificate");
  }
  SetTime(X509_getm_notBefore(certificate.get()), not_before);
  SetTime(X509_getm_notAfter(certificate.get()), not_after);
  X509_NAME* subject = X509_get_subject_name(certificate.get());
  if (!common_name.empty() &&
      X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.data()),
                                 static_cast<int>(common_name.size()), -1, 0) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "common_name '", common_name, "' is not a valid subject CN: ", OpenSslErrors()));
  }
  return certificate;
}

absl::StatusOr<KeyAndCertificate> Finish(X509* certificate, EVP_PKEY* key, EVP_PKEY* signer) {
  if (X509_sign(certificate, signer, EVP_sha256()) <= 0) {
    return OpenSslFailure("cannot sign the certificate");
  }
  KeyAndCertificate out;
  absl::StatusOr<std::string> pem = ToPem(certificate);
  if (!pem.ok()) return pem.status();
  out.certificate_pem = *std::move(pem);
  pem = ToPem(key);
  if (!pem.ok()) return pem.status();
  out.private_key_pem = *std::move(pem);
  return out;
}

std::string Utf8(const ASN1_STRING* text) {
  unsigned char* utf8 = nullptr;
  const int size = ASN1_STRING_to_UTF8(&utf8, text);
  if (size < 0) return "";
  std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(size));
  OPENSSL_free(utf8);
  return out;
}

// An IP SAN's octets as text ("127.0.0.1", "::1"); "" for a length that is neither family's.
std::string IpText(const ASN1_OCTET_STRING* octets) {
  const int length = ASN1_STRING_length(octets);
  const int family = length == 4 ? AF_INET : length == 16 ? AF_INET6 : -1;
  char text[INET6_ADDRSTRLEN] = {};
  if (family < 0 ||
      inet_ntop(family, ASN1_STRING_get0_data(octets), text, sizeof text) == nullptr) {
    return "";
  }
  return text;
}

// A name's CN, else the whole name in RFC 2253 form.
std::string NameText(const X509_NAME* name) {
  const int cn = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (cn >= 0) return Utf8(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, cn)));
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253) < 0) return "";
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

PeerCertificate Describe(X509* certificate) {
  PeerCertificate peer;
  const X509_NAME* subject = X509_get_subject_name(certificate);
  const int cn = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (cn >= 0) {
    peer.common_name = Utf8(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, cn)));
  }
  GeneralNamesPtr names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type == GEN_URI) peer.uris.push_back(Utf8(name->d.uniformResourceIdentifier));
    if (name->type == GEN_DNS) peer.dns_names.push_back(Utf8(name->d.dNSName));
    if (name->type == GEN_IPADD) {
      if (std::string ip = IpText(name->d.iPAddress); !ip.empty()) peer.ip_addresses.push_back(ip);
    }
  }
  peer.issuer = NameText(X509_get_issuer_name(certificate));
  peer.ca = X509_check_ca(certificate) == 1;  // basicConstraints CA:TRUE, not a v1 root.
  peer.not_before = FromAsn1(X509_get0_notBefore(certificate));
  peer.not_after = FromAsn1(X509_get0_notAfter(certificate));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (X509_digest(certificate, EVP_sha256(), digest, &size) == 1) {
    peer.sha256 =
        absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), size));
  }
  return peer;
}

// How a certificate is named in a refusal: its CN, else its first URI, else its fingerprint.
std::string NameOf(X509* certificate) {
  if (certificate == nullptr) return "?";
  const PeerCertificate peer = Describe(certificate);
  if (!peer.common_name.empty()) return absl::StrCat("CN=", peer.common_name);
  if (!peer.uris.empty()) return absl::StrCat("URI=", peer.uris.front());
  return absl::StrCat("SHA256=", peer.sha256);
}

Verification Refuse(CertificateProblem problem, std::string detail) {
  Verification v;
  v.problem = problem;
  v.detail = std::move(detail);
  return v;
}

}  // namespace

const char* ProblemName(CertificateProblem problem) {
  switch (problem) {
    case CertificateProblem::kNone:
      return "none";
    case CertificateProblem::kMissing:
      return "missing";
    case CertificateProblem::kMalformed:
      return "malformed";
    case CertificateProblem::kExpired:
      return "expired";
    case CertificateProblem::kNotYetValid:
      return "not_yet_valid";
    case CertificateProblem::kUntrusted:
      return "untrusted";
  }
  return "unknown";
}

absl::StatusOr<PeerCertificate> ReadCertificate(const std::string& pem, const std::string& what) {
  ERR_clear_error();
  X509Ptr certificate = ParseCertificate(pem);
  if (certificate == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": no PEM certificate: ", OpenSslErrors("no CERTIFICATE block")));
  }
  return Describe(certificate.get());
}

absl::StatusOr<KeyAndCertificate> MakeCa(const CaRequest& request) {
  ERR_clear_error();
  if (request.common_name.empty()) {
    return absl::InvalidArgumentError("common_name of a CA must not be empty");
  }
  if (absl::Status s = CheckValidity(request.not_before, request.not_after); !s.ok()) return s;
  absl::StatusOr<KeyPtr> key = NewKey();
  if (!key.ok()) return key.status();
  absl::StatusOr<X509Ptr> ca =
      NewCertificate(key->get(), request.common_name, request.not_before, request.not_after);
  if (!ca.ok()) return ca.status();
  X509* x = ca->get();
  if (X509_set_issuer_name(x, X509_get_subject_name(x)) != 1) {
    return OpenSslFailure("cannot make a CA certificate");
  }
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:TRUE"},
                            std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"},
                            std::pair{NID_subject_key_identifier, "hash"},
                            std::pair{NID_authority_key_identifier, "keyid"}}) {
    if (absl::Status s = AddExtension(x, &ctx, nid, value); !s.ok()) return s;
  }
  return Finish(x, key->get(), key->get());
}

absl::StatusOr<KeyAndCertificate> Issue(const KeyAndCertificate& ca,
                                        const CertificateRequest& request) {
  ERR_clear_error();
  if (request.common_name.empty() && request.uris.empty() && request.dns_names.empty() &&
      request.ip_addresses.empty()) {
    return absl::InvalidArgumentError(
        "common_name, uris, dns_names and ip_addresses are all empty: a certificate needs a name");
  }
  if (absl::Status s = CheckValidity(request.not_before, request.not_after); !s.ok()) return s;

  X509Ptr ca_certificate = ParseCertificate(ca.certificate_pem);
  if (ca_certificate == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("CA certificate does not parse: ", OpenSslErrors()));
  }
  BioPtr key_bio = ReadOnlyBio(ca.private_key_pem);
  KeyPtr ca_key(key_bio == nullptr
                    ? nullptr
                    : PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (ca_key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("CA private key does not parse: ", OpenSslErrors()));
  }
  if (X509_check_private_key(ca_certificate.get(), ca_key.get()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CA private key does not match the CA certificate (",
                     NameOf(ca_certificate.get()), "): ", OpenSslErrors()));
  }
  if (X509_check_ca(ca_certificate.get()) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("CA certificate ", NameOf(ca_certificate.get()),
                                                   " is not a CA (basicConstraints)"));
  }

  absl::StatusOr<KeyPtr> key = NewKey();
  if (!key.ok()) return key.status();
  absl::StatusOr<X509Ptr> leaf =
      NewCertificate(key->get(), request.common_name, request.not_before, request.not_after);
  if (!leaf.ok()) return leaf.status();
  X509* x = leaf->get();
  if (X509_set_issuer_name(x, X509_get_subject_name(ca_certificate.get())) != 1) {
    return OpenSslFailure("cannot make a certificate");
  }
  if (absl::Status s = AddAltNames(x, request); !s.ok()) return s;
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, ca_certificate.get(), x, nullptr, nullptr, 0);
  for (auto [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:FALSE"},
        std::pair{NID_key_usage, "critical,digitalSignature,keyAgreement"},
        std::pair{NID_ext_key_usage, request.server ? "serverAuth" : "clientAuth"},
        std::pair{NID_subject_key_identifier, "hash"},
        std::pair{NID_authority_key_identifier, "keyid:always"}}) {
    if (absl::Status s = AddExtension(x, &ctx, nid, value); !s.ok()) return s;
  }
  return Finish(x, key->get(), ca_key.get());
}

struct TrustBundle::Store {
  StorePtr store;
};

absl::StatusOr<TrustBundle> TrustBundle::FromPem(const std::string& ca_bundle_pem,
                                                 const std::string& what) {
  ERR_clear_error();
  absl::StatusOr<CertificatesPtr> cas = ParseCertificates(ca_bundle_pem, what);
  if (!cas.ok()) return cas.status();
  const int count = sk_X509_num(cas->get());
  if (count == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": no PEM certificate in it"));
  }
  auto store = std::make_unique<Store>();
  store->store.reset(X509_STORE_new());
  if (store->store == nullptr) return OpenSslFailure(what);
  for (int i = 0; i < count; ++i) {
    // add_cert takes its own reference.
    if (X509_STORE_add_cert(store->store.get(), sk_X509_value(cas->get(), i)) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": cannot trust certificate ", i + 1, ": ", OpenSslErrors()));
    }
  }
  TrustBundle bundle;
  bundle.store_ = store.release();
  return bundle;
}

TrustBundle::~TrustBundle() { delete store_; }

TrustBundle::TrustBundle(TrustBundle&& other) noexcept : store_(other.store_) {
  other.store_ = nullptr;
}

TrustBundle& TrustBundle::operator=(TrustBundle&& other) noexcept {
  if (this != &other) {
    delete store_;
    store_ = other.store_;
    other.store_ = nullptr;
  }
  return *this;
}

Verification TrustBundle::Verify(const std::string& leaf_pem, const std::string& chain_pem,
                                 absl::Time now) const {
  ERR_clear_error();
  if (leaf_pem.empty()) {
    return Refuse(CertificateProblem::kMissing, "no client certificate was presented");
  }
  X509Ptr leaf = ParseCertificate(leaf_pem);
  if (leaf == nullptr) {
    return Refuse(CertificateProblem::kMalformed,
                  absl::StrCat("client certificate is malformed: not a PEM X.509 certificate (",
                               OpenSslErrors(), ")"));
  }
  absl::StatusOr<CertificatesPtr> chain = ParseCertificates(chain_pem, "client certificate chain");
  if (!chain.ok()) {
    return Refuse(CertificateProblem::kMalformed,
                  absl::StrCat("client certificate chain is malformed: ", chain.status().message(),
                               " (", NameOf(leaf.get()), ")"));
  }
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (store_ == nullptr || ctx == nullptr ||
      X509_STORE_CTX_init(ctx.get(), store_->store.get(), leaf.get(), chain->get()) != 1) {
    return Refuse(CertificateProblem::kUntrusted,
                  absl::StrCat("client certificate cannot be checked: ", OpenSslErrors()));
  }
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set_time(param, absl::ToTimeT(now));  // Also sets USE_CHECK_TIME.
  // clientAuth, checked only when the leaf lists extended usages.
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_CLIENT);
  if (X509_verify_cert(ctx.get()) == 1) {
    Verification ok;
    ok.peer = Describe(leaf.get());
    return ok;
  }
  ERR_clear_error();
  const int error = X509_STORE_CTX_get_error(ctx.get());
  X509* failed = X509_STORE_CTX_get_current_cert(ctx.get());
  if (failed == nullptr) failed = leaf.get();
  // The leaf is named in every refusal; a certificate higher in the chain is named as well.
  std::string which = failed == leaf.get() || X509_cmp(failed, leaf.get()) == 0
                          ? absl::StrCat("(", NameOf(leaf.get()), ")")
                          : absl::StrCat("(", NameOf(leaf.get()), ", issuer ", NameOf(failed), ")");
  switch (error) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return Refuse(CertificateProblem::kExpired,
                    absl::StrCat("client certificate expired at ",
                                 Rfc3339(FromAsn1(X509_get0_notAfter(failed))), " ", which));
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return Refuse(CertificateProblem::kNotYetValid,
                    absl::StrCat("client certificate is not yet valid: not before ",
                                 Rfc3339(FromAsn1(X509_get0_notBefore(failed))), " ", which));
    default:
      return Refuse(CertificateProblem::kUntrusted,
                    absl::StrCat("client certificate is untrusted: ",
                                 X509_verify_cert_error_string(error), " ", which));
  }
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", what, " ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  return text.str();
}

namespace {

// Writes `text` to a temporary file beside `path` (created 0600, so a key is never readable by
// others even for a moment, then given `mode`), synced, then moved to `path`: renamed over it
// when `replace`, else linked, so that an existing file is never touched.
absl::Status WriteAtomically(const std::string& path, const std::string& text, int mode,
                             bool replace) {
  std::string temporary = path + ".tmp.XXXXXX";
  const int fd = mkstemp(temporary.data());
  if (fd < 0) {
    return absl::InternalError(absl::StrCat(
        "cannot write ", path, ": cannot create a temporary file: ", std::strerror(errno)));
  }
  auto fail = [&](absl::string_view step) {
    const int saved = errno;
    close(fd);
    unlink(temporary.c_str());
    return absl::InternalError(
        absl::StrCat("cannot write ", path, ": ", step, ": ", std::strerror(saved)));
  };
  if (fchmod(fd, static_cast<mode_t>(mode)) != 0) return fail("chmod");
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("write");
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("fsync");
  if (close(fd) != 0) {
    const int saved = errno;
    unlink(temporary.c_str());
    return absl::InternalError(
        absl::StrCat("cannot write ", path, ": close: ", std::strerror(saved)));
  }
  const int moved =
      replace ? rename(temporary.c_str(), path.c_str()) : link(temporary.c_str(), path.c_str());
  const int saved = errno;
  if (moved != 0 || !replace) unlink(temporary.c_str());
  if (moved != 0 && saved == EEXIST) {
    return absl::AlreadyExistsError(absl::StrCat(path, " exists; it is not replaced"));
  }
  if (moved != 0) {
    return absl::InternalError(absl::StrCat(
        "cannot write ", path, ": ", replace ? "rename" : "link", ": ", std::strerror(saved)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WritePemFile(const std::string& path, const std::string& text, int mode) {
  return WriteAtomically(path, text, mode, /*replace=*/true);
}

absl::Status WriteNewPemFile(const std::string& path, const std::string& text, int mode) {
  return WriteAtomically(path, text, mode, /*replace=*/false);
}

}  // namespace fleet::pki
