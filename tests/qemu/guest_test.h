// The fixture the QEMU tests share: a guest booted for each test (tests/qemu/qemu_guest.h)
// with the devices the test names, and the guest-side reads the tests make of its PCI tree.
#ifndef FLEET_TESTS_QEMU_GUEST_TEST_H_
#define FLEET_TESTS_QEMU_GUEST_TEST_H_

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/integration/subprocess.h"
#include "tests/qemu/qemu_guest.h"

namespace fleet::testing {

inline std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

class GuestTest : public ::testing::Test {
 protected:
  // Boots a guest with `devices` (QEMU -device values) and loads the drivers a host would
  // have loaded for them (`modules`). From SetUp: `if (!BootGuest(...)) return;` (false when
  // the test was skipped or failed).
  bool BootGuest(const std::vector<std::string>& devices, const std::string& modules) {
    if (absl::Status can = QemuGuest::CanBoot(); !can.ok()) {
      // These machines have QEMU (deploy/quickstart/install-deps.sh): in CI a missing one fails.
      if (getenv("CI") != nullptr) {
        [&] { FAIL() << can.message(); }();  // Fatal: the test body does not run.
        return false;
      }
      [&] { GTEST_SKIP() << can.message(); }();  // Marks the test skipped; SetUp returns.
      return false;
    }
    dir_ = FreshDirectory("guest");
    QemuGuest::Options options;
    options.devices = devices;
    absl::StatusOr<std::unique_ptr<QemuGuest>> guest = QemuGuest::Boot(options, dir_);
    if (!guest.ok()) {
      [&] { FAIL() << guest.status(); }();
      return false;
    }
    guest_ = std::move(*guest);
    std::cout << "guest: kernel " << guest_->kernel_version() << ", " << guest_->accelerator()
              << ", booted in " << absl::FormatDuration(guest_->boot_time()) << std::endl;
    RecordProperty("boot_ms", absl::StrCat(absl::ToInt64Milliseconds(guest_->boot_time())));
    if (!modules.empty()) Guest("modprobe -a " + modules);
    return !HasFailure();
  }

  // On a failure, what `diagnostics` prints in the guest (and the kernel's last words).
  void PrintDiagnostics(const std::string& diagnostics) {
    if (!HasFailure() || guest_ == nullptr) return;
    absl::StatusOr<QemuGuest::Result> out = guest_->Run(diagnostics + "; dmesg | tail -40");
    if (out.ok()) std::cout << "diagnostics:\n" << out->output << std::endl;
  }

  // Writes `text` to `name` in this test's directory, which the guest reads at the same path.
  std::string WriteText(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    FILE* f = fopen(path.c_str(), "w");
    EXPECT_NE(f, nullptr) << path;
    if (f == nullptr) return path;
    fputs(text.c_str(), f);
    fclose(f);
    return path;
  }

  // Runs `command` in the guest, which must succeed; returns its output.
  std::string Guest(const std::string& command, absl::Duration timeout = absl::Seconds(60)) {
    if (guest_ == nullptr) {
      ADD_FAILURE() << "no guest: " << command;
      return "";
    }
    absl::StatusOr<QemuGuest::Result> result = guest_->Run(command, timeout);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return "";
    EXPECT_EQ(result->exit_code, 0) << command << ":\n" << result->output;
    return result->output;
  }

  // The PCI functions directly below downstream port `bdf`, as the guest's sysfs lists them.
  std::string FunctionsBelow(const std::string& bdf) {
    return Trimmed(Guest(
        absl::StrCat("cd /sys/bus/pci/devices/", bdf, " && ls -d ????:??:??.? 2>/dev/null; true")));
  }

  // Waits until the guest's kernel has enumerated a function below `bdf` (pciehp, after a
  // hot-add); returns its BDF.
  std::string AwaitFunctionBelow(const std::string& bdf) {
    return Trimmed(
        Guest(absl::StrCat("cd /sys/bus/pci/devices/", bdf,
                           " && for i in $(seq 300); do ls -d ????:??:??.? 2>/dev/null && exit 0; "
                           "sleep 0.1; done; exit 1")));
  }

  // The driver bound to a function, waiting up to 10 s for one; "" when none binds.
  std::string DriverOf(const std::string& function_bdf) {
    const std::string device = "/sys/bus/pci/devices/" + function_bdf;
    return Trimmed(Guest(absl::StrCat("for i in $(seq 100); do [ -e ", device,
                                      "/driver ] && break; sleep 0.1; done; basename $(readlink ",
                                      device, "/driver) 2>/dev/null; true")));
  }

  std::string dir_;
  std::unique_ptr<QemuGuest> guest_;
};

}  // namespace fleet::testing

#endif  // FLEET_TESTS_QEMU_GUEST_TEST_H_
