// The gatekeeper's decisions, without a network: certificates made with fleet::pki, the
// policy and the CA bundle in files, a fake clock for validity.
#include "controller/auth/authenticator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <grpc/grpc_security_constants.h>

#include <deque>
#include <filesystem>
#include <fstream>

#include "absl/time/clock.h"
#include "common/pki.h"
#include "testing/fake_clock.h"
#include "tests/scratch.h"

namespace fleet::auth {
namespace {

using ::testing::HasSubstr;

class AuthenticatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fleet::testing::FreshDirectory("auth");
    ca_ = pki::MakeCa({.common_name = "site CA"}).value();
    Write("ca.pem", ca_.certificate_pem);
    Write("policy.yaml", R"(grants:
  - {identity: spiffe://site/operator/*, role: operator}
  - {identity: spiffe://site/viewer/*, role: viewer}
  - {identity: spiffe://site/job/*, role: job}
  - {identity: spiffe://site/agent/*, role: agent}
)");
    authenticator_ =
        Authenticator::Create({Path("ca.pem"), Path("policy.yaml")}, nullptr, &clock_).value();
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(Path(name)) << text;
  }
  std::string Cert(const std::string& uri, const pki::KeyAndCertificate* ca = nullptr,
                   absl::Time not_before = absl::Now() - absl::Hours(1),
                   absl::Time not_after = absl::Now() + absl::Hours(24)) {
    pki::CertificateRequest r;
    r.uris = {uri};
    r.not_before = not_before;
    r.not_after = not_after;
    return pki::Issue(ca != nullptr ? *ca : ca_, r).value().certificate_pem;
  }
  Authenticator::Decision Decide(const std::string& method, const std::string& leaf) {
    return authenticator_->Decide(method, leaf, "");
  }

  std::filesystem::path dir_;
  fleet::testing::FakeClock clock_{absl::Now()};
  pki::KeyAndCertificate ca_;
  std::shared_ptr<Authenticator> authenticator_;
};

constexpr char kApply[] = "/fleet.v1.InventoryService/ApplyInventory";
constexpr char kGet[] = "/fleet.v1.TopologyService/GetAllocation";

TEST_F(AuthenticatorTest, ARoleHoldingThePermissionPassesWithItsGrant) {
  Authenticator::Decision d = Decide(kApply, Cert("spiffe://site/operator/alice"));
  EXPECT_TRUE(d.status.ok()) << d.status.error_message();
  EXPECT_EQ(d.identity, "spiffe://site/operator/alice");
  EXPECT_EQ(d.grant.role, Role::kOperator);
  d = Decide(kGet, Cert("spiffe://site/job/team-a"));
  EXPECT_TRUE(d.status.ok());
  EXPECT_EQ(d.grant.tenants, std::vector<std::string>{"team-a"});
}

TEST_F(AuthenticatorTest, RefusalsNameTheRoleAndThePermissionMissing) {
  Authenticator::Decision d = Decide(kApply, Cert("spiffe://site/viewer/grafana"));
  EXPECT_EQ(d.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(d.status.error_message(),
            "role viewer (spiffe://site/viewer/grafana) lacks permission inventory.write needed "
            "by /fleet.v1.InventoryService/ApplyInventory");
  d = Decide(kGet, Cert("spiffe://elsewhere/operator/mallory"));
  EXPECT_EQ(d.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(d.status.error_message(), HasSubstr("holds no role in fleetd's policy"));
  // A method missing from the table is refused to everyone, operators too.
  d = Decide("/fleet.v1.AdminService/Future", Cert("spiffe://site/operator/alice"));
  EXPECT_EQ(d.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(AuthenticatorTest, BadCertificatesAreUnauthenticatedNamingWhy) {
  const absl::Time now = absl::Now();
  struct Case {
    std::string leaf;
    std::string says;
  };
  pki::KeyAndCertificate other = pki::MakeCa({.common_name = "other CA"}).value();
  const std::vector<Case> cases = {
      {"", "no client certificate"},
      {"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", ""},
      {Cert("spiffe://site/operator/alice", nullptr, now - absl::Hours(48), now - absl::Hours(1)),
       "expired"},
      {Cert("spiffe://site/operator/alice", nullptr, now + absl::Hours(1), now + absl::Hours(48)),
       "not yet valid"},
      {Cert("spiffe://site/operator/alice", &other), ""},
  };
  for (const Case& c : cases) {
    Authenticator::Decision d = Decide(kGet, c.leaf);
    EXPECT_EQ(d.status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << c.says;
    EXPECT_THAT(d.status.error_message(), HasSubstr(c.says));
  }
  // Public methods need no certificate.
  EXPECT_TRUE(Decide("/grpc.health.v1.Health/Check", "").status.ok());
}

TEST_F(AuthenticatorTest, ACachedCertificateStillExpiresAndAReloadDropsTheOldCa) {
  const std::string leaf = Cert("spiffe://site/operator/alice", nullptr,
                                absl::Now() - absl::Hours(1), absl::Now() + absl::Hours(2));
  ASSERT_TRUE(Decide(kGet, leaf).status.ok());
  clock_.Advance(absl::Hours(3));
  EXPECT_EQ(Decide(kGet, leaf).status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  clock_.Advance(-absl::Hours(3));
  ASSERT_TRUE(Decide(kGet, leaf).status.ok());

  // The site moves to a new CA: the old one's certificates stop working on reload.
  pki::KeyAndCertificate next = pki::MakeCa({.common_name = "site CA 2"}).value();
  Write("ca.pem", next.certificate_pem);
  ASSERT_TRUE(authenticator_->Reload().ok());
  EXPECT_EQ(Decide(kGet, leaf).status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Decide(kGet, Cert("spiffe://site/operator/alice", &next)).status.ok());

  // A broken policy is not taken: what is in force stays.
  Write("policy.yaml", "grants: [{identity: x, role: admin}]\n");
  EXPECT_EQ(authenticator_->Reload().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Decide(kGet, Cert("spiffe://site/operator/alice", &next)).status.ok());
}

// gRPC's AuthContext as a connection has it: one, shared by every call on the connection,
// whose properties can only be added to.
class ConnectionAuthContext final : public grpc::AuthContext {
 public:
  explicit ConnectionAuthContext(std::string leaf_pem) {
    AddProperty(GRPC_X509_PEM_CERT_PROPERTY_NAME, leaf_pem);
  }
  bool IsPeerAuthenticated() const override { return !peer_identity_name_.empty(); }
  std::vector<grpc::string_ref> GetPeerIdentity() const override {
    return FindPropertyValues(peer_identity_name_);
  }
  std::string GetPeerIdentityPropertyName() const override { return peer_identity_name_; }
  std::vector<grpc::string_ref> FindPropertyValues(const std::string& name) const override {
    std::vector<grpc::string_ref> out;
    for (const auto& [key, value] : properties_) {
      if (key == name) out.emplace_back(value);
    }
    return out;
  }
  grpc::AuthPropertyIterator begin() const override { return End(); }
  grpc::AuthPropertyIterator end() const override { return End(); }
  void AddProperty(const std::string& key, const grpc::string_ref& value) override {
    properties_.emplace_back(key, std::string(value.data(), value.size()));
  }
  bool SetPeerIdentityPropertyName(const std::string& name) override {
    peer_identity_name_ = name;
    return true;
  }
  size_t size() const { return properties_.size(); }

 private:
  // Iteration is not used by the gatekeeper; the iterator's constructor is protected.
  struct EndIterator : grpc::AuthPropertyIterator {};
  static grpc::AuthPropertyIterator End() { return EndIterator(); }

  std::deque<std::pair<std::string, std::string>> properties_;  // Stable for string_refs.
  std::string peer_identity_name_;
};

grpc::Status Call(Authenticator& gate, grpc::AuthContext& connection, const std::string& method) {
  const std::multimap<grpc::string_ref, grpc::string_ref> metadata = {{":path", method}};
  return gate.Process(metadata, &connection, nullptr, nullptr);
}

TEST_F(AuthenticatorTest, ACallOnAnOpenConnectionIsDecidedOnThePolicyInForceAndWritesNothing) {
  const std::string leaf = Cert("spiffe://site/job/ml");
  ConnectionAuthContext connection(leaf);
  Write("policy.yaml", R"(grants:
  - {identity: spiffe://site/job/ml, role: job, tenants: [team-a, team-b]}
  - {identity: spiffe://site/operator/*, role: operator}
)");
  ASSERT_TRUE(authenticator_->Reload().ok());
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(Call(*authenticator_, connection, kGet).ok());
  // The connection holds what the handshake put there, however many calls it made.
  EXPECT_EQ(connection.size(), 1u);
  GrantSource::Resolved resolved = authenticator_->Resolve(kGet, leaf, "");
  EXPECT_EQ(resolved.identity, "spiffe://site/job/ml");
  ASSERT_TRUE(resolved.grant.has_value());
  EXPECT_EQ(resolved.grant->tenants, (std::vector<std::string>{"team-a", "team-b"}));

  // Narrowing the tenants reaches the next resolution; a role that lacks the method's
  // permission now gives no grant, though the identity stays known.
  Write("policy.yaml", R"(grants:
  - {identity: spiffe://site/job/ml, role: job, tenants: [team-a]}
)");
  ASSERT_TRUE(authenticator_->Reload().ok());
  EXPECT_TRUE(Call(*authenticator_, connection, kGet).ok());
  EXPECT_EQ(authenticator_->Resolve(kGet, leaf, "").grant->tenants,
            std::vector<std::string>{"team-a"});
  Write("policy.yaml", "grants: [{identity: spiffe://site/job/ml, role: viewer}]\n");
  ASSERT_TRUE(authenticator_->Reload().ok());
  constexpr char kRelease[] = "/fleet.v1.TopologyService/ReleaseTopology";
  EXPECT_EQ(Call(*authenticator_, connection, kRelease).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  resolved = authenticator_->Resolve(kRelease, leaf, "");
  EXPECT_EQ(resolved.identity, "spiffe://site/job/ml");
  EXPECT_FALSE(resolved.grant.has_value());
  Write("policy.yaml", "grants: []\n");
  ASSERT_TRUE(authenticator_->Reload().ok());
  EXPECT_EQ(Call(*authenticator_, connection, kGet).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_FALSE(authenticator_->Resolve(kGet, leaf, "").grant.has_value());

  // A CA dropped from the bundle refuses the open connection's next call.
  Write("policy.yaml", "grants: [{identity: spiffe://site/job/*, role: job}]\n");
  ASSERT_TRUE(authenticator_->Reload().ok());
  ASSERT_TRUE(Call(*authenticator_, connection, kGet).ok());
  Write("ca.pem", pki::MakeCa({.common_name = "site CA 2"}).value().certificate_pem);
  ASSERT_TRUE(authenticator_->Reload().ok());
  EXPECT_EQ(Call(*authenticator_, connection, kGet).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  resolved = authenticator_->Resolve(kGet, leaf, "");
  EXPECT_TRUE(resolved.identity.empty());
  EXPECT_FALSE(resolved.grant.has_value());
  EXPECT_EQ(connection.size(), 1u);
}

}  // namespace
}  // namespace fleet::auth
