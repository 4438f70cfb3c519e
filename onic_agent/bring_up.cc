#include "onic_agent/bring_up.h"

#include <istream>

#include <google/protobuf/util/json_util.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/hex_id.h"
#include "nlohmann/json.hpp"

namespace fleet::onic_agent {
namespace {

nlohmann::json MessageJson(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &text, options);
  return nlohmann::json::parse(text);
}

void Answer(const std::string& verb, const absl::Status& status, nlohmann::json answer,
            std::ostream& out) {
  answer["verb"] = verb;
  answer["code"] = absl::StatusCodeToString(status.code());
  answer["message"] = std::string(status.message());
  out << answer.dump() << std::endl;
}

}  // namespace

void DeclareExpectFlags(FlagSet& flags, ExpectedDeviceText* text) {
  flags.String("expect-vendor", &text->vendor, "retrain: the PCIe vendor id expected, hex");
  flags.String("expect-device", &text->device, "retrain: the PCIe device id expected, hex");
  flags.String("expect-dsn", &text->dsn,
               "retrain: the Device Serial Number expected, hex (52-54-00-ff-fe-12-34-56)");
}

absl::StatusOr<BringUpCommand> ParseBringUpCommand(const std::vector<std::string>& words,
                                                   const ExpectedDeviceText& expected) {
  if (words.empty()) {
    return absl::InvalidArgumentError("no verb: discover, read, quiesce or retrain");
  }
  BringUpCommand command;
  command.verb = words[0];
  const size_t operands = command.verb == "discover" ? 0 : 2;
  if (command.verb != "discover" && command.verb != "read" && command.verb != "quiesce" &&
      command.verb != "retrain") {
    return absl::InvalidArgumentError(
        absl::StrCat("verb '", command.verb, "' is not discover, read, quiesce or retrain"));
  }
  if (words.size() != operands + 1) {
    return absl::InvalidArgumentError(absl::StrCat(command.verb, " takes ",
                                                   operands == 0 ? "no operands" : "SERIAL PORT",
                                                   ", not ", words.size() - 1, " words"));
  }
  if (operands == 2) {
    command.serial = words[1];
    if (words[2] != "1" && words[2] != "2") {
      return absl::InvalidArgumentError(
          absl::StrCat("port '", words[2], "' is not 1 or 2 (an O-NIC's optical ports)"));
    }
    command.port = words[2] == "1" ? 1 : 2;
  }
  const bool expects =
      !expected.vendor.empty() || !expected.device.empty() || !expected.dsn.empty();
  if (expects && command.verb != "retrain") {
    return absl::InvalidArgumentError(absl::StrCat("--expect-* checks the device a retrain finds; ",
                                                   command.verb, " does not retrain"));
  }
  if (!expected.vendor.empty()) {
    absl::StatusOr<uint64_t> vendor = ParseHexId(expected.vendor, 16, "--expect-vendor");
    if (!vendor.ok()) return vendor.status();
    command.expected.set_pcie_vendor_id(static_cast<uint32_t>(*vendor));
  }
  if (!expected.device.empty()) {
    absl::StatusOr<uint64_t> device = ParseHexId(expected.device, 16, "--expect-device");
    if (!device.ok()) return device.status();
    command.expected.set_pcie_device_id(static_cast<uint32_t>(*device));
  }
  if (!expected.dsn.empty()) {
    absl::StatusOr<uint64_t> dsn = ParseHexId(expected.dsn, 64, "--expect-dsn");
    if (!dsn.ok()) return dsn.status();
    command.expected.set_device_serial_number(*dsn);
  }
  return command;
}

int RunBringUpCommand(OnicBackend& backend, const BringUpCommand& command, std::ostream& out) {
  nlohmann::json answer = nlohmann::json::object();
  absl::Status status;
  if (command.verb == "discover") {
    absl::StatusOr<std::vector<v1::AgentOnic>> onics = backend.Discover();
    status = onics.status();
    answer["onics"] = nlohmann::json::array();
    if (onics.ok()) {
      for (const v1::AgentOnic& onic : *onics) answer["onics"].push_back(MessageJson(onic));
    }
  } else {
    const absl::Time deadline = absl::Now() + command.timeout;
    CommandOutcome outcome;
    if (command.verb == "read") {
      outcome = backend.ReadPort(command.serial, command.port);
    } else if (command.verb == "quiesce") {
      outcome = backend.Quiesce(command.serial, command.port, deadline);
    } else {
      outcome = backend.Retrain(command.serial, command.port, command.expected, deadline);
    }
    status = outcome.status;
    answer["link"] = MessageJson(outcome.link);
  }
  Answer(command.verb, status, std::move(answer), out);
  return status.ok() ? 0 : 1;
}

int RunBringUpSession(OnicBackend& backend, std::istream& in, std::ostream& out) {
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    ExpectedDeviceText expected;
    FlagSet flags("VERB [SERIAL PORT] [--expect-* HEX]");
    DeclareExpectFlags(flags, &expected);
    absl::StatusOr<std::vector<std::string>> rest = flags.Parse(words);
    absl::StatusOr<BringUpCommand> command =
        rest.ok() ? ParseBringUpCommand(*rest, expected) : rest.status();
    if (!command.ok()) {
      Answer(words[0], command.status(), nlohmann::json::object(), out);
      continue;
    }
    RunBringUpCommand(backend, *command, out);
  }
  return 0;
}

}  // namespace fleet::onic_agent
