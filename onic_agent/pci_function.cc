#include "onic_agent/pci_function.h"

#include <charconv>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "onic_agent/pcie_config.h"

namespace fleet::onic_agent {
namespace {

// Parses a sysfs id attribute such as "0x10de\n".
absl::StatusOr<uint32_t> ParseHexAttribute(absl::string_view text, const std::string& path) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (absl::StartsWith(s, "0x")) s.remove_prefix(2);
  uint32_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, 16);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": expected a hex id like 0x10de, read \"", text, "\""));
  }
  return value;
}

// At least `size` bytes of the function's config space.
absl::StatusOr<std::string> ReadConfig(SysfsFiles& files, const std::string& path, size_t size) {
  ASSIGN_OR_RETURN(std::string config, files.ReadAt(path, 0, size));
  if (config.size() < pcie::kConventionalConfigSize) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " gave ", config.size(),
                     " bytes of config space (an agent without CAP_SYS_ADMIN reads only 64)"));
  }
  return config;
}

absl::Status WithPath(const absl::Status& status, const std::string& path) {
  return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
}

}  // namespace

absl::StatusOr<PciFunctionIds> ReadPciFunctionIds(SysfsFiles& files, const std::string& dir,
                                                  bool with_dsn) {
  PciFunctionIds ids;
  ASSIGN_OR_RETURN(std::string vendor, files.ReadFile(dir + "/vendor"));
  ASSIGN_OR_RETURN(ids.vendor, ParseHexAttribute(vendor, dir + "/vendor"));
  ASSIGN_OR_RETURN(std::string device, files.ReadFile(dir + "/device"));
  ASSIGN_OR_RETURN(ids.device, ParseHexAttribute(device, dir + "/device"));
  if (!with_dsn) return ids;
  const std::string path = dir + "/config";
  ASSIGN_OR_RETURN(std::string config, ReadConfig(files, path, pcie::kExtendedConfigSize));
  absl::StatusOr<std::optional<uint64_t>> dsn = pcie::DeviceSerialNumber(config);
  if (!dsn.ok()) return WithPath(dsn.status(), path);
  ids.dsn = *dsn;
  return ids;
}

absl::StatusOr<std::optional<uint8_t>> ReadPciePortType(SysfsFiles& files, const std::string& dir) {
  const std::string path = dir + "/config";
  ASSIGN_OR_RETURN(std::string config, ReadConfig(files, path, pcie::kConventionalConfigSize));
  absl::StatusOr<std::optional<size_t>> cap = pcie::FindCapability(config, pcie::kCapIdPciExpress);
  if (!cap.ok()) return WithPath(cap.status(), path);
  if (!cap->has_value() || **cap + pcie::kPcieCapabilities + 2 > config.size()) {
    return std::optional<uint8_t>();
  }
  return std::optional<uint8_t>((pcie::Read16(config, **cap + pcie::kPcieCapabilities) >> 4) & 0xf);
}

}  // namespace fleet::onic_agent
