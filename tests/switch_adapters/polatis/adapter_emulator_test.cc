// The Polatis adapter against the real polatis-emu binary over real sockets. Every test
// runs over both protocols: the adapter must behave the same whichever it speaks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "switch_adapters/polatis/polatis_switch.h"
#include "tests/integration/subprocess.h"

namespace fleet::polatis {
namespace {

using fleet::testing::BinaryPath;
using fleet::testing::Daemon;
using fleet::testing::HttpRequest;
using switch_adapters::ApplyResult;
using switch_adapters::CrossConnect;
using switch_adapters::CrossConnectBatch;
using switch_adapters::PortStatus;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Emulator {
  std::unique_ptr<Daemon> process;
  std::string tl1;   // HOST:PORT
  std::string rest;  // HOST:PORT
};

Emulator StartEmulator(std::vector<std::string> extra = {}) {
  Emulator emu;
  std::vector<std::string> argv = {BinaryPath("polatis-emu"),
                                   "--size",
                                   "16x16",
                                   "--tl1-port",
                                   "0",
                                   "--rest-port",
                                   "0",
                                   "--switch-ms",
                                   "0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  absl::StatusOr<std::unique_ptr<Daemon>> started = Daemon::Start(argv);
  EXPECT_TRUE(started.ok()) << started.status();
  if (!started.ok()) return emu;
  emu.process = std::move(*started);
  absl::StatusOr<std::string> tl1 = emu.process->WaitForLine("tl1: ");
  EXPECT_TRUE(tl1.ok()) << tl1.status();
  absl::StatusOr<std::string> rest = emu.process->WaitForLine("rest: ");
  EXPECT_TRUE(rest.ok()) << rest.status();
  emu.tl1 = tl1.value_or("");
  emu.rest = rest.value_or("");
  return emu;
}

std::pair<std::string, uint16_t> Split(const std::string& address) {
  size_t colon = address.rfind(':');
  return {address.substr(0, colon), static_cast<uint16_t>(std::stoi(address.substr(colon + 1)))};
}

class AdapterEmulatorTest : public ::testing::TestWithParam<Protocol> {
 protected:
  void SetUp() override { emu_ = StartEmulator(); }

  std::unique_ptr<switch_adapters::OpticalSwitch> Adapter(PolatisSwitchOptions options = {}) {
    auto [host, port] = Split(GetParam() == Protocol::kTl1 ? emu_.tl1 : emu_.rest);
    options.name = "emu";
    options.protocol = GetParam();
    options.host = host;
    options.port = port;
    if (options.credentials.user.empty()) options.credentials = {"admin", "root"};
    return NewPolatisSwitch(options);
  }

  // The side-channel: a JSON request that must succeed.
  nlohmann::json Sim(const std::string& method, const std::string& path,
                     const nlohmann::json& body = nullptr) {
    absl::StatusOr<fleet::testing::HttpReply> reply =
        HttpRequest(emu_.rest, method, path, body.is_null() ? "" : body.dump());
    EXPECT_TRUE(reply.ok()) << reply.status();
    if (!reply.ok()) return nullptr;
    EXPECT_LT(reply->status, 300) << method << " " << path << ": " << reply->body;
    return reply->body.empty() ? nlohmann::json()
                               : nlohmann::json::parse(reply->body, nullptr, false);
  }

  int64_t CrossConnectsChanged() {
    return Sim("GET", "/sim/v1/counters")["cross_connects_changed"];
  }

  Emulator emu_;
};

TEST_P(AdapterEmulatorTest, IdentityAndSize) {
  absl::StatusOr<switch_adapters::SwitchIdentity> id = Adapter()->Identity();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->ingress_ports, 16u);
  EXPECT_EQ(id->egress_ports, 16u);
  EXPECT_THAT(id->vendor + id->model, HasSubstr("16x16"));
  EXPECT_FALSE(id->serial.empty());
}

TEST_P(AdapterEmulatorTest, BulkApplyReadsBackAndReapplyChangesNothing) {
  auto adapter = Adapter();
  CrossConnectBatch batch;
  for (uint32_t i = 1; i <= 16; ++i) batch.add.push_back({i, 33 - i});
  ApplyResult result = adapter->Apply(batch);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.added.size(), 16u);
  ASSERT_TRUE(result.observed.has_value());
  EXPECT_EQ(result.observed->size(), 16u);
  absl::StatusOr<std::vector<CrossConnect>> read = adapter->ReadCrossConnects();
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->front(), (CrossConnect{1, 32}));

  const int64_t changed = CrossConnectsChanged();
  ApplyResult again = adapter->Apply(batch);
  EXPECT_TRUE(again.status.ok()) << again.status;
  EXPECT_THAT(again.added, IsEmpty());
  EXPECT_EQ(CrossConnectsChanged(), changed);

  // Swap two egresses in one batch: removes first, then adds.
  ApplyResult swapped = adapter->Apply({{{1, 32}, {2, 31}}, {{1, 31}, {2, 32}}});
  ASSERT_TRUE(swapped.status.ok()) << swapped.status;
  EXPECT_THAT(swapped.added, ElementsAre(CrossConnect{1, 31}, CrossConnect{2, 32}));
}

TEST_P(AdapterEmulatorTest, RefusedBatchChangesNothing) {
  auto adapter = Adapter();
  ASSERT_TRUE(adapter->Apply({{}, {{1, 17}}}).status.ok());
  const int64_t changed = CrossConnectsChanged();
  ApplyResult busy = adapter->Apply({{}, {{2, 18}, {3, 17}}});
  EXPECT_EQ(busy.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(busy.status.message()), HasSubstr("egress 17 is in use by 1->17"));
  ApplyResult outside = adapter->Apply({{}, {{2, 40}}});
  EXPECT_EQ(outside.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CrossConnectsChanged(), changed);
}

TEST_P(AdapterEmulatorTest, ShuttersAndPortState) {
  auto adapter = Adapter();
  ASSERT_TRUE(adapter->SetShutters({3, 20}, false).ok());
  Sim("PUT", "/sim/v1/ports/5", {{"failed", true}});
  absl::StatusOr<std::vector<switch_adapters::PortState>> ports = adapter->ReadPorts();
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), 32u);
  EXPECT_EQ((*ports)[2].status, PortStatus::kDisabled);
  EXPECT_EQ((*ports)[19].status, PortStatus::kDisabled);
  EXPECT_EQ((*ports)[4].status, PortStatus::kFailed);
  EXPECT_EQ((*ports)[0].status, PortStatus::kEnabled);
  ASSERT_TRUE(adapter->SetShutters({3, 20}, true).ok());
  ports = adapter->ReadPorts();
  ASSERT_TRUE(ports.ok());
  EXPECT_EQ((*ports)[2].status, PortStatus::kEnabled);
}

TEST_P(AdapterEmulatorTest, PowerFollowsTheLight) {
  auto adapter = Adapter();
  ASSERT_TRUE(adapter->Apply({{}, {{4, 20}}}).status.ok());
  Sim("PUT", "/sim/v1/signals/4", {{"name", "FLT-X/1"}, {"power_dbm", 0.0}});
  absl::StatusOr<std::vector<switch_adapters::PortPower>> power = adapter->ReadPower({4, 20, 21});
  ASSERT_TRUE(power.ok()) << power.status();
  ASSERT_EQ(power->size(), 3u);
  EXPECT_NEAR((*power)[0].dbm, 0.0, 0.01);
  EXPECT_LT((*power)[1].dbm, 0.0);
  EXPECT_GT((*power)[1].dbm, -5.0);
  EXPECT_EQ((*power)[2].dbm, switch_adapters::PortPower::kNoLight);
  Sim("PUT", "/sim/v1/ports/20", {{"power_drop_db", 6.0}});
  absl::StatusOr<std::vector<switch_adapters::PortPower>> dropped = adapter->ReadPower({20});
  ASSERT_TRUE(dropped.ok());
  EXPECT_NEAR((*dropped)[0].dbm, (*power)[1].dbm - 6.0, 0.02);
}

TEST_P(AdapterEmulatorTest, RefusedCommandsAreErrorsAndTheNextCallRecovers) {
  auto adapter = Adapter();
  ASSERT_TRUE(adapter->ReadCrossConnects().ok());  // Logged in, connection up.
  Sim("PUT", "/sim/v1/faults", {{"deny_next", 1}});
  absl::StatusOr<std::vector<CrossConnect>> denied = adapter->ReadCrossConnects();
  EXPECT_FALSE(denied.ok());
  EXPECT_THAT(std::string(denied.status().message()), HasSubstr("emu"));
  EXPECT_TRUE(adapter->ReadCrossConnects().ok());
}

TEST_P(AdapterEmulatorTest, PartialBulkFailureReportsWhatHappened) {
  auto adapter = Adapter();
  Sim("PUT", "/sim/v1/faults", {{"fail_bulk_after", 2}});
  ApplyResult partial = adapter->Apply({{}, {{1, 17}, {2, 18}, {3, 19}, {4, 20}}});
  EXPECT_FALSE(partial.status.ok());
  ASSERT_TRUE(partial.observed.has_value());
  EXPECT_EQ(partial.observed->size(), 2u);
  EXPECT_EQ(partial.added.size(), 2u);
  // Applying the same batch again completes it.
  ApplyResult rest = adapter->Apply({{}, {{1, 17}, {2, 18}, {3, 19}, {4, 20}}});
  ASSERT_TRUE(rest.status.ok()) << rest.status;
  EXPECT_EQ(rest.added.size(), 2u);
}

TEST_P(AdapterEmulatorTest, DroppedConnectionsAreReconnectedTransparently) {
  auto adapter = Adapter();
  ASSERT_TRUE(adapter->Apply({{}, {{1, 17}}}).status.ok());
  Sim("POST", "/sim/v1/faults/drop-connections");
  absl::StatusOr<std::vector<CrossConnect>> read = adapter->ReadCrossConnects();
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(*read, ElementsAre(CrossConnect{1, 17}));
}

TEST_P(AdapterEmulatorTest, ExpiredSessionsLogInAgain) {
  auto adapter = Adapter();
  ASSERT_TRUE(adapter->ReadCrossConnects().ok());
  Sim("PUT", "/sim/v1/faults", {{"expire_sessions", true}});
  ApplyResult result = adapter->Apply({{}, {{2, 18}}});
  EXPECT_TRUE(result.status.ok()) << result.status;
}

TEST_P(AdapterEmulatorTest, SlowSwitchTimesOutThenRecovers) {
  PolatisSwitchOptions options;
  options.command_timeout = absl::Milliseconds(300);
  auto adapter = Adapter(options);
  ASSERT_TRUE(adapter->ReadCrossConnects().ok());
  Sim("PUT", "/sim/v1/faults", {{"latency_ms", 1500}});
  absl::StatusOr<std::vector<CrossConnect>> slow = adapter->ReadCrossConnects();
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kUnavailable) << slow.status();
  Sim("DELETE", "/sim/v1/faults");
  EXPECT_TRUE(adapter->ReadCrossConnects().ok());
}

TEST_P(AdapterEmulatorTest, WrongPasswordIsPermissionDenied) {
  PolatisSwitchOptions options;
  options.credentials = {"admin", "wrong"};
  absl::StatusOr<std::vector<CrossConnect>> read = Adapter(options)->ReadCrossConnects();
  EXPECT_EQ(read.status().code(), absl::StatusCode::kPermissionDenied) << read.status();
  EXPECT_THAT(std::string(read.status().message()), ::testing::Not(HasSubstr("wrong")));
}

TEST_P(AdapterEmulatorTest, OneCommandPerCrossConnectModeGivesTheSameResult) {
  PolatisSwitchOptions options;
  options.bulk = false;
  auto adapter = Adapter(options);
  ApplyResult result = adapter->Apply({{}, {{1, 17}, {2, 18}, {3, 19}}});
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.added.size(), 3u);
  EXPECT_GE(result.commands, 5);  // Read, three adds, read back.
}

INSTANTIATE_TEST_SUITE_P(BothProtocols, AdapterEmulatorTest,
                         ::testing::Values(Protocol::kTl1, Protocol::kRest),
                         [](const ::testing::TestParamInfo<Protocol>& info) {
                           return info.param == Protocol::kTl1 ? "Tl1" : "Rest";
                         });

TEST(CrossProtocolTest, WrittenOverTl1ReadOverRestAndBack) {
  Emulator emu = StartEmulator();
  auto [tl1_host, tl1_port] = Split(emu.tl1);
  auto [rest_host, rest_port] = Split(emu.rest);
  auto tl1 = NewPolatisSwitch({"emu", Protocol::kTl1, tl1_host, tl1_port, {"admin", "root"}});
  auto rest = NewPolatisSwitch({"emu", Protocol::kRest, rest_host, rest_port, {"admin", "root"}});
  ASSERT_TRUE(tl1->Apply({{}, {{7, 23}}}).status.ok());
  absl::StatusOr<std::vector<CrossConnect>> seen = rest->ReadCrossConnects();
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_THAT(*seen, ElementsAre(CrossConnect{7, 23}));
  ASSERT_TRUE(rest->Apply({{{7, 23}}, {{8, 24}}}).status.ok());
  seen = tl1->ReadCrossConnects();
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_THAT(*seen, ElementsAre(CrossConnect{8, 24}));
}

TEST(LegacyYangTest, RestReadsTheOlderPairsName) {
  Emulator emu = StartEmulator({"--yang-revision", "legacy"});
  auto [host, port] = Split(emu.rest);
  auto rest = NewPolatisSwitch({"emu", Protocol::kRest, host, port, {"admin", "root"}});
  ApplyResult result = rest->Apply({{}, {{2, 30}}});
  ASSERT_TRUE(result.status.ok()) << result.status;
  absl::StatusOr<std::vector<CrossConnect>> seen = rest->ReadCrossConnects();
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_THAT(*seen, ElementsAre(CrossConnect{2, 30}));
}

TEST(UnreachableSwitchTest, IsUnavailable) {
  auto tl1 = NewPolatisSwitch({"gone",
                               Protocol::kTl1,
                               "127.0.0.1",
                               1,
                               {"admin", "root"},
                               absl::Seconds(1),
                               absl::Seconds(1)});
  EXPECT_EQ(tl1->ReadCrossConnects().status().code(), absl::StatusCode::kUnavailable);
  auto rest = NewPolatisSwitch({"gone",
                                Protocol::kRest,
                                "127.0.0.1",
                                1,
                                {"admin", "root"},
                                absl::Seconds(1),
                                absl::Seconds(1)});
  EXPECT_EQ(rest->ReadCrossConnects().status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace fleet::polatis
