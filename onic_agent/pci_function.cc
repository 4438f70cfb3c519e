#include "onic_agent/pci_function.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/hex_id.h"
#include "common/status_macros.h"
#include "onic_agent/pcie_config.h"

namespace fleet::onic_agent {
namespace {

// A sysfs id attribute such as "0x10de\n".
absl::StatusOr<uint32_t> ParseHexAttribute(absl::string_view text, const std::string& path) {
  absl::StatusOr<uint64_t> id = ParseHexId(absl::StripAsciiWhitespace(text), 16, path);
  if (!id.ok()) return absl::FailedPreconditionError(id.status().message());
  return static_cast<uint32_t>(*id);
}

// At least `size` bytes of the function's config space.
absl::StatusOr<std::string> ReadConfig(SysfsFiles& files, const std::string& path, size_t size) {
  ASSIGN_OR_RETURN(std::string config, files.ReadAt(path, 0, size));
  if (config.size() < pcie::kConventionalConfigSize) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " gave ", config.size(), " bytes of config space, need ",
                     pcie::kConventionalConfigSize,
                     " (an agent without CAP_SYS_ADMIN reads only the first 64)"));
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
  if (config.size() < pcie::kExtendedConfigSize) {
    // The DSN is an extended capability: without extended config space it cannot be read.
    return absl::FailedPreconditionError(
        absl::StrCat(path, " gave ", config.size(),
                     " bytes of config space, no extended config space to find the Device Serial "
                     "Number in"));
  }
  absl::StatusOr<std::optional<uint64_t>> dsn = pcie::DeviceSerialNumber(config);
  if (!dsn.ok()) return WithPath(dsn.status(), path);
  ids.dsn = *dsn;
  return ids;
}

uint8_t PcieCapability::port_type() const {
  return (pcie::Read16(config, offset + pcie::kPcieCapabilities) >> 4) & 0xf;
}

uint8_t PcieCapability::port_number() const {
  return static_cast<uint8_t>(pcie::Read32(config, offset + pcie::kLinkCapabilities) >> 24);
}

absl::StatusOr<std::optional<PcieCapability>> ReadPcieCapability(SysfsFiles& files,
                                                                 const std::string& config_path) {
  PcieCapability cap;
  ASSIGN_OR_RETURN(cap.config, ReadConfig(files, config_path, pcie::kConventionalConfigSize));
  absl::StatusOr<std::optional<size_t>> found =
      pcie::FindCapability(cap.config, pcie::kCapIdPciExpress);
  if (!found.ok()) return WithPath(found.status(), config_path);
  if (!found->has_value()) return std::optional<PcieCapability>();
  cap.offset = **found;
  if (cap.offset + pcie::kLinkStatus + 2 > cap.config.size()) {
    return absl::FailedPreconditionError(absl::StrCat(config_path, ": PCI Express capability at 0x",
                                                      absl::Hex(cap.offset),
                                                      " runs past the end of config space"));
  }
  return std::optional<PcieCapability>(std::move(cap));
}

}  // namespace fleet::onic_agent
