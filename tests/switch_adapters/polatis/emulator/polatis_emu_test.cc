// The real polatis-emu binary: its command line, the addresses it prints, TL1 and REST on
// those addresses with the real clock, --state across a restart, and shutdown on SIGTERM.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "testing/fake_clock.h"
#include "tests/integration/subprocess.h"
#include "tests/switch_adapters/polatis/emulator/raw_clients.h"

namespace fleet::polatis_emu {
namespace {

using fleet::testing::BinaryPath;
using fleet::testing::CommandResult;
using fleet::testing::Daemon;
using fleet::testing::RunCommand;
using nlohmann::json;
using raw::Tl1Client;
using ::testing::HasSubstr;

constexpr char kCrossConnects[] = "/api/data/optical-switch:cross-connects";

// A running polatis-emu and the addresses it printed.
struct Emu {
  std::unique_ptr<Daemon> daemon;
  std::string tl1;
  std::string rest;
};

Emu StartEmu(std::vector<std::string> flags) {
  std::vector<std::string> argv = {BinaryPath("polatis-emu"), "--tl1-port", "0", "--rest-port",
                                   "0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  Emu emu;
  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(argv);
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  if (!daemon.ok()) return emu;
  emu.daemon = std::move(*daemon);
  absl::StatusOr<std::string> tl1 = emu.daemon->WaitForLine("tl1: ");
  EXPECT_TRUE(tl1.ok()) << tl1.status();
  absl::StatusOr<std::string> rest = emu.daemon->WaitForLine("rest: ");
  EXPECT_TRUE(rest.ok()) << rest.status();
  emu.tl1 = tl1.value_or("");
  emu.rest = rest.value_or("");
  return emu;
}

TEST(PolatisEmuTest, PrintsAddressesServesBothProtocolsAndStopsOnSigterm) {
  Emu emu = StartEmu({"--size", "16x16", "--switch-ms", "0"});
  ASSERT_NE(emu.daemon, nullptr);
  EXPECT_THAT(emu.tl1, ::testing::StartsWith("127.0.0.1:"));
  EXPECT_THAT(emu.rest, ::testing::StartsWith("127.0.0.1:"));
  EXPECT_NE(emu.tl1, emu.rest);

  // What `printf '...' | nc -q1 HOST PORT` does: every command in one write.
  auto nc = raw::Socket::Connect(emu.tl1);
  ASSERT_NE(nc, nullptr);
  ASSERT_TRUE(nc->Send("ACT-USER::admin:1::root;ENT-PATCH::1,17:2:;RTRV-PATCH:::3:;"));
  std::string output;
  while (output.find("M  3 COMPLD") == std::string::npos || output.back() != ';') {
    ASSERT_TRUE(nc->ReadSome(&output)) << output;
  }
  EXPECT_THAT(output, HasSubstr("M  1 COMPLD"));
  EXPECT_THAT(output, HasSubstr("M  2 COMPLD"));
  EXPECT_THAT(output, HasSubstr("M  3 COMPLD\r\n   \"1,17\"\r\n;"));

  // What `curl -u admin:root http://HOST:PORT/api/data/optical-switch:cross-connects` does.
  raw::HttpReply reply = raw::Http(emu.rest, "GET", kCrossConnects);
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body,
            R"({"optical-switch:cross-connects":{"pair":[{"ingress":1,"egress":17}]}})");

  absl::StatusOr<int> code = emu.daemon->Stop(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << emu.daemon->Stderr();
}

TEST(PolatisEmuTest, StopsOnSigintWithSessionsOpen) {
  Emu emu = StartEmu({"--size", "4x4"});
  ASSERT_NE(emu.daemon, nullptr);
  auto tl1 = Tl1Client::Connect(emu.tl1);
  ASSERT_TRUE(tl1 && tl1->LogIn());
  auto http = raw::HttpClient::Connect(emu.rest);
  ASSERT_EQ(http->Request("GET", kCrossConnects).status, 200);  // kept alive
  absl::StatusOr<int> code = emu.daemon->Stop(SIGINT);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << emu.daemon->Stderr();
  EXPECT_TRUE(tl1->socket().ClosedByPeer());
}

TEST(PolatisEmuTest, BadFlagsExitWithCode2AndAMessage) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--size", "0x4"}, "--size"},
      {{"--size", "big"}, "--size"},
      {{"--tl1-port", "70000"}, "--tl1-port"},
      {{"--rest-port", "x"}, "--rest-port"},
      {{"--listen", "localhost:1"}, "--listen"},
      {{"--switch-ms", "-1"}, "--switch-ms"},
      {{"--session-timeout-s", "-5"}, "--session-timeout-s"},
      {{"--insertion-loss-db", "lots"}, "--insertion-loss-db"},
      {{"--yang-revision", "2019"}, "--yang-revision"},
      {{"--colour", "blue"}, "--colour"},
      {{"extra"}, "extra"},
  };
  for (const auto& [flags, named] : cases) {
    std::vector<std::string> argv = {BinaryPath("polatis-emu")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    CommandResult result = RunCommand(argv);
    EXPECT_EQ(result.exit_code, 2) << flags[0] << ": " << result.err;
    EXPECT_THAT(result.err, HasSubstr(named));
    EXPECT_EQ(result.out, "");  // no address printed
  }
  CommandResult help = RunCommand({BinaryPath("polatis-emu"), "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--yang-revision"));
}

TEST(PolatisEmuTest, PortInUseFailsToStart) {
  Emu first = StartEmu({"--size", "4x4"});
  ASSERT_NE(first.daemon, nullptr);
  const std::string port = first.tl1.substr(first.tl1.find(':') + 1);
  CommandResult second = RunCommand(
      {BinaryPath("polatis-emu"), "--size", "4x4", "--tl1-port", port, "--rest-port", "0"});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(second.err, HasSubstr("cannot start"));
}

TEST(PolatisEmuTest, CommandAnswersAfterTheSwitchTimeWithLightThere) {
  Emu emu = StartEmu({"--size", "8x8", "--switch-ms", "200", "--insertion-loss-db", "2.25"});
  ASSERT_NE(emu.daemon, nullptr);
  ASSERT_EQ(
      raw::Http(emu.rest, "PUT", "/sim/v1/signals/1", R"({"name":"n1","power_dbm":1})").status,
      204);
  auto tl1 = Tl1Client::Connect(emu.tl1);
  ASSERT_TRUE(tl1 && tl1->LogIn());
  const absl::Time start = absl::Now();
  ASSERT_THAT(tl1->Command("ENT-PATCH::1,9:2:;"), HasSubstr("COMPLD"));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));  // the switching time is included
  // The answer came after settling, so the light is there at once.
  EXPECT_EQ(raw::Http(emu.rest, "GET", "/sim/v1/light/9").body,
            R"({"egress":9,"signal":"n1","power_dbm":-1.25})");

  // A batch answers after the switching time too (that it settles in parallel, not pair by
  // pair, is checked exactly on a fleet::testing::FakeClock in switch_model_test).
  const absl::Time batch_start = absl::Now();
  ASSERT_THAT(tl1->Command("ENT-PATCH::2&&8,10&&16:3:;"), HasSubstr("COMPLD"));
  EXPECT_GE(absl::Now() - batch_start, absl::Milliseconds(200));
}

TEST(PolatisEmuTest, StateSurvivesARestart) {
  const std::string state = fleet::testing::FreshDirectory("state") + "/polatis.json";
  {
    Emu emu = StartEmu({"--size", "16x16", "--switch-ms", "0", "--state", state});
    ASSERT_NE(emu.daemon, nullptr);
    auto tl1 = Tl1Client::Connect(emu.tl1);
    ASSERT_TRUE(tl1 && tl1->LogIn());
    ASSERT_THAT(tl1->Command("ENT-PATCH::1&&2,17&&18:1:;"), HasSubstr("COMPLD"));
    ASSERT_THAT(tl1->Command("OPR-PORT-SHUTTER::5:2:;"), HasSubstr("COMPLD"));
    ASSERT_EQ(raw::Http(emu.rest, "PUT", absl::StrCat(kCrossConnects, "/pair=3"),
                        R"({"pair":[{"ingress":3,"egress":30}]})")
                  .status,
              201);
    absl::StatusOr<int> code = emu.daemon->Stop(SIGTERM);
    ASSERT_TRUE(code.ok() && *code == 0);
  }
  Emu restarted = StartEmu({"--size", "16x16", "--switch-ms", "0", "--state", state});
  ASSERT_NE(restarted.daemon, nullptr);
  EXPECT_EQ(raw::Http(restarted.rest, "GET", kCrossConnects).body,
            R"({"optical-switch:cross-connects":{"pair":[{"ingress":1,"egress":17},)"
            R"({"ingress":2,"egress":18},{"ingress":3,"egress":30}]}})");
  auto tl1 = Tl1Client::Connect(restarted.tl1);
  ASSERT_TRUE(tl1 && tl1->LogIn());
  EXPECT_THAT(tl1->Command("RTRV-PORT-SHUTTER::5:1:;"), HasSubstr("\"5:CLOSED\""));

  // A state file for another size is refused rather than silently dropped.
  CommandResult wrong_size = RunCommand({BinaryPath("polatis-emu"), "--size", "8x8", "--tl1-port",
                                         "0", "--rest-port", "0", "--state", state});
  EXPECT_EQ(wrong_size.exit_code, 1);
  EXPECT_THAT(wrong_size.err, HasSubstr("16x16"));
}

TEST(PolatisEmuTest, FlagsReachTheSwitch) {
  Emu emu = StartEmu({"--size", "4x6", "--user", "ops", "--password", "pw", "--sid", "LAB-OCS",
                      "--yang-revision", "legacy"});
  ASSERT_NE(emu.daemon, nullptr);
  auto tl1 = Tl1Client::Connect(emu.tl1);
  ASSERT_NE(tl1, nullptr);
  EXPECT_FALSE(tl1->LogIn("admin", "root"));
  ASSERT_TRUE(tl1->LogIn("ops", "pw"));
  std::string size = tl1->Command("RTRV-EQPT::SYSTEM:2:::PARAMETER=SIZE;");
  EXPECT_THAT(size, HasSubstr("   LAB-OCS "));
  EXPECT_THAT(size, HasSubstr("\"SYSTEM:SIZE=4x6\""));
  EXPECT_EQ(raw::Http(emu.rest, "GET", kCrossConnects, "", "admin:root").status, 401);
  EXPECT_EQ(raw::Http(emu.rest, "PUT", absl::StrCat(kCrossConnects, "/pairs=4"),
                      R"({"pairs":[{"ingress":4,"egress":10}]})", "ops:pw")
                .status,
            201);
  EXPECT_EQ(raw::Http(emu.rest, "GET", kCrossConnects, "", "ops:pw").body,
            R"({"optical-switch:cross-connects":{"pairs":[{"ingress":4,"egress":10}]}})");
}

TEST(PolatisEmuTest, TrunkFiberCarriesLightBetweenTwoProcesses) {
  Emu a = StartEmu({"--switch-ms", "0"});
  Emu b = StartEmu({"--switch-ms", "0"});
  ASSERT_NE(a.daemon, nullptr);
  ASSERT_NE(b.daemon, nullptr);
  ASSERT_EQ(raw::Http(a.rest, "PUT", "/sim/v1/signals/1", R"({"name":"FLT-S1C0-N0/1"})").status,
            204);
  ASSERT_EQ(raw::Http(a.rest, "PUT", absl::StrCat(kCrossConnects, "/pair=1"),
                      R"({"pair":[{"ingress":1,"egress":673}]})")
                .status,
            201);
  ASSERT_EQ(raw::Http(b.rest, "PUT", "/sim/v1/trunks/289",
                      absl::StrCat(R"({"from":")", a.rest, R"(","egress":673,"loss_db":1})"))
                .status,
            204);
  ASSERT_EQ(raw::Http(b.rest, "PUT", absl::StrCat(kCrossConnects, "/pair=289"),
                      R"({"pair":[{"ingress":289,"egress":400}]})")
                .status,
            201);
  EXPECT_EQ(raw::Http(b.rest, "GET", "/sim/v1/light/400").body,
            R"({"egress":400,"signal":"FLT-S1C0-N0/1","power_dbm":-4.0})");
  // A reader keeping a copy learns which light the far emulator's changes move.
  EXPECT_THAT(raw::Http(b.rest, "GET", "/sim/v1/light?egress=400,401").body,
              HasSubstr(R"({"egress":400,"signal":"FLT-S1C0-N0/1","power_dbm":-4.0,)"
                        R"("via_trunk":true},{"egress":401,"signal":null,"power_dbm":-99.99}])"));

  // The far process gone: no light, one warning however often the light is read.
  absl::StatusOr<int> code = a.daemon->Stop(SIGTERM);
  ASSERT_TRUE(code.ok() && *code == 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(raw::Http(b.rest, "GET", "/sim/v1/light/400").body,
              R"({"egress":400,"signal":null,"power_dbm":-99.99})");
  }
  const std::string log = b.daemon->Stderr();
  const size_t warning = log.find("into ingress 289 brings no light");
  EXPECT_NE(warning, std::string::npos) << log;
  EXPECT_EQ(log.find("into ingress 289 brings no light", warning + 1), std::string::npos) << log;
}

// --session-timeout-s counts real idle seconds, so this test has to be idle for one: the
// sleep is the behaviour under test, not a wait for another thread.
TEST(PolatisEmuTest, SessionTimeoutFlagLogsIdleSessionsOut) {
  Emu emu = StartEmu({"--size", "4x4", "--session-timeout-s", "1"});
  ASSERT_NE(emu.daemon, nullptr);
  auto tl1 = Tl1Client::Connect(emu.tl1);
  ASSERT_TRUE(tl1 && tl1->LogIn());
  absl::SleepFor(absl::Milliseconds(1100));
  EXPECT_THAT(tl1->Command("RTRV-PATCH:::2:;"),
              HasSubstr("DENY\r\n   PICC\r\n   /* Not logged in */"));
  ASSERT_TRUE(tl1->LogIn());
  EXPECT_THAT(tl1->Command("RTRV-PATCH:::3:;"), HasSubstr("COMPLD"));
}

}  // namespace
}  // namespace fleet::polatis_emu
