// Reading PCI configuration space as sysfs `config` files return it: little-endian bytes,
// 256 of them (conventional) or 4096 (PCI Express extended). Pure functions over the bytes;
// register offsets and bits from the PCI Express Base Specification (r5.0, section 7.5).
//
// Capability lists come from hardware and may be broken (a pointer into the header, a loop):
// every walk is bounded by hop count and pointer checks, and a broken list is an error
// naming the offending pointer, never a hang.
#ifndef FLEET_ONIC_AGENT_PCIE_CONFIG_H_
#define FLEET_ONIC_AGENT_PCIE_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleet::onic_agent::pcie {

inline constexpr size_t kConventionalConfigSize = 256;
inline constexpr size_t kExtendedConfigSize = 4096;

// Type 0/1 header.
inline constexpr size_t kVendorId = 0x00;
inline constexpr size_t kStatus = 0x06;
inline constexpr uint16_t kStatusCapabilitiesList = 1u << 4;
inline constexpr size_t kCapabilitiesPointer = 0x34;

inline constexpr uint8_t kCapIdPciExpress = 0x10;
inline constexpr uint16_t kExtCapIdDeviceSerialNumber = 0x0003;

// Registers relative to the PCI Express capability.
inline constexpr size_t kPcieCapabilities = 0x02;  // Device/Port Type in bits 7:4.
inline constexpr size_t kLinkCapabilities = 0x0c;
inline constexpr uint32_t kLinkCapDllActiveReporting = 1u << 20;
inline constexpr size_t kLinkControl = 0x10;
inline constexpr uint16_t kLinkControlLinkDisable = 1u << 4;
inline constexpr uint16_t kLinkControlRetrainLink = 1u << 5;
inline constexpr size_t kLinkStatus = 0x12;
inline constexpr uint16_t kPcieCapSlotImplemented = 1u << 8;  // In kPcieCapabilities.
inline constexpr size_t kSlotCapabilities = 0x14;
inline constexpr uint32_t kSlotCapHotPlugCapable = 1u << 6;
inline constexpr uint32_t kSlotCapPowerControllerPresent = 1u << 1;
inline constexpr size_t kSlotControl = 0x18;
inline constexpr uint16_t kSlotControlHotPlugInterruptEnable = 1u << 5;
inline constexpr uint16_t kLinkStatusTraining = 1u << 11;
inline constexpr uint16_t kLinkStatusDllActive = 1u << 13;

// Device/Port Type values of the PCI Express Capabilities register.
inline constexpr uint8_t kPortTypeRootPort = 0x4;
inline constexpr uint8_t kPortTypeSwitchUpstream = 0x5;
inline constexpr uint8_t kPortTypeSwitchDownstream = 0x6;

// Little-endian register reads. The caller guarantees `offset + width <= config.size()`.
uint16_t Read16(absl::string_view config, size_t offset);
uint32_t Read32(absl::string_view config, size_t offset);

// The offset of the first standard capability with ID `id`, nullopt when the device has none.
// FAILED_PRECONDITION when the list is malformed (pointer into the header or past the end,
// or more hops than 48 capabilities can take, i.e. a loop).
absl::StatusOr<std::optional<size_t>> FindCapability(absl::string_view config, uint8_t id);

// The offset of the first extended capability with ID `id` (list starting at 0x100), nullopt
// when absent or when `config` holds no extended space (256 bytes). Errors as FindCapability.
absl::StatusOr<std::optional<size_t>> FindExtendedCapability(absl::string_view config, uint16_t id);

// The 64-bit Device Serial Number, nullopt when the device has no DSN capability.
absl::StatusOr<std::optional<uint64_t>> DeviceSerialNumber(absl::string_view config);

struct LinkStatusFields {
  uint8_t speed_code = 0;   // Current Link Speed, bits 3:0.
  uint32_t speed_mts = 0;   // speed_code in MT/s; 0 for a code this code does not know.
  uint32_t width = 0;       // Negotiated Link Width, bits 9:4.
  bool training = false;    // Link Training, bit 11.
  bool dll_active = false;  // Data Link Layer Link Active, bit 13.
};
LinkStatusFields DecodeLinkStatus(uint16_t link_status);

// 1 → 2500 (2.5 GT/s) … 6 → 64000 (64 GT/s); 0 for anything else.
uint32_t LinkSpeedMts(uint8_t speed_code);

}  // namespace fleet::onic_agent::pcie

#endif  // FLEET_ONIC_AGENT_PCIE_CONFIG_H_
