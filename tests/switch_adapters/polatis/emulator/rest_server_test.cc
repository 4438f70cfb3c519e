// The REST API over real HTTP against an in-process emulator on port 0 (fleet::testing::FakeClock,
// no switching time): every resource and status code of docs/polatis-emulator.md, and TL1/REST
// seeing each other's changes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "switch_adapters/polatis/emulator/emulator.h"
#include "testing/fake_clock.h"
#include "tests/switch_adapters/polatis/emulator/raw_clients.h"

namespace fleet::polatis_emu {
namespace {

using nlohmann::json;
using raw::HttpReply;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kCrossConnects[] = "/api/data/optical-switch:cross-connects";

std::string PairPath(int ingress) { return absl::StrCat(kCrossConnects, "/pair=", ingress); }

std::string PairBody(int ingress, int egress) {
  return absl::StrCat(R"({"pair":[{"ingress":)", ingress, R"(,"egress":)", egress, "}]}");
}

// The RESTCONF error tag of an error reply.
std::string ErrorTag(const HttpReply& reply) {
  json body = json::parse(reply.body, nullptr, false);
  if (body.is_discarded()) return "not json: " + reply.body;
  return body["ietf-restconf:errors"]["error"][0].value("error-tag", "none");
}

std::string ErrorMessage(const HttpReply& reply) {
  json body = json::parse(reply.body, nullptr, false);
  if (body.is_discarded()) return "not json: " + reply.body;
  return body["ietf-restconf:errors"]["error"][0].value("error-message", "none");
}

class RestServerTest : public ::testing::Test {
 protected:
  void Start(YangRevision revision = YangRevision::kCurrent) {
    EmulatorOptions options;
    options.size = {16, 16};  // ingress 1..16, egress 17..32
    options.tl1_port = 0;
    options.rest_port = 0;
    options.switch_time = absl::ZeroDuration();
    options.yang_revision = revision;
    absl::StatusOr<std::unique_ptr<Emulator>> emulator = Emulator::Start(options, &clock_);
    ASSERT_TRUE(emulator.ok()) << emulator.status();
    emulator_ = std::move(*emulator);
  }

  HttpReply Request(const std::string& method, const std::string& path,
                    const std::string& body = "", const std::string& credentials = "admin:root") {
    return raw::Http(emulator_->rest_address(), method, path, body, credentials);
  }

  fleet::testing::FakeClock clock_;
  std::unique_ptr<Emulator> emulator_;
};

TEST_F(RestServerTest, ReadCrossConnects) {
  Start();
  HttpReply empty = Request("GET", kCrossConnects);
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(empty.headers["content-type"], "application/yang-data+json");
  EXPECT_EQ(empty.body, R"({"optical-switch:cross-connects":{}})");

  ASSERT_TRUE(emulator_->model().Connect({{1, 17}, {2, 18}}, ConnectMode::kRefuseInUse).ok());
  EXPECT_EQ(Request("GET", kCrossConnects).body,
            R"({"optical-switch:cross-connects":{"pair":[{"ingress":1,"egress":17},)"
            R"({"ingress":2,"egress":18}]}})");
  HttpReply one = Request("GET", PairPath(2));
  EXPECT_EQ(one.status, 200);
  EXPECT_EQ(one.body, R"({"optical-switch:pair":[{"ingress":2,"egress":18}]})");
  HttpReply missing = Request("GET", PairPath(3));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(ErrorTag(missing), "data-missing");
  EXPECT_EQ(Request("GET", PairPath(17)).status, 400);  // an egress is no key
  EXPECT_EQ(Request("GET", absl::StrCat(kCrossConnects, "/pair=x")).status, 400);
  // A client may percent-encode the colon.
  EXPECT_EQ(Request("GET", "/api/data/optical-switch%3Across-connects").status, 200);
}

TEST_F(RestServerTest, PutCreatesReplacesAndRefuses) {
  Start();
  EXPECT_EQ(Request("PUT", PairPath(1), PairBody(1, 17)).status, 201);
  EXPECT_EQ(Request("PUT", PairPath(1), PairBody(1, 17)).status, 204);  // unchanged
  EXPECT_EQ(Request("PUT", PairPath(1), PairBody(1, 18)).status, 204);  // moved to a free egress
  EXPECT_THAT(emulator_->model().CrossConnects(), ElementsAre(CrossConnect{1, 18}));

  HttpReply in_use = Request("PUT", PairPath(2), PairBody(2, 18));
  EXPECT_EQ(in_use.status, 409);
  EXPECT_EQ(ErrorTag(in_use), "in-use");
  EXPECT_EQ(ErrorMessage(in_use), "Port in use: 18");

  HttpReply mismatch = Request("PUT", PairPath(2), PairBody(3, 19));
  EXPECT_EQ(mismatch.status, 400);
  EXPECT_EQ(ErrorTag(mismatch), "invalid-value");
  HttpReply out_of_range = Request("PUT", PairPath(2), PairBody(2, 1000));
  EXPECT_EQ(out_of_range.status, 400);
  EXPECT_EQ(ErrorMessage(out_of_range), "Invalid OXC port: 1000");
  EXPECT_EQ(Request("PUT", PairPath(2), PairBody(2, 5)).status, 400);  // ingress as egress
  HttpReply malformed = Request("PUT", PairPath(2), "{\"pair\":[");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(ErrorTag(malformed), "malformed-message");
  EXPECT_EQ(Request("PUT", PairPath(2), R"({"pair":[{"ingress":2,"egress":"19"}]})").status, 400);
  EXPECT_EQ(Request("PUT", PairPath(2), R"({"pair":[]})").status, 400);
  // The module-qualified name is accepted too.
  EXPECT_EQ(
      Request("PUT", PairPath(2), R"({"optical-switch:pair":[{"ingress":2,"egress":19}]})").status,
      201);
  EXPECT_THAT(emulator_->model().CrossConnects(),
              ElementsAre(CrossConnect{1, 18}, CrossConnect{2, 19}));
}

TEST_F(RestServerTest, DeleteOneAndAll) {
  Start();
  ASSERT_TRUE(emulator_->model().Connect({{1, 17}, {2, 18}}, ConnectMode::kRefuseInUse).ok());
  EXPECT_EQ(Request("DELETE", PairPath(1)).status, 204);
  HttpReply again = Request("DELETE", PairPath(1));
  EXPECT_EQ(again.status, 404);
  EXPECT_EQ(ErrorTag(again), "data-missing");
  EXPECT_EQ(Request("DELETE", kCrossConnects).status, 204);
  EXPECT_THAT(emulator_->model().CrossConnects(), IsEmpty());
  EXPECT_EQ(Request("DELETE", kCrossConnects).status, 204);  // nothing left: still fine
}

TEST_F(RestServerTest, PatchIsAllOrNothing) {
  Start();
  ASSERT_TRUE(emulator_->model().Connect({{1, 17}, {2, 18}}, ConnectMode::kRefuseInUse).ok());
  const std::string body = R"({"optical-switch:cross-connects":{"pair":[{"ingress":3,"egress":19},)"
                           R"({"ingress":4,"egress":20},{"ingress":1,"egress":21}]}})";
  EXPECT_EQ(Request("PATCH", kCrossConnects, body).status, 204);
  EXPECT_THAT(emulator_->model().CrossConnects(),
              ElementsAre(CrossConnect{1, 21}, CrossConnect{2, 18}, CrossConnect{3, 19},
                          CrossConnect{4, 20}));

  // Egress 18 is held by ingress 2, which is not in the patch: 409 and nothing changes.
  HttpReply conflict = Request("PATCH", kCrossConnects,
                               R"({"optical-switch:cross-connects":{"pair":[)"
                               R"({"ingress":5,"egress":22},{"ingress":6,"egress":18}]}})");
  EXPECT_EQ(conflict.status, 409);
  EXPECT_EQ(ErrorTag(conflict), "in-use");
  EXPECT_EQ(emulator_->model().EgressOf(5), std::nullopt);

  // Swapping two ingresses in one patch is fine.
  EXPECT_EQ(Request("PATCH", kCrossConnects,
                    R"({"optical-switch:cross-connects":{"pair":[)"
                    R"({"ingress":3,"egress":20},{"ingress":4,"egress":19}]}})")
                .status,
            204);
  EXPECT_EQ(emulator_->model().EgressOf(3), 20);
  EXPECT_EQ(emulator_->model().EgressOf(4), 19);

  EXPECT_EQ(Request("PATCH", kCrossConnects,
                    R"({"optical-switch:cross-connects":{"pair":[{"ingress":7,"egress":99}]}})")
                .status,
            400);
  EXPECT_EQ(Request("PATCH", kCrossConnects, R"({"pair":[]})").status, 400);
  EXPECT_EQ(Request("PATCH", kCrossConnects, "nonsense").status, 400);
}

TEST_F(RestServerTest, PortConfig) {
  Start();
  ASSERT_TRUE(emulator_->model().SetPortFailed(3, true).ok());
  const std::string path = "/api/data/optical-switch:port-config";
  HttpReply before = Request("GET", path);
  ASSERT_EQ(before.status, 200);
  json ports = json::parse(before.body)["optical-switch:port-config"]["port"];
  ASSERT_EQ(ports.size(), 32u);
  EXPECT_EQ(ports[0], json::parse(R"({"port-id":1,"status":"ENABLED","label":"","peer-port":0})"));
  EXPECT_EQ(ports[2]["status"], "FAILED");

  EXPECT_EQ(Request("PATCH", path,
                    R"({"optical-switch:port-config":{"port":[{"port-id":5,"status":"DISABLED"},)"
                    R"({"port-id":20,"status":"DISABLED"}]}})")
                .status,
            204);
  ports = json::parse(Request("GET", path).body)["optical-switch:port-config"]["port"];
  EXPECT_EQ(ports[4]["status"], "DISABLED");
  EXPECT_EQ(ports[19]["status"], "DISABLED");
  EXPECT_FALSE(emulator_->model().ReadPorts({5})[0].shutter_open);
  EXPECT_EQ(Request("PATCH", path,
                    R"({"optical-switch:port-config":{"port":[{"port-id":5,"status":"ENABLED"}]}})")
                .status,
            204);
  EXPECT_TRUE(emulator_->model().ReadPorts({5})[0].shutter_open);

  // FAILED cannot be set, ports must exist, and one bad entry refuses the whole request.
  EXPECT_EQ(Request("PATCH", path,
                    R"({"optical-switch:port-config":{"port":[{"port-id":6,"status":"FAILED"}]}})")
                .status,
            400);
  EXPECT_EQ(Request("PATCH", path,
                    R"({"optical-switch:port-config":{"port":[{"port-id":6,"status":"DISABLED"},)"
                    R"({"port-id":99,"status":"DISABLED"}]}})")
                .status,
            400);
  EXPECT_TRUE(emulator_->model().ReadPorts({6})[0].shutter_open);
}

TEST_F(RestServerTest, OpmPowerAndProductInformation) {
  Start();
  ASSERT_TRUE(emulator_->model().SetSignal(1, "s", -1.6).ok());
  ASSERT_TRUE(emulator_->model().Connect({{1, 17}}, ConnectMode::kRefuseInUse).ok());
  HttpReply power = Request("GET", "/api/data/optical-switch:opm-power");
  ASSERT_EQ(power.status, 200);
  json ports = json::parse(power.body)["optical-switch:opm-power"]["port"];
  ASSERT_EQ(ports.size(), 32u);
  EXPECT_EQ(ports[0], json::parse(R"({"port-id":1,"power":-1.6})"));
  EXPECT_EQ(ports[16], json::parse(R"({"port-id":17,"power":-3.1})"));
  EXPECT_EQ(ports[17], json::parse(R"({"port-id":18,"power":-99.99})"));

  HttpReply product = Request("GET", "/api/data/optical-switch:product-information");
  ASSERT_EQ(product.status, 200);
  json info = json::parse(product.body)["optical-switch:product-information"];
  EXPECT_EQ(info["manufacturer"], "Polatis");
  EXPECT_EQ(info["model-name"], "N-VST-16x16-EMU");
  EXPECT_EQ(info["serial-number"], MakeSwitchIdentity({16, 16}, "POLATIS-EMU").serial_number);
  EXPECT_EQ(info["software-version"], "7.4.0-EMU");
}

TEST_F(RestServerTest, AuthenticationIsRequired) {
  Start();
  for (const std::string& credentials : {std::string(""), std::string("admin:wrong"),
                                         std::string("nobody:root"), std::string("admin")}) {
    HttpReply reply = Request("GET", kCrossConnects, "", credentials);
    EXPECT_EQ(reply.status, 401) << credentials;
    EXPECT_EQ(ErrorTag(reply), "access-denied");
    EXPECT_THAT(reply.headers["www-authenticate"], HasSubstr("Basic"));
  }
  // A refused request changes nothing.
  EXPECT_EQ(Request("PUT", PairPath(1), PairBody(1, 17), "admin:wrong").status, 401);
  EXPECT_THAT(emulator_->model().CrossConnects(), IsEmpty());
  // The side-channel needs no credentials.
  EXPECT_EQ(Request("GET", "/sim/v1/counters", "", "").status, 200);
}

TEST_F(RestServerTest, UnknownResourcesAndMethods) {
  Start();
  HttpReply unknown = Request("GET", "/api/data/optical-switch:fans");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(ErrorTag(unknown), "invalid-value");
  EXPECT_EQ(Request("GET", "/index.html").status, 404);
  EXPECT_EQ(Request("GET", "/api/data/optical-switch:cross-connects/pairs=1").status, 404);
  HttpReply method = Request("POST", kCrossConnects, "{}");
  EXPECT_EQ(method.status, 405);
  EXPECT_THAT(method.headers["allow"], HasSubstr("PATCH"));
}

TEST_F(RestServerTest, PathsThatAreNotUtf8AreAnsweredWithJson) {
  // The decoded path goes into the error's JSON: a byte that is not UTF-8 must not make the
  // JSON writer throw out of the request handler (and end the emulator).
  Start();
  HttpReply unknown = Request("GET", "/%FF%FEx");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_THAT(ErrorMessage(unknown), HasSubstr("Unknown resource: /"));
  HttpReply port = Request("DELETE", "/sim/v1/signals/%FF");
  EXPECT_EQ(port.status, 400);
  EXPECT_TRUE(json::accept(port.body)) << port.body;
  EXPECT_EQ(Request("GET", kCrossConnects).status, 200);
}

TEST_F(RestServerTest, LegacyRevisionNamesTheListPairs) {
  Start(YangRevision::kLegacy);
  const std::string path = absl::StrCat(kCrossConnects, "/pairs=1");
  EXPECT_EQ(Request("PUT", path, R"({"pairs":[{"ingress":1,"egress":17}]})").status, 201);
  EXPECT_EQ(Request("GET", kCrossConnects).body,
            R"({"optical-switch:cross-connects":{"pairs":[{"ingress":1,"egress":17}]}})");
  EXPECT_EQ(Request("GET", path).body, R"({"optical-switch:pairs":[{"ingress":1,"egress":17}]})");
  // The current name is not understood by a legacy switch, in paths or bodies.
  EXPECT_EQ(Request("GET", PairPath(1)).status, 404);
  EXPECT_EQ(Request("PUT", path, PairBody(1, 17)).status, 400);
  EXPECT_EQ(Request("PATCH", kCrossConnects,
                    R"({"optical-switch:cross-connects":{"pair":[{"ingress":2,"egress":18}]}})")
                .status,
            400);
  EXPECT_EQ(Request("PATCH", kCrossConnects,
                    R"({"optical-switch:cross-connects":{"pairs":[{"ingress":2,"egress":18}]}})")
                .status,
            204);
  EXPECT_EQ(emulator_->model().EgressOf(2), 18);
}

TEST_F(RestServerTest, CurrentRevisionRefusesTheLegacyName) {
  Start();
  EXPECT_EQ(Request("PUT", PairPath(1), R"({"pairs":[{"ingress":1,"egress":17}]})").status, 400);
  EXPECT_THAT(emulator_->model().CrossConnects(), IsEmpty());
}

TEST_F(RestServerTest, ConnectionIsKeptAlive) {
  Start();
  auto client = raw::HttpClient::Connect(emulator_->rest_address());
  ASSERT_NE(client, nullptr);
  for (int i = 1; i <= 3; ++i) {
    HttpReply reply = client->Request("PUT", PairPath(i), PairBody(i, 16 + i));
    EXPECT_EQ(reply.status, 201) << i;
    EXPECT_NE(reply.headers["connection"], "close");
  }
  EXPECT_EQ(client->Request("GET", PairPath(3)).status, 200);
}

TEST_F(RestServerTest, PatchMadeOverTl1IsSeenOverRestAndViceVersa) {
  Start();
  auto tl1 = raw::Tl1Client::Connect(emulator_->tl1_address());
  ASSERT_NE(tl1, nullptr);
  ASSERT_TRUE(tl1->LogIn());
  ASSERT_THAT(tl1->Command("ENT-PATCH::1&&2,17&&18:2:;"), HasSubstr("COMPLD"));
  EXPECT_EQ(Request("GET", kCrossConnects).body,
            R"({"optical-switch:cross-connects":{"pair":[{"ingress":1,"egress":17},)"
            R"({"ingress":2,"egress":18}]}})");

  EXPECT_EQ(Request("PUT", PairPath(3), PairBody(3, 19)).status, 201);
  EXPECT_EQ(Request("DELETE", PairPath(1)).status, 204);
  std::string retrieved = tl1->Command("RTRV-PATCH:::3:;");
  EXPECT_THAT(retrieved, HasSubstr("\"2,18\""));
  EXPECT_THAT(retrieved, HasSubstr("\"3,19\""));
  EXPECT_THAT(retrieved, ::testing::Not(HasSubstr("\"1,17\"")));
  // A port held through REST is in use for TL1.
  EXPECT_THAT(tl1->Command("ENT-PATCH::4,19:4:;"), HasSubstr("Port in use: 19"));
  // Shutters closed over REST read back over TL1.
  ASSERT_EQ(
      Request("PATCH", "/api/data/optical-switch:port-config",
              R"({"optical-switch:port-config":{"port":[{"port-id":7,"status":"DISABLED"}]}})")
          .status,
      204);
  EXPECT_THAT(tl1->Command("RTRV-PORT-SHUTTER::7:5:;"), HasSubstr("\"7:CLOSED\""));
}

}  // namespace
}  // namespace fleet::polatis_emu
