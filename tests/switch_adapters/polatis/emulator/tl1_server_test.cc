// TL1 over real TCP against an in-process emulator on port 0. The emulator runs on a
// fleet::testing::FakeClock with no switching time, so timestamps and session timeouts are exact.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "switch_adapters/polatis/emulator/emulator.h"
#include "switch_adapters/polatis/emulator/tl1_server.h"
#include "testing/fake_clock.h"
#include "tests/switch_adapters/polatis/emulator/raw_clients.h"

namespace fleet::polatis_emu {
namespace {

using raw::Tl1Client;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The quoted data lines of a COMPLD response.
std::vector<std::string> DataLines(const std::string& response) {
  std::vector<std::string> lines;
  static const std::regex kLine("   \"([^\"]*)\"\r\n");
  for (std::sregex_iterator it(response.begin(), response.end(), kLine), end; it != end; ++it) {
    lines.push_back((*it)[1]);
  }
  return lines;
}

// "COMPLD", or the DENY's error code and comment, e.g. "DENY PICC Not logged in".
std::string Outcome(const std::string& response) {
  static const std::regex kDeny("M  \\S+ DENY\r\n   (\\w+)\r\n   /\\* (.*) \\*/\r\n;$");
  std::smatch match;
  if (std::regex_search(response, match, kDeny)) {
    return absl::StrCat("DENY ", match[1].str(), " ", match[2].str());
  }
  if (response.find(" COMPLD\r\n") != std::string::npos) return "COMPLD";
  return absl::StrCat("unexpected: ", response);
}

class Tl1ServerTest : public ::testing::Test {
 protected:
  static EmulatorOptions Options() {
    EmulatorOptions options;
    options.size = {16, 16};  // ingress 1..16, egress 17..32
    options.tl1_port = 0;
    options.rest_port = 0;
    options.switch_time = absl::ZeroDuration();
    return options;
  }

  void Start(const EmulatorOptions& options = Options()) {
    absl::StatusOr<std::unique_ptr<Emulator>> emulator = Emulator::Start(options, &clock_);
    ASSERT_TRUE(emulator.ok()) << emulator.status();
    emulator_ = std::move(*emulator);
  }

  std::unique_ptr<Tl1Client> Connect(bool log_in = true) {
    std::unique_ptr<Tl1Client> client = Tl1Client::Connect(emulator_->tl1_address());
    EXPECT_NE(client, nullptr);
    if (client && log_in) {
      EXPECT_TRUE(client->LogIn());
    }
    return client;
  }

  std::string Do(Tl1Client& client, const std::string& command) {
    return Outcome(client.Command(command));
  }

  fleet::testing::FakeClock clock_;
  std::unique_ptr<Emulator> emulator_;
};

TEST_F(Tl1ServerTest, LoginLogout) {
  Start();
  auto client = Connect(/*log_in=*/false);
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::1:;"), "DENY PICC Not logged in");
  EXPECT_EQ(Do(*client, "ACT-USER::admin:2::wrong;"), "DENY PICC Permission denied");
  EXPECT_EQ(Do(*client, "ACT-USER::root:3::root;"), "DENY PICC Permission denied");
  EXPECT_EQ(Do(*client, "ACT-USER::admin:4::root;"), "COMPLD");
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::5:;"), "COMPLD");
  EXPECT_EQ(Do(*client, "CANC-USER::admin:6:;"), "COMPLD");
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::7:;"), "DENY PICC Not logged in");
  // The connection stays open after logout: log in again on it.
  EXPECT_EQ(Do(*client, "ACT-USER::admin:8::root;"), "COMPLD");
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::9:;"), "COMPLD");
}

TEST_F(Tl1ServerTest, CustomCredentials) {
  EmulatorOptions options = Options();
  options.user = "ops";
  options.password = "s3cret";
  Start(options);
  auto client = Connect(/*log_in=*/false);
  EXPECT_EQ(Do(*client, "ACT-USER::admin:1::root;"), "DENY PICC Permission denied");
  EXPECT_EQ(Do(*client, "ACT-USER::ops:2::s3cret;"), "COMPLD");
}

TEST_F(Tl1ServerTest, UnknownVerbIsRefusedOnlyAfterLogin) {
  Start();
  auto client = Connect(/*log_in=*/false);
  EXPECT_EQ(Do(*client, "RTRV-FOO:::1:;"), "DENY PICC Not logged in");
  ASSERT_TRUE(client->LogIn());
  EXPECT_EQ(Do(*client, "RTRV-FOO:::2:;"), "DENY ICNV Command not valid: RTRV-FOO");
  EXPECT_EQ(Do(*client, "rtrv-foo-bar:::3:;"), "DENY ICNV Command not valid: RTRV-FOO-BAR");
}

TEST_F(Tl1ServerTest, SessionTimesOutWhenIdle) {
  EmulatorOptions options = Options();
  options.session_timeout = absl::Seconds(60);
  Start(options);
  auto client = Connect();
  clock_.Advance(absl::Seconds(59));
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::1:;"), "COMPLD");  // activity restarts the idle time
  clock_.Advance(absl::Seconds(59));
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::2:;"), "COMPLD");
  clock_.Advance(absl::Seconds(60));
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::3:;"), "DENY PICC Not logged in");
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::4:;"), "DENY PICC Not logged in");
  ASSERT_TRUE(client->LogIn());
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::5:;"), "COMPLD");
}

TEST_F(Tl1ServerTest, SessionsNeverTimeOutByDefault) {
  Start();
  auto client = Connect();
  clock_.Advance(absl::Hours(24 * 365));
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::1:;"), "COMPLD");
}

TEST_F(Tl1ServerTest, ExpireSessionsFaultLogsEverySessionOut) {
  Start();
  auto a = Connect();
  auto b = Connect();
  raw::HttpReply reply = raw::Http(emulator_->rest_address(), "PUT", "/sim/v1/faults",
                                   R"({"expire_sessions":true})", "");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(Do(*a, "RTRV-PATCH:::1:;"), "DENY PICC Not logged in");
  EXPECT_EQ(Do(*b, "ENT-PATCH::1,17:2:;"), "DENY PICC Not logged in");
  EXPECT_THAT(emulator_->model().CrossConnects(), IsEmpty());
  // Real clients log in again and retry: that works at once.
  ASSERT_TRUE(a->LogIn());
  EXPECT_EQ(Do(*a, "ENT-PATCH::1,17:3:;"), "COMPLD");
  auto c = Connect();  // a session opened after the fault is not affected
  EXPECT_EQ(Do(*c, "RTRV-PATCH:::4:;"), "COMPLD");
}

TEST_F(Tl1ServerTest, EnterRetrieveAndDeletePatches) {
  Start();
  auto client = Connect();
  EXPECT_EQ(Do(*client, "ENT-PATCH::1,17:1:;"), "COMPLD");
  EXPECT_EQ(Do(*client, "ENT-PATCH::2&3,18&19:2:;"), "COMPLD");
  EXPECT_EQ(Do(*client, "ENT-PATCH::4&&6,20&&22:3:;"), "COMPLD");
  EXPECT_EQ(Do(*client, "ENT-PATCH::9&&7,23&&25:4:;"), "COMPLD");  // ranges pair in order
  EXPECT_THAT(DataLines(client->Command("RTRV-PATCH:::5:;")),
              ElementsAre("1,17", "2,18", "3,19", "4,20", "5,21", "6,22", "7,25", "8,24", "9,23"));
  EXPECT_THAT(DataLines(client->Command("RTRV-PATCH::1&20&&21:6:;")),
              ElementsAre("1,17", "4,20", "5,21"));
  EXPECT_EQ(DataLines(client->Command("RTRV-PATCH::ALL:7:;")).size(), 9u);
  EXPECT_THAT(DataLines(client->Command("RTRV-PATCH::16:8:;")), IsEmpty());

  EXPECT_EQ(Do(*client, "DLT-PATCH::17:9:;"), "COMPLD");  // by its egress
  EXPECT_EQ(Do(*client, "DLT-PATCH::2&&3&25:10:;"), "COMPLD");
  EXPECT_EQ(Do(*client, "DLT-PATCH::12:11:;"), "COMPLD");  // no patch there: accepted
  EXPECT_THAT(DataLines(client->Command("RTRV-PATCH:::12:;")),
              ElementsAre("4,20", "5,21", "6,22", "8,24", "9,23"));
  EXPECT_EQ(Do(*client, "DLT-PATCH::99:13:;"), "DENY IDNV Invalid OXC port: 99");
  EXPECT_EQ(Do(*client, "DLT-PATCH:::14:;"), "DENY IIAC Empty parameters");
  EXPECT_EQ(Do(*client, "DLT-PATCH::ALL:15:;"), "COMPLD");
  EXPECT_THAT(DataLines(client->Command("RTRV-PATCH:::16:;")), IsEmpty());
}

TEST_F(Tl1ServerTest, EnterPatchRefusals) {
  Start();
  auto client = Connect();
  ASSERT_EQ(Do(*client, "ENT-PATCH::1,17:1:;"), "COMPLD");
  EXPECT_EQ(Do(*client, "ENT-PATCH::1,17:2:;"), "COMPLD");  // the same patch again
  EXPECT_EQ(Do(*client, "ENT-PATCH::1,18:3:;"), "DENY SROF Port in use: 1");
  EXPECT_EQ(Do(*client, "ENT-PATCH::2,17:4:;"), "DENY SROF Port in use: 17");
  EXPECT_EQ(Do(*client, "ENT-PATCH::1,1000:5:;"), "DENY IDNV Invalid OXC port: 1000");
  EXPECT_EQ(Do(*client, "ENT-PATCH::17,18:6:;"), "DENY IDNV Invalid OXC port: 17");
  EXPECT_EQ(Do(*client, "ENT-PATCH::14&&18,20&&24:7:;"), "DENY IDNV Invalid OXC port: 17");
  EXPECT_EQ(Do(*client, "ENT-PATCH::2,16:8:;"), "DENY IDNV Invalid OXC port: 16");
  EXPECT_EQ(Do(*client, "ENT-PATCH::ALL,18:9:;"), "DENY IDNV Invalid OXC port: ALL");
  EXPECT_EQ(Do(*client, "ENT-PATCH::,:10:;"), "DENY IIAC Empty parameters");
  EXPECT_EQ(Do(*client, "ENT-PATCH::2,:11:;"), "DENY IIAC Empty parameters");
  EXPECT_EQ(Do(*client, "ENT-PATCH::2:12:;"), "DENY IIAC Empty parameters");
  EXPECT_EQ(Do(*client, "ENT-PATCH:::13:;"), "DENY IIAC Empty parameters");
  EXPECT_EQ(Do(*client, "ENT-PATCH::2&3,18:14:;"), "DENY IIAC Mismatched port lists");
  EXPECT_EQ(Do(*client, "ENT-PATCH::2&&4,18&&19:15:;"), "DENY IIAC Mismatched port lists");
  EXPECT_EQ(Do(*client, "ENT-PATCH::2,1x:16:;"), "DENY IICT Parse error at offset 14 in command");
  EXPECT_EQ(Do(*client, "ENT-PATCH::2,18,19:17:;"),
            "DENY IICT Parse error at offset 15 in command");
  // All-or-nothing: the second pair is refused, so the first is not made either.
  EXPECT_EQ(Do(*client, "ENT-PATCH::2&3,18&17:18:;"), "DENY SROF Port in use: 17");
  EXPECT_THAT(DataLines(client->Command("RTRV-PATCH:::19:;")), ElementsAre("1,17"));
}

TEST_F(Tl1ServerTest, ShuttersAndPower) {
  Start();
  auto client = Connect();
  EXPECT_EQ(Do(*client, "OPR-PORT-SHUTTER::5&&6:1:;"), "COMPLD");
  EXPECT_THAT(DataLines(client->Command("RTRV-PORT-SHUTTER::4&&7:2:;")),
              ElementsAre("4:OPEN", "5:CLOSED", "6:CLOSED", "7:OPEN"));
  EXPECT_EQ(Do(*client, "RLS-PORT-SHUTTER::5:3:;"), "COMPLD");
  EXPECT_THAT(DataLines(client->Command("RTRV-PORT-SHUTTER::5&6:4:;")),
              ElementsAre("5:OPEN", "6:CLOSED"));
  EXPECT_EQ(DataLines(client->Command("RTRV-PORT-SHUTTER:::5:;")).size(), 32u);
  EXPECT_EQ(Do(*client, "OPR-PORT-SHUTTER:::6:;"), "DENY IIAC Empty parameters");
  EXPECT_EQ(Do(*client, "OPR-PORT-SHUTTER::33:7:;"), "DENY IDNV Invalid OXC port: 33");

  ASSERT_TRUE(emulator_->model().SetSignal(1, "FLT-S1C0-N0/1", -1.6).ok());
  ASSERT_EQ(Do(*client, "ENT-PATCH::1,17:8:;"), "COMPLD");
  EXPECT_THAT(DataLines(client->Command("RTRV-PORT-POWER::1&17&18:9:;")),
              ElementsAre("1:-1.60", "17:-3.10", "18:-99.99"));
  EXPECT_EQ(Do(*client, "OPR-PORT-SHUTTER::17:10:;"), "COMPLD");
  EXPECT_THAT(DataLines(client->Command("RTRV-PORT-POWER::17:11:;")), ElementsAre("17:-99.99"));
  EXPECT_EQ(DataLines(client->Command("RTRV-PORT-POWER::ALL:12:;")).size(), 32u);
}

TEST_F(Tl1ServerTest, Alarms) {
  Start();
  auto client = Connect();
  EXPECT_THAT(DataLines(client->Command("RTRV-ALM-ALL::ALL:1:;")), IsEmpty());
  ASSERT_TRUE(emulator_->model().SetPortFailed(20, true).ok());
  ASSERT_TRUE(emulator_->model().SetPowerDrop(3, 2.5).ok());
  ASSERT_TRUE(emulator_->model().SetPowerDrop(20, 1).ok());
  EXPECT_THAT(DataLines(client->Command("RTRV-ALM-ALL::ALL:2:;")),
              ElementsAre("3:MN,LOW-POWER,NSA", "20:MJ,PORT-FAILED,SA", "20:MN,LOW-POWER,NSA"));
  EXPECT_THAT(DataLines(client->Command("RTRV-ALM-ALL::3:3:;")), ElementsAre("3:MN,LOW-POWER,NSA"));
}

TEST_F(Tl1ServerTest, IdentityAndParameters) {
  Start();
  auto client = Connect();
  EXPECT_THAT(DataLines(client->Command("RTRV-EQPT::SYSTEM:1:::PARAMETER=SIZE;")),
              ElementsAre("SYSTEM:SIZE=16x16"));
  EXPECT_EQ(Do(*client, "RTRV-EQPT::SYSTEM:2:::FOO=1;"),
            "DENY IPNV Unexpected parameter FOO in block 6");
  EXPECT_EQ(Do(*client, "RTRV-EQPT::SYSTEM:3:::PARAMETER=COLOR;"),
            "DENY IDNV Invalid parameter value: COLOR");
  EXPECT_EQ(Do(*client, "RTRV-EQPT::SHELF:4:::PARAMETER=SIZE;"), "DENY IIAC Invalid AID: SHELF");
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::5::X=1;"), "DENY IPNV Unexpected parameter X in block 5");
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::6:LOUD;"), "DENY IPNV Unexpected parameter LOUD in block 4");
  EXPECT_THAT(DataLines(client->Command("RTRV-NETYPE:::7:;")),
              ElementsAre("POLATIS,N-VST-16x16-EMU,OCS,7.4.0-EMU"));
  const std::string serial = MakeSwitchIdentity({16, 16}, "POLATIS-EMU").serial_number;
  EXPECT_THAT(DataLines(client->Command("RTRV-INV::OCS:8:;")), ElementsAre("OCS:SN=" + serial));
}

TEST_F(Tl1ServerTest, MalformedCommandsAreRefusedWithTheOffset) {
  Start();
  auto client = Connect();
  EXPECT_EQ(client->Command("bad;"),
            "\r\n\n   POLATIS-EMU 23-11-14 22:13:20\r\nM  0 DENY\r\n   IICT\r\n"
            "   /* Parse error at offset 3 in command */\r\n;");
  EXPECT_EQ(Do(*client, "RTRV_PATCH:::42:;"), "DENY IICT Parse error at offset 4 in command");
  EXPECT_THAT(client->Command("RTRV_PATCH:::42:;"), HasSubstr("M  42 DENY"));
  // The session goes on after garbage.
  EXPECT_EQ(Do(*client, "RTRV-PATCH:::43:;"), "COMPLD");
}

TEST_F(Tl1ServerTest, ExactFramingOfCompletedAndDenied) {
  Start();
  ASSERT_TRUE(emulator_->model().Connect({{1, 17}}, ConnectMode::kRefuseInUse).ok());
  auto client = Connect();
  EXPECT_EQ(client->Command("RTRV-PATCH:::130:;"),
            "\r\n\n   POLATIS-EMU 23-11-14 22:13:20\r\nM  130 COMPLD\r\n   \"1,17\"\r\n;");
  EXPECT_EQ(client->Command("ENT-PATCH::1,1000:131:;"),
            "\r\n\n   POLATIS-EMU 23-11-14 22:13:20\r\nM  131 DENY\r\n   IDNV\r\n"
            "   /* Invalid OXC port: 1000 */\r\n;");
}

TEST_F(Tl1ServerTest, SidAppearsInTheHeader) {
  EmulatorOptions options = Options();
  options.sid = "OCS-7";
  Start(options);
  auto client = Connect(/*log_in=*/false);
  EXPECT_EQ(client->Command("ACT-USER::admin:1::root;"),
            "\r\n\n   OCS-7 23-11-14 22:13:20\r\nM  1 COMPLD\r\n;");
}

TEST_F(Tl1ServerTest, SeveralCommandsInOneWriteAreAnsweredInOrder) {
  Start();
  auto client = Connect(/*log_in=*/false);
  ASSERT_TRUE(client->socket().Send(
      "ACT-USER::admin:1::root;\r\nENT-PATCH::1,17:2:;RTRV-PATCH:::3:;\r\nCANC-USER::admin:4:;"));
  EXPECT_THAT(client->Response(), HasSubstr("M  1 COMPLD"));
  EXPECT_THAT(client->Response(), HasSubstr("M  2 COMPLD"));
  std::string retrieved = client->Response();
  EXPECT_THAT(retrieved, HasSubstr("M  3 COMPLD"));
  EXPECT_THAT(DataLines(retrieved), ElementsAre("1,17"));
  EXPECT_THAT(client->Response(), HasSubstr("M  4 COMPLD"));
}

TEST_F(Tl1ServerTest, ConcurrentSessionsHaveTheirOwnLogin) {
  Start();
  auto a = Connect();
  auto b = Connect(/*log_in=*/false);
  auto c = Connect();
  EXPECT_EQ(Do(*a, "ENT-PATCH::1,17:1:;"), "COMPLD");
  EXPECT_EQ(Do(*b, "RTRV-PATCH:::2:;"), "DENY PICC Not logged in");
  EXPECT_THAT(DataLines(c->Command("RTRV-PATCH:::3:;")), ElementsAre("1,17"));
  EXPECT_EQ(Do(*c, "CANC-USER::admin:4:;"), "COMPLD");
  EXPECT_EQ(Do(*a, "RTRV-PATCH:::5:;"), "COMPLD");  // a's login is its own
  EXPECT_EQ(emulator_->model().counters().sessions, 3);

  // Sessions working at once on different ports all succeed and leave a consistent switch.
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto session = Tl1Client::Connect(emulator_->tl1_address());
      if (!session || !session->LogIn()) {
        ++failures[t];
        return;
      }
      const int ingress = 2 + t, egress = 18 + t;
      for (int i = 0; i < 20; ++i) {
        const std::string ctag = absl::StrCat(t, "0", i);
        if (Outcome(session->Command(
                absl::StrCat("ENT-PATCH::", ingress, ",", egress, ":", ctag, ":;"))) != "COMPLD" ||
            Outcome(session->Command(absl::StrCat("DLT-PATCH::", ingress, ":", ctag, ":;"))) !=
                "COMPLD") {
          ++failures[t];
        }
      }
      session->Command(absl::StrCat("ENT-PATCH::", ingress, ",", egress, ":9:;"));
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(failures, ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(DataLines(a->Command("RTRV-PATCH:::6:;")),
              ElementsAre("1,17", "2,18", "3,19", "4,20", "5,21"));
  EXPECT_EQ(emulator_->model().counters().cross_connects_changed, 1 + 4 * 41);
}

TEST_F(Tl1ServerTest, OverlongGarbageIsRefusedAndTheConnectionClosed) {
  Start();
  auto client = Connect();
  ASSERT_TRUE(client->socket().Send(std::string(70 * 1024, 'x')));
  EXPECT_EQ(Outcome(client->Response()), "DENY IICT Parse error at offset 65536 in command");
  EXPECT_TRUE(client->socket().ClosedByPeer());
}

TEST(Tl1ServerCapTest, ConnectionsBeyondTheCapAreClosed) {
  fleet::testing::FakeClock clock;
  SwitchModelOptions model_options;
  model_options.size = {4, 4};
  auto model = SwitchModel::Create(model_options, &clock);
  ASSERT_TRUE(model.ok());
  Tl1ServerOptions options;
  options.max_sessions = 2;
  auto server = Tl1Server::Start(options, model->get(), &clock);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("127.0.0.1:", (*server)->port());
  auto a = Tl1Client::Connect(address);
  auto b = Tl1Client::Connect(address);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->LogIn());  // answered: both are registered sessions now
  ASSERT_TRUE(b->LogIn());
  auto c = Tl1Client::Connect(address);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->socket().ClosedByPeer());
  EXPECT_TRUE(a->LogIn());  // the others are unaffected
  // Once a session ends, there is room again.
  a.reset();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  bool admitted = false;
  while (!admitted && absl::Now() < deadline) {
    auto d = Tl1Client::Connect(address);
    admitted = d && d->LogIn();
  }
  EXPECT_TRUE(admitted);
}

TEST_F(Tl1ServerTest, StopWakesASessionWaitingOnLatency) {
  Start();
  auto client = Connect();
  FaultUpdate slow;
  slow.latency = absl::Hours(1);
  emulator_->model().UpdateFaults(slow);
  ASSERT_TRUE(client->socket().Send("RTRV-PATCH:::1:;"));
  absl::Notification stopped;
  std::thread stopper([&] {
    emulator_->Stop();
    stopped.Notify();
  });
  EXPECT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(30)));
  stopper.join();
  EXPECT_TRUE(client->socket().ClosedByPeer());
}

}  // namespace
}  // namespace fleet::polatis_emu
