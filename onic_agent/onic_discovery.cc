#include "onic_agent/onic_discovery.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/hex_id.h"
#include "common/status_macros.h"
#include "onic_agent/pci_function.h"
#include "onic_agent/pcie_config.h"

namespace fleet::onic_agent {
namespace {

constexpr const char* kPlaceholders[] = {"host", "index", "dsn", "bdf"};

std::string IdsText(uint32_t vendor, uint32_t device) {
  return absl::StrCat(absl::Hex(vendor, absl::kZeroPad4), ":", absl::Hex(device, absl::kZeroPad4));
}

// Calls `on_placeholder(name)` for each {name} in `text`, `on_text(piece)` for the rest.
// INVALID_ARGUMENT for an unbalanced brace.
template <typename OnText, typename OnPlaceholder>
absl::Status WalkTemplate(absl::string_view text, OnText on_text, OnPlaceholder on_placeholder) {
  while (!text.empty()) {
    const size_t open = text.find_first_of("{}");
    if (open == absl::string_view::npos) {
      on_text(text);
      break;
    }
    const size_t close = text.find('}', open);
    if (text[open] == '}' || close == absl::string_view::npos ||
        text.substr(open + 1, close - open - 1).find('{') != absl::string_view::npos) {
      return absl::InvalidArgumentError("unbalanced braces");
    }
    on_text(text.substr(0, open));
    RETURN_IF_ERROR(on_placeholder(text.substr(open + 1, close - open - 1)));
    text.remove_prefix(close + 1);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OnicMatch> ParseOnicMatch(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("onic_discovery.match '", text, "' ", why,
                                                   " (write VENDOR:DEVICE in hex, e.g. 10ee:9038, "
                                                   "or VENDOR:* for any device of the vendor)"));
  };
  if (parts.size() != 2) return refuse("is not VENDOR:DEVICE");
  OnicMatch match;
  absl::StatusOr<uint64_t> vendor = ParseHexId(parts[0], 16, "vendor");
  if (!vendor.ok()) return refuse(vendor.status().message());
  match.vendor = static_cast<uint16_t>(*vendor);
  if (parts[1] != "*") {
    absl::StatusOr<uint64_t> device = ParseHexId(parts[1], 16, "device");
    if (!device.ok()) return refuse(device.status().message());
    match.device = static_cast<uint16_t>(*device);
  }
  return match;
}

absl::Status CheckSerialTemplate(absl::string_view serial_template) {
  bool distinct = false;
  absl::Status walked = WalkTemplate(
      serial_template, [](absl::string_view) {},
      [&](absl::string_view name) {
        if (std::find(std::begin(kPlaceholders), std::end(kPlaceholders), name) ==
            std::end(kPlaceholders)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "unknown placeholder {", name, "}; known: {host}, {index}, {dsn}, {bdf}"));
        }
        distinct = distinct || name != "host";
        return absl::OkStatus();
      });
  if (walked.ok() && !distinct) {
    walked = absl::InvalidArgumentError(
        "it needs {index}, {dsn} or {bdf}, or every O-NIC found would get the same serial");
  }
  if (!walked.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("onic_discovery.serial '", serial_template, "': ", walked.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> FindOnics(SysfsFiles& files,
                                                                    const std::string& sysfs_root,
                                                                    const OnicDiscovery& discovery,
                                                                    const std::string& host) {
  RETURN_IF_ERROR(CheckSerialTemplate(discovery.serial));
  const bool with_dsn = discovery.serial.find("{dsn}") != std::string::npos;
  if (host.empty() && discovery.serial.find("{host}") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("onic_discovery.serial '", discovery.serial,
                                                   "' uses {host}, but no host is set (host: in "
                                                   "the config, or --host)"));
  }
  const std::string devices = sysfs_root + "/bus/pci/devices";
  ASSIGN_OR_RETURN(std::vector<std::string> names, files.ListDir(devices));
  std::sort(names.begin(), names.end());
  std::vector<PcieSysfsBackend::OnicConfig> found;
  for (const std::string& bdf : names) {
    if (!IsPciBdf(bdf)) continue;
    const std::string dir = devices + "/" + bdf;
    ASSIGN_OR_RETURN(PciFunctionIds ids, ReadPciFunctionIds(files, dir, /*with_dsn=*/false));
    if (std::none_of(discovery.match.begin(), discovery.match.end(),
                     [&](const OnicMatch& m) { return m.Matches(ids.vendor, ids.device); })) {
      continue;
    }
    const std::string what =
        absl::StrCat("O-NIC ", bdf, " (", IdsText(ids.vendor, ids.device), ")");
    // Its downstream ports: the PCIe functions directly below it that are downstream ports.
    ASSIGN_OR_RETURN(std::vector<std::string> below, files.ListDir(dir));
    std::sort(below.begin(), below.end());
    std::vector<std::string> ports, others;
    for (const std::string& child : below) {
      if (!IsPciBdf(child)) continue;
      absl::StatusOr<std::optional<uint8_t>> type = ReadPciePortType(files, dir + "/" + child);
      if (!type.ok()) {
        return absl::Status(type.status().code(),
                            absl::StrCat(what, ": ", type.status().message()));
      }
      const bool downstream = type->has_value() && (**type == pcie::kPortTypeSwitchDownstream ||
                                                    **type == pcie::kPortTypeRootPort);
      (downstream ? ports : others).push_back(child);
    }
    if (ports.size() != 2) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " matches onic_discovery.match but has ", ports.size(),
          " PCIe downstream ports below it (", ports.empty() ? "none" : absl::StrJoin(ports, ", "),
          others.empty() ? "" : absl::StrCat("; other functions: ", absl::StrJoin(others, ", ")),
          "); an O-NIC has one per optical port, 2: check the pattern"));
    }
    std::optional<uint64_t> dsn;
    if (with_dsn) {
      absl::StatusOr<PciFunctionIds> with = ReadPciFunctionIds(files, dir, /*with_dsn=*/true);
      if (!with.ok()) {
        return absl::Status(with.status().code(),
                            absl::StrCat(what, ": ", with.status().message()));
      }
      if (!with->dsn.has_value()) {
        return absl::FailedPreconditionError(
            absl::StrCat(what, " has no Device Serial Number, but onic_discovery.serial '",
                         discovery.serial, "' uses {dsn}"));
      }
      dsn = with->dsn;
    }
    std::string serial;
    const size_t index = found.size();
    RETURN_IF_ERROR(WalkTemplate(
        discovery.serial, [&](absl::string_view text) { absl::StrAppend(&serial, text); },
        [&](absl::string_view name) {
          if (name == "host") absl::StrAppend(&serial, host);
          if (name == "index") absl::StrAppend(&serial, index);
          if (name == "dsn") absl::StrAppend(&serial, DsnText(*dsn));
          if (name == "bdf") absl::StrAppend(&serial, bdf);
          return absl::OkStatus();
        }));
    found.push_back({serial, {ports[0], ports[1]}, bdf});
  }
  return found;
}

}  // namespace fleet::onic_agent
