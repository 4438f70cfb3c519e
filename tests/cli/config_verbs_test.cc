// `fleetctl config ...` and how fleetctl picks its server and credentials from flags, the
// environment and the config file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/pki.h"
#include "tests/cli/fleetctl_fixture.h"
#include "tests/scratch.h"

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class FleetctlConfigTest : public FleetctlTest {
 protected:
  void SetUp() override {
    FleetctlTest::SetUp();
    // A home of this test's own: nothing of the user's config is read or written.
    home_ = fleet::testing::FreshDirectory("home");
    env_.variables = {};
    env_.variables.home = home_;
    config_path_ = home_ + "/.config/fleet/config.yaml";
  }
  std::string ConfigText() {
    std::ifstream in(config_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  void WriteConfig(const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(config_path_).parent_path());
    std::ofstream(config_path_) << text;
  }

  std::string home_;
  std::string config_path_;
};

TEST_F(FleetctlConfigTest, NoCredentialsIsUsageErrorAndDoesNotDial) {
  env_.variables.server = "fleet.example:50051";
  EXPECT_EQ(Run({"get", "switches"}), kExitUsage);
  EXPECT_EQ(err(),
            "fleetctl: no credentials for fleet.example:50051: give --ca, --cert and --key (or "
            "FLEET_CA, FLEET_CERT, FLEET_KEY), or a context (fleetctl config use-context NAME); "
            "--insecure for a fleetd started with --insecure\n");
  EXPECT_TRUE(connected_to_.empty());
}

TEST_F(FleetctlConfigTest, InsecureFlagSendsThePrincipal) {
  ASSERT_EQ(Run({"--insecure", "get", "switches"}), kExitOk) << err();
  EXPECT_TRUE(connected_with_.insecure);
  EXPECT_EQ(inventory_.principal(), "operator:tester");
}

TEST_F(FleetctlConfigTest, TlsSendsNoPrincipal) {
  // The fakes serve plaintext: this connector dials them so, to see what the verb sends when
  // fleetctl believes it speaks TLS.
  ClientTlsFiles seen;
  auto connect = [&](const std::string& address,
                     const ClientTlsFiles& tls) -> absl::StatusOr<ServerStubs> {
    seen = tls;
    return NewServerStubs(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  };
  std::ostringstream out, err;
  ASSERT_EQ(
      RunFleetctl({"get", "switches", "--ca", "ca.pem", "--cert", "op.pem", "--key", "op.key"},
                  env_, connect, out, err),
      kExitOk)
      << err.str();
  EXPECT_FALSE(seen.insecure);
  EXPECT_EQ(seen.ca, "ca.pem");
  EXPECT_EQ(seen.cert, "op.pem");
  EXPECT_EQ(seen.key, "op.key");
  EXPECT_EQ(inventory_.principal(), "");
}

TEST_F(FleetctlConfigTest, UnreadableCertificateIsNotFound) {
  const std::string missing = home_ + "/nothing.pem";
  EXPECT_EQ(Run({"get", "hosts", "--ca", missing, "--cert", missing, "--key", missing}),
            kExitFailed);
  EXPECT_EQ(err(), absl::StrCat("error: NOT_FOUND: cannot read CA bundle ", missing,
                                ": No such file or directory\n"));
}

// Plaintext to a server that speaks TLS: gRPC says only that the socket closed; fleetctl says
// why, naming what asked for plaintext.
TEST_F(FleetctlConfigTest, PlaintextToATlsServerSaysToDropInsecure) {
  pki::CaRequest ca_request;
  ca_request.common_name = "test CA";
  absl::StatusOr<pki::KeyAndCertificate> ca = pki::MakeCa(ca_request);
  ASSERT_TRUE(ca.ok()) << ca.status();
  pki::CertificateRequest server_request;
  server_request.ip_addresses = {"127.0.0.1"};
  server_request.server = true;
  absl::StatusOr<pki::KeyAndCertificate> server = pki::Issue(*ca, server_request);
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::SslServerCredentialsOptions tls;
  tls.pem_key_cert_pairs.push_back({server->private_key_pem, server->certificate_pem});
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(tls), &port);
  fleet::testing::FakeInventoryService inventory(clock_.Now());
  builder.RegisterService(&inventory);
  std::unique_ptr<grpc::Server> tls_server = builder.BuildAndStart();
  ASSERT_NE(tls_server, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", port);

  EXPECT_EQ(Run({"get", "switches", "--insecure", "--server", address, "--timeout", "5"}),
            kExitFailed);
  EXPECT_THAT(err(), HasSubstr("error: UNAVAILABLE: "));
  EXPECT_THAT(err(), HasSubstr(": this fleetd serves TLS; drop --insecure\n"));
  env_.variables.insecure = "1";
  EXPECT_EQ(Run({"get", "switches", "--server", address, "--timeout", "5"}), kExitFailed);
  EXPECT_THAT(err(), HasSubstr(": this fleetd serves TLS; drop FLEET_INSECURE\n"));
  // Nothing is added when no server is there at all.
  const std::string nowhere = "unix:" + ::testing::TempDir() + "/no-fleetd.sock";
  EXPECT_EQ(Run({"get", "switches", "--server", nowhere, "--timeout", "2"}), kExitFailed);
  EXPECT_THAT(err(), Not(HasSubstr("serves TLS")));
  tls_server->Shutdown();
}

TEST_F(FleetctlConfigTest, TlsToAPlaintextServerFailsAsUnavailable) {
  const std::string pem = WriteFile("junk.pem", "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(Run({"get", "hosts", "--ca", pem, "--cert", pem, "--key", pem, "--timeout", "2"}),
            kExitFailed);
  EXPECT_THAT(err(), ::testing::StartsWith("error: UNAVAILABLE: "));
}

TEST_F(FleetctlConfigTest, ContextOfTheConfigFileIsDialled) {
  WriteConfig(absl::StrCat("current-context: local\ncontexts:\n  - name: local\n    server: ",
                           address_, "\n    insecure: true\n  - name: far\n    server: far:1\n",
                           "    ca: pki/ca.pem\n    cert: pki/op.pem\n    key: pki/op.key\n"));
  env_.default_server = "localhost:1";
  ASSERT_EQ(Run({"get", "switches"}), kExitOk) << err();
  EXPECT_EQ(connected_to_, address_);
  EXPECT_EQ(inventory_.principal(), "operator:tester");
  // --context picks another; its relative files are the config folder's.
  EXPECT_EQ(Run({"get", "switches", "--context", "far"}), kExitFailed);
  EXPECT_EQ(connected_to_, "far:1");
  EXPECT_EQ(connected_with_.ca, home_ + "/.config/fleet/pki/ca.pem");
  EXPECT_THAT(err(), HasSubstr("cannot read CA bundle " + home_ + "/.config/fleet/pki/ca.pem"));
  // FLEET_CONFIG moves the file, --config beats it.
  const std::string elsewhere = WriteFile("elsewhere.yaml", "contexts: []\n");
  env_.variables.config = elsewhere;
  EXPECT_EQ(Run({"get", "switches"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("no credentials for localhost:1"));
  EXPECT_EQ(Run({"get", "switches", "--config", config_path_}), kExitOk) << err();
}

TEST_F(FleetctlConfigTest, MalformedConfigFailsNamingFileAndLine) {
  WriteConfig("contexts:\n  - name: a\n    server: x:1\n    servr: y\n");
  EXPECT_EQ(Run({"get", "switches", "--insecure"}), kExitFailed);
  EXPECT_THAT(err(), HasSubstr(absl::StrCat("error: INVALID_ARGUMENT: ", config_path_,
                                            ":4: unknown key 'servr' in a context")));
  EXPECT_TRUE(connected_to_.empty());
}

TEST_F(FleetctlConfigTest, SetContextCreatesUpdatesAndKeepsTheOthers) {
  ASSERT_EQ(Run({"config", "set-context", "lab", "--server", "lab:1", "--insecure"}), kExitOk)
      << err();
  EXPECT_EQ(out(), absl::StrCat("context lab created in ", config_path_, "\n"));
  ASSERT_EQ(Run({"config", "set-context", "demo", "--server", "demo:1", "--ca", "/p/ca.pem",
                 "--cert", "/p/op.pem", "--key", "/p/op.key"}),
            kExitOk)
      << err();
  ASSERT_EQ(Run({"config", "set-context", "demo", "--server", "demo:2"}), kExitOk) << err();
  EXPECT_EQ(out(), absl::StrCat("context demo updated in ", config_path_, "\n"));
  EXPECT_EQ(ConfigText(),
            "contexts:\n"
            "  - name: lab\n"
            "    server: lab:1\n"
            "    insecure: true\n"
            "  - name: demo\n"
            "    server: demo:2\n"
            "    ca: /p/ca.pem\n"
            "    cert: /p/op.pem\n"
            "    key: /p/op.key\n");
  struct stat st;
  ASSERT_EQ(stat(config_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Going plaintext drops the files; a context is one or the other.
  ASSERT_EQ(Run({"config", "set-context", "demo", "--insecure"}), kExitOk) << err();
  EXPECT_THAT(ConfigText(), Not(HasSubstr("ca:")));
  EXPECT_TRUE(connected_to_.empty());
}

TEST_F(FleetctlConfigTest, SetContextRefusesHalfAnIdentityAndInsecureWithFiles) {
  EXPECT_EQ(Run({"config", "set-context", "x", "--ca", "/ca.pem"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("context 'x' would not have all of ca, cert and key"));
  EXPECT_EQ(Run({"config", "set-context", "x", "--ca", "/ca.pem", "--insecure"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--insecure and --ca/--cert/--key"));
  EXPECT_FALSE(std::filesystem::exists(config_path_));
}

TEST_F(FleetctlConfigTest, SetContextStoresFilesAbsolute) {
  ASSERT_EQ(Run({"config", "set-context", "x", "--ca", "pki/ca.pem", "--cert", "pki/op.pem",
                 "--key", "pki/op.key"}),
            kExitOk)
      << err();
  EXPECT_THAT(ConfigText(), HasSubstr(absl::StrCat("ca: ", std::filesystem::current_path().string(),
                                                   "/pki/ca.pem\n")));
}

TEST_F(FleetctlConfigTest, UseContextRewritesCurrentOnly) {
  WriteConfig("contexts:\n  - name: a\n    insecure: true\n  - name: b\n    insecure: true\n");
  ASSERT_EQ(Run({"config", "use-context", "b"}), kExitOk) << err();
  EXPECT_EQ(out(), absl::StrCat("current-context is b (", config_path_, ")\n"));
  EXPECT_EQ(ConfigText(),
            "current-context: b\ncontexts:\n  - name: a\n    insecure: true\n  - name: b\n"
            "    insecure: true\n");
  EXPECT_EQ(Run({"config", "use-context", "c"}), kExitFailed);
  EXPECT_EQ(err(), absl::StrCat("error: NOT_FOUND: context 'c' is not in ", config_path_,
                                "; contexts: a, b\n"));
  EXPECT_THAT(ConfigText(), HasSubstr("current-context: b\n"));
}

TEST_F(FleetctlConfigTest, GetContextsAndViewWithoutCredentials) {
  WriteConfig(
      "current-context: demo\ncontexts:\n  - name: demo\n    server: 127.0.0.1:50051\n"
      "    ca: pki/ca.pem\n    cert: pki/op.pem\n    key: pki/op.key\n"
      "  - name: lab\n    server: lab:1\n    insecure: true\n");
  ASSERT_EQ(Run({"config", "get-contexts"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "CURRENT  NAME  SERVER           AUTH\n"
            "*        demo  127.0.0.1:50051  tls\n"
            "         lab   lab:1            insecure\n");
  ASSERT_EQ(Run({"config", "view"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("*        demo  127.0.0.1:50051  tls       pki/ca.pem"));
  ASSERT_EQ(Run({"config", "view", "-o", "yaml"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("current-context: demo\ncontexts:\n  - name: demo\n"));
  ASSERT_EQ(Run({"config", "view", "-o", "json"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("\"current-context\": \"demo\""));
  EXPECT_TRUE(connected_to_.empty());
}

TEST_F(FleetctlConfigTest, ViewOfNoFile) {
  ASSERT_EQ(Run({"config", "view"}), kExitOk) << err();
  EXPECT_EQ(out(), absl::StrCat("No contexts in ", config_path_, " (no such file).\n"));
  ASSERT_EQ(Run({"config", "view", "-o", "yaml"}), kExitOk) << err();
  EXPECT_EQ(out(), "contexts: []\n");
}

TEST_F(FleetctlConfigTest, SubcommandsAreChecked) {
  EXPECT_EQ(Run({"config"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("config needs a subcommand: view, get-contexts, use-context, "
                               "set-context"));
  EXPECT_EQ(Run({"config", "delete-context", "x"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown subcommand 'delete-context'"));
  EXPECT_EQ(Run({"config", "use-context"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("config use-context needs one context NAME"));
  EXPECT_EQ(Run({"config", "view", "extra"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("config view takes no arguments"));
}

TEST_F(FleetctlConfigTest, HelpAndCompletionKnowConfigAndTheConnectionFlags) {
  ASSERT_EQ(Run({"--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("\n  config "));
  for (const char* flag : {"--ca", "--cert", "--key", "--insecure", "--context", "--config"}) {
    EXPECT_THAT(out(), HasSubstr(flag)) << flag;
  }
  ASSERT_EQ(Run({"config", "--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("set-context NAME"));
  ASSERT_EQ(Run({"completion", "bash"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("get-contexts"));
  EXPECT_THAT(out(), HasSubstr("--insecure"));
  bool found = false;
  for (const VerbSpec& verb : FleetctlCommandLine().verbs) {
    if (verb.name != "config") continue;
    found = true;
    EXPECT_THAT(verb.words,
                ::testing::ElementsAre("view", "get-contexts", "use-context", "set-context"));
  }
  EXPECT_TRUE(found);
  bool file_flags = false;
  for (const FlagSpec& flag : FleetctlCommandLine().global_flags) {
    if (flag.name == "cert") file_flags = flag.file;
  }
  EXPECT_TRUE(file_flags);
  EXPECT_TRUE(connected_to_.empty());
}

}  // namespace
}  // namespace fleet::cli
