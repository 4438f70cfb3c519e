#include "switch_adapters/polatis/rest_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace fleet::polatis {
namespace {

using nlohmann::json;
using switch_adapters::CrossConnect;
using switch_adapters::PortPower;
using switch_adapters::PortStatus;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

json Body(const std::string& text) {
  std::optional<json> parsed = ParseRestBody(text);
  EXPECT_TRUE(parsed.has_value()) << text;
  return parsed.value_or(json());
}

TEST(ParseRestBodyTest, EmptyIsAnEmptyObjectAndGarbageIsRefused) {
  EXPECT_EQ(ParseRestBody(""), json::object());
  EXPECT_FALSE(ParseRestBody("{\"a\":").has_value());
}

TEST(RestErrorMessageTest, TagAndMessageOrTheBodyItself) {
  EXPECT_EQ(RestErrorMessage(R"({"ietf-restconf:errors":{"error":[{"error-tag":"in-use",)"
                             R"("error-message":"Port in use: 385"}]}})"),
            "in-use: Port in use: 385");
  EXPECT_EQ(RestErrorMessage("Service Unavailable"), "Service Unavailable");
  EXPECT_EQ(RestErrorMessage(std::string(300, 'x')), std::string(200, 'x'));
}

TEST(RestErrorMessageTest, AnErrorOfAnotherShapeIsNotFatal) {
  EXPECT_EQ(RestErrorMessage(R"({"ietf-restconf:errors":{"error":[7]}})"), "");
  EXPECT_EQ(RestErrorMessage(R"({"ietf-restconf:errors":{"error":[{"error-tag":1,)"
                             R"("error-message":"busy"}]}})"),
            "busy");
}

TEST(ParseRestCrossConnectsTest, ReadsEitherListNameSorted) {
  absl::StatusOr<RestCrossConnects> read = ParseRestCrossConnects(
      Body(R"({"optical-switch:cross-connects":{"pair":[{"ingress":2,"egress":386},)"
           R"({"ingress":1,"egress":385}]}})"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(read->pairs, ElementsAre(CrossConnect{1, 385}, CrossConnect{2, 386}));
  EXPECT_EQ(read->list_name, "pair");

  read = ParseRestCrossConnects(
      Body(R"({"optical-switch:cross-connects":{"pairs":[{"ingress":3,"egress":390}]}})"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(read->pairs, ElementsAre(CrossConnect{3, 390}));
  EXPECT_EQ(read->list_name, "pairs");

  read = ParseRestCrossConnects(Body(R"({"optical-switch:cross-connects":{}})"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(read->pairs, IsEmpty());
  EXPECT_EQ(read->list_name, "");
}

TEST(ParseRestCrossConnectsTest, AnotherShapeIsInternalNotNoCrossConnects) {
  for (const char* text : {"[]", "3", R"({"optical-switch:cross-connects":5})",
                           R"({"optical-switch:cross-connects":{"pair":{"ingress":1}}})"}) {
    absl::StatusOr<RestCrossConnects> read = ParseRestCrossConnects(Body(text));
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInternal) << text;
  }
}

TEST(ParseRestCrossConnectsTest, APortBeyond32BitsIsMalformedNotTruncated) {
  absl::StatusOr<RestCrossConnects> read = ParseRestCrossConnects(
      Body(R"({"optical-switch:cross-connects":{"pair":[{"ingress":4294967297,"egress":385}]}})"));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("malformed pair"));
}

TEST(ParseRestPortConfigTest, StatusesAndDefaults) {
  absl::StatusOr<std::vector<switch_adapters::PortState>> ports = ParseRestPortConfig(
      Body(R"({"optical-switch:port-config":{"port":[{"port-id":385,"status":"DISABLED"},)"
           R"({"port-id":2,"status":"FAILED"},{"port-id":1}]}})"));
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), 3u);
  EXPECT_EQ((*ports)[0].port, 1u);
  EXPECT_EQ((*ports)[0].status, PortStatus::kEnabled);
  EXPECT_EQ((*ports)[1].status, PortStatus::kFailed);
  EXPECT_EQ((*ports)[2].status, PortStatus::kDisabled);
}

TEST(ParseRestPortConfigTest, AWrongTypeIsInternal) {
  for (const char* text : {R"({"optical-switch:port-config":{"port":[{"port-id":"1"}]}})",
                           R"({"optical-switch:port-config":{"port":[{"port-id":1,"status":0}]}})",
                           R"({"optical-switch:port-config":{"port":[1]}})"}) {
    EXPECT_EQ(ParseRestPortConfig(Body(text)).status().code(), absl::StatusCode::kInternal) << text;
  }
}

TEST(ParseRestOpmPowerTest, FiltersAndDefaults) {
  const json body = Body(R"({"optical-switch:opm-power":{"port":[{"port-id":386},)"
                         R"({"port-id":385,"power":-3.1},{"port-id":1,"power":0}]}})");
  absl::StatusOr<std::vector<PortPower>> all = ParseRestOpmPower(body, {});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].dbm, PortPower::kNoLight);
  absl::StatusOr<std::vector<PortPower>> some = ParseRestOpmPower(body, {385});
  ASSERT_TRUE(some.ok()) << some.status();
  ASSERT_EQ(some->size(), 1u);
  EXPECT_DOUBLE_EQ((*some)[0].dbm, -3.1);
  EXPECT_EQ(ParseRestOpmPower(Body(R"({"optical-switch:opm-power":{"port":[{"port-id":1,)"
                                   R"("power":"low"}]}})"),
                              {})
                .status()
                .code(),
            absl::StatusCode::kInternal);
}

TEST(ParseRestProductInformationTest, SizeFromTheModelName) {
  absl::StatusOr<switch_adapters::SwitchIdentity> id = ParseRestProductInformation(
      Body(R"({"optical-switch:product-information":{"manufacturer":"Polatis",)"
           R"("model-name":"N-VST-384x192-EMU","serial-number":"1","software-version":"8"}})"));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->vendor, "Polatis");
  EXPECT_EQ(id->ingress_ports, 384u);
  EXPECT_EQ(id->egress_ports, 192u);
  id = ParseRestProductInformation(Body(R"({"model-name":"v7-x-12-48x48"})"));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->ingress_ports, 48u);
  id = ParseRestProductInformation(Body(R"({"model-name":"series 7000"})"));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->ingress_ports, 0u);
  EXPECT_EQ(id->egress_ports, 0u);
}

TEST(ParseRestProductInformationTest, MalformedIsInternalNotAThrow) {
  for (const char* text :
       {"3", R"({"optical-switch:product-information":[]})", R"({"model-name":7})",
        R"({"model-name":"N-99999999999x1"})", R"({"model-name":"N-1x99999999999999999999999"})"}) {
    EXPECT_EQ(ParseRestProductInformation(Body(text)).status().code(), absl::StatusCode::kInternal)
        << text;
  }
}

TEST(ParseRestProductInformationTest, ALongModelNameIsScannedWithoutRecursion) {
  // A regex matcher that recurses per character would overflow the stack here.
  const std::string digits(200000, '7');
  absl::StatusOr<switch_adapters::SwitchIdentity> id =
      ParseRestProductInformation(json{{"model-name", digits}});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->ingress_ports, 0u);
}

}  // namespace
}  // namespace fleet::polatis
