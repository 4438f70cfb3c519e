// The client config file and the precedence of flags, environment, context and defaults.
#include "controller/cli/client_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/scratch.h"

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;

constexpr char kTwoContexts[] =
    "current-context: demo\n"
    "contexts:\n"
    "  - name: demo\n"
    "    server: 127.0.0.1:50051\n"
    "    ca: pki/ca.pem\n"
    "    cert: pki/operator.pem\n"
    "    key: /abs/operator.key\n"
    "  - name: lab\n"
    "    server: fleet-lab:50051\n"
    "    insecure: true\n";

ClientConfig Parsed(const std::string& text, const std::string& path = "/etc/fleet/config.yaml") {
  absl::StatusOr<ClientConfig> config = ParseClientConfig(text, path);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : ClientConfig{};
}

std::string Problem(const std::string& text) {
  absl::StatusOr<ClientConfig> config = ParseClientConfig(text, "c.yaml");
  EXPECT_FALSE(config.ok()) << text;
  if (!config.ok()) {
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  }
  return config.ok() ? "" : std::string(config.status().message());
}

TEST(ClientConfigTest, ParsesContextsAndResolvesPathsAgainstItsFolder) {
  ClientConfig config = Parsed(kTwoContexts);
  EXPECT_EQ(config.current_context, "demo");
  ASSERT_EQ(config.contexts.size(), 2u);
  const ConfigContext* demo = config.Find("demo");
  ASSERT_NE(demo, nullptr);
  EXPECT_EQ(demo->server, "127.0.0.1:50051");
  EXPECT_EQ(config.Resolve(demo->ca), "/etc/fleet/pki/ca.pem");
  EXPECT_EQ(config.Resolve(demo->key), "/abs/operator.key");
  EXPECT_TRUE(config.Find("lab")->insecure);
  EXPECT_EQ(config.Find("nope"), nullptr);
  EXPECT_EQ(config.ContextNames(), "demo, lab");
}

TEST(ClientConfigTest, EmptyTextHasNoContexts) {
  ClientConfig config = Parsed("");
  EXPECT_TRUE(config.contexts.empty());
  EXPECT_EQ(config.ContextNames(), "(none)");
}

TEST(ClientConfigTest, ProblemsNameFileLineKeyAndRule) {
  EXPECT_THAT(Problem("contexts: []\nusers: []\n"),
              HasSubstr("c.yaml:2: unknown key 'users'; known: contexts, current-context"));
  EXPECT_THAT(Problem("contexts:\n  - name: a\n    sever: x:1\n"),
              HasSubstr("c.yaml:3: unknown key 'sever' in a context; known: ca, cert, insecure, "
                        "key, name, server"));
  EXPECT_THAT(Problem("contexts:\n  - name: a\n  - name: b\n  - name: a\n"),
              HasSubstr("c.yaml:4: context 'a' is named twice (first at line 2)"));
  EXPECT_THAT(Problem("current-context: c\ncontexts:\n  - name: a\n"),
              HasSubstr("c.yaml:1: current-context 'c' is not a context; contexts: a"));
  EXPECT_THAT(Problem("contexts:\n  - server: x:1\n"),
              HasSubstr("c.yaml:2: a context needs a name"));
  EXPECT_THAT(Problem("contexts:\n  - name: a\n    insecure: maybe\n"),
              HasSubstr("c.yaml:3: insecure must be true or false, got 'maybe'"));
  EXPECT_THAT(Problem("contexts:\n  - name: a\n    insecure: true\n    ca: x\n"),
              HasSubstr("c.yaml:2: context 'a' is insecure and has ca/cert/key"));
  EXPECT_THAT(Problem("contexts:\n  - name: a\n    ca: x\n"),
              HasSubstr("c.yaml:2: context 'a' has no cert and key: ca, cert and key go together"));
  EXPECT_THAT(Problem("contexts: {name: a}\n"), HasSubstr("contexts must be a list"));
  EXPECT_THAT(Problem("- a\n"), HasSubstr("must be a mapping"));
  EXPECT_THAT(Problem("contexts: [\n"), HasSubstr("c.yaml:"));
}

TEST(ClientConfigTest, EveryProblemIsListed) {
  const std::string problems = Problem("colour: red\ncontexts:\n  - name: a\n    port: 1\n");
  EXPECT_THAT(problems, HasSubstr("'colour'"));
  EXPECT_THAT(problems, HasSubstr("'port'"));
}

TEST(ClientConfigTest, MissingFileIsAnEmptyConfig) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/client_config_test_none.yaml");
  absl::StatusOr<ClientConfig> config = ReadClientConfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->exists);
  EXPECT_EQ(config->path, path);
  EXPECT_TRUE(config->contexts.empty());
}

TEST(ClientConfigTest, PathPrecedence) {
  ClientEnvironment env;
  env.home = "/home/op";
  ConnectionFlags flags;
  EXPECT_EQ(ClientConfigPath(flags, env), "/home/op/.config/fleet/config.yaml");
  env.xdg_config_home = "/xdg";
  EXPECT_EQ(ClientConfigPath(flags, env), "/xdg/fleet/config.yaml");
  env.config = "/env.yaml";
  EXPECT_EQ(ClientConfigPath(flags, env), "/env.yaml");
  flags.config = "/flag.yaml";
  EXPECT_EQ(ClientConfigPath(flags, env), "/flag.yaml");
  EXPECT_EQ(ClientConfigPath({}, {}), "");
}

TEST(ClientConfigTest, WriteIsAtomicPrivateAndReadsBack) {
  const std::string dir = fleet::testing::FreshDirectory("config") + "/new/folder";
  ClientConfig config = Parsed(kTwoContexts, dir + "/config.yaml");
  ASSERT_TRUE(WriteClientConfig(config).ok());
  struct stat st;
  ASSERT_EQ(stat(config.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  int entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(entry.path().filename(), "config.yaml");  // No temporary file left.
  }
  EXPECT_EQ(entries, 1);
  absl::StatusOr<ClientConfig> back = ReadClientConfig(config.path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->exists);
  EXPECT_EQ(ClientConfigYaml(*back), ClientConfigYaml(config));
  EXPECT_EQ(back->Find("demo")->ca, "pki/ca.pem");
  EXPECT_TRUE(back->Find("lab")->insecure);
}

TEST(ClientConfigTest, JsonHoldsTheFileAsWritten) {
  EXPECT_EQ(ClientConfigJson(Parsed(kTwoContexts)),
            "{\n"
            "  \"current-context\": \"demo\",\n"
            "  \"contexts\": [\n"
            "    {\"name\": \"demo\", \"server\": \"127.0.0.1:50051\", \"ca\": \"pki/ca.pem\", "
            "\"cert\": \"pki/operator.pem\", \"key\": \"/abs/operator.key\"},\n"
            "    {\"name\": \"lab\", \"server\": \"fleet-lab:50051\", \"insecure\": true}\n"
            "  ]\n"
            "}\n");
  EXPECT_EQ(ClientConfigJson(ClientConfig{}), "{\n  \"contexts\": []\n}\n");
}

class ResolveTest : public ::testing::Test {
 protected:
  absl::StatusOr<Connection> Resolve() {
    return ResolveConnection(flags_, env_, config_, "localhost:50051");
  }
  std::string Refusal() {
    absl::StatusOr<Connection> connection = Resolve();
    EXPECT_FALSE(connection.ok());
    return connection.ok() ? "" : std::string(connection.status().message());
  }
  ConnectionFlags flags_;
  ClientEnvironment env_;
  ClientConfig config_ = Parsed(kTwoContexts);
};

TEST_F(ResolveTest, CurrentContextGivesServerAndFiles) {
  absl::StatusOr<Connection> c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->context, "demo");
  EXPECT_EQ(c->server, "127.0.0.1:50051");
  EXPECT_EQ(c->tls.ca, "/etc/fleet/pki/ca.pem");
  EXPECT_EQ(c->tls.cert, "/etc/fleet/pki/operator.pem");
  EXPECT_EQ(c->tls.key, "/abs/operator.key");
  EXPECT_FALSE(c->tls.insecure);
}

TEST_F(ResolveTest, FlagBeatsEnvironmentBeatsContextBeatsDefault) {
  env_.server = "env:1";
  env_.ca = "env-ca.pem";
  flags_.server = "flag:1";
  absl::StatusOr<Connection> c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "flag:1");
  EXPECT_EQ(c->tls.ca, "env-ca.pem");
  EXPECT_EQ(c->tls.cert, "/etc/fleet/pki/operator.pem");
  flags_.server.clear();
  flags_.ca = "flag-ca.pem";
  c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "env:1");
  EXPECT_EQ(c->tls.ca, "flag-ca.pem");
  config_.current_context.clear();
  env_ = {};
  flags_ = {};
  flags_.insecure = true;
  c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "localhost:50051");
  EXPECT_EQ(c->context, "");
}

TEST_F(ResolveTest, ContextByFlagBeatsEnvironmentAndCurrent) {
  env_.context = "demo";
  flags_.context = "lab";
  absl::StatusOr<Connection> c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->context, "lab");
  EXPECT_EQ(c->server, "fleet-lab:50051");
  EXPECT_TRUE(c->tls.insecure);
  EXPECT_TRUE(c->tls.ca.empty());
}

TEST_F(ResolveTest, UnknownContextListsTheKnownOnes) {
  env_.context = "prod";
  EXPECT_THAT(Refusal(), HasSubstr("context 'prod' (FLEET_CONTEXT) is not in "
                                   "/etc/fleet/config.yaml; contexts: demo, lab"));
}

TEST_F(ResolveTest, InsecureFlagIgnoresTheContextsFiles) {
  flags_.insecure = true;
  absl::StatusOr<Connection> c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tls.insecure);
  EXPECT_TRUE(c->tls.ca.empty() && c->tls.cert.empty() && c->tls.key.empty());
}

TEST_F(ResolveTest, FilesOverrideAnInsecureContextAndMustBeComplete) {
  flags_.context = "lab";
  env_.ca = "ca.pem";
  env_.cert = "op.pem";
  EXPECT_THAT(Refusal(), HasSubstr("no client key for fleet-lab:50051: give --key or FLEET_KEY"));
  env_.key = "op.key";
  absl::StatusOr<Connection> c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->tls.insecure);
  EXPECT_EQ(c->tls.key, "op.key");
}

TEST_F(ResolveTest, InsecureWithFilesFromOneSourceIsRefused) {
  flags_.insecure = true;
  flags_.cert = "x.pem";
  EXPECT_THAT(Refusal(), HasSubstr("--insecure and --ca/--cert/--key both come from the command "
                                   "line"));
  flags_ = {};
  env_.insecure = "1";
  env_.key = "k";
  EXPECT_THAT(Refusal(), HasSubstr("FLEET_INSECURE and FLEET_CA/FLEET_CERT/FLEET_KEY"));
}

TEST_F(ResolveTest, FleetInsecureMustBeABoolean) {
  env_.insecure = "sometimes";
  EXPECT_THAT(Refusal(), HasSubstr("FLEET_INSECURE='sometimes' is not a boolean"));
  env_.insecure = "true";
  absl::StatusOr<Connection> c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tls.insecure);
  // An explicit 0 asks for TLS even where the context is insecure; lab has no files.
  env_.insecure = "0";
  flags_.context = "lab";
  EXPECT_THAT(Refusal(), HasSubstr("no credentials for fleet-lab:50051"));
}

TEST_F(ResolveTest, NoCredentialsNamesWhatToGive) {
  config_ = ClientConfig{};
  absl::StatusOr<Connection> c = Resolve();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.status().message(),
            "no credentials for localhost:50051: give --ca, --cert and --key (or FLEET_CA, "
            "FLEET_CERT, FLEET_KEY), or a context (fleetctl config use-context NAME); --insecure "
            "for a fleetd started with --insecure");
}

}  // namespace
}  // namespace fleet::cli
