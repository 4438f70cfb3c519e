#include "onic_agent/bring_up.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace fleet::onic_agent {
namespace {

using ::testing::HasSubstr;

// A backend that answers every call with a fixed outcome and records what it was asked.
class RecordingBackend : public OnicBackend {
 public:
  std::string name() const override { return "recording"; }
  absl::StatusOr<std::vector<v1::AgentOnic>> Discover() override {
    calls.push_back("discover");
    v1::AgentOnic onic;
    onic.set_serial("ONIC-A");
    return std::vector<v1::AgentOnic>{onic};
  }
  CommandOutcome Quiesce(const std::string& serial, uint32_t port, absl::Time) override {
    calls.push_back(absl::StrCat("quiesce ", serial, " ", port));
    return {absl::OkStatus(), Link(serial, port, v1::LINK_STATUS_QUIESCED)};
  }
  CommandOutcome Retrain(const std::string& serial, uint32_t port, const v1::PeerIdentity& expected,
                         absl::Time) override {
    calls.push_back(absl::StrCat("retrain ", serial, " ", port, " ", expected.pcie_vendor_id(), " ",
                                 expected.pcie_device_id(), " ", expected.device_serial_number()));
    return {absl::UnavailableError("link did not train"), Link(serial, port, v1::LINK_STATUS_DOWN)};
  }
  CommandOutcome ReadPort(const std::string& serial, uint32_t port) override {
    calls.push_back(absl::StrCat("read ", serial, " ", port));
    return {absl::OkStatus(), Link(serial, port, v1::LINK_STATUS_UP)};
  }
  absl::Status Blink(const std::string&, absl::Duration) override { return absl::OkStatus(); }

  std::vector<std::string> calls;

 private:
  static v1::LinkState Link(const std::string& serial, uint32_t port, v1::LinkStatus status) {
    v1::LinkState link;
    link.set_onic_serial(serial);
    link.set_port(port);
    link.set_status(status);
    return link;
  }
};

TEST(BringUpTest, ParsesEachVerbAndItsExpectedDevice) {
  absl::StatusOr<BringUpCommand> command = ParseBringUpCommand(
      {"retrain", "ONIC-A", "2"}, {"0x8086", "10d3", "52-54-00-ff-ff-12-34-56"});
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->serial, "ONIC-A");
  EXPECT_EQ(command->port, 2u);
  EXPECT_EQ(command->expected.pcie_vendor_id(), 0x8086u);
  EXPECT_EQ(command->expected.pcie_device_id(), 0x10d3u);
  EXPECT_EQ(command->expected.device_serial_number(), 0x525400ffff123456ULL);
  EXPECT_TRUE(ParseBringUpCommand({"discover"}, {}).ok());
  EXPECT_TRUE(ParseBringUpCommand({"read", "X", "1"}, {}).ok());
}

TEST(BringUpTest, BadWordsAreRefusedNamingTheWordAndTheRule) {
  auto message = [](const std::vector<std::string>& words, const ExpectedDeviceText& expected) {
    return std::string(ParseBringUpCommand(words, expected).status().message());
  };
  EXPECT_THAT(message({}, {}), HasSubstr("no verb"));
  EXPECT_THAT(message({"blink", "A", "1"}, {}), HasSubstr("verb 'blink' is not discover"));
  EXPECT_THAT(message({"read", "A"}, {}), HasSubstr("read takes SERIAL PORT, not 1 words"));
  EXPECT_THAT(message({"discover", "A"}, {}), HasSubstr("discover takes no operands"));
  EXPECT_THAT(message({"read", "A", "3"}, {}), HasSubstr("port '3' is not 1 or 2"));
  EXPECT_THAT(message({"retrain", "A", "1"}, {"zz", "", ""}),
              HasSubstr("--expect-vendor 'zz' is not a non-zero hex number of at most 16 bits"));
  EXPECT_THAT(message({"retrain", "A", "1"}, {"", "123456", ""}),
              HasSubstr("--expect-device '123456'"));
  EXPECT_THAT(message({"quiesce", "A", "1"}, {"8086", "", ""}),
              HasSubstr("quiesce does not retrain"));
}

TEST(BringUpTest, ASessionAnswersEachLineAsJsonWithOneBackend) {
  RecordingBackend backend;
  std::istringstream in(
      "discover\n\nquiesce ONIC-A 1\nretrain ONIC-A 1 --expect-vendor 8086 --expect-dsn 0x2\n"
      "read ONIC-A 9\nretrain ONIC-A 1 --expect-nothing 1\nread ONIC-A 1\n");
  std::ostringstream out;
  EXPECT_EQ(RunBringUpSession(backend, in, out), 0);
  EXPECT_THAT(backend.calls, ::testing::ElementsAre("discover", "quiesce ONIC-A 1",
                                                    "retrain ONIC-A 1 32902 0 2", "read ONIC-A 1"));
  std::vector<nlohmann::json> answers;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) answers.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(answers.size(), 6u);
  EXPECT_EQ(answers[0]["onics"][0]["serial"], "ONIC-A");
  EXPECT_EQ(answers[1]["link"]["status"], "LINK_STATUS_QUIESCED");
  EXPECT_EQ(answers[2]["code"], "UNAVAILABLE");
  EXPECT_EQ(answers[2]["message"], "link did not train");
  EXPECT_EQ(answers[3]["code"], "INVALID_ARGUMENT");
  EXPECT_THAT(answers[3]["message"].get<std::string>(), HasSubstr("port '9'"));
  EXPECT_EQ(answers[4]["code"], "INVALID_ARGUMENT");
  EXPECT_THAT(answers[4]["message"].get<std::string>(), HasSubstr("expect-nothing"));
  EXPECT_EQ(answers[5]["code"], "OK");
}

TEST(BringUpTest, OneCommandExitsZeroOnlyWhenItSucceeded) {
  RecordingBackend backend;
  std::ostringstream out;
  EXPECT_EQ(RunBringUpCommand(backend, *ParseBringUpCommand({"read", "A", "1"}, {}), out), 0);
  EXPECT_EQ(RunBringUpCommand(backend, *ParseBringUpCommand({"retrain", "A", "1"}, {}), out), 1);
}

}  // namespace
}  // namespace fleet::onic_agent
