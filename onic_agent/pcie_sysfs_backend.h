// The `pcie-sysfs` O-NIC backend: each O-NIC optical port carries a PCIe link from a PCIe
// downstream port on this host (a root port or a switch downstream port, e.g. 0000:18:00.0)
// to whatever device is at the other end of the optical circuit. The backend works that
// downstream port through Linux sysfs:
//
// - Quiesce: every PCIe function below the port, deepest first: driver unbound (when one is
//   bound), then the function removed (`remove`). The link itself is left alone, unless the
//   port is a slot with power (below).
// - Retrain: sets Retrain Link in the port's Link Control register, waits for Link Training
//   to clear and Data Link Layer Link Active to set, rescans the port's secondary bus and
//   checks that the expected device (vendor/device ids, Device Serial Number) appeared. On a
//   hot-plug port (pciehp) the kernel may have enumerated the new device already, and a slot
//   with power that is off is turned on instead; see Retrain.
// - ReadPort: Link Status of the port (UP when DL Link Active), or QUIESCED while nothing is
//   below a port this backend quiesced.
// - A port that does not report DL Link Active (Link Capabilities bit 20; optional below
//   5 GT/s, mandatory above): its link is judged by what enumerates, as Linux judges it.
//   Retrain waits for Link Training to clear and settle_without_dll_reporting, then rescans;
//   ReadPort reads it UP while functions are below it, DOWN otherwise.
// - Slot power, where the port is a hot-plug slot with a Power Controller (Slot Capabilities
//   bit 1) that the kernel's hot-plug driver (pciehp) lists in bus/pci/slots/<name>, with
//   `power`, at the port's secondary bus (`address` "dddd:bb:00"), and Options::slot_power is
//   on: Quiesce, after removing the functions, turns the slot off (writes 0 to `power`), so
//   the link goes down on purpose before the circuit moves rather than under pciehp's feet;
//   Retrain on a slot that is off turns it on (writes 1): pciehp powers it, waits for the
//   link, enumerates and binds drivers, and the backend then judges what enumerated as it
//   judges a rescan's find. Both writes return when pciehp is done (a power-off waits the 1 s
//   the PCIe spec asks after removing power), so they are not bounded by the call's deadline.
//
// What PCIe cannot tell, and so this backend does not report: optical rx/tx power (always
// -99.99 with a note in `detail`), the far O-NIC's identity (`expected.onic_serial`/`port`
// are not checked; only ids the far device exposes over PCIe are), and an identify LED
// (Blink is UNIMPLEMENTED).
//
// Needs root (CAP_SYS_ADMIN): sysfs `config` reads beyond the first 64 bytes, `remove`,
// `rescan` and `unbind` are privileged.
//
// Thread-safety: calls for different ports may run concurrently (the per-port memory is
// locked); the caller runs at most one call per port at a time, as OnicBackend requires.
#ifndef FLEET_ONIC_AGENT_PCIE_SYSFS_BACKEND_H_
#define FLEET_ONIC_AGENT_PCIE_SYSFS_BACKEND_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "onic_agent/backend.h"
#include "onic_agent/sysfs_files.h"

namespace fleet::onic_agent {

class PcieSysfsBackend : public OnicBackend {
 public:
  struct OnicConfig {
    std::string serial;
    // The BDF (domain:bus:device.function, e.g. "0000:18:00.0") of the PCIe downstream port
    // behind optical port 1 and port 2.
    std::array<std::string, 2> port_bdfs;
    // The O-NIC's own PCIe function, as Discover reports it; empty: port 1's downstream port.
    std::string pcie_address;
  };

  struct Options {
    std::string sysfs_root = "/sys";
    std::vector<OnicConfig> onics;
    // Pause between two reads of Link Status while waiting for the link to train.
    absl::Duration poll_interval = absl::Milliseconds(1);
    // A link that has not trained this long after Retrain Link is reported UNAVAILABLE (the
    // call's deadline, when earlier, gives DEADLINE_EXCEEDED instead). Linux waits 1 s for a
    // retrain (PCIE_LINK_RETRAIN_TIMEOUT_MS); optical transceivers locking may need longer.
    absl::Duration link_train_timeout = absl::Seconds(1);
    // A port that does not report DL Link Active (optional below 5 GT/s): after Retrain Link
    // and Link Training clearing, the wait before the rescan (the PCIe spec's 100 ms before
    // configuration requests to a device below such a port).
    absl::Duration settle_without_dll_reporting = absl::Milliseconds(100);
    // Whether Quiesce and Retrain turn a power-controlled hot-plug slot off and on (above);
    // off: the slot's power is left as it is and a slot that is off is read DOWN.
    bool slot_power = true;
  };

  // Checks `options` (INVALID_ARGUMENT naming the field: serials non-empty and unique, BDFs
  // well formed and used once, poll interval and train timeout not negative / positive).
  static absl::Status ValidateOptions(const Options& options);

  // The production backend: POSIX file calls under options.sysfs_root, the system clock.
  static absl::StatusOr<std::unique_ptr<PcieSysfsBackend>> Create(Options options);
  // For tests: `files` and `clock` are not owned and must outlive the backend.
  static absl::StatusOr<std::unique_ptr<PcieSysfsBackend>> Create(Options options,
                                                                  SysfsFiles* files,
                                                                  const Clock* clock);

  std::string name() const override { return "pcie-sysfs"; }

  // Per port, the state ReadPort gives; a port whose downstream port cannot be read is
  // listed DOWN with the reason in `detail` (so one broken port does not hide the others).
  // `pcie_address` is the O-NIC's configured address, else port 1's downstream port.
  absl::StatusOr<std::vector<v1::AgentOnic>> Discover() override;

  // Unbinds and removes every function below the port, deepest first, and checks that none
  // is left (UNAVAILABLE naming the survivors otherwise), then turns a power-controlled slot
  // off (UNAVAILABLE naming the slot and the kernel's answer when that fails; the port is
  // QUIESCED all the same). Nothing below and nothing to turn off: OK at once.
  CommandOutcome Quiesce(const std::string& serial, uint32_t port, absl::Time deadline) override;

  // On a power-controlled slot that is off, turns it on (above): a slot that stays off (no
  // device present, or its link did not train for pciehp) is UNAVAILABLE naming the slot and
  // the kernel's answer, and the port stays quiesced if it was (the answer's link is DOWN; a
  // read after it QUIESCED). Any failure after the slot came on removes what enumerated and
  // turns the slot off again.
  // Refuses (FAILED_PRECONDITION) while functions are still below a port this backend did not
  // quiesce (retraining under bound drivers would pull the link from under them), when the
  // BDF is not a downstream port, or when Link Disable is set. On a hot-plug slot whose hot-plug
  // driver is on (pciehp), functions below a port this backend quiesced are taken as what the
  // kernel enumerated when the new link came up: they are not retrained, only waited for (DL Link
  // Active), listed again and checked as a rescan's find would be. (Nothing tells them apart from
  // the old device put back by another rescan; an `expected` with a DSN does.) `expected` fields
  // that are zero are not checked; those set must all match one function below the port. A wrong
  // device is removed again (and a power-controlled slot turned off) before returning, so this host
  // never keeps a device it was not given (on a hot-plug port the kernel may have bound its
  // driver for the moment before).
  CommandOutcome Retrain(const std::string& serial, uint32_t port, const v1::PeerIdentity& expected,
                         absl::Time deadline) override;

  CommandOutcome ReadPort(const std::string& serial, uint32_t port) override;

  // UNIMPLEMENTED: sysfs has no control of the O-NIC's identify LED.
  absl::Status Blink(const std::string& serial, absl::Duration duration) override;

 private:
  struct PortRef {
    std::string serial;
    uint32_t port = 0;
    std::string bdf;
  };
  // A power-controlled hot-plug slot as pciehp lists it in bus/pci/slots/.
  struct PowerSlot {
    std::string name;        // The slot's directory name (its Physical Slot Number).
    std::string power_path;  // Its `power`: "1" on, "0" off.
  };
  // The downstream port's PCI Express capability, as found in its config space.
  struct PortRegisters {
    std::string config_path;
    size_t pcie_cap = 0;
    // A hot-plug slot whose hot-plug driver (pciehp) is on: Slot Implemented, Hot-Plug
    // Capable, and Hot-Plug Interrupt Enable set in Slot Control.
    bool hot_plug = false;
    // Link Capabilities bit 20: whether Link Status shows the link up.
    bool dll_active_reporting = false;
    // Set for a hot-plug slot with a Power Controller that pciehp lists, when
    // Options::slot_power is on.
    std::optional<PowerSlot> power_slot;
  };
  // What the backend remembers about a port between calls.
  struct PortMemory {
    bool quiesced = false;        // Last change was a Quiesce.
    std::string rejected_detail;  // Last Retrain removed a wrong device: why.
  };
  // A PCIe function below a downstream port.
  struct Function {
    std::string bdf;
    std::string path;
    int depth = 0;
  };

  PcieSysfsBackend(Options options, std::unique_ptr<SysfsFiles> owned_files, SysfsFiles* files,
                   std::unique_ptr<Clock> owned_clock, const Clock* clock);

  absl::StatusOr<PortRef> FindPort(const std::string& serial, uint32_t port) const;
  std::string DevicePath(const std::string& bdf) const;
  absl::StatusOr<PortRegisters> OpenPort(const PortRef& ref);
  // The slot in bus/pci/slots/ at the port's secondary bus with a `power` attribute; nullopt
  // when there is none (pciehp not bound to the port, or no such directory).
  std::optional<PowerSlot> FindPowerSlot(const PortRef& ref);
  // Whether the slot is on; UNAVAILABLE naming the slot, the port and the file otherwise.
  absl::StatusOr<bool> SlotPowered(const PortRef& ref, const PowerSlot& slot);
  // Writes `on` to the slot's `power` and reads it back: OK when the write was taken and it
  // reads `on`, and for off also when the write was refused but it reads off (pciehp turned it
  // off itself). Otherwise UNAVAILABLE naming the slot, the port and what the kernel answered;
  // a refused turn-on that reads on is pciehp's own enumeration, not this call's.
  absl::Status SetSlotPower(const PortRef& ref, const PowerSlot& slot, bool on);
  absl::StatusOr<uint16_t> ReadRegister16(const PortRegisters& regs, size_t offset);
  // Every function below `path`, deepest first.
  absl::StatusOr<std::vector<Function>> FunctionsBelow(const std::string& path, int depth);
  // FunctionsBelow the port's own directory; FAILED_PRECONDITION when the port is missing.
  absl::StatusOr<std::vector<Function>> FunctionsBelowPort(const PortRef& ref);
  absl::Status RemoveFunctions(const PortRef& ref, const std::vector<Function>& functions,
                               std::optional<absl::Time> deadline);
  // OK when one of `found` is the device `expected` names; otherwise FAILED_PRECONDITION
  // naming what was seen, after removing `found` again and turning a power slot off.
  absl::Status VerifyDevice(const PortRef& ref, const PortRegisters& regs,
                            const std::vector<Function>& found, const v1::PeerIdentity& expected);
  absl::Status Rescan(const PortRef& ref);
  // The port's state from its registers and memory; `status` is what a caller should return.
  CommandOutcome Observe(const PortRef& ref);
  v1::LinkState BaseLink(const std::string& serial, uint32_t port) const;
  PortMemory Memory(const PortRef& ref) const;
  void SetMemory(const PortRef& ref, PortMemory memory);

  const Options options_;
  std::unique_ptr<SysfsFiles> owned_files_;
  SysfsFiles* const files_;
  std::unique_ptr<Clock> owned_clock_;
  const Clock* const clock_;

  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, uint32_t>, PortMemory> memory_ ABSL_GUARDED_BY(mu_);
};

// Whether `name` is a PCI function address as sysfs names devices: hex domain (4+ digits),
// bus (2), device (2), "." function (0-7), lowercase, e.g. "0000:18:00.0".
bool IsPciBdf(absl::string_view name);

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_PCIE_SYSFS_BACKEND_H_
