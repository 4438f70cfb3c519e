// The few file operations the pcie-sysfs backend does on sysfs, behind an interface so tests
// can put a simulated PCIe port behind the same calls (see tests/onic_agent/fake_pcie_sysfs.h).
//
// Paths are absolute; the backend builds them under its configured sysfs root. The real
// implementation is plain POSIX. Two sysfs rules shape the interface:
// - Attribute writes (`remove`, `rescan`, `driver/unbind`) act on the value of one write(2)
//   to an existing file: WriteFile never creates or truncates and writes in one call.
// - `config` is binary and offset-addressed: the kernel turns a 2-byte write at an even offset
//   into one 16-bit config write, so registers are written with WriteAt of exactly their size
//   (a wider write would also hit the neighbouring register, e.g. RW1C status bits).
#ifndef FLEET_ONIC_AGENT_SYSFS_FILES_H_
#define FLEET_ONIC_AGENT_SYSFS_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleet::onic_agent {

// Errors: NOT_FOUND when the path does not exist, PERMISSION_DENIED when the agent may not
// access it, otherwise the code absl::ErrnoToStatus gives; messages name the path.
class SysfsFiles {
 public:
  virtual ~SysfsFiles() = default;

  // The names in directory `path` (without "." and ".."), sorted.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) = 0;
  // Whether `path` exists (following symlinks).
  virtual bool Exists(const std::string& path) = 0;
  // The whole content of a small text attribute such as `vendor`.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // Up to `size` bytes from `offset`; fewer only at end of file (sysfs `config` also ends
  // early for an agent without CAP_SYS_ADMIN: it then reads only the first 64 bytes).
  virtual absl::StatusOr<std::string> ReadAt(const std::string& path, uint64_t offset,
                                             size_t size) = 0;
  // Writes `data` at `offset` of an existing file in one pwrite(2).
  virtual absl::Status WriteAt(const std::string& path, uint64_t offset,
                               absl::string_view data) = 0;
  // Writes `data` to an existing file in one write(2).
  virtual absl::Status WriteFile(const std::string& path, absl::string_view data) = 0;
};

// SysfsFiles on the real file system (POSIX calls). Stateless, thread-safe.
class PosixSysfsFiles : public SysfsFiles {
 public:
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  bool Exists(const std::string& path) override;
  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::StatusOr<std::string> ReadAt(const std::string& path, uint64_t offset,
                                     size_t size) override;
  absl::Status WriteAt(const std::string& path, uint64_t offset, absl::string_view data) override;
  absl::Status WriteFile(const std::string& path, absl::string_view data) override;
};

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_SYSFS_FILES_H_
