#include "onic_agent/pcie_config.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fleet::onic_agent::pcie {
namespace {

// Standard capabilities live in 0x40..0xff, each at least 4 bytes: at most 48 of them, the
// hop limit Linux uses too (PCI_FIND_CAP_TTL).
constexpr int kMaxCapabilityHops = 48;
constexpr size_t kFirstCapability = 0x40;
// Extended capabilities live in 0x100..0xfff, each at least 8 bytes.
constexpr int kMaxExtendedCapabilityHops = (4096 - 256) / 8;
constexpr size_t kFirstExtendedCapability = 0x100;

std::string Hex(size_t value, absl::PadSpec width) {
  return absl::StrCat("0x", absl::Hex(value, width));
}

}  // namespace

uint16_t Read16(absl::string_view config, size_t offset) {
  return static_cast<uint16_t>(static_cast<uint8_t>(config[offset]) |
                               static_cast<uint8_t>(config[offset + 1]) << 8);
}

uint32_t Read32(absl::string_view config, size_t offset) {
  return static_cast<uint32_t>(Read16(config, offset)) |
         static_cast<uint32_t>(Read16(config, offset + 2)) << 16;
}

absl::StatusOr<std::optional<size_t>> FindCapability(absl::string_view config, uint8_t id) {
  if (config.size() < kConventionalConfigSize) {
    return absl::FailedPreconditionError(absl::StrCat("config space is ", config.size(),
                                                      " bytes, need ", kConventionalConfigSize,
                                                      " to walk capabilities"));
  }
  if ((Read16(config, kStatus) & kStatusCapabilitiesList) == 0) return std::nullopt;
  size_t at = kCapabilitiesPointer;  // Where the pointer being followed was read.
  size_t pos = static_cast<uint8_t>(config[kCapabilitiesPointer]) & ~size_t{3};
  for (int hops = 0; pos != 0; ++hops) {
    if (hops >= kMaxCapabilityHops) {
      return absl::FailedPreconditionError(
          absl::StrCat("capability list does not end after ", kMaxCapabilityHops,
                       " entries (a loop; last pointer ", Hex(pos, absl::kZeroPad2), " at ",
                       Hex(at, absl::kZeroPad2), ")"));
    }
    if (pos < kFirstCapability || pos + 2 > kConventionalConfigSize) {
      return absl::FailedPreconditionError(
          absl::StrCat("capability pointer ", Hex(pos, absl::kZeroPad2), " at ",
                       Hex(at, absl::kZeroPad2), " is outside 0x40..0xfc"));
    }
    const uint8_t cap_id = static_cast<uint8_t>(config[pos]);
    // 0xff is what a function that stopped answering reads as; Linux ends the walk there too.
    if (cap_id == 0xff) return std::nullopt;
    if (cap_id == id) return pos;
    at = pos + 1;
    pos = static_cast<uint8_t>(config[pos + 1]) & ~size_t{3};
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<size_t>> FindExtendedCapability(absl::string_view config,
                                                             uint16_t id) {
  if (config.size() < kExtendedConfigSize) return std::nullopt;
  size_t at = 0;  // Where the pointer being followed was read (0: the fixed start).
  size_t pos = kFirstExtendedCapability;
  for (int hops = 0; pos != 0; ++hops) {
    if (hops >= kMaxExtendedCapabilityHops) {
      return absl::FailedPreconditionError(
          absl::StrCat("extended capability list does not end after ", kMaxExtendedCapabilityHops,
                       " entries (a loop; last pointer ", Hex(pos, absl::kZeroPad3), " at ",
                       Hex(at, absl::kZeroPad3), ")"));
    }
    if (pos < kFirstExtendedCapability || pos + 4 > kExtendedConfigSize) {
      return absl::FailedPreconditionError(
          absl::StrCat("extended capability pointer ", Hex(pos, absl::kZeroPad3), " at ",
                       Hex(at, absl::kZeroPad3), " is outside 0x100..0xffc"));
    }
    const uint32_t header = Read32(config, pos);
    // An empty list is a zero header; all ones is a function that stopped answering.
    if (header == 0 || header == 0xffffffffu) return std::nullopt;
    if ((header & 0xffff) == id) return pos;
    at = pos;
    pos = (header >> 20) & 0xffc;
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<uint64_t>> DeviceSerialNumber(absl::string_view config) {
  absl::StatusOr<std::optional<size_t>> cap =
      FindExtendedCapability(config, kExtCapIdDeviceSerialNumber);
  if (!cap.ok()) return cap.status();
  if (!cap->has_value()) return std::nullopt;
  const size_t pos = **cap;
  if (pos + 12 > config.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Device Serial Number capability at ", Hex(pos, absl::kZeroPad3), " runs past the end"));
  }
  // Lower dword at +4, upper dword at +8.
  return static_cast<uint64_t>(Read32(config, pos + 8)) << 32 | Read32(config, pos + 4);
}

LinkStatusFields DecodeLinkStatus(uint16_t link_status) {
  LinkStatusFields f;
  f.speed_code = link_status & 0xf;
  f.speed_mts = LinkSpeedMts(f.speed_code);
  f.width = (link_status >> 4) & 0x3f;
  f.training = (link_status & kLinkStatusTraining) != 0;
  f.dll_active = (link_status & kLinkStatusDllActive) != 0;
  return f;
}

uint32_t LinkSpeedMts(uint8_t speed_code) {
  // Strictly the code indexes the Supported Link Speeds Vector of Link Capabilities 2; every
  // port built so far fills that vector contiguously from 2.5 GT/s, so the index is the rate.
  switch (speed_code) {
    case 1:
      return 2500;
    case 2:
      return 5000;
    case 3:
      return 8000;
    case 4:
      return 16000;
    case 5:
      return 32000;
    case 6:
      return 64000;
    default:
      return 0;
  }
}

}  // namespace fleet::onic_agent::pcie
