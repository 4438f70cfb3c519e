// The /sim/v1 side-channel over real HTTP against an in-process emulator on port 0: light on
// fibers, counters, and each injected fault as TL1 and REST clients see it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "nlohmann/json.hpp"
#include "switch_adapters/polatis/emulator/emulator.h"
#include "testing/fake_clock.h"
#include "tests/switch_adapters/polatis/emulator/raw_clients.h"

namespace fleet::polatis_emu {
namespace {

using nlohmann::json;
using raw::HttpReply;
using raw::Tl1Client;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kCrossConnects[] = "/api/data/optical-switch:cross-connects";

class SimTest : public ::testing::Test {
 protected:
  void Start(absl::Duration switch_time, const Clock* clock) {
    EmulatorOptions options;
    options.size = {16, 16};  // ingress 1..16, egress 17..32
    options.tl1_port = 0;
    options.rest_port = 0;
    options.switch_time = switch_time;
    absl::StatusOr<std::unique_ptr<Emulator>> emulator = Emulator::Start(options, clock);
    ASSERT_TRUE(emulator.ok()) << emulator.status();
    emulator_ = std::move(*emulator);
  }

  HttpReply Request(const std::string& method, const std::string& path,
                    const std::string& body = "", const std::string& credentials = "admin:root") {
    return raw::Http(emulator_->rest_address(), method, path, body, credentials);
  }

  json Counters() { return json::parse(Request("GET", "/sim/v1/counters").body); }

  // Signal "sig" on ingress 1, cross-connected to egress 17 (over REST).
  void LightIngress1ToEgress17() {
    ASSERT_EQ(Request("PUT", "/sim/v1/signals/1", R"({"name":"sig","power_dbm":0})").status, 204);
    ASSERT_EQ(Request("PUT", absl::StrCat(kCrossConnects, "/pair=1"),
                      R"({"pair":[{"ingress":1,"egress":17}]})")
                  .status,
              201);
  }

  std::unique_ptr<Tl1Client> Tl1() {
    auto client = Tl1Client::Connect(emulator_->tl1_address());
    EXPECT_TRUE(client && client->LogIn());
    return client;
  }

  // Polls GET /sim/v1/light/E until `done` holds for its answer or a deadline passes.
  json AwaitLight(int egress, const std::function<bool(const json&)>& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    json light;
    do {
      light = json::parse(Request("GET", absl::StrCat("/sim/v1/light/", egress)).body);
      if (done(light)) break;
    } while (absl::Now() < deadline);
    return light;
  }

  SystemClock system_clock_;
  fleet::testing::FakeClock fake_clock_;
  std::unique_ptr<Emulator> emulator_;
};

TEST_F(SimTest, LightFollowsSettlingShuttersAndFaults) {
  Start(absl::Milliseconds(50), &fake_clock_);
  EXPECT_EQ(
      Request("PUT", "/sim/v1/signals/1", R"({"name":"FLT-S1C0-N0/1","power_dbm":0.0})").status,
      204);
  EXPECT_EQ(Request("GET", "/sim/v1/light/17").body,
            R"({"egress":17,"signal":null,"power_dbm":-99.99})");
  ASSERT_EQ(Request("PUT", absl::StrCat(kCrossConnects, "/pair=1"),
                    R"({"pair":[{"ingress":1,"egress":17}]})")
                .status,
            201);
  // The switch clock has not moved: the beam is still moving.
  EXPECT_EQ(Request("GET", "/sim/v1/light/17").body,
            R"({"egress":17,"signal":null,"power_dbm":-99.99})");
  fake_clock_.Advance(absl::Milliseconds(50));
  EXPECT_EQ(Request("GET", "/sim/v1/light/17").body,
            R"({"egress":17,"signal":"FLT-S1C0-N0/1","power_dbm":-1.5})");

  auto tl1 = Tl1();
  ASSERT_THAT(tl1->Command("OPR-PORT-SHUTTER::1:1:;"), HasSubstr("COMPLD"));
  EXPECT_EQ(json::parse(Request("GET", "/sim/v1/light/17").body)["signal"], nullptr);
  ASSERT_THAT(tl1->Command("RLS-PORT-SHUTTER::1:2:;"), HasSubstr("COMPLD"));
  EXPECT_EQ(json::parse(Request("GET", "/sim/v1/light/17").body)["signal"], "FLT-S1C0-N0/1");

  EXPECT_EQ(Request("PUT", "/sim/v1/ports/17", R"({"failed":true})").status, 204);
  EXPECT_EQ(json::parse(Request("GET", "/sim/v1/light/17").body)["power_dbm"], -99.99);
  EXPECT_THAT(tl1->Command("RTRV-ALM-ALL::ALL:3:;"), HasSubstr("\"17:MJ,PORT-FAILED,SA\""));
  EXPECT_EQ(Request("PUT", "/sim/v1/ports/17", R"({"failed":false})").status, 204);
  EXPECT_THAT(tl1->Command("RTRV-ALM-ALL::ALL:4:;"), Not(HasSubstr("PORT-FAILED")));

  EXPECT_EQ(Request("PUT", "/sim/v1/ports/1", R"({"power_drop_db":3.0})").status, 204);
  EXPECT_EQ(json::parse(Request("GET", "/sim/v1/light/17").body)["power_dbm"], -4.5);
  EXPECT_THAT(tl1->Command("RTRV-ALM-ALL::ALL:5:;"), HasSubstr("\"1:MN,LOW-POWER,NSA\""));
  EXPECT_THAT(tl1->Command("RTRV-PORT-POWER::1&17:6:;"),
              HasSubstr("\"1:-3.00\"\r\n   \"17:-4.50\""));

  // A new signal replaces the old one; deleting it darkens the fiber.
  EXPECT_EQ(Request("PUT", "/sim/v1/signals/1", R"({"name":"other","power_dbm":2})").status, 204);
  EXPECT_EQ(Request("GET", "/sim/v1/light/17").body,
            R"({"egress":17,"signal":"other","power_dbm":-2.5})");
  EXPECT_EQ(Request("DELETE", "/sim/v1/signals/1").status, 204);
  EXPECT_EQ(json::parse(Request("GET", "/sim/v1/light/17").body)["signal"], nullptr);
}

TEST_F(SimTest, SeveralEgressesAreReadInOneRequestInTheOrderAsked) {
  Start(absl::Milliseconds(50), &fake_clock_);
  ASSERT_EQ(
      Request("PUT", "/sim/v1/signals/1", R"({"name":"FLT-S1C0-N0/1","power_dbm":0.0})").status,
      204);
  ASSERT_EQ(Request("PUT", absl::StrCat(kCrossConnects, "/pair=1"),
                    R"({"pair":[{"ingress":1,"egress":17}]})")
                .status,
            201);
  fake_clock_.Advance(absl::Milliseconds(50));
  // Three changes so far: the signal, the cross-connect, and its beam settling. Light at 17
  // since the beam settled, 50 ms after the fake clock's start; 18 never changed.
  EXPECT_EQ(Request("GET", "/sim/v1/light?egress=18,17").body,
            R"({"lights":[{"egress":18,"signal":null,"power_dbm":-99.99},)"
            R"({"egress":17,"signal":"FLT-S1C0-N0/1","power_dbm":-1.5,)"
            R"("since_us":1700000000050000}],"generation":3})");
  fake_clock_.Advance(absl::Seconds(1));  // Still there: since is when it came.
  EXPECT_EQ(json::parse(Request("GET", "/sim/v1/light?egress=17").body)["lights"][0]["since_us"],
            1700000000050000);
  for (const char* bad :
       {"/sim/v1/light", "/sim/v1/light?egress=", "/sim/v1/light?egress=x",
        "/sim/v1/light?egress=17&hops=1", "/sim/v1/light?egress=3", "/sim/v1/light?after=1",
        "/sim/v1/light?egress=17&after=x", "/sim/v1/light?egress=17&after=1&wait_ms=60001",
        "/sim/v1/light?egress=17&after=1&wait_ms=-1", "/sim/v1/light?egress=17&egress=18"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(Request("GET", bad).status, 400);
  }
  EXPECT_THAT(Request("GET", "/sim/v1/light?egress=x").body,
              HasSubstr("egress 'x' is not a port number"));
  EXPECT_THAT(Request("GET", "/sim/v1/light?egress=3").body,
              HasSubstr("port 3 is not an egress port"));
  EXPECT_THAT(Request("GET", "/sim/v1/light?egress=17&after=x").body,
              HasSubstr("after 'x' must be a light generation"));
  EXPECT_THAT(Request("GET", "/sim/v1/light?egress=17&after=1&wait_ms=60001").body,
              HasSubstr("wait_ms '60001' must be an integer 0..60000"));
}

// A reader that keeps a copy of the light (an emulated agent) asks with the generation it
// has: the answer waits until the light at the egresses it asked for may have changed.
// since_us is the light's last change, also when the beam's settle before it was not yet
// counted (nobody read the light in between).
TEST_F(SimTest, SinceIsTheLightsLastChangeEvenAfterAnUncountedSettle) {
  Start(absl::Milliseconds(50), &fake_clock_);
  const absl::Time made = fake_clock_.Now();
  ASSERT_NO_FATAL_FAILURE(LightIngress1ToEgress17());  // Settles 50 ms from now.
  fake_clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(Request("PUT", "/sim/v1/ports/17", R"({"failed":true})").status, 204);
  fake_clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(Request("PUT", "/sim/v1/ports/17", R"({"failed":false})").status, 204);
  const json light = json::parse(Request("GET", "/sim/v1/light?egress=17").body);
  EXPECT_EQ(light["lights"][0]["signal"], "sig");
  EXPECT_EQ(light["lights"][0]["since_us"], absl::ToUnixMicros(made + absl::Seconds(2)));
}

TEST_F(SimTest, ALongPollAnswersWhenTheLightItAskedForChanges) {
  Start(absl::ZeroDuration(), &system_clock_);
  ASSERT_NO_FATAL_FAILURE(LightIngress1ToEgress17());
  const json lit = json::parse(Request("GET", "/sim/v1/light?egress=17,18").body);
  const uint64_t generation = lit["generation"];
  EXPECT_EQ(generation, 2u);  // The signal, then the cross-connect.
  EXPECT_EQ(lit["lights"][0]["signal"], "sig");
  // The cross-connect came after generation 1: answered at once.
  EXPECT_EQ(json::parse(Request("GET", "/sim/v1/light?egress=17,18&after=1&wait_ms=60000").body),
            lit);
  // Nothing changes: the answer comes when the wait is over, the same as before.
  const absl::Time start = absl::Now();
  EXPECT_EQ(json::parse(Request("GET", absl::StrCat("/sim/v1/light?egress=17,18&after=", generation,
                                                    "&wait_ms=40"))
                            .body),
            lit);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(40));

  // A change elsewhere (a signal and a cross-connect at egress 19) does not answer it; the
  // signal at 17 going dark does.
  json answer;
  std::thread poll([&] {
    answer =
        json::parse(Request("GET", absl::StrCat("/sim/v1/light?egress=17,18&after=", generation,
                                                "&wait_ms=60000"))
                        .body);
  });
  ASSERT_EQ(Request("PUT", "/sim/v1/signals/3", R"({"name":"other","power_dbm":0})").status, 204);
  ASSERT_EQ(Request("PUT", absl::StrCat(kCrossConnects, "/pair=3"),
                    R"({"pair":[{"ingress":3,"egress":19}]})")
                .status,
            201);
  // A poll that wrongly answered the changes at 19 would have done so by now; if it is slow
  // to, this passes without proving anything, never fails.
  absl::SleepFor(absl::Milliseconds(20));
  ASSERT_EQ(Request("DELETE", "/sim/v1/signals/1").status, 204);
  poll.join();
  EXPECT_EQ(answer["lights"][0]["signal"], nullptr);
  EXPECT_EQ(answer["generation"], generation + 3);
}

TEST_F(SimTest, ALongPollAnswersWhenACrossConnectSettles) {
  Start(absl::Milliseconds(30), &system_clock_);
  ASSERT_EQ(Request("PUT", "/sim/v1/signals/1", R"({"name":"sig","power_dbm":0})").status, 204);
  auto tl1 = Tl1();
  ASSERT_THAT(tl1->Command("ENT-PATCH::1,17:1:;"), HasSubstr("COMPLD"));
  // TL1 answers once the beam has settled: make the next one without waiting for it.
  json before = json::parse(Request("GET", "/sim/v1/light?egress=17").body);
  ASSERT_EQ(before["lights"][0]["signal"], "sig");
  ASSERT_EQ(Request("DELETE", absl::StrCat(kCrossConnects, "/pair=1")).status, 204);
  std::thread make([&] { EXPECT_THAT(tl1->Command("ENT-PATCH::1,17:2:;"), HasSubstr("COMPLD")); });
  // The generation moves when the cross-connect is made, dark, and the light comes when it
  // settles: a reader asking with the dark generation hears of it then, not a minute later.
  json light;
  uint64_t seen = before["generation"];
  const absl::Time start = absl::Now();
  while (light.is_null() || light["lights"][0]["signal"].is_null()) {
    light = json::parse(
        Request("GET", absl::StrCat("/sim/v1/light?egress=17&after=", seen, "&wait_ms=60000"))
            .body);
    seen = light["generation"];
  }
  make.join();
  EXPECT_EQ(light["lights"][0]["signal"], "sig");
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

// A reader that read the dark fiber while the beam moved asks again after it settled: the
// settle counts as a change, so the answer comes at once with the light.
TEST_F(SimTest, ALongPollAfterAnUnseenSettleAnswersAtOnce) {
  Start(absl::Milliseconds(30), &fake_clock_);
  ASSERT_NO_FATAL_FAILURE(LightIngress1ToEgress17());
  const json dark = json::parse(Request("GET", "/sim/v1/light?egress=17").body);
  ASSERT_EQ(dark["lights"][0]["signal"], nullptr);  // The switch clock has not moved.
  fake_clock_.Advance(absl::Milliseconds(30));
  const absl::Time start = absl::Now();
  const json lit =
      json::parse(Request("GET", absl::StrCat("/sim/v1/light?egress=17&after=",
                                              dark["generation"].get<uint64_t>(), "&wait_ms=60000"))
                      .body);
  EXPECT_EQ(lit["lights"][0]["signal"], "sig");
  EXPECT_GT(lit["generation"], dark["generation"]);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

TEST_F(SimTest, AStoppingEmulatorEndsItsLongPolls) {
  Start(absl::ZeroDuration(), &system_clock_);
  const uint64_t generation =
      json::parse(Request("GET", "/sim/v1/light?egress=17").body)["generation"];
  std::thread poll([&, address = emulator_->rest_address()] {
    raw::Http(address, "GET",
              absl::StrCat("/sim/v1/light?egress=17&after=", generation, "&wait_ms=60000"), "", "");
  });
  absl::SleepFor(absl::Milliseconds(20));
  const absl::Time start = absl::Now();
  emulator_.reset();
  poll.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

TEST_F(SimTest, LightArrivesAfterTheSwitchTimeOnTheRealClock) {
  Start(absl::Milliseconds(30), &system_clock_);
  ASSERT_EQ(Request("PUT", "/sim/v1/signals/2", R"({"name":"sig","power_dbm":-1})").status, 204);
  auto tl1 = Tl1();
  ASSERT_THAT(tl1->Command("ENT-PATCH::2,18:1:;"), HasSubstr("COMPLD"));
  json light = AwaitLight(18, [](const json& l) { return !l["signal"].is_null(); });
  EXPECT_EQ(light["signal"], "sig");
  EXPECT_EQ(light["power_dbm"], -2.5);
  ASSERT_THAT(tl1->Command("DLT-PATCH::2:2:;"), HasSubstr("COMPLD"));
  EXPECT_EQ(json::parse(Request("GET", "/sim/v1/light/18").body)["signal"], nullptr);
}

TEST_F(SimTest, CountersCountCommandsChangesAndSessions) {
  Start(absl::ZeroDuration(), &fake_clock_);
  {
    auto tl1 = Tl1();                                        // 1 TL1 command
    ASSERT_THAT(tl1->Command("ENT-PATCH::1&&3,17&&19:2:;"),  // 2
                HasSubstr("COMPLD"));
    ASSERT_THAT(tl1->Command("garbage;"), HasSubstr("DENY"));  // 3: answered, so counted
    EXPECT_EQ(Request("DELETE", absl::StrCat(kCrossConnects, "/pair=2")).status, 204);  // REST 1
    EXPECT_EQ(Request("GET", kCrossConnects, "", "").status, 401);                      // REST 2
    json counters = Counters();  // the side-channel itself is not counted
    EXPECT_EQ(counters["tl1_commands"], 3);
    EXPECT_EQ(counters["rest_requests"], 2);
    EXPECT_EQ(counters["commands"], 5);
    EXPECT_EQ(counters["cross_connects_changed"], 4);
    EXPECT_EQ(counters["cross_connects"], 2);
    EXPECT_EQ(counters["sessions"], 1);
  }
  // The TL1 connection is closed; its session ends on the emulator's side shortly after.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (Counters()["sessions"] != 0 && absl::Now() < deadline) {
  }
  EXPECT_EQ(Counters()["sessions"], 0);
}

TEST_F(SimTest, TheChangeLogNamesTheClientOfEachChangeInOrder) {
  Start(absl::ZeroDuration(), &fake_clock_);
  auto first = Tl1();
  auto second = Tl1();
  ASSERT_THAT(first->Command("ENT-PATCH::1,17:2:;"), HasSubstr("COMPLD"));
  ASSERT_THAT(second->Command("ENT-PATCH::2&&3,18&&19:3:;"), HasSubstr("COMPLD"));
  ASSERT_EQ(Request("DELETE", absl::StrCat(kCrossConnects, "/pair=1")).status, 204);
  // Reads and refused changes are not changes.
  ASSERT_THAT(first->Command("RTRV-PATCH:::4:;"), HasSubstr("COMPLD"));
  ASSERT_THAT(first->Command("ENT-PATCH::2,20:5:;"), HasSubstr("DENY"));
  const json changes = json::parse(Request("GET", "/sim/v1/changes").body)["changes"];
  ASSERT_EQ(changes.size(), 3u) << changes.dump();
  const std::string a = changes[0]["origin"], b = changes[1]["origin"], c = changes[2]["origin"];
  EXPECT_THAT(a, ::testing::StartsWith("tl1 session "));
  EXPECT_THAT(b, ::testing::StartsWith("tl1 session "));
  EXPECT_NE(a, b);
  EXPECT_THAT(c, ::testing::StartsWith("rest 127.0.0.1:"));
  EXPECT_EQ(changes[0]["cross_connects"], 1);
  EXPECT_EQ(changes[1]["cross_connects"], 2);
  EXPECT_EQ(changes[2]["cross_connects"], 1);
  EXPECT_EQ(changes[0]["shutters"], false);
  EXPECT_LE(changes[0]["at_unix_ms"], changes[2]["at_unix_ms"]);
}

TEST_F(SimTest, DenyNextRefusesTheNextCommandsOfBothProtocols) {
  Start(absl::ZeroDuration(), &fake_clock_);
  HttpReply set = Request("PUT", "/sim/v1/faults", R"({"deny_next":2})");
  ASSERT_EQ(set.status, 200);
  EXPECT_EQ(json::parse(set.body)["deny_next"], 2);
  auto tl1 = Tl1();                          // logins are not refused
  EXPECT_EQ(Counters()["tl1_commands"], 1);  // nor is the side-channel
  std::string denied = tl1->Command("ENT-PATCH::1,17:2:;");
  EXPECT_THAT(denied, HasSubstr("M  2 DENY\r\n   SROF\r\n   /* Injected fault */"));
  HttpReply refused = Request("GET", kCrossConnects);
  EXPECT_EQ(refused.status, 500);
  EXPECT_THAT(refused.body, HasSubstr("\"error-tag\":\"operation-failed\""));
  EXPECT_THAT(refused.body, HasSubstr("Injected fault"));
  // Used up: both protocols work again, and the refused ENT-PATCH made nothing.
  EXPECT_EQ(Request("GET", kCrossConnects).body, R"({"optical-switch:cross-connects":{}})");
  EXPECT_THAT(tl1->Command("ENT-PATCH::1,17:3:;"), HasSubstr("COMPLD"));
}

TEST_F(SimTest, LatencyDelaysEveryProtocolAnswer) {
  Start(absl::ZeroDuration(), &fake_clock_);
  auto tl1 = Tl1();
  ASSERT_EQ(Request("PUT", "/sim/v1/faults", R"({"latency_ms":150})").status, 200);
  // Lower bounds only: an answer cannot come before the injected delay.
  absl::Time start = absl::Now();
  EXPECT_THAT(tl1->Command("RTRV-PATCH:::1:;"), HasSubstr("COMPLD"));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));
  start = absl::Now();
  EXPECT_EQ(Request("GET", kCrossConnects).status, 200);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));
  ASSERT_EQ(Request("DELETE", "/sim/v1/faults").status, 204);
  EXPECT_EQ(json::parse(Request("PUT", "/sim/v1/faults", "{}").body)["latency_ms"], 0.0);
}

TEST_F(SimTest, FailBulkAfterLeavesTheFirstChanges) {
  Start(absl::ZeroDuration(), &fake_clock_);
  auto tl1 = Tl1();
  ASSERT_EQ(Request("PUT", "/sim/v1/faults", R"({"fail_bulk_after":2})").status, 200);
  std::string failed = tl1->Command("ENT-PATCH::1&&4,17&&20:1:;");
  EXPECT_THAT(failed, HasSubstr("DENY\r\n   SROF\r\n   /* Operation failed after 2 of 4 */"));
  std::string retrieved = tl1->Command("RTRV-PATCH:::2:;");
  EXPECT_THAT(retrieved, HasSubstr("\"1,17\"\r\n   \"2,18\"\r\n;"));

  ASSERT_EQ(Request("PUT", "/sim/v1/faults", R"({"fail_bulk_after":1})").status, 200);
  HttpReply patch =
      Request("PATCH", kCrossConnects,
              R"({"optical-switch:cross-connects":{"pair":[{"ingress":5,"egress":21},)"
              R"({"ingress":6,"egress":22},{"ingress":7,"egress":23}]}})");
  EXPECT_EQ(patch.status, 500);
  EXPECT_THAT(patch.body, HasSubstr("Operation failed after 1 of 3"));
  EXPECT_EQ(emulator_->model().EgressOf(5), 21);
  EXPECT_EQ(emulator_->model().EgressOf(6), std::nullopt);
  // One-shot: the retry succeeds.
  EXPECT_EQ(Request("PATCH", kCrossConnects,
                    R"({"optical-switch:cross-connects":{"pair":[{"ingress":6,"egress":22},)"
                    R"({"ingress":7,"egress":23}]}})")
                .status,
            204);
}

TEST_F(SimTest, DropConnectionsClosesEveryConnection) {
  Start(absl::ZeroDuration(), &fake_clock_);
  auto tl1 = Tl1();
  auto http = raw::HttpClient::Connect(emulator_->rest_address());
  ASSERT_NE(http, nullptr);
  ASSERT_EQ(http->Request("GET", kCrossConnects).status, 200);  // a kept-alive connection
  auto caller = raw::HttpClient::Connect(emulator_->rest_address());
  ASSERT_NE(caller, nullptr);

  EXPECT_EQ(caller->Request("POST", "/sim/v1/faults/drop-connections", "", "").status, 204);
  EXPECT_TRUE(tl1->socket().ClosedByPeer());
  EXPECT_TRUE(http->socket().ClosedByPeer());
  EXPECT_TRUE(caller->socket().ClosedByPeer());

  // The listeners stay: clients reconnect at once.
  auto again = Tl1();
  EXPECT_THAT(again->Command("RTRV-PATCH:::1:;"), HasSubstr("COMPLD"));
  EXPECT_EQ(Request("GET", kCrossConnects).status, 200);
}

TEST_F(SimTest, DeleteFaultsClearsEverything) {
  Start(absl::ZeroDuration(), &fake_clock_);
  ASSERT_EQ(
      Request("PUT", "/sim/v1/faults", R"({"deny_next":5,"latency_ms":1,"fail_bulk_after":0})")
          .status,
      200);
  ASSERT_EQ(Request("PUT", "/sim/v1/ports/20", R"({"failed":true,"power_drop_db":2})").status, 204);
  json ports = json::parse(Request("GET", "/api/data/optical-switch:port-config").body);
  EXPECT_EQ(Request("DELETE", "/sim/v1/faults").status, 204);
  json settings = json::parse(Request("PUT", "/sim/v1/faults", "{}").body);
  EXPECT_EQ(settings, json::parse(R"({"deny_next":0,"latency_ms":0.0,"fail_bulk_after":null})"));
  EXPECT_THAT(emulator_->model().Alarms(), IsEmpty());
  ports = json::parse(Request("GET", "/api/data/optical-switch:port-config").body);
  EXPECT_EQ(ports["optical-switch:port-config"]["port"][19]["status"], "ENABLED");
  auto tl1 = Tl1();
  EXPECT_THAT(tl1->Command("ENT-PATCH::1&2,17&18:1:;"), HasSubstr("COMPLD"));
}

TEST_F(SimTest, FaultSettingsCombineAndReplace) {
  Start(absl::ZeroDuration(), &fake_clock_);
  ASSERT_EQ(Request("PUT", "/sim/v1/faults", R"({"deny_next":3,"fail_bulk_after":4})").status, 200);
  json settings = json::parse(
      Request("PUT", "/sim/v1/faults", R"({"deny_next":1,"fail_bulk_after":null})").body);
  EXPECT_EQ(settings["deny_next"], 1);
  EXPECT_EQ(settings["fail_bulk_after"], nullptr);
  EXPECT_EQ(settings["latency_ms"], 0.0);
}

TEST_F(SimTest, BadSideChannelRequestsAreRefused) {
  Start(absl::ZeroDuration(), &fake_clock_);
  EXPECT_EQ(Request("PUT", "/sim/v1/signals/17", R"({"name":"x","power_dbm":0})").status, 400);
  EXPECT_EQ(Request("PUT", "/sim/v1/signals/1", R"({"power_dbm":0})").status, 400);
  EXPECT_EQ(Request("PUT", "/sim/v1/signals/1", R"({"name":"x","power_dbm":"high"})").status, 400);
  EXPECT_EQ(Request("PUT", "/sim/v1/signals/1", "not json").status, 400);
  EXPECT_EQ(Request("GET", "/sim/v1/light/1").status, 400);
  EXPECT_EQ(Request("GET", "/sim/v1/light/x").status, 400);
  EXPECT_EQ(Request("PUT", "/sim/v1/faults", R"({"bogus":1})").status, 400);
  EXPECT_EQ(Request("PUT", "/sim/v1/faults", R"({"deny_next":-1})").status, 400);
  EXPECT_EQ(Request("PUT", "/sim/v1/faults", R"({"expire_sessions":"yes"})").status, 400);
  EXPECT_EQ(Request("PUT", "/sim/v1/ports/99", R"({"failed":true})").status, 400);
  EXPECT_EQ(Request("PUT", "/sim/v1/ports/3", R"({"power_drop_db":-3})").status, 400);
  EXPECT_EQ(Request("GET", "/sim/v1/nothing").status, 404);
  EXPECT_EQ(Request("GET", "/sim/v1/faults/drop-connections").status, 405);
  // A refused fault request sets nothing.
  EXPECT_EQ(Request("PUT", "/sim/v1/faults", R"({"deny_next":2,"latency_ms":-5})").status, 400);
  EXPECT_EQ(Request("GET", kCrossConnects).status, 200);
}

}  // namespace
}  // namespace fleet::polatis_emu
