// The agent's config file: how it dials fleetd (mutual TLS files or insecure).
#include "onic_agent/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/scratch.h"

namespace fleet::onic_agent {
namespace {

using ::testing::HasSubstr;

std::string Problem(const std::string& text) {
  absl::StatusOr<AgentConfig> config = ParseAgentConfig(text, "agent.yaml");
  EXPECT_FALSE(config.ok()) << text;
  return config.ok() ? "" : std::string(config.status().message());
}

TEST(AgentConfigTest, ReadsTheTlsFilesResolvedAgainstItsFolder) {
  const std::string dir = fleet::testing::FreshDirectory("agent");
  const std::string path = dir + "/agent.yaml";
  std::ofstream(path) << "controller: fleetd:50051\ntls_ca_file: pki/ca.pem\n"
                         "tls_cert_file: pki/agent.pem\ntls_key_file: /abs/agent.key\n";
  absl::StatusOr<AgentConfig> config = ReadAgentConfigFile(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->tls_ca_file, dir + "/pki/ca.pem");
  EXPECT_EQ(config->tls_cert_file, dir + "/pki/agent.pem");
  EXPECT_EQ(config->tls_key_file, "/abs/agent.key");
  EXPECT_FALSE(config->insecure);
  EXPECT_TRUE(CheckAgentTls(*config).ok());
}

TEST(AgentConfigTest, InsecureIsABoolean) {
  absl::StatusOr<AgentConfig> config = ParseAgentConfig("insecure: true\n", "agent.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->insecure);
  EXPECT_TRUE(CheckAgentTls(*config).ok());
  EXPECT_THAT(Problem("host: a\ninsecure: perhaps\n"),
              HasSubstr("agent.yaml:2: insecure must be true or false, got 'perhaps'"));
}

TEST(AgentConfigTest, SlotPowerIsABooleanOnByDefault) {
  absl::StatusOr<AgentConfig> config = ParseAgentConfig("host: a\n", "agent.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->slot_power);
  config = ParseAgentConfig("slot_power: false\n", "agent.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->slot_power);
  EXPECT_THAT(Problem("host: a\nslot_power: [1]\n"),
              HasSubstr("agent.yaml:2: slot_power must be true or false, got 'a collection'"));
}

TEST(AgentConfigTest, TheMonitorIntervalIsPositiveMillisecondsOneSecondByDefault) {
  absl::StatusOr<AgentConfig> config = ParseAgentConfig("host: a\n", "agent.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->monitor_interval_ms, 1000);
  config = ParseAgentConfig("monitor_interval_ms: 5000\n", "agent.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->monitor_interval_ms, 5000);
  EXPECT_THAT(Problem("host: a\nmonitor_interval_ms: 0\n"),
              HasSubstr("agent.yaml:2: monitor_interval_ms 0 must be between 1 and 3600000"));
}

TEST(AgentConfigTest, InsecureWithFilesIsRefusedByKey) {
  EXPECT_THAT(Problem("insecure: true\ntls_cert_file: a.pem\n"),
              HasSubstr("agent.yaml:1: insecure: true with tls_ca_file/tls_cert_file/"
                        "tls_key_file: the agent dials fleetd either in plaintext"));
}

TEST(AgentConfigTest, SomeButNotAllFilesNamesTheMissing) {
  EXPECT_THAT(Problem("host: a\ntls_cert_file: a.pem\n"),
              HasSubstr("agent.yaml:2: no tls_ca_file and tls_key_file: tls_ca_file, "
                        "tls_cert_file and tls_key_file go together"));
}

TEST(AgentConfigTest, NeitherIsLeftToCheckAgentTls) {
  absl::StatusOr<AgentConfig> config = ParseAgentConfig("host: a\n", "agent.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::Status tls = CheckAgentTls(*config);
  EXPECT_EQ(tls.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tls.message(), HasSubstr("no TLS credentials to dial fleetd: set tls_ca_file, "
                                       "tls_cert_file and tls_key_file"));
  EXPECT_THAT(tls.message(), HasSubstr("insecure: true (--insecure)"));
}

TEST(AgentConfigTest, UnknownKeysListTheTlsOnes) {
  EXPECT_THAT(Problem("tls_ca: x\n"), HasSubstr("tls_ca_file"));
}

TEST(AgentConfigTest, OnicDiscoveryIsReadAndCheckedNamingTheLine) {
  absl::StatusOr<AgentConfig> config = ParseAgentConfig(
      "backend: pcie-sysfs\nonic_discovery:\n  match: [\"10ee:9038\", \"1d0f:*\"]\n"
      "  serial: \"FLT-{dsn}\"\n",
      "agent.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->onic_discovery.has_value());
  ASSERT_EQ(config->onic_discovery->match.size(), 2u);
  EXPECT_EQ(config->onic_discovery->match[0].vendor, 0x10ee);
  EXPECT_EQ(config->onic_discovery->match[0].device, 0x9038);
  EXPECT_EQ(config->onic_discovery->match[1].device, std::nullopt);
  EXPECT_EQ(config->onic_discovery->serial, "FLT-{dsn}");
  // The default serial.
  config = ParseAgentConfig("onic_discovery: {match: \"10ee:9038\"}\n", "agent.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->onic_discovery->serial, "{dsn}");

  EXPECT_THAT(Problem("onic_discovery:\n  match: []\n"),
              HasSubstr("agent.yaml:2: onic_discovery.match needs one or more"));
  EXPECT_THAT(Problem("onic_discovery:\n  match: [\"10ee-9038\"]\n"),
              HasSubstr("agent.yaml:2: onic_discovery.match '10ee-9038' is not VENDOR:DEVICE"));
  EXPECT_THAT(Problem("onic_discovery:\n  match: [\"10ee:9038\"]\n  serial: fixed\n"),
              HasSubstr("agent.yaml:3: onic_discovery.serial 'fixed': it needs {index}"));
  EXPECT_THAT(Problem("onic_discovery:\n  match: [\"10ee:9038\"]\n  slot: 1\n"),
              HasSubstr("unknown onic_discovery setting 'slot'"));
  EXPECT_THAT(Problem("onics: []\nonic_discovery:\n  match: [\"10ee:9038\"]\n"),
              HasSubstr("give onics (a hand list) or onic_discovery, not both"));
}

TEST(AgentConfigTest, DeployExampleIsValid) {
  absl::StatusOr<AgentConfig> config =
      ReadAgentConfigFile(std::string(FLEET_SOURCE_DIR) + "/deploy/config/fleet-onic-agent.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(CheckAgentTls(*config).ok());
  EXPECT_FALSE(config->insecure);
  EXPECT_EQ(config->tls_cert_file, "/etc/fleet/pki/agent.pem");
}

}  // namespace
}  // namespace fleet::onic_agent
