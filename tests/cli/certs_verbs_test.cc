// `fleetctl certs init-ca|issue|show`: a site CA and the certificates it issues, made on the
// local machine, checked by verifying them as fleetd does (common/pki.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/pki.h"
#include "tests/cli/fleetctl_fixture.h"
#include "tests/scratch.h"

namespace fleet::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FleetctlCertsTest : public FleetctlTest {
 protected:
  void SetUp() override {
    FleetctlTest::SetUp();
    dir_ = fleet::testing::FreshDirectory("certs");
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Read(const std::string& name) const {
    absl::StatusOr<std::string> text = pki::ReadPemFile(Path(name), name);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.value_or("");
  }
  static int Mode(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
  }
  // Clears what the previous command printed.
  int RunAgain(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    return Run(std::move(args));
  }

  std::string dir_;
};

TEST_F(FleetctlCertsTest, IssuedClientAndServerCertificatesVerifyAgainstTheCa) {
  ASSERT_EQ(Run({"certs", "init-ca", "--out", Path("ca"), "--site", "lab.fleet"}), kExitOk)
      << err();
  EXPECT_THAT(out(), HasSubstr("CA for site lab.fleet"));
  EXPECT_EQ(Mode(Path("ca/ca.key")), 0600);
  EXPECT_EQ(Mode(Path("ca/ca.pem")), 0644);
  EXPECT_TRUE(connected_to_.empty()) << "certs must not dial";

  ASSERT_EQ(RunAgain({"certs", "issue", "--ca-dir", Path("ca"), "--identity",
                      "spiffe://lab.fleet/operator/alice", "--out", Path("alice"), "--days", "90"}),
            kExitOk)
      << err();
  EXPECT_EQ(Mode(Path("alice.key")), 0600);
  ASSERT_EQ(RunAgain({"certs", "issue", "--ca-dir", Path("ca"), "--server-name",
                      "fleet.lab,10.1.2.3,::1", "--out", Path("fleetd")}),
            kExitOk)
      << err();

  absl::StatusOr<pki::TrustBundle> bundle = pki::TrustBundle::FromPem(Read("ca/ca.pem"), "ca");
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  pki::Verification alice = bundle->Verify(Read("alice.pem"), "", clock_.Now());
  ASSERT_TRUE(alice.ok()) << alice.detail;
  EXPECT_EQ(alice.peer.common_name, "operator/alice");
  EXPECT_THAT(alice.peer.uris, ElementsAre("spiffe://lab.fleet/operator/alice"));
  EXPECT_EQ(alice.peer.not_after, clock_.Now() + absl::Hours(24 * 90));
  // A server certificate is no client's: fleetd would refuse it as a caller's.
  EXPECT_FALSE(bundle->Verify(Read("fleetd.pem"), "", clock_.Now()).ok());

  ASSERT_EQ(RunAgain({"certs", "show", Path("fleetd.pem"), "-o", "json"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("\"subject\": \"fleet.lab\""));
  EXPECT_THAT(out(), HasSubstr("\"dns_names\": [\n    \"fleet.lab\"\n  ]"));
  EXPECT_THAT(out(), HasSubstr("\"10.1.2.3\",\n    \"::1\""));
  EXPECT_THAT(out(), HasSubstr("\"issuer\": \"FLEET site CA lab.fleet\""));
  EXPECT_THAT(out(), HasSubstr("\"validity\": \"valid\""));

  ASSERT_EQ(RunAgain({"certs", "show", Path("alice.pem")}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Subject:   operator/alice\n"));
  EXPECT_THAT(out(), HasSubstr("URIs:      spiffe://lab.fleet/operator/alice\n"));
  clock_.Advance(absl::Hours(24 * 91));
  ASSERT_EQ(RunAgain({"certs", "show", Path("alice.pem"), "-o", "yaml"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("validity: expired"));
}

TEST_F(FleetctlCertsTest, DaysHelpNamesTheDefaultsOnce) {
  ASSERT_EQ(RunAgain({"certs", "--help"}), kExitOk) << err();
  EXPECT_THAT(out(),
              HasSubstr("validity in days (default 3650 for a CA, 365 for a certificate)\n"));
  EXPECT_THAT(out(), ::testing::Not(HasSubstr("(default 0)")));
}

TEST_F(FleetctlCertsTest, NothingIsOverwrittenUnlessForcedAndACaNever) {
  ASSERT_EQ(Run({"certs", "init-ca", "--out", Path("ca"), "--site", "lab.fleet"}), kExitOk);
  const std::string ca_key = Read("ca/ca.key");
  EXPECT_EQ(RunAgain({"certs", "init-ca", "--out", Path("ca"), "--site", "lab.fleet"}),
            kExitFailed);
  EXPECT_THAT(
      err(), HasSubstr(Path("ca") + " already holds a CA (ca.key); a CA is never "
                                    "replaced: give another --out, or remove the folder yourself"));
  EXPECT_EQ(RunAgain({"certs", "init-ca", "--out", Path("ca"), "--site", "lab.fleet", "--force"}),
            kExitUsage);
  EXPECT_THAT(err(), HasSubstr("certs init-ca never replaces a CA: --force is for issue"));
  EXPECT_EQ(Read("ca/ca.key"), ca_key);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(Path("ca"))) ++entries;
  EXPECT_EQ(entries, 2) << "a refused init-ca leaves nothing behind";

  const std::vector<std::string> issue = {"certs",      "issue",
                                          "--ca-dir",   Path("ca"),
                                          "--identity", "spiffe://lab.fleet/agent/server1",
                                          "--out",      Path("server1")};
  ASSERT_EQ(RunAgain(issue), kExitOk) << err();
  const std::string first = Read("server1.pem");
  EXPECT_EQ(RunAgain(issue), kExitFailed);
  EXPECT_THAT(err(), HasSubstr("server1.pem exists; give --force to replace it"));
  EXPECT_EQ(Read("server1.pem"), first);
  std::vector<std::string> forced = issue;
  forced.push_back("--force");
  ASSERT_EQ(RunAgain(forced), kExitOk) << err();
  EXPECT_NE(Read("server1.pem"), first);
}

TEST_F(FleetctlCertsTest, BadArgumentsAreRefusedNamingTheFlagAndTheRule) {
  ASSERT_EQ(Run({"certs", "init-ca", "--out", Path("ca"), "--site", "lab.fleet"}), kExitOk);
  struct Case {
    std::vector<std::string> args;
    int exit;
    std::string message;
  };
  const std::string ca = Path("ca");
  const std::vector<Case> cases = {
      {{"certs"}, kExitUsage, "certs needs a subcommand: init-ca, issue, show"},
      {{"certs", "renew"}, kExitUsage, "unknown subcommand 'renew'"},
      {{"certs", "init-ca", "--out", Path("ca2")}, kExitUsage, "needs --out DIR and --site SITE"},
      {{"certs", "issue", "--ca-dir", ca, "--out", Path("x")},
       kExitUsage,
       "one of --identity URI (a client) or --server-name NAMES"},
      {{"certs", "issue", "--ca-dir", ca, "--out", Path("x"), "--identity", "operator/alice"},
       kExitFailed,
       "--identity: 'operator/alice' is not spiffe://SITE/ROLE/NAME"},
      {{"certs", "issue", "--ca-dir", ca, "--out", Path("x"), "--identity",
        "spiffe://lab.fleet/admin/bob"},
       kExitFailed,
       "role 'admin' of 'spiffe://lab.fleet/admin/bob' is none of operator"},
      {{"certs", "issue", "--ca-dir", ca, "--out", Path("x"), "--server-name", " , "},
       kExitFailed,
       "--server-name: ' , ' names no host"},
      {{"certs", "issue", "--ca-dir", ca, "--out", Path("x"), "--identity",
        "spiffe://lab.fleet/job/a", "--days", "-1"},
       kExitFailed,
       "--days: -1 is not between 1 and 36500"},
      {{"certs", "issue", "--ca-dir", Path("nowhere"), "--out", Path("x"), "--identity",
        "spiffe://lab.fleet/job/a"},
       kExitFailed,
       "cannot read CA certificate"},
      {{"certs", "issue", "--ca-dir", ca, "--out", Path("x"), "--identity",
        "spiffe://other.fleet/job/a"},
       kExitFailed,
       "--identity: site 'other.fleet' of 'spiffe://other.fleet/job/a' is not the site of the CA "
       "in " +
           ca + " ('lab.fleet')"},
      {{"certs", "issue", "--ca-dir", ca, "--out", Path("x"), "--server-name", "fleet.lab:50051"},
       kExitFailed,
       "--server-name: 'fleet.lab:50051' is neither an IP address nor a host name (no port, path "
       "or space)"},
      {{"certs", "issue", "--ca-dir", ca, "--out", Path("x.pem"), "--identity",
        "spiffe://lab.fleet/job/a"},
       kExitUsage,
       "is the path without extension: issue writes OUT.pem and OUT.key"},
      {{"certs", "show"}, kExitUsage, "certs show needs one FILE"},
      {{"certs", "show", Path("ca/ca.key")}, kExitFailed, "no PEM certificate"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(RunAgain(c.args), c.exit) << absl::StrJoin(c.args, " ");
    EXPECT_THAT(err(), HasSubstr(c.message)) << absl::StrJoin(c.args, " ");
  }
  EXPECT_FALSE(std::filesystem::exists(Path("x.pem")));
  EXPECT_FALSE(std::filesystem::exists(Path("x.key")));
  EXPECT_FALSE(std::filesystem::exists(Path("ca2")));
}

}  // namespace
}  // namespace fleet::cli
