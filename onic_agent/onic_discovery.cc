#include "onic_agent/onic_discovery.h"

#include <algorithm>
#include <map>
#include <utility>

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
  return absl::StrCat(PcieIdText(vendor), ":", PcieIdText(device));
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
  std::vector<PcieSysfsBackend::OnicConfig> found;
  std::map<std::string, std::string> serial_at;  // Serial -> the O-NIC's address.
  for (const std::string& bdf : names) {         // ListDir sorts: address order.
    if (!IsPciBdf(bdf)) continue;
    const std::string dir = devices + "/" + bdf;
    // A function gone since the listing (a device leaving with its circuit) is no O-NIC.
    absl::StatusOr<PciFunctionIds> ids = ReadPciFunctionIds(files, dir, /*with_dsn=*/false);
    if (absl::IsNotFound(ids.status())) continue;
    if (!ids.ok()) return ids.status();
    if (std::none_of(discovery.match.begin(), discovery.match.end(),
                     [&](const OnicMatch& m) { return m.Matches(ids->vendor, ids->device); })) {
      continue;
    }
    const std::string what =
        absl::StrCat("O-NIC ", bdf, " (", IdsText(ids->vendor, ids->device), ")");
    auto in_context = [&](const absl::Status& status) {
      return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
    };
    // Only a switch's upstream port is an O-NIC: a switch may give its downstream ports the
    // same ids, and a pattern may match a device behind one.
    absl::StatusOr<std::optional<PcieCapability>> cap = ReadPcieCapability(files, dir + "/config");
    if (absl::IsNotFound(cap.status())) continue;
    if (!cap.ok()) return in_context(cap.status());
    if (!cap->has_value() || (*cap)->port_type() != pcie::kPortTypeSwitchUpstream) continue;
    // Its downstream ports, in the switch's port-number order (then address order).
    ASSIGN_OR_RETURN(std::vector<std::string> below, files.ListDir(dir));
    std::vector<std::pair<uint8_t, std::string>> ports;
    std::vector<std::string> others;
    for (const std::string& child : below) {
      if (!IsPciBdf(child)) continue;
      absl::StatusOr<std::optional<PcieCapability>> port =
          ReadPcieCapability(files, absl::StrCat(dir, "/", child, "/config"));
      if (absl::IsNotFound(port.status())) continue;
      if (!port.ok()) return in_context(port.status());
      if (port->has_value() && (*port)->port_type() == pcie::kPortTypeSwitchDownstream) {
        ports.emplace_back((*port)->port_number(), child);
      } else {
        others.push_back(child);
      }
    }
    std::sort(ports.begin(), ports.end());
    if (ports.size() != 2) {
      std::vector<std::string> named;
      for (const auto& [number, port] : ports) named.push_back(port);
      return absl::FailedPreconditionError(absl::StrCat(
          what, " matches onic_discovery.match but has ", ports.size(),
          " PCIe downstream ports below it (", named.empty() ? "none" : absl::StrJoin(named, ", "),
          others.empty() ? "" : absl::StrCat("; other functions: ", absl::StrJoin(others, ", ")),
          "); an O-NIC has one per optical port, 2: check the pattern"));
    }
    std::optional<uint64_t> dsn;
    if (with_dsn) {
      absl::StatusOr<PciFunctionIds> with = ReadPciFunctionIds(files, dir, /*with_dsn=*/true);
      if (!with.ok()) return in_context(with.status());
      if (!with->dsn.has_value() || *with->dsn == 0) {
        return absl::FailedPreconditionError(
            absl::StrCat(what, " has no Device Serial Number", with->dsn ? " (it reads 0)" : "",
                         ", but onic_discovery.serial '", discovery.serial, "' uses {dsn}"));
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
    auto [other, inserted] = serial_at.emplace(serial, bdf);
    if (!inserted) {
      return absl::FailedPreconditionError(
          absl::StrCat("O-NICs ", other->second, " and ", bdf, " both get serial '", serial,
                       "' from onic_discovery.serial '", discovery.serial,
                       "' (the same Device Serial Number?): give them one that tells them apart"));
    }
    found.push_back({serial, {ports[0].second, ports[1].second}, bdf});
  }
  return found;
}

}  // namespace fleet::onic_agent
