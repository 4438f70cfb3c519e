// A fake sysfs PCI tree with simulated downstream ports, for the pcie-sysfs backend's tests.
//
// The tree is a real directory (bus/pci/devices/<bdf>/config, rescan, pci_bus/<bus>/rescan,
// child functions with vendor, device, config, remove and a driver symlink into
// bus/pci/drivers/<name>/ with its unbind file), read and written with the real
// PosixSysfsFiles. On top of that, this SysfsFiles reacts to the backend's calls the way the
// kernel and a port's hardware would, synchronously as the kernel does:
// - setting Retrain Link in a port's Link Control sets Link Training (Retrain Link itself
//   reads back 0); after a configured number of Link Status reads the link is up: Training
//   clear, DL Link Active set, the configured speed and width; or, if so configured, it
//   stays in training, or falls back to Detect (nothing active).
// - every Link Status read of a port advances the fleet::testing::FakeClock by `poll_tick`, so
// deadlines and
//   training timeouts pass without wall-clock time;
// - writing a port's rescan (its own or its secondary bus's) creates the device configured
//   for it, if the link is up;
// - a port with a power slot (`power_slot`: a hot-plug slot with a Power Controller, listed
//   in bus/pci/slots/<name> with `address` and `power`, as pciehp lists it): writing 0 to
//   `power` removes what is below and takes the link down ("slot off <name>"); writing 1
//   puts the rescan's device below and brings the link up, or into training for an `outcome`
//   other than kUp ("slot on <name>"), or, with no device configured, fails as pciehp does for
//   an empty slot (ENODEV) and the slot stays off; a write of what the slot already is fails
//   the same way;
// - writing a function's `remove` deletes its directory; writing its BDF to driver/unbind
//   drops its driver link.
// Every such write is recorded as an event, in order. Thread-safe.
#ifndef FLEET_TESTS_ONIC_AGENT_FAKE_PCIE_SYSFS_H_
#define FLEET_TESTS_ONIC_AGENT_FAKE_PCIE_SYSFS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "onic_agent/sysfs_files.h"
#include "testing/fake_clock.h"

namespace fleet::onic_agent::testing {

// A PCIe function (device) to put below a port.
struct FakeFunction {
  std::string bdf;
  uint16_t vendor = 0x10de;
  uint16_t device = 0x2330;
  std::optional<uint64_t> dsn;         // Device Serial Number capability, if any.
  std::string driver;                  // Bound driver's name; empty: none bound.
  std::vector<FakeFunction> children;  // Non-empty: a bridge with these behind it.
};

// Where a port's link ends up after Retrain Link and `polls_to_train` Link Status reads.
enum class FakeTrainingOutcome {
  kUp,                 // Trained: Training clear, DL Link Active set, speed and width.
  kStaysTraining,      // Link Training never clears.
  kFallsBackToDetect,  // No usable far end: Training clears, DL Link Active stays clear.
};

struct FakePortSpec {
  std::string bdf;           // e.g. "0000:18:00.0"
  uint16_t vendor = 0x8086;  // The port's own ids.
  uint16_t device = 0x347a;
  uint8_t port_number = 0;           // Link Capabilities' Port Number.
  std::string secondary_bus;         // e.g. "0000:19"; empty: no pci_bus/ directory.
  uint8_t port_type = 4;             // Device/Port Type: 4 root port, 6 switch downstream.
  bool dll_active_reporting = true;  // Link Capabilities bit 20.
  uint16_t link_control = 0x0043;    // ASPM L0s+L1, Common Clock Configuration.
  bool link_up = false;              // Initial Link Status.
  uint8_t speed_code = 4;            // What training negotiates: 16 GT/s …
  uint8_t width = 16;                // … x16.
  int polls_to_train = 2;            // Link Status reads that still see Link Training.
  FakeTrainingOutcome outcome = FakeTrainingOutcome::kUp;
  // A hot-plug slot whose hot-plug driver is on: Slot Implemented, Hot-Plug Capable and
  // Hot-Plug Interrupt Enable set.
  bool hot_plug = false;
  // With hot_plug and secondary_bus: the slot's name in bus/pci/slots/ (its Power Controller
  // Present bit set); empty: no power controller, no slot directory.
  std::string power_slot;
  bool slot_powered = true;  // The slot's initial power.
};

struct ConfigWrite {
  std::string bdf;
  uint64_t offset = 0;
  std::string bytes;
};

class FakePcieSysfs : public SysfsFiles {
 public:
  // `root` is an existing, empty directory; `clock` is not owned.
  FakePcieSysfs(std::string root, fleet::testing::FakeClock* clock,
                absl::Duration poll_tick = absl::Milliseconds(1));

  // --- Building the tree ---
  void AddPort(const FakePortSpec& spec);
  // A switch's upstream port `fn` (an O-NIC as onic_discovery finds it) in bus/pci/devices,
  // with the ports `port_bdfs` (added already) directly below it, and `fn.children` too.
  void AddUpstreamPort(const FakeFunction& fn, const std::vector<std::string>& port_bdfs);
  // Puts `fn` (and its children) below port `port_bdf` now.
  void AddFunction(const std::string& port_bdf, const FakeFunction& fn);
  // What a rescan of the port finds while its link is up (nullopt: nothing).
  void SetDeviceAfterRescan(const std::string& port_bdf, std::optional<FakeFunction> fn);
  // The same for a multi-function device.
  void SetFunctionsAfterRescan(const std::string& port_bdf, std::vector<FakeFunction> fns);
  // The next read of function `bdf`'s `vendor` finds it gone: as if someone else removed it
  // between the backend's listing and its reading, the fake deletes it and the read fails
  // NOT_FOUND (recorded as "removed by another <bdf>").
  void SetRemovedWhenRead(const std::string& bdf);
  // Makes `remove` writes do nothing (a function the kernel refuses to let go).
  void SetRemoveIgnored(bool ignored);
  // Overwrites bytes of a port's config space (for malformed capability lists).
  void PokeConfig(const std::string& port_bdf, size_t offset, const std::string& bytes);
  // Replaces a port's config file by `bytes` (e.g. a short, unprivileged read).
  void ReplaceConfig(const std::string& port_bdf, const std::string& bytes);

  // --- Observing ---
  std::string PortPath(const std::string& port_bdf) const;
  // Whether a function `bdf` exists anywhere below port `port_bdf`.
  bool HasFunction(const std::string& port_bdf, const std::string& bdf) const;
  bool HasDriver(const std::string& port_bdf, const std::string& bdf) const;
  // Whether the port's power slot is on.
  bool SlotPowered(const std::string& port_bdf) const;
  uint16_t LinkControl(const std::string& port_bdf) const;
  // "unbind <bdf>", "remove <bdf>", "rescan <port> bus" / "rescan <port> device".
  std::vector<std::string> events() const;
  std::vector<ConfigWrite> config_writes() const;
  int link_status_reads(const std::string& port_bdf) const;

  // --- SysfsFiles ---
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  bool Exists(const std::string& path) override;
  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::StatusOr<std::string> ReadAt(const std::string& path, uint64_t offset,
                                     size_t size) override;
  absl::Status WriteAt(const std::string& path, uint64_t offset, absl::string_view data) override;
  absl::Status WriteFile(const std::string& path, absl::string_view data) override;

 private:
  struct Port {
    FakePortSpec spec;
    bool training = false;
    int polls_left = 0;
    int link_status_reads = 0;
    std::vector<FakeFunction> after_rescan;
  };

  // The port whose config file is `path`, or nullptr.
  Port* PortByConfigPath(const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteFunction(const std::string& parent_dir, const FakeFunction& fn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint16_t ReadConfig16(const std::string& bdf, size_t offset) const;
  // The slot's `power` file, "" when the port has none.
  std::string SlotPowerPath(const FakePortSpec& spec) const;
  absl::Status WriteSlotPower(Port& port, absl::string_view data)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteConfig16(const std::string& bdf, size_t offset, uint16_t value);

  const std::string root_;
  fleet::testing::FakeClock* const clock_;
  const absl::Duration poll_tick_;
  mutable PosixSysfsFiles disk_;  // Stateless; the real tree underneath.

  mutable absl::Mutex mu_;
  std::map<std::string, Port> ports_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> removed_when_read_ ABSL_GUARDED_BY(mu_);
  std::vector<ConfigWrite> config_writes_ ABSL_GUARDED_BY(mu_);
  bool remove_ignored_ ABSL_GUARDED_BY(mu_) = false;
};

// Offsets of the simulated port's registers: PM capability at 0x40, PCI Express capability
// at 0x60 (so Link Control is at 0x70 and Link Status at 0x72), AER at 0x100.
inline constexpr size_t kFakePcieCap = 0x60;

}  // namespace fleet::onic_agent::testing

#endif  // FLEET_TESTS_ONIC_AGENT_FAKE_PCIE_SYSFS_H_
