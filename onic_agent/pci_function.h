// What the agent reads of one PCI function in sysfs: its directory (for example
// /sys/bus/pci/devices/0000:18:00.0) holds `vendor`, `device` and `config`. Shared by the
// pcie-sysfs backend (checking the device a retrain brought up) and O-NIC discovery.
#ifndef FLEET_ONIC_AGENT_PCI_FUNCTION_H_
#define FLEET_ONIC_AGENT_PCI_FUNCTION_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "onic_agent/sysfs_files.h"

namespace fleet::onic_agent {

struct PciFunctionIds {
  uint32_t vendor = 0;
  uint32_t device = 0;
  std::optional<uint64_t> dsn;  // Device Serial Number; read only when asked for.
};

// The function's ids from `vendor` and `device` and, when `with_dsn`, its Device Serial Number
// from its extended config space (FAILED_PRECONDITION when config space reads short, as it does
// for an agent without CAP_SYS_ADMIN). Errors name the file.
absl::StatusOr<PciFunctionIds> ReadPciFunctionIds(SysfsFiles& files, const std::string& dir,
                                                  bool with_dsn);

// A function's PCI Express capability, as found in its config space.
struct PcieCapability {
  std::string config;  // The first 256 bytes of config space, at least.
  size_t offset = 0;   // Of the capability in `config`.
  // Device/Port Type (pcie_config.h: 4 a root port, 5 a switch's upstream port, 6 a switch's
  // downstream port, …).
  uint8_t port_type() const;
  // The Port Number in Link Capabilities (a switch numbers its ports by it).
  uint8_t port_number() const;
};
// Reads `config_path` (a function's `config`) and finds its PCI Express capability; nullopt
// for a function without one (not PCIe). FAILED_PRECONDITION when config space reads short (an
// agent without CAP_SYS_ADMIN reads 64 bytes) or its capability list is malformed; errors name
// the path.
absl::StatusOr<std::optional<PcieCapability>> ReadPcieCapability(SysfsFiles& files,
                                                                 const std::string& config_path);

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_PCI_FUNCTION_H_
