// A Linux guest for the tests that need a real kernel: QEMU's q35 machine booted from Debian's
// kernel (/boot/vmlinuz-VERSION) with a busybox initramfs written at boot. The guest mounts
// this host's file system read-only over 9p (virtio) and runs commands chrooted into it, so the
// project's binaries run in the guest as built, with this host's libraries: nothing is copied
// or rebuilt for it. /proc, /sys and /dev in the guest are its own, and so is /run (an empty
// tmpfs, the one place the guest can write).
//
// Its only network is its own loopback (up), for programs run together inside it.
// Talking to the guest, without any network: commands go to its second serial port (a Unix
// socket here), one line each, and come back with their output and exit code; the kernel's log
// goes to a file (console()). QMP, QEMU's JSON monitor, adds and removes devices while it runs.
//
// The machine: native PCIe hot-plug (pciehp), as on a host whose firmware grants it to the OS
// (QEMU's ACPI hot-plug of root ports is turned off), one vCPU, KVM when /dev/kvm opens and
// TCG emulation otherwise. Devices are the caller's (`Options::devices`).
//
// Not thread-safe: one test thread drives a guest. The destructor kills QEMU; QEMU also dies
// with the test process (PR_SET_PDEATHSIG), so no guest outlives a crashed test.
#ifndef FLEET_TESTS_QEMU_QEMU_GUEST_H_
#define FLEET_TESTS_QEMU_QEMU_GUEST_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace fleet::testing {

class QemuGuest {
 public:
  struct Options {
    // QEMU -device values, e.g. "pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1,addr=0x2".
    std::vector<std::string> devices;
    int memory_mib = 1024;
    absl::Duration boot_timeout = absl::Seconds(180);
  };

  // OK when a guest can boot here; otherwise FAILED_PRECONDITION saying what is missing
  // (qemu-system-x86_64, a kernel with its modules, a static busybox, kmod's modprobe).
  static absl::Status CanBoot();

  // Boots a guest and waits until it takes commands. `work_dir` keeps the initramfs, the
  // console log and QEMU's own output.
  static absl::StatusOr<std::unique_ptr<QemuGuest>> Boot(const Options& options,
                                                         const std::string& work_dir);
  ~QemuGuest();
  QemuGuest(const QemuGuest&) = delete;
  QemuGuest& operator=(const QemuGuest&) = delete;

  struct Result {
    int exit_code = -1;
    std::string output;  // stdout and stderr, interleaved.
  };
  // Runs `command` (one line of sh) in the guest, chrooted into this host's file system.
  // DEADLINE_EXCEEDED after `timeout`, INTERNAL when the guest answers another command than the
  // one sent; every later Run is then FAILED_PRECONDITION (the guest's answers would be out of
  // step).
  absl::StatusOr<Result> Run(const std::string& command,
                             absl::Duration timeout = absl::Seconds(60));

  // Runs a QMP command and returns its "return" value; an "error" answer is FAILED_PRECONDITION
  // with QEMU's description. Events that arrive meanwhile are kept for AwaitEvent.
  absl::StatusOr<nlohmann::json> Qmp(const std::string& command,
                                     const nlohmann::json& arguments = nlohmann::json::object(),
                                     absl::Duration timeout = absl::Seconds(30));
  // Waits for the QMP event `name` (e.g. DEVICE_DELETED) and returns its "data".
  absl::StatusOr<nlohmann::json> AwaitEvent(const std::string& name,
                                            absl::Duration timeout = absl::Seconds(60));

  // What the guest's kernel and init printed on its console so far.
  std::string console() const;
  // "kvm" or "tcg".
  const std::string& accelerator() const { return accelerator_; }
  const std::string& kernel_version() const { return kernel_version_; }
  // From starting QEMU to the guest taking commands.
  absl::Duration boot_time() const { return boot_time_; }

 private:
  QemuGuest() = default;
  // Reads one '\n'-terminated line from `fd` into `line`, buffering in `buffer`.
  absl::Status ReadLine(int fd, std::string& buffer, std::string& line, absl::Time deadline);
  absl::StatusOr<nlohmann::json> ReadQmpMessage(absl::Time deadline);

  pid_t pid_ = -1;
  std::string socket_dir_;
  std::string console_path_;
  std::string qemu_log_path_;
  int command_fd_ = -1;
  int qmp_fd_ = -1;
  std::string command_buffer_;
  std::string qmp_buffer_;
  std::deque<nlohmann::json> events_;
  uint64_t commands_sent_ = 0;  // Each command is sent with its number; the guest echoes it.
  std::string broken_;  // Why commands can no longer be run, once one timed out or mismatched.
  std::string accelerator_;
  std::string kernel_version_;
  absl::Duration boot_time_;
};

}  // namespace fleet::testing

#endif  // FLEET_TESTS_QEMU_QEMU_GUEST_H_
