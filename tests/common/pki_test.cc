#include "common/pki.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

namespace fleet::pki {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;

// Fixed instants, so no expectation depends on the wall clock.
const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);  // 2027-01-15

KeyAndCertificate Ca(const std::string& name = "FLEET site CA test.fleet") {
  absl::StatusOr<KeyAndCertificate> ca = MakeCa({.common_name = name,
                                                 .not_before = kNow - absl::Hours(24),
                                                 .not_after = kNow + absl::Hours(24 * 3650)});
  EXPECT_TRUE(ca.ok()) << ca.status();
  return ca.value_or(KeyAndCertificate{});
}

CertificateRequest Client(const std::string& role_and_name) {
  return {.common_name = role_and_name,
          .uris = {"spiffe://test.fleet/" + role_and_name},
          .dns_names = {},
          .ip_addresses = {},
          .server = false,
          .not_before = kNow - absl::Hours(1),
          .not_after = kNow + absl::Hours(24)};
}

KeyAndCertificate MustIssue(const KeyAndCertificate& ca, const CertificateRequest& request) {
  absl::StatusOr<KeyAndCertificate> issued = Issue(ca, request);
  EXPECT_TRUE(issued.ok()) << issued.status();
  return issued.value_or(KeyAndCertificate{});
}

TrustBundle Bundle(const std::string& pem) {
  absl::StatusOr<TrustBundle> bundle = TrustBundle::FromPem(pem, "test CA bundle");
  EXPECT_TRUE(bundle.ok()) << bundle.status();
  return *std::move(bundle);
}

// The certificate parsed by OpenSSL itself, to check what Issue wrote.
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
std::unique_ptr<X509, X509Free> Parse(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  std::unique_ptr<X509, X509Free> x(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return x;
}

TEST(PkiTest, ClientCertificateVerifiesAndIsDescribed) {
  const KeyAndCertificate ca = Ca();
  const KeyAndCertificate client = MustIssue(ca, Client("agent/server1"));
  EXPECT_THAT(client.certificate_pem, HasSubstr("-----BEGIN CERTIFICATE-----"));
  EXPECT_THAT(client.private_key_pem, HasSubstr("-----BEGIN PRIVATE KEY-----"));

  Verification v = Bundle(ca.certificate_pem).Verify(client.certificate_pem, "", kNow);
  ASSERT_TRUE(v.ok()) << ProblemName(v.problem) << ": " << v.detail;
  EXPECT_EQ(v.peer.common_name, "agent/server1");
  EXPECT_THAT(v.peer.uris, ElementsAre("spiffe://test.fleet/agent/server1"));
  EXPECT_THAT(v.peer.dns_names, IsEmpty());
  EXPECT_EQ(v.peer.not_before, kNow - absl::Hours(1));
  EXPECT_EQ(v.peer.not_after, kNow + absl::Hours(24));
  EXPECT_THAT(v.peer.sha256, MatchesRegex("[0-9a-f]{64}"));
  // The fingerprint is of this certificate: another one differs.
  Verification other =
      Bundle(ca.certificate_pem)
          .Verify(MustIssue(ca, Client("agent/server1")).certificate_pem, "", kNow);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other.peer.sha256, v.peer.sha256);
}

TEST(PkiTest, IssuedCertificatesCarryTheRightExtensions) {
  const KeyAndCertificate ca = Ca();
  CertificateRequest request{.common_name = "fleetd",
                             .uris = {},
                             .dns_names = {"localhost", "fleetd.test.fleet"},
                             .ip_addresses = {"127.0.0.1", "::1"},
                             .server = true};
  const KeyAndCertificate server = MustIssue(ca, request);
  auto x = Parse(server.certificate_pem);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(X509_check_ca(x.get()), 0);
  EXPECT_EQ(X509_check_host(x.get(), "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(x.get(), "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(x.get(), "::1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(x.get(), "127.0.0.2", 0), 0);
  EXPECT_EQ(X509_check_purpose(x.get(), X509_PURPOSE_SSL_SERVER, 0), 1);
  EXPECT_EQ(X509_check_purpose(x.get(), X509_PURPOSE_SSL_CLIENT, 0), 0);
  EXPECT_NE(X509_get0_subject_key_id(x.get()), nullptr);
  EXPECT_NE(X509_get0_authority_key_id(x.get()), nullptr);
  auto issuer = Parse(ca.certificate_pem);
  ASSERT_NE(issuer, nullptr);
  EXPECT_EQ(X509_check_issued(issuer.get(), x.get()), X509_V_OK);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x.get()),
                                  X509_get0_subject_key_id(issuer.get())),
            0);
  EXPECT_EQ(X509_check_ca(issuer.get()), 1);
  // Two issues have different random serials.
  auto again = Parse(MustIssue(ca, request).certificate_pem);
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(x.get()), X509_get0_serialNumber(again.get())),
            0);

  // A server certificate is not a client certificate: its usages say serverAuth only.
  Verification v = Bundle(ca.certificate_pem).Verify(server.certificate_pem, "", kNow);
  EXPECT_EQ(v.problem, CertificateProblem::kUntrusted);
}

TEST(PkiTest, CertificateWithOnlyAUriNeedsNoCommonName) {
  const KeyAndCertificate ca = Ca();
  CertificateRequest request = Client("job/team-a");
  request.common_name.clear();
  Verification v =
      Bundle(ca.certificate_pem).Verify(MustIssue(ca, request).certificate_pem, "", kNow);
  ASSERT_TRUE(v.ok()) << v.detail;
  EXPECT_EQ(v.peer.common_name, "");
  EXPECT_THAT(v.peer.uris, ElementsAre("spiffe://test.fleet/job/team-a"));
}

TEST(PkiTest, ExpiredCertificateIsRefusedNamingWhenAndWho) {
  const KeyAndCertificate ca = Ca();
  CertificateRequest request = Client("job/team-a");
  request.not_before = kNow - absl::Hours(48);
  request.not_after = absl::FromUnixSeconds(1'799'996'400);  // An hour before kNow.
  Verification v =
      Bundle(ca.certificate_pem).Verify(MustIssue(ca, request).certificate_pem, "", kNow);
  EXPECT_EQ(v.problem, CertificateProblem::kExpired);
  EXPECT_STREQ(ProblemName(v.problem), "expired");
  EXPECT_EQ(v.detail, "client certificate expired at 2027-01-15T07:00:00Z (CN=job/team-a)");
  EXPECT_FALSE(v.ok());
}

TEST(PkiTest, NotYetValidCertificateIsRefused) {
  const KeyAndCertificate ca = Ca();
  CertificateRequest request = Client("job/team-a");
  request.not_before = kNow + absl::Hours(1);
  request.not_after = kNow + absl::Hours(2);
  Verification v =
      Bundle(ca.certificate_pem).Verify(MustIssue(ca, request).certificate_pem, "", kNow);
  EXPECT_EQ(v.problem, CertificateProblem::kNotYetValid);
  EXPECT_STREQ(ProblemName(v.problem), "not_yet_valid");
  EXPECT_THAT(v.detail, HasSubstr("not yet valid"));
  EXPECT_THAT(v.detail, HasSubstr("CN=job/team-a"));
  // The same certificate verifies once its time has come: the check uses `now`, not the clock.
  Verification later =
      Bundle(ca.certificate_pem)
          .Verify(MustIssue(ca, request).certificate_pem, "", kNow + absl::Minutes(90));
  EXPECT_TRUE(later.ok()) << later.detail;
}

TEST(PkiTest, CertificateFromAnotherCaIsUntrusted) {
  const KeyAndCertificate ours = Ca("ours");
  const KeyAndCertificate theirs = Ca("theirs");
  Verification v = Bundle(ours.certificate_pem)
                       .Verify(MustIssue(theirs, Client("operator/eve")).certificate_pem, "", kNow);
  EXPECT_EQ(v.problem, CertificateProblem::kUntrusted);
  EXPECT_STREQ(ProblemName(v.problem), "untrusted");
  EXPECT_THAT(v.detail, HasSubstr("untrusted: unable to get local issuer certificate"));
  EXPECT_THAT(v.detail, HasSubstr("CN=operator/eve"));
}

TEST(PkiTest, SelfSignedCertificateIsUntrusted) {
  const KeyAndCertificate ca = Ca();
  // A CA is the simplest self-signed certificate; one that is not in the bundle.
  const KeyAndCertificate self = Ca("operator/mallory");
  Verification v = Bundle(ca.certificate_pem).Verify(self.certificate_pem, "", kNow);
  EXPECT_EQ(v.problem, CertificateProblem::kUntrusted);
  EXPECT_THAT(v.detail, HasSubstr("self-signed certificate"));
  EXPECT_THAT(v.detail, HasSubstr("CN=operator/mallory"));
}

TEST(PkiTest, GarbageIsMalformedAndNothingIsMissing) {
  TrustBundle bundle = Bundle(Ca().certificate_pem);
  Verification garbage = bundle.Verify("not a certificate", "", kNow);
  EXPECT_EQ(garbage.problem, CertificateProblem::kMalformed);
  EXPECT_STREQ(ProblemName(garbage.problem), "malformed");
  EXPECT_THAT(garbage.detail, HasSubstr("malformed"));
  Verification truncated =
      bundle.Verify("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "", kNow);
  EXPECT_EQ(truncated.problem, CertificateProblem::kMalformed);

  Verification missing = bundle.Verify("", "", kNow);
  EXPECT_EQ(missing.problem, CertificateProblem::kMissing);
  EXPECT_STREQ(ProblemName(missing.problem), "missing");
  EXPECT_THAT(missing.detail, HasSubstr("no client certificate"));
  EXPECT_STREQ(ProblemName(CertificateProblem::kNone), "none");
}

TEST(PkiTest, ReadCertificateSaysWhatACertificateHoldsWithoutVerifying) {
  const KeyAndCertificate ca = Ca("FLEET site CA read.fleet");
  absl::StatusOr<PeerCertificate> ca_read = ReadCertificate(ca.certificate_pem, "ca.pem");
  ASSERT_TRUE(ca_read.ok()) << ca_read.status();
  EXPECT_TRUE(ca_read->ca);
  EXPECT_EQ(ca_read->issuer, "FLEET site CA read.fleet");

  CertificateRequest server = Client("fleetd");
  server.server = true;
  server.dns_names = {"localhost"};
  server.ip_addresses = {"127.0.0.1", "::1"};
  const KeyAndCertificate leaf = MustIssue(ca, server);
  absl::StatusOr<PeerCertificate> read = ReadCertificate(leaf.certificate_pem, "fleetd.pem");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->ca);
  EXPECT_EQ(read->common_name, "fleetd");
  EXPECT_EQ(read->issuer, "FLEET site CA read.fleet");
  EXPECT_THAT(read->uris, ElementsAre("spiffe://test.fleet/fleetd"));
  EXPECT_THAT(read->dns_names, ElementsAre("localhost"));
  EXPECT_THAT(read->ip_addresses, ElementsAre("127.0.0.1", "::1"));
  EXPECT_EQ(read->not_after, absl::FromUnixSeconds(absl::ToUnixSeconds(server.not_after)));
  EXPECT_EQ(read->sha256.size(), 64u);

  absl::StatusOr<PeerCertificate> garbage = ReadCertificate("not a certificate", "x.pem");
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(garbage.status().message(), HasSubstr("x.pem: no PEM certificate"));
}

TEST(PkiTest, BundleOfTwoCasTrustsBothAndTakesAChain) {
  const KeyAndCertificate old_ca = Ca("old CA");
  const KeyAndCertificate new_ca = Ca("new CA");
  TrustBundle bundle = Bundle(old_ca.certificate_pem + new_ca.certificate_pem);
  EXPECT_TRUE(bundle.Verify(MustIssue(old_ca, Client("agent/a")).certificate_pem, "", kNow).ok());
  EXPECT_TRUE(bundle.Verify(MustIssue(new_ca, Client("agent/b")).certificate_pem, "", kNow).ok());

  // chain_pem may carry the leaf and the CA again; a broken chain is malformed.
  const KeyAndCertificate leaf = MustIssue(new_ca, Client("agent/c"));
  Verification with_leaf_in_chain =
      bundle.Verify(leaf.certificate_pem, leaf.certificate_pem + new_ca.certificate_pem, kNow);
  EXPECT_TRUE(with_leaf_in_chain.ok()) << with_leaf_in_chain.detail;
  Verification bad_chain = bundle.Verify(leaf.certificate_pem,
                                         "-----BEGIN CERTIFICATE-----\nx\n"
                                         "-----END CERTIFICATE-----\n",
                                         kNow);
  EXPECT_EQ(bad_chain.problem, CertificateProblem::kMalformed);
}

TEST(PkiTest, BundleWithoutCertificatesIsRefusedNamingIt) {
  absl::StatusOr<TrustBundle> none = TrustBundle::FromPem("", "--client-ca /etc/fleet/ca.pem");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("--client-ca /etc/fleet/ca.pem: no PEM"));
  absl::StatusOr<TrustBundle> broken = TrustBundle::FromPem(
      Ca().certificate_pem + "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
      "bundle");
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(broken.status().message(), HasSubstr("bundle: a certificate does not parse"));
}

TEST(PkiTest, BadRequestsAreRefusedNamingTheField) {
  const KeyAndCertificate ca = Ca();
  CertificateRequest bad_ip = Client("agent/a");
  bad_ip.ip_addresses = {"127.0.0.1", "300.1.2.3"};
  absl::StatusOr<KeyAndCertificate> issued = Issue(ca, bad_ip);
  EXPECT_EQ(issued.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(issued.status().message(),
              HasSubstr("ip_addresses[1] '300.1.2.3' is not an IPv4 or IPv6 address"));

  CertificateRequest nameless = Client("agent/a");
  nameless.common_name.clear();
  nameless.uris.clear();
  issued = Issue(ca, nameless);
  EXPECT_EQ(issued.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(issued.status().message(), HasSubstr("all empty"));

  CertificateRequest empty_dns = Client("agent/a");
  empty_dns.dns_names = {""};
  EXPECT_THAT(Issue(ca, empty_dns).status().message(), HasSubstr("dns_names[0] is empty"));

  CertificateRequest backwards = Client("agent/a");
  backwards.not_after = backwards.not_before;
  issued = Issue(ca, backwards);
  EXPECT_EQ(issued.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(issued.status().message(), HasSubstr("not_after"));
  EXPECT_THAT(issued.status().message(), HasSubstr("later than not_before"));

  absl::StatusOr<KeyAndCertificate> no_name = MakeCa({});
  EXPECT_EQ(no_name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_name.status().message(), HasSubstr("common_name"));
  absl::StatusOr<KeyAndCertificate> ca_backwards =
      MakeCa({.common_name = "x", .not_before = kNow, .not_after = kNow - absl::Seconds(1)});
  EXPECT_THAT(ca_backwards.status().message(), HasSubstr("not_after"));
}

TEST(PkiTest, IssueRefusesABrokenOrMismatchedCa) {
  const KeyAndCertificate ca = Ca();
  const KeyAndCertificate other = Ca("other");
  absl::StatusOr<KeyAndCertificate> issued =
      Issue({ca.certificate_pem, other.private_key_pem}, Client("agent/a"));
  EXPECT_EQ(issued.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(issued.status().message(), HasSubstr("does not match"));
  issued = Issue({"garbage", ca.private_key_pem}, Client("agent/a"));
  EXPECT_EQ(issued.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(issued.status().message(), HasSubstr("CA certificate does not parse"));
  issued = Issue({ca.certificate_pem, "garbage"}, Client("agent/a"));
  EXPECT_THAT(issued.status().message(), HasSubstr("CA private key does not parse"));
  // A leaf cannot sign.
  const KeyAndCertificate leaf = MustIssue(ca, Client("agent/a"));
  issued = Issue(leaf, Client("agent/b"));
  EXPECT_EQ(issued.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(issued.status().message(), HasSubstr("is not a CA"));
}

class PemFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/pki_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(PemFileTest, WritesWithModeAndReplacesAtomically) {
  const std::string path = dir_ + "/key.pem";
  ASSERT_TRUE(WritePemFile(path, "first", 0600).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const ino_t first_inode = st.st_ino;

  ASSERT_TRUE(WritePemFile(path, "second", 0644).ok());
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // A new file renamed over the old one, not the old one rewritten in place.
  EXPECT_NE(st.st_ino, first_inode);
  absl::StatusOr<std::string> read = ReadPemFile(path, "key");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "second");
  // No temporary file is left behind.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST_F(PemFileTest, ANewFileNeverReplacesOne) {
  const std::string path = dir_ + "/ca.key";
  ASSERT_TRUE(WriteNewPemFile(path, "first", 0600).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::Status again = WriteNewPemFile(path, "second", 0600);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr(path + " exists"));
  EXPECT_EQ(ReadPemFile(path, "key").value_or(""), "first");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1);  // Neither write left its temporary file.
}

TEST_F(PemFileTest, FailuresNameThePath) {
  absl::Status written = WritePemFile(dir_ + "/missing/key.pem", "x", 0600);
  EXPECT_EQ(written.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(written.message(), HasSubstr(dir_ + "/missing/key.pem"));
  absl::StatusOr<std::string> read = ReadPemFile(dir_ + "/nope.pem", "site CA");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr("cannot read site CA " + dir_ + "/nope.pem"));
}

}  // namespace
}  // namespace fleet::pki
