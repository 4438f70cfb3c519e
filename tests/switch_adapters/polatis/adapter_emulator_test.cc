// The Polatis adapter against the real polatis-emu binary over real sockets. Every test
// runs over both protocols: the adapter must behave the same whichever it speaks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/http_client.h"
#include "common/pki.h"
#include "switch_adapters/polatis/polatis_switch.h"
#include "tests/integration/subprocess.h"

namespace fleet::polatis {
namespace {

using fleet::testing::BinaryPath;
using fleet::testing::CommandResult;
using fleet::testing::Daemon;
using fleet::testing::FreshDirectory;
using fleet::testing::HttpRequest;
using fleet::testing::RunCommand;
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

// A REST driver for the emulator at `address` (HOST:PORT), over plain HTTP unless a CA bundle
// is given.
std::unique_ptr<switch_adapters::OpticalSwitch> RestDriver(const std::string& address,
                                                           const std::string& ca_bundle = "",
                                                           bool insecure_http = true) {
  auto [host, port] = Split(address);
  PolatisSwitchOptions options;
  options.name = "emu";
  options.protocol = Protocol::kRest;
  options.host = host;
  options.port = port;
  options.credentials = {"admin", "root"};
  options.connect_timeout = absl::Seconds(5);
  options.ca_bundle = ca_bundle;
  options.insecure_http = insecure_http;
  return NewPolatisSwitch(options);
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
    options.insecure_http = true;  // The emulator serves plain HTTP unless given a certificate.
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

// The change gate (fleetd's commit point) is asked before each command that changes the
// switch, in bulk and one by one, and never for a read; once it refuses, nothing changes.
TEST_P(AdapterEmulatorTest, TheChangeGateIsAskedBeforeEachChangingCommandOnly) {
  int asked = 0;
  bool open = true;
  PolatisSwitchOptions options;
  options.before_change = [&] {
    ++asked;
    return open ? absl::OkStatus() : absl::UnavailableError("not the leader");
  };
  auto adapter = Adapter(options);
  ASSERT_TRUE(adapter->Identity().ok());
  ASSERT_TRUE(adapter->ReadCrossConnects().ok());
  ASSERT_TRUE(adapter->ReadPorts().ok());
  EXPECT_EQ(asked, 0);
  ASSERT_TRUE(adapter->Apply({{}, {{1, 17}, {2, 18}}}).status.ok());
  EXPECT_EQ(asked, 1);  // One bulk add.
  ASSERT_TRUE(adapter->SetShutters({3}, false).ok());
  EXPECT_EQ(asked, 2);
  options.bulk = false;
  auto one_by_one = Adapter(options);
  ASSERT_TRUE(one_by_one->Apply({{{2, 18}}, {{4, 20}, {5, 21}}}).status.ok());
  EXPECT_EQ(asked, 5);  // One remove, two adds.

  open = false;
  const int64_t changed = CrossConnectsChanged();
  ApplyResult refused = adapter->Apply({{{1, 17}}, {{6, 22}}});
  EXPECT_EQ(refused.status, absl::UnavailableError("not the leader"));
  EXPECT_EQ(adapter->SetShutters({3}, true), absl::UnavailableError("not the leader"));
  EXPECT_EQ(CrossConnectsChanged(), changed);
  absl::StatusOr<std::vector<CrossConnect>> held = adapter->ReadCrossConnects();
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_THAT(*held, ElementsAre(CrossConnect{1, 17}, CrossConnect{4, 20}, CrossConnect{5, 21}));
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
                         [](const ::testing::TestParamInfo<Protocol>& protocol) {
                           return protocol.param == Protocol::kTl1 ? "Tl1" : "Rest";
                         });

TEST(CrossProtocolTest, WrittenOverTl1ReadOverRestAndBack) {
  Emulator emu = StartEmulator();
  auto [tl1_host, tl1_port] = Split(emu.tl1);
  auto tl1 = NewPolatisSwitch({"emu", Protocol::kTl1, tl1_host, tl1_port, {"admin", "root"}});
  auto rest = RestDriver(emu.rest);
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
  auto rest = RestDriver(emu.rest);
  ApplyResult result = rest->Apply({{}, {{2, 30}}});
  ASSERT_TRUE(result.status.ok()) << result.status;
  absl::StatusOr<std::vector<CrossConnect>> seen = rest->ReadCrossConnects();
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_THAT(*seen, ElementsAre(CrossConnect{2, 30}));
}

// The REST driver over HTTPS: the emulator's certificate comes from a CA made here with
// fleet::pki, and the driver trusts that CA, another one, or plain HTTP by choice.
class RestTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshDirectory("rest-tls");
    ca_ = MakeCaFile("site-ca.pem", "FLEET site CA test");
    other_ca_ = MakeCaFile("other-ca.pem", "Another CA");
  }

  // A CA written to `name` in the test's directory; returns its key and certificate.
  pki::KeyAndCertificate MakeCaFile(const std::string& name, const std::string& common_name) {
    pki::CaRequest request;
    request.common_name = common_name;
    absl::StatusOr<pki::KeyAndCertificate> ca = pki::MakeCa(request);
    EXPECT_TRUE(ca.ok()) << ca.status();
    EXPECT_TRUE(pki::WritePemFile(Path(name), ca->certificate_pem, 0644).ok());
    return *ca;
  }

  // The emulator's certificate and key, issued by `ca` for `dns` and `ips`, written to files;
  // returns the flags that make polatis-emu serve HTTPS with them.
  std::vector<std::string> ServerFlags(const pki::KeyAndCertificate& ca,
                                       std::vector<std::string> dns, std::vector<std::string> ips) {
    pki::CertificateRequest request;
    request.common_name = "polatis-emu";
    request.dns_names = std::move(dns);
    request.ip_addresses = std::move(ips);
    request.server = true;
    absl::StatusOr<pki::KeyAndCertificate> server = pki::Issue(ca, request);
    EXPECT_TRUE(server.ok()) << server.status();
    EXPECT_TRUE(pki::WritePemFile(Path("emu.pem"), server->certificate_pem, 0644).ok());
    EXPECT_TRUE(pki::WritePemFile(Path("emu.key"), server->private_key_pem, 0600).ok());
    return {"--tls-cert", Path("emu.pem"), "--tls-key", Path("emu.key")};
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // `name` from the emulator's /sim/v1/counters, read over HTTPS trusting the site CA.
  int64_t HttpsCounter(const Emulator& emu, const std::string& name) {
    CurlHttpClientOptions options;
    options.base_url = "https://" + emu.rest;
    options.ca_file = Path("site-ca.pem");
    options.content_type = "application/json";
    absl::StatusOr<HttpResponse> reply =
        NewCurlHttpClient(options)->Send("GET", "/sim/v1/counters", "");
    EXPECT_TRUE(reply.ok()) << reply.status();
    if (!reply.ok()) return -1;
    EXPECT_EQ(reply->status, 200) << reply->body;
    return nlohmann::json::parse(reply->body, nullptr, false).value(name, int64_t{-1});
  }

  std::string dir_;
  pki::KeyAndCertificate ca_, other_ca_;
};

TEST_F(RestTlsTest, TrustedCertificateWorksForAConnectRoundTrip) {
  Emulator emu = StartEmulator(ServerFlags(ca_, {"localhost"}, {"127.0.0.1"}));
  ASSERT_NE(emu.process, nullptr);
  auto rest = RestDriver(emu.rest, Path("site-ca.pem"), /*insecure_http=*/false);
  absl::StatusOr<switch_adapters::SwitchIdentity> id = rest->Identity();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->ingress_ports, 16u);
  ApplyResult made = rest->Apply({{}, {{3, 19}}});
  ASSERT_TRUE(made.status.ok()) << made.status;
  absl::StatusOr<std::vector<CrossConnect>> read = rest->ReadCrossConnects();
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(*read, ElementsAre(CrossConnect{3, 19}));
  ASSERT_TRUE(rest->Apply({{{3, 19}}, {}}).status.ok());
  read = rest->ReadCrossConnects();
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(*read, IsEmpty());
  // The /sim/v1 side-channel is on the same HTTPS port.
  EXPECT_GT(HttpsCounter(emu, "rest_requests"), 0);

  // Connections dropped under the driver (behind TLS) are made again.
  CurlHttpClientOptions options;
  options.base_url = "https://" + emu.rest;
  options.ca_file = Path("site-ca.pem");
  absl::StatusOr<HttpResponse> dropped =
      NewCurlHttpClient(options)->Send("POST", "/sim/v1/faults/drop-connections", "");
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->status, 204);
  read = rest->ReadCrossConnects();
  EXPECT_TRUE(read.ok()) << read.status();
}

TEST_F(RestTlsTest, CertificateFromAnotherCaIsUnavailableAndNoRequestIsSent) {
  Emulator emu = StartEmulator(ServerFlags(other_ca_, {"localhost"}, {"127.0.0.1"}));
  ASSERT_NE(emu.process, nullptr);
  auto rest = RestDriver(emu.rest, Path("site-ca.pem"), /*insecure_http=*/false);
  absl::StatusOr<std::vector<CrossConnect>> read = rest->ReadCrossConnects();
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable) << read.status();
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr("https://" + emu.rest + "/api/data/optical-switch:cross-connects"));
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr("SSL certificate problem: unable to get local issuer certificate"));
  // The handshake failed before any HTTP: the emulator never saw a request, so never the
  // Basic credentials. (Read over HTTPS trusting the CA that did sign it.)
  CurlHttpClientOptions options;
  options.base_url = "https://" + emu.rest;
  options.ca_file = Path("other-ca.pem");
  absl::StatusOr<HttpResponse> counters =
      NewCurlHttpClient(options)->Send("GET", "/sim/v1/counters", "");
  ASSERT_TRUE(counters.ok()) << counters.status();
  EXPECT_EQ(nlohmann::json::parse(counters->body, nullptr, false).value("rest_requests", -1), 0);
}

TEST_F(RestTlsTest, CertificateForAnotherNameIsUnavailable) {
  // Issued for 127.0.0.1 only; the driver dials the emulator by the name localhost.
  Emulator emu = StartEmulator(ServerFlags(ca_, {}, {"127.0.0.1"}));
  ASSERT_NE(emu.process, nullptr);
  const std::string by_name = "localhost:" + std::to_string(Split(emu.rest).second);
  absl::StatusOr<std::vector<CrossConnect>> read =
      RestDriver(by_name, Path("site-ca.pem"), /*insecure_http=*/false)->ReadCrossConnects();
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable) << read.status();
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr("no alternative certificate subject name matches target host name "
                        "'localhost'"));
  EXPECT_EQ(HttpsCounter(emu, "rest_requests"), 0);
}

TEST_F(RestTlsTest, HttpsEmulatorRefusesPlainHttp) {
  Emulator emu = StartEmulator(ServerFlags(ca_, {"localhost"}, {"127.0.0.1"}));
  ASSERT_NE(emu.process, nullptr);
  absl::StatusOr<std::vector<CrossConnect>> read = RestDriver(emu.rest)->ReadCrossConnects();
  EXPECT_FALSE(read.ok());
  EXPECT_EQ(HttpsCounter(emu, "rest_requests"), 0);
}

TEST_F(RestTlsTest, HttpsAgainstAPlainHttpEmulatorFailsCleanlyBeforeAnyRequest) {
  Emulator emu = StartEmulator();
  auto rest = RestDriver(emu.rest, Path("site-ca.pem"), /*insecure_http=*/false);
  absl::StatusOr<std::vector<CrossConnect>> read = rest->ReadCrossConnects();
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable) << read.status();
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("https://" + emu.rest));
  EXPECT_EQ(fleet::testing::EmulatorCounter(emu.rest, "rest_requests"), 0);
  // Chosen plainly, plain HTTP works.
  EXPECT_TRUE(RestDriver(emu.rest)->ReadCrossConnects().ok());
}

TEST_F(RestTlsTest, EmulatorTlsFlagsAreCheckedAtStart) {
  CommandResult half = RunCommand({BinaryPath("polatis-emu"), "--tl1-port", "0", "--rest-port", "0",
                                   "--tls-cert", Path("site-ca.pem")});
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_THAT(half.err, HasSubstr("--tls-cert and --tls-key go together"));
  CommandResult missing =
      RunCommand({BinaryPath("polatis-emu"), "--tl1-port", "0", "--rest-port", "0", "--tls-cert",
                  Path("nope.pem"), "--tls-key", Path("nope.key")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("cannot load TLS certificate " + Path("nope.pem")));
  CommandResult help = RunCommand({BinaryPath("polatis-emu"), "--help"});
  EXPECT_THAT(help.out, HasSubstr("--tls-cert"));
  EXPECT_THAT(help.out, HasSubstr("HTTPS"));
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
