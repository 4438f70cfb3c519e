// fleetd's config file and the daemon assembled in-process.
#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <fstream>

#include "controller/fleetd/config.h"
#include "controller/fleetd/daemon.h"
#include "fleet/v1/inventory.grpc.pb.h"
#include "tests/integration/subprocess.h"

namespace fleet::fleetd {
namespace {

using ::testing::HasSubstr;

TEST(FleetdConfigTest, ParsesEverySetting) {
  absl::StatusOr<FleetdConfig> config = ParseFleetdConfig(R"(
listen_address: 0.0.0.0
metrics_listen_address: 10.0.0.5
grpc_port: 7000
metrics_port: 7001
tls_ca_file: /etc/fleet/tls/ca.pem
tls_cert_file: /etc/fleet/tls/fleetd.pem
tls_key_file: /etc/fleet/tls/fleetd.key
policy_file: /etc/fleet/policy.yaml
tls_reload_interval_seconds: 5
state_dir: /srv/fleet
inventory: /etc/fleet/site.yaml
switch_credentials: /etc/fleet/credentials.yaml
shutdown_grace_seconds: 3
agent_heartbeat_ms: 2000
agent_heartbeats_per_second: 0
log_level: debug
default_lease_seconds: 600
reconcile_interval_seconds: 0
unknown_cross_connects: adopt
armed_light_wait_ms: 0
events_max_age_days: 7
events_max_count: 5000
ended_allocations_max_age_days: 0
ended_allocations_max_count: 20
retention_interval_seconds: 30
retention_batch_rows: 100
retention_pass_max_rows: 1000
)",
                                                          "fleetd.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen_address, "0.0.0.0");
  EXPECT_EQ(config->metrics_listen_address, "10.0.0.5");
  EXPECT_EQ(config->tls_ca_file, "/etc/fleet/tls/ca.pem");
  EXPECT_EQ(config->tls_cert_file, "/etc/fleet/tls/fleetd.pem");
  EXPECT_EQ(config->tls_key_file, "/etc/fleet/tls/fleetd.key");
  EXPECT_EQ(config->policy_file, "/etc/fleet/policy.yaml");
  EXPECT_EQ(config->tls_reload_interval, absl::Seconds(5));
  EXPECT_FALSE(config->insecure);
  EXPECT_EQ(config->grpc_port, 7000);
  EXPECT_EQ(config->metrics_port, 7001);
  EXPECT_EQ(config->state_dir, "/srv/fleet");
  EXPECT_EQ(config->inventory, "/etc/fleet/site.yaml");
  EXPECT_EQ(config->switch_credentials, "/etc/fleet/credentials.yaml");
  EXPECT_EQ(config->shutdown_grace, absl::Seconds(3));
  EXPECT_EQ(config->agent_heartbeat, absl::Seconds(2));
  EXPECT_EQ(config->agent_heartbeats_per_second, 0);
  EXPECT_EQ(config->log_level, "debug");
  EXPECT_EQ(config->default_lease, absl::Minutes(10));
  EXPECT_EQ(config->reconcile_interval, absl::ZeroDuration());
  EXPECT_EQ(config->unknown_cross_connects, "adopt");
  EXPECT_EQ(config->armed_light_wait, absl::ZeroDuration());
  EXPECT_EQ(config->retention.events.max_age, absl::Hours(7 * 24));
  EXPECT_EQ(config->retention.events.max_count, 5000);
  EXPECT_EQ(config->retention.ended_allocations.max_age, absl::ZeroDuration());
  EXPECT_EQ(config->retention.ended_allocations.max_count, 20);
  EXPECT_EQ(config->retention.interval, absl::Seconds(30));
  EXPECT_EQ(config->retention.batch_rows, 100);
  EXPECT_EQ(config->retention.pass_max_rows, 1000);
  EXPECT_TRUE(ValidateFleetdConfig(*config).ok());
}

TEST(FleetdConfigTest, TheShippedConfigParses) {
  absl::StatusOr<FleetdConfig> config =
      ReadFleetdConfigFile(std::string(FLEET_SOURCE_DIR) + "/deploy/config/fleetd.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(ValidateFleetdConfig(*config).ok());
  EXPECT_EQ(config->unknown_cross_connects, "report");
  EXPECT_EQ(config->armed_light_wait, absl::Seconds(5));
  EXPECT_EQ(config->agent_heartbeats_per_second, 500);
  EXPECT_EQ(config->retention.events.max_age, absl::Hours(30 * 24));
  EXPECT_EQ(config->retention.events.max_count, 1'000'000);
  EXPECT_EQ(config->retention.ended_allocations.max_age, absl::Hours(30 * 24));
  EXPECT_EQ(config->retention.ended_allocations.max_count, 100'000);
  EXPECT_EQ(config->retention.interval, absl::Seconds(60));
}

TEST(FleetdConfigTest, EmptyFileMeansDefaults) {
  absl::StatusOr<FleetdConfig> config = ParseFleetdConfig("", "fleetd.yaml");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->grpc_port, 50051);
  EXPECT_EQ(config->state_dir, "/var/lib/fleet");
  // Retention is on by default: history is bounded without any setting.
  EXPECT_EQ(config->retention.events.max_age, absl::Hours(30 * 24));
  EXPECT_EQ(config->retention.events.max_count, 1'000'000);
  EXPECT_EQ(config->retention.ended_allocations.max_age, absl::Hours(30 * 24));
  EXPECT_EQ(config->retention.ended_allocations.max_count, 100'000);
  EXPECT_EQ(config->retention.interval, absl::Seconds(60));
  EXPECT_EQ(config->retention.batch_rows, 500);
  EXPECT_EQ(config->metrics_listen_address, "127.0.0.1");
  // There is no default for the TLS files: without them, only --insecure starts.
  EXPECT_EQ(ValidateFleetdConfig(*config).message(),
            "mutual TLS needs tls_ca_file, tls_cert_file, tls_key_file, policy_file (flags "
            "--tls-ca, --tls-cert, --tls-key, --policy); or --insecure for plaintext");
  config->insecure = true;
  EXPECT_TRUE(ValidateFleetdConfig(*config).ok());
  config->policy_file = "/etc/fleet/policy.yaml";
  EXPECT_EQ(ValidateFleetdConfig(*config).message(),
            "--insecure serves plaintext, yet policy_file is set: choose one");
}

TEST(FleetdConfigTest, EveryProblemIsNamedWithItsLine) {
  absl::StatusOr<FleetdConfig> config =
      ParseFleetdConfig("grpc_port: many\nstate_dri: /tmp\nlisten_address: [a, b]\n", "f.yaml");
  ASSERT_FALSE(config.ok());
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("f.yaml:1: 'grpc_port' must be a whole number, not 'many'"));
  EXPECT_THAT(message, HasSubstr("f.yaml:2: unknown setting 'state_dri'"));
  EXPECT_THAT(message, HasSubstr("f.yaml:3: 'listen_address' must be a single value"));
}

TEST(FleetdConfigTest, ValidationNamesTheValue) {
  FleetdConfig config;
  config.grpc_port = 70000;
  config.log_level = "loud";
  config.unknown_cross_connects = "ignore";
  config.armed_light_wait = absl::Milliseconds(-1);
  config.agent_heartbeat = absl::ZeroDuration();
  config.agent_heartbeats_per_second = -1;
  absl::Status status = ValidateFleetdConfig(config);
  EXPECT_THAT(std::string(status.message()), HasSubstr("agent_heartbeat_ms 0 must be positive"));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("agent_heartbeats_per_second -1 is negative (0: the interval never "
                        "lengthens)"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("armed light wait is negative"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("unknown_cross_connects 'ignore'"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("grpc_port 70000 is not in 0..65535"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("log_level 'loud' is not one of"));
}

TEST(FleetdConfigTest, RetentionProblemsNameTheKeyTheValueAndTheRule) {
  absl::StatusOr<FleetdConfig> parsed =
      ParseFleetdConfig("events_max_count: lots\nretention_batch_rows: 1.5\n", "f.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()),
              HasSubstr("f.yaml:1: 'events_max_count' must be a whole number, not 'lots'"));
  EXPECT_THAT(std::string(parsed.status().message()),
              HasSubstr("f.yaml:2: 'retention_batch_rows' must be a whole number, not '1.5'"));

  parsed = ParseFleetdConfig(R"(
events_max_age_days: -1
events_max_count: -5
ended_allocations_max_age_days: 40000
ended_allocations_max_count: -1
retention_interval_seconds: -60
retention_batch_rows: 0
retention_pass_max_rows: -1
)",
                             "f.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const std::string message(ValidateFleetdConfig(*parsed).message());
  EXPECT_THAT(message, HasSubstr("events_max_age_days -1 is not in 0..36500"));
  EXPECT_THAT(message, HasSubstr("events_max_count -5 is negative"));
  EXPECT_THAT(message, HasSubstr("ended_allocations_max_age_days 40000 is not in 0..36500"));
  EXPECT_THAT(message, HasSubstr("ended_allocations_max_count -1 is negative"));
  EXPECT_THAT(message, HasSubstr("retention_interval_seconds -60 is negative"));
  EXPECT_THAT(message, HasSubstr("retention_batch_rows 0 is not in 1..10000"));
  EXPECT_THAT(message, HasSubstr("retention_pass_max_rows -1 is below retention_batch_rows 0"));

  FleetdConfig config;
  config.retention.batch_rows = 800;
  config.retention.pass_max_rows = 500;
  EXPECT_THAT(std::string(ValidateFleetdConfig(config).message()),
              HasSubstr("retention_pass_max_rows 500 is below retention_batch_rows 800"));
  // Zero turns a limit, or background pruning, off: allowed.
  config = FleetdConfig();
  config.insecure = true;
  config.retention.events = {};
  config.retention.ended_allocations = {};
  config.retention.interval = absl::ZeroDuration();
  EXPECT_TRUE(ValidateFleetdConfig(config).ok());
}

FleetdConfig TestConfig(const std::string& state_dir) {
  FleetdConfig config;
  config.grpc_port = 0;
  config.metrics_port = 0;
  config.state_dir = state_dir;
  config.insecure = true;
  return config;
}

TEST(FleetdTest, ServesInventoryAppliedAtStartAndKeepsItAcrossRestarts) {
  SystemClock clock;
  FleetdConfig config = TestConfig(testing::FreshDirectory("state"));
  config.inventory = std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-gen1.yaml";
  {
    absl::StatusOr<std::unique_ptr<Fleetd>> daemon = Fleetd::Start(config, &clock);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    EXPECT_THAT((*daemon)->grpc_address(), HasSubstr("127.0.0.1:"));
    EXPECT_NE((*daemon)->grpc_address(), "127.0.0.1:0");
    absl::StatusOr<std::string> metrics =
        testing::HttpGet((*daemon)->metrics_address(), "/metrics");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_THAT(*metrics, HasSubstr("fleet_build_info{version=\""));
    // Retention's series exist from the start; the database's size is read at the scrape.
    EXPECT_THAT(*metrics, HasSubstr("fleet_store_pruned_rows_total{kind=\"events\"} 0"));
    EXPECT_THAT(*metrics, HasSubstr("fleet_store_pruned_rows_total{kind=\"allocations\"} 0"));
    EXPECT_THAT(*metrics, HasSubstr("fleet_store_retention_passes_total{outcome=\"failed\"} 0"));
    EXPECT_THAT(*metrics, ::testing::ContainsRegex("fleet_store_database_bytes [1-9]"));
  }
  config.inventory.clear();
  absl::StatusOr<std::unique_ptr<Fleetd>> restarted = Fleetd::Start(config, &clock);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  auto stub = v1::InventoryService::NewStub(
      grpc::CreateChannel((*restarted)->grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::ListOnicsResponse onics;
  ASSERT_TRUE(stub->ListOnics(&context, {}, &onics).ok());
  EXPECT_EQ(onics.onics_size(), 36);
}

TEST(FleetdTest, RefusesToStartOnABrokenInventory) {
  SystemClock clock;
  const std::string dir = testing::FreshDirectory("state");
  const std::string bad = dir + "/bad.yaml";
  {
    std::ofstream out(bad);
    out << "hosts:\n  - {name: h1}\n  - {name: h1}\n";
  }
  FleetdConfig config = TestConfig(dir + "/state");
  config.inventory = bad;
  absl::StatusOr<std::unique_ptr<Fleetd>> daemon = Fleetd::Start(config, &clock);
  ASSERT_FALSE(daemon.ok());
  EXPECT_EQ(daemon.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(daemon.status().message()), HasSubstr("duplicate host id 'h1'"));
  EXPECT_THAT(std::string(daemon.status().message()), HasSubstr(bad));
}

TEST(FleetdTest, MissingCredentialsFileIsNamed) {
  SystemClock clock;
  FleetdConfig config = TestConfig(testing::FreshDirectory("state"));
  config.switch_credentials = "/nonexistent/credentials.yaml";
  absl::StatusOr<std::unique_ptr<Fleetd>> daemon = Fleetd::Start(config, &clock);
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(std::string(daemon.status().message()),
              HasSubstr("switch credentials file /nonexistent/credentials.yaml does not exist"));
}

}  // namespace
}  // namespace fleet::fleetd
