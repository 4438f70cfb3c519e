// What the agent reads of one PCI function in sysfs: its directory (for example
// /sys/bus/pci/devices/0000:18:00.0) holds `vendor`, `device` and `config`. Shared by the
// pcie-sysfs backend (checking the device a retrain brought up) and O-NIC discovery.
#ifndef FLEET_ONIC_AGENT_PCI_FUNCTION_H_
#define FLEET_ONIC_AGENT_PCI_FUNCTION_H_

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

// The Device/Port Type of the function's PCI Express capability (4 a root port, 5 a switch's
// upstream port, 6 a switch's downstream port, …); nullopt when it has none (not PCIe).
absl::StatusOr<std::optional<uint8_t>> ReadPciePortType(SysfsFiles& files, const std::string& dir);

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_PCI_FUNCTION_H_
