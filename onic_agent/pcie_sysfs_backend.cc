#include "onic_agent/pcie_sysfs_backend.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/hex_id.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "onic_agent/pci_function.h"
#include "onic_agent/pcie_config.h"

namespace fleet::onic_agent {
namespace {

constexpr double kNoPowerReading = -99.99;
constexpr char kNoPowerNote[] = "optical power is not readable through sysfs";
constexpr char kNoDllReporting[] =
    "the port does not report Data Link Layer Link Active (Link Capabilities bit 20)";
// Deeper than any real PCIe hierarchy below one port (each level is a bus number); a guard
// against a sysfs tree that is not what it should be.
constexpr int kMaxHierarchyDepth = 32;

std::string Hex4(uint32_t value) { return "0x" + PcieIdText(value); }

bool IsLowerHex(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

std::string PortName(const std::string& serial, uint32_t port) {
  return absl::StrCat("O-NIC ", serial, " port ", port);
}

std::string LinkSummary(const pcie::LinkStatusFields& f) {
  return absl::StrCat(f.speed_mts, " MT/s x", f.width);
}

}  // namespace

bool IsPciBdf(absl::string_view name) {
  // dddd:bb:dd.f; the domain may be wider than 4 digits (e.g. Intel VMD domains 10000+).
  const size_t colon1 = name.find(':');
  if (colon1 == absl::string_view::npos || colon1 < 4) return false;
  absl::string_view rest = name.substr(colon1 + 1);
  return IsLowerHex(name.substr(0, colon1)) && rest.size() == 7 && rest[2] == ':' &&
         rest[5] == '.' && IsLowerHex(rest.substr(0, 2)) && IsLowerHex(rest.substr(3, 2)) &&
         rest[6] >= '0' && rest[6] <= '7';
}

absl::Status PcieSysfsBackend::ValidateOptions(const Options& options) {
  if (options.sysfs_root.empty()) {
    return absl::InvalidArgumentError("sysfs_root is empty (use \"/sys\" on a real host)");
  }
  if (options.poll_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "poll_interval ", absl::FormatDuration(options.poll_interval), " is negative"));
  }
  if (options.settle_without_dll_reporting < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("settle_without_dll_reporting ",
                     absl::FormatDuration(options.settle_without_dll_reporting), " is negative"));
  }
  if (options.link_train_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("link_train_timeout ",
                                                   absl::FormatDuration(options.link_train_timeout),
                                                   " must be positive"));
  }
  std::set<std::string> serials;
  std::map<std::string, std::string> bdf_users;
  for (size_t i = 0; i < options.onics.size(); ++i) {
    const OnicConfig& onic = options.onics[i];
    if (onic.serial.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("onics[", i, "].serial is empty"));
    }
    if (!serials.insert(onic.serial).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("onics[", i, "].serial \"", onic.serial, "\" is configured twice"));
    }
    if (!onic.pcie_address.empty() && !IsPciBdf(onic.pcie_address)) {
      return absl::InvalidArgumentError(
          absl::StrCat("onics[", i, "] (", onic.serial, ") pcie \"", onic.pcie_address,
                       "\" is not a PCI address like 0000:17:00.0 (lowercase hex)"));
    }
    for (uint32_t p = 1; p <= 2; ++p) {
      const std::string& bdf = onic.port_bdfs[p - 1];
      if (!IsPciBdf(bdf)) {
        return absl::InvalidArgumentError(
            absl::StrCat("onics[", i, "] (", onic.serial, ") port ", p, " BDF \"", bdf,
                         "\" is not a PCI address like 0000:18:00.0 (lowercase hex)"));
      }
      auto [it, inserted] = bdf_users.emplace(bdf, PortName(onic.serial, p));
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat("downstream port ", bdf, " is given for ",
                                                       PortName(onic.serial, p), " and for ",
                                                       it->second));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PcieSysfsBackend>> PcieSysfsBackend::Create(Options options) {
  RETURN_IF_ERROR(ValidateOptions(options));
  auto files = std::make_unique<PosixSysfsFiles>();
  auto clock = std::make_unique<SystemClock>();
  SysfsFiles* files_ptr = files.get();
  const Clock* clock_ptr = clock.get();
  return std::unique_ptr<PcieSysfsBackend>(new PcieSysfsBackend(
      std::move(options), std::move(files), files_ptr, std::move(clock), clock_ptr));
}

absl::StatusOr<std::unique_ptr<PcieSysfsBackend>> PcieSysfsBackend::Create(Options options,
                                                                           SysfsFiles* files,
                                                                           const Clock* clock) {
  RETURN_IF_ERROR(ValidateOptions(options));
  return std::unique_ptr<PcieSysfsBackend>(
      new PcieSysfsBackend(std::move(options), nullptr, files, nullptr, clock));
}

PcieSysfsBackend::PcieSysfsBackend(Options options, std::unique_ptr<SysfsFiles> owned_files,
                                   SysfsFiles* files, std::unique_ptr<Clock> owned_clock,
                                   const Clock* clock)
    : options_([&] {
        // "/sys/" and "/sys" name the same tree; paths are joined with "/".
        while (!options.sysfs_root.empty() && options.sysfs_root.back() == '/') {
          options.sysfs_root.pop_back();
        }
        return std::move(options);
      }()),
      owned_files_(std::move(owned_files)),
      files_(files),
      owned_clock_(std::move(owned_clock)),
      clock_(clock) {}

// --- Lookup and register access ---

absl::StatusOr<PcieSysfsBackend::PortRef> PcieSysfsBackend::FindPort(const std::string& serial,
                                                                     uint32_t port) const {
  for (const OnicConfig& onic : options_.onics) {
    if (onic.serial != serial) continue;
    if (port < 1 || port > 2) {
      return absl::NotFoundError(
          absl::StrCat("O-NIC ", serial, " has no port ", port, " (ports are 1 and 2)"));
    }
    return PortRef{serial, port, onic.port_bdfs[port - 1]};
  }
  return absl::NotFoundError(absl::StrCat("no O-NIC with serial \"", serial, "\" on this host"));
}

std::string PcieSysfsBackend::DevicePath(const std::string& bdf) const {
  return absl::StrCat(options_.sysfs_root, "/bus/pci/devices/", bdf);
}

absl::StatusOr<PcieSysfsBackend::PortRegisters> PcieSysfsBackend::OpenPort(const PortRef& ref) {
  PortRegisters regs;
  regs.config_path = DevicePath(ref.bdf) + "/config";
  const std::string context =
      absl::StrCat("downstream port ", ref.bdf, " of ", PortName(ref.serial, ref.port));
  absl::StatusOr<std::optional<PcieCapability>> cap = ReadPcieCapability(*files_, regs.config_path);
  if (!cap.ok()) {
    if (cap.status().code() == absl::StatusCode::kNotFound) {
      return absl::FailedPreconditionError(
          absl::StrCat(context, ": ", regs.config_path,
                       " does not exist (no such PCI device; check the agent's O-NIC "
                       "configuration)"));
    }
    return WithContext(cap.status(), context);
  }
  if (!cap->has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat(context, ": ", regs.config_path,
                     " has no PCI Express capability (ID 0x10): not a PCIe port"));
  }
  regs.pcie_cap = (*cap)->offset;
  const std::string& config = (*cap)->config;
  const uint8_t port_type = (*cap)->port_type();
  if (port_type != pcie::kPortTypeRootPort && port_type != pcie::kPortTypeSwitchDownstream) {
    return absl::FailedPreconditionError(
        absl::StrCat(context, ": ", ref.bdf, " is not a PCIe downstream port (Device/Port Type ",
                     port_type, "; a root port is 4, a switch downstream port 6)"));
  }
  const uint16_t pcie_capabilities = pcie::Read16(config, regs.pcie_cap + pcie::kPcieCapabilities);
  const bool has_slot = (pcie_capabilities & pcie::kPcieCapSlotImplemented) != 0 &&
                        regs.pcie_cap + pcie::kSlotControl + 2 <= pcie::kConventionalConfigSize;
  const uint32_t slot_capabilities =
      has_slot ? pcie::Read32(config, regs.pcie_cap + pcie::kSlotCapabilities) : 0;
  regs.hot_plug = has_slot && (slot_capabilities & pcie::kSlotCapHotPlugCapable) != 0 &&
                  (pcie::Read16(config, regs.pcie_cap + pcie::kSlotControl) &
                   pcie::kSlotControlHotPlugInterruptEnable) != 0;
  regs.dll_active_reporting = (pcie::Read32(config, regs.pcie_cap + pcie::kLinkCapabilities) &
                               pcie::kLinkCapDllActiveReporting) != 0;
  if (options_.slot_power && regs.hot_plug &&
      (slot_capabilities & pcie::kSlotCapPowerControllerPresent) != 0) {
    regs.power_slot = FindPowerSlot(ref);
  }
  return regs;
}

// --- Slot power ---

std::optional<PcieSysfsBackend::PowerSlot> PcieSysfsBackend::FindPowerSlot(const PortRef& ref) {
  // pciehp names a slot by its Physical Slot Number; its `address` is the port's secondary
  // bus and device 0 ("0000:01:00"). The port's pci_bus/ holds that bus ("0000:01").
  absl::StatusOr<std::vector<std::string>> buses =
      files_->ListDir(DevicePath(ref.bdf) + "/pci_bus");
  if (!buses.ok() || buses->size() != 1) return std::nullopt;
  const std::string address = (*buses)[0] + ":00";
  const std::string slots = options_.sysfs_root + "/bus/pci/slots";
  absl::StatusOr<std::vector<std::string>> names = files_->ListDir(slots);
  if (!names.ok()) return std::nullopt;
  for (const std::string& name : *names) {
    const std::string dir = absl::StrCat(slots, "/", name);
    absl::StatusOr<std::string> at = files_->ReadFile(dir + "/address");
    if (!at.ok() || absl::StripAsciiWhitespace(*at) != address) continue;
    if (!files_->Exists(dir + "/power")) return std::nullopt;
    return PowerSlot{name, dir + "/power"};
  }
  return std::nullopt;
}

absl::StatusOr<bool> PcieSysfsBackend::SlotPowered(const PortRef& ref, const PowerSlot& slot) {
  const std::string context =
      absl::StrCat("reading the power of slot ", slot.name, " of downstream port ", ref.bdf, " (",
                   PortName(ref.serial, ref.port), ")");
  absl::StatusOr<std::string> text = files_->ReadFile(slot.power_path);
  if (!text.ok())
    return absl::UnavailableError(absl::StrCat(context, ": ", text.status().message()));
  const absl::string_view value = absl::StripAsciiWhitespace(*text);
  if (value != "0" && value != "1") {
    return absl::UnavailableError(
        absl::StrCat(context, ": ", slot.power_path, " reads \"", value, "\", not 0 or 1"));
  }
  return value == "1";
}

absl::Status PcieSysfsBackend::SetSlotPower(const PortRef& ref, const PowerSlot& slot, bool on) {
  // pciehp answers a write only when it is done (slot enabled and enumerated, or disabled and
  // powered down), and refuses one (ENODEV) for a slot that already is what was asked, or, to
  // turn on, for an empty slot or a link it could not train.
  const absl::Status written = files_->WriteFile(slot.power_path, on ? "1" : "0");
  absl::StatusOr<bool> powered = SlotPowered(ref, slot);
  if (!powered.ok()) return powered.status();
  const std::string what = absl::StrCat("slot ", slot.name, " of downstream port ", ref.bdf, " (",
                                        PortName(ref.serial, ref.port), ")");
  if (*powered == on) {
    // Refused, yet as asked: pciehp got there by itself (a device arrived, or left) while
    // the agent asked. Off is off; on is pciehp's own enumeration, still to be judged.
    if (written.ok() || !on) return absl::OkStatus();
    return absl::UnavailableError(
        absl::StrCat(what, " was turned on by pciehp itself while the agent turned it on (",
                     written.message(), "); a retrain judges what it enumerates"));
  }
  return absl::UnavailableError(absl::StrCat(
      what, " did not turn ", on ? "on" : "off", ": it is still ", on ? "off" : "on", " (",
      written.ok() ? std::string("the write was taken") : std::string(written.message()), ")",
      on && written.code() == absl::StatusCode::kNotFound
          ? "; pciehp found no device present or the link did not train"
          : ""));
}

absl::StatusOr<uint16_t> PcieSysfsBackend::ReadRegister16(const PortRegisters& regs,
                                                          size_t offset) {
  const size_t at = regs.pcie_cap + offset;
  ASSIGN_OR_RETURN(std::string bytes, files_->ReadAt(regs.config_path, at, 2));
  if (bytes.size() != 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        regs.config_path, ": short read at 0x", absl::Hex(at), " (", bytes.size(), " of 2 bytes)"));
  }
  return pcie::Read16(bytes, 0);
}

// --- The functions below a port ---

absl::StatusOr<std::vector<PcieSysfsBackend::Function>> PcieSysfsBackend::FunctionsBelow(
    const std::string& path, int depth) {
  if (depth > kMaxHierarchyDepth) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": PCI hierarchy deeper than ", kMaxHierarchyDepth, " levels"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> names, files_->ListDir(path));
  std::vector<Function> out;
  for (const std::string& name : names) {
    if (!IsPciBdf(name)) continue;  // pci_bus/, driver, power/, consumer:… links, attributes.
    Function fn{name, absl::StrCat(path, "/", name), depth};
    absl::StatusOr<std::vector<Function>> below = FunctionsBelow(fn.path, depth + 1);
    if (!below.ok()) {
      // Gone between the two listings (removed by someone else): nothing to do for it.
      if (below.status().code() == absl::StatusCode::kNotFound) continue;
      return below.status();
    }
    out.insert(out.end(), below->begin(), below->end());
    out.push_back(std::move(fn));
  }
  // Deepest first, so a bridge goes after everything behind it.
  std::stable_sort(out.begin(), out.end(),
                   [](const Function& a, const Function& b) { return a.depth > b.depth; });
  return out;
}

absl::StatusOr<std::vector<PcieSysfsBackend::Function>> PcieSysfsBackend::FunctionsBelowPort(
    const PortRef& ref) {
  const std::string path = DevicePath(ref.bdf);
  absl::StatusOr<std::vector<Function>> functions = FunctionsBelow(path, 0);
  // A missing device directory is a configuration problem, not an unknown port.
  if (functions.status().code() == absl::StatusCode::kNotFound) {
    return absl::FailedPreconditionError(absl::StrCat(
        "downstream port ", ref.bdf, " of ", PortName(ref.serial, ref.port), ": ", path,
        " does not exist (no such PCI device; check the agent's O-NIC "
        "configuration)"));
  }
  return functions;
}

absl::Status PcieSysfsBackend::RemoveFunctions(const PortRef& ref,
                                               const std::vector<Function>& functions,
                                               std::optional<absl::Time> deadline) {
  for (size_t i = 0; i < functions.size(); ++i) {
    const Function& fn = functions[i];
    if (deadline.has_value() && clock_->Now() >= *deadline) {
      std::vector<std::string> left;
      for (size_t j = i; j < functions.size(); ++j) left.push_back(functions[j].bdf);
      return absl::DeadlineExceededError(absl::StrCat(
          "deadline passed quiescing ", PortName(ref.serial, ref.port), " with ", left.size(),
          " of ", functions.size(), " functions still present: ", absl::StrJoin(left, ", ")));
    }
    // The kernel's `remove` also releases the driver; unbinding first lets the driver's
    // own remove path run and report on its own, before the device disappears.
    if (files_->Exists(fn.path + "/driver")) {
      absl::Status unbound = files_->WriteFile(fn.path + "/driver/unbind", fn.bdf);
      if (!unbound.ok() && unbound.code() != absl::StatusCode::kNotFound) {
        return WithContext(unbound, absl::StrCat("unbinding the driver of ", fn.bdf));
      }
    }
    absl::Status removed = files_->WriteFile(fn.path + "/remove", "1");
    if (!removed.ok() && removed.code() != absl::StatusCode::kNotFound) {
      return WithContext(removed, absl::StrCat("removing ", fn.bdf));
    }
  }
  return absl::OkStatus();
}

namespace {

std::string Describe(const std::string& bdf, uint32_t vendor, uint32_t device, bool with_dsn,
                     std::optional<uint64_t> dsn) {
  std::string out = absl::StrCat("vendor ", Hex4(vendor), " device ", Hex4(device));
  if (with_dsn) {
    absl::StrAppend(&out, dsn.has_value() ? absl::StrCat(" dsn ", DsnText(*dsn))
                                          : std::string(" without a serial number"));
  }
  absl::StrAppend(&out, " at ", bdf);
  return out;
}

std::string DescribeExpected(const v1::PeerIdentity& expected) {
  std::vector<std::string> parts;
  if (expected.pcie_vendor_id() != 0) parts.push_back("vendor " + Hex4(expected.pcie_vendor_id()));
  if (expected.pcie_device_id() != 0) parts.push_back("device " + Hex4(expected.pcie_device_id()));
  if (expected.device_serial_number() != 0) {
    parts.push_back("dsn " + DsnText(expected.device_serial_number()));
  }
  return absl::StrJoin(parts, " ");
}

bool ExpectsDevice(const v1::PeerIdentity& expected) {
  return expected.pcie_vendor_id() != 0 || expected.pcie_device_id() != 0 ||
         expected.device_serial_number() != 0;
}

}  // namespace

absl::Status PcieSysfsBackend::Rescan(const PortRef& ref) {
  // A bridge's own `rescan` rescans the bus the bridge sits on (every sibling port's subtree
  // too, re-adding what another port just quiesced while its link is still up). The bridge's
  // secondary bus, `pci_bus/<bus>/rescan`, scans below this port only, and for an empty bus
  // also resizes the bridge windows for the new device's BARs (pci_rescan_bus_bridge_resize).
  const std::string device = DevicePath(ref.bdf);
  std::string path = device + "/rescan";
  absl::StatusOr<std::vector<std::string>> buses = files_->ListDir(device + "/pci_bus");
  if (buses.ok() && buses->size() == 1)
    path = absl::StrCat(device, "/pci_bus/", (*buses)[0], "/rescan");
  absl::Status status = files_->WriteFile(path, "1");
  if (!status.ok()) return WithContext(status, "rescan below " + ref.bdf);
  return absl::OkStatus();
}

absl::Status PcieSysfsBackend::VerifyDevice(const PortRef& ref, const PortRegisters& regs,
                                            const std::vector<Function>& found,
                                            const v1::PeerIdentity& expected) {
  const std::string name = PortName(ref.serial, ref.port);
  const bool with_dsn = expected.device_serial_number() != 0;
  std::vector<std::string> seen;
  absl::Status why;
  for (const Function& fn : found) {
    absl::StatusOr<PciFunctionIds> ids = ReadPciFunctionIds(*files_, fn.path, with_dsn);
    if (!ids.ok()) {
      why = absl::FailedPreconditionError(absl::StrCat("cannot verify the device behind ", name,
                                                       " (expected ", DescribeExpected(expected),
                                                       "): ", ids.status().message()));
      break;
    }
    // All the ids the caller set must hold for one function (a GPU's audio function has
    // another device id, and multi-function devices carry the DSN on function 0).
    if ((expected.pcie_vendor_id() == 0 || expected.pcie_vendor_id() == ids->vendor) &&
        (expected.pcie_device_id() == 0 || expected.pcie_device_id() == ids->device) &&
        (!with_dsn || ids->dsn == expected.device_serial_number())) {
      return absl::OkStatus();
    }
    seen.push_back(Describe(fn.bdf, ids->vendor, ids->device, with_dsn, ids->dsn));
  }
  if (why.ok()) {
    why = absl::FailedPreconditionError(absl::StrCat("wrong device behind ", name, ": saw ",
                                                     absl::StrJoin(seen, "; "), " (expected ",
                                                     DescribeExpected(expected), ")"));
  }
  // Do not keep a device this host was not given: its drivers would bind to it, and it may
  // be another tenant's. A slot that can be turned off is, so pciehp does not add it again.
  const absl::Status removed = RemoveFunctions(ref, found, std::nullopt);
  why = absl::Status(
      why.code(), absl::StrCat(why.message(),
                               removed.ok() ? "; removed it again" : "; removing it again failed: ",
                               removed.message()));
  if (regs.power_slot.has_value()) {
    const absl::Status off = SetSlotPower(ref, *regs.power_slot, false);
    why = absl::Status(
        why.code(), absl::StrCat(why.message(),
                                 off.ok() ? "; its slot is off" : "; turning its slot off failed: ",
                                 off.message()));
  }
  FLEET_LOG(WARNING) << why;
  PortMemory rejected;
  rejected.rejected_detail = std::string(why.message());
  SetMemory(ref, std::move(rejected));
  return why;
}

// --- Observing a port ---

v1::LinkState PcieSysfsBackend::BaseLink(const std::string& serial, uint32_t port) const {
  v1::LinkState link;
  link.set_onic_serial(serial);
  link.set_port(port);
  link.set_rx_power_dbm(kNoPowerReading);
  link.set_tx_power_dbm(kNoPowerReading);
  return link;
}

PcieSysfsBackend::PortMemory PcieSysfsBackend::Memory(const PortRef& ref) const {
  absl::MutexLock lock(&mu_);
  auto it = memory_.find({ref.serial, ref.port});
  return it == memory_.end() ? PortMemory{} : it->second;
}

void PcieSysfsBackend::SetMemory(const PortRef& ref, PortMemory memory) {
  absl::MutexLock lock(&mu_);
  memory_[{ref.serial, ref.port}] = std::move(memory);
}

CommandOutcome PcieSysfsBackend::Observe(const PortRef& ref) {
  CommandOutcome out;
  out.link = BaseLink(ref.serial, ref.port);
  auto fail = [&](const absl::Status& status) {
    out.status = status;
    out.link.set_status(v1::LINK_STATUS_DOWN);
    out.link.set_detail(std::string(status.message()));
    return out;
  };
  absl::StatusOr<std::vector<Function>> functions = FunctionsBelowPort(ref);
  if (!functions.ok()) return fail(functions.status());
  const PortMemory memory = Memory(ref);
  if (functions->empty() && memory.quiesced) {
    out.link.set_status(v1::LINK_STATUS_QUIESCED);
    out.link.set_detail(absl::StrCat("quiesced: no PCIe function below downstream port ", ref.bdf,
                                     "; ", kNoPowerNote));
    return out;
  }
  if (!memory.rejected_detail.empty()) {
    out.link.set_status(v1::LINK_STATUS_DOWN);
    out.link.set_detail(memory.rejected_detail);
    return out;
  }
  absl::StatusOr<PortRegisters> regs = OpenPort(ref);
  if (!regs.ok()) return fail(regs.status());
  if (regs->power_slot.has_value() && functions->empty()) {
    absl::StatusOr<bool> powered = SlotPowered(ref, *regs->power_slot);
    if (!powered.ok()) return fail(powered.status());
    if (!*powered) {
      out.link.set_status(v1::LINK_STATUS_DOWN);
      out.link.set_detail(absl::StrCat("slot ", regs->power_slot->name, " of downstream port ",
                                       ref.bdf, " is powered off; ", kNoPowerNote));
      return out;
    }
  }
  absl::StatusOr<uint16_t> link_status = ReadRegister16(*regs, pcie::kLinkStatus);
  if (!link_status.ok()) return fail(link_status.status());
  const pcie::LinkStatusFields f = pcie::DecodeLinkStatus(*link_status);
  std::string what;
  if (!regs->dll_active_reporting && !f.training) {
    // The port cannot say whether its link is up: what enumerated below it is the evidence.
    if (functions->empty()) {
      out.link.set_status(v1::LINK_STATUS_DOWN);
      what = absl::StrCat("nothing enumerated below ", ref.bdf, "; ", kNoDllReporting);
    } else {
      out.link.set_status(v1::LINK_STATUS_UP);
      out.link.set_link_speed_mts(f.speed_mts);
      out.link.set_link_width(f.width);
      what = absl::StrCat("link up at ", LinkSummary(f), " on ", ref.bdf, ", ", functions->size(),
                          " PCIe functions below (judged by them: ", kNoDllReporting, ")");
    }
  } else if (f.dll_active) {
    out.link.set_status(v1::LINK_STATUS_UP);
    out.link.set_link_speed_mts(f.speed_mts);
    out.link.set_link_width(f.width);
    what = absl::StrCat("link up at ", LinkSummary(f), " on ", ref.bdf, ", ", functions->size(),
                        " PCIe functions below");
  } else if (f.training) {
    out.link.set_status(v1::LINK_STATUS_TRAINING);
    what = absl::StrCat("link training on ", ref.bdf);
  } else {
    out.link.set_status(v1::LINK_STATUS_DOWN);
    what = absl::StrCat("link down on ", ref.bdf, " (Data Link Layer Link Active clear)");
  }
  out.link.set_detail(absl::StrCat(what, "; ", kNoPowerNote));
  return out;
}

// --- OnicBackend ---

absl::StatusOr<std::vector<v1::AgentOnic>> PcieSysfsBackend::Discover() {
  std::vector<v1::AgentOnic> onics;
  for (const OnicConfig& config : options_.onics) {
    v1::AgentOnic& onic = onics.emplace_back();
    onic.set_serial(config.serial);
    onic.set_pcie_address(config.pcie_address.empty() ? config.port_bdfs[0] : config.pcie_address);
    for (uint32_t port = 1; port <= 2; ++port) {
      CommandOutcome observed = Observe(PortRef{config.serial, port, config.port_bdfs[port - 1]});
      if (!observed.status.ok()) {
        FLEET_LOG(WARNING) << PortName(config.serial, port)
                           << " cannot be read: " << observed.status;
      }
      *onic.add_ports() = std::move(observed.link);
    }
  }
  return onics;
}

CommandOutcome PcieSysfsBackend::Quiesce(const std::string& serial, uint32_t port,
                                         absl::Time deadline) {
  absl::StatusOr<PortRef> ref = FindPort(serial, port);
  if (!ref.ok()) {
    CommandOutcome out{ref.status(), BaseLink(serial, port)};
    out.link.set_detail(std::string(ref.status().message()));
    return out;
  }
  auto fail = [&](const absl::Status& status) {
    CommandOutcome out = Observe(*ref);
    out.status = status;
    out.link.set_detail(std::string(status.message()));
    return out;
  };
  absl::StatusOr<std::vector<Function>> functions = FunctionsBelowPort(*ref);
  if (!functions.ok()) return fail(functions.status());
  if (absl::Status removed = RemoveFunctions(*ref, *functions, deadline); !removed.ok()) {
    return fail(removed);
  }
  absl::StatusOr<std::vector<Function>> left = FunctionsBelowPort(*ref);
  if (!left.ok()) return fail(left.status());
  if (!left->empty()) {
    std::vector<std::string> bdfs;
    for (const Function& fn : *left) bdfs.push_back(fn.bdf);
    return fail(absl::UnavailableError(absl::StrCat(PortName(serial, port),
                                                    ": PCIe functions still below ", ref->bdf,
                                                    " after remove: ", absl::StrJoin(bdfs, ", "))));
  }
  PortMemory quiesced;
  quiesced.quiesced = true;
  SetMemory(*ref, std::move(quiesced));
  if (!functions->empty()) {
    FLEET_LOG(INFO) << PortName(serial, port) << " quiesced: removed " << functions->size()
                    << " PCIe functions below " << ref->bdf;
  }
  // A BDF that is not a downstream port (FAILED_PRECONDITION) has no slot to turn off; its
  // functions are gone all the same, which is what a quiesce promises. Other errors (a config
  // read that failed) leave unknown whether a slot is on: said.
  std::string power_note;
  absl::StatusOr<PortRegisters> regs = OpenPort(*ref);
  if (!regs.ok() && regs.status().code() != absl::StatusCode::kFailedPrecondition) {
    return fail(regs.status());
  }
  if (regs.ok() && regs->power_slot.has_value()) {
    absl::StatusOr<bool> powered = SlotPowered(*ref, *regs->power_slot);
    if (!powered.ok()) return fail(powered.status());
    if (*powered) {
      if (clock_->Now() >= deadline) {
        return fail(absl::DeadlineExceededError(
            absl::StrCat("deadline passed before turning slot ", regs->power_slot->name, " off; ",
                         PortName(serial, port), " has nothing below it")));
      }
      if (absl::Status off = SetSlotPower(*ref, *regs->power_slot, false); !off.ok()) {
        return fail(off);
      }
      FLEET_LOG(INFO) << PortName(serial, port) << ": slot " << regs->power_slot->name
                      << " turned off";
    }
    power_note = absl::StrCat("; slot ", regs->power_slot->name, " powered off");
  }
  CommandOutcome out{absl::OkStatus(), BaseLink(serial, port)};
  out.link.set_status(v1::LINK_STATUS_QUIESCED);
  out.link.set_detail(absl::StrCat("quiesced: removed ", functions->size(),
                                   " PCIe functions below downstream port ", ref->bdf, power_note,
                                   "; ", kNoPowerNote));
  return out;
}

CommandOutcome PcieSysfsBackend::Retrain(const std::string& serial, uint32_t port,
                                         const v1::PeerIdentity& expected, absl::Time deadline) {
  absl::StatusOr<PortRef> ref = FindPort(serial, port);
  if (!ref.ok()) {
    CommandOutcome out{ref.status(), BaseLink(serial, port)};
    out.link.set_detail(std::string(ref.status().message()));
    return out;
  }
  const std::string name = PortName(serial, port);
  // `touched`: the link was retrained, so it is no longer what it was before the call and
  // anything short of success is DOWN (or TRAINING while still training).
  bool touched = false;
  // Set once this call turned a slot on: a failure after that removes what pciehp enumerated
  // and turns the slot off again, so no device stays on this host that was not judged.
  std::optional<PowerSlot> turned_on;
  auto fail = [&](absl::Status status) {
    if (turned_on.has_value()) {
      absl::StatusOr<std::vector<Function>> left = FunctionsBelowPort(*ref);
      const absl::Status removed =
          left.ok() ? RemoveFunctions(*ref, *left, std::nullopt) : left.status();
      const absl::Status off = SetSlotPower(*ref, *turned_on, false);
      status = absl::Status(
          status.code(),
          absl::StrCat(status.message(), "; slot ", turned_on->name,
                       removed.ok() && off.ok() ? " turned off again" : " not turned off again: ",
                       removed.ok() ? off.message() : removed.message()));
    }
    CommandOutcome out = Observe(*ref);
    out.status = status;
    // Past the deadline the state reached so far is the answer (it may be TRAINING);
    // otherwise a retrained port that is not confirmed is DOWN.
    if (touched && status.code() != absl::StatusCode::kDeadlineExceeded &&
        out.link.status() != v1::LINK_STATUS_DOWN) {
      out.link.set_status(v1::LINK_STATUS_DOWN);
      out.link.clear_link_speed_mts();
      out.link.clear_link_width();
    }
    out.link.set_detail(std::string(status.message()));
    return out;
  };

  if (clock_->Now() >= deadline) {
    return fail(absl::DeadlineExceededError(
        absl::StrCat("deadline passed before retraining ", name, "; the link was not touched")));
  }
  absl::StatusOr<PortRegisters> regs = OpenPort(*ref);
  if (!regs.ok()) return fail(regs.status());
  absl::StatusOr<std::vector<Function>> present = FunctionsBelowPort(*ref);
  if (!present.ok()) return fail(present.status());
  // Checked before a slot is turned on too: pciehp's power-on enables the link again.
  absl::StatusOr<uint16_t> link_control = ReadRegister16(*regs, pcie::kLinkControl);
  if (!link_control.ok()) return fail(link_control.status());
  if (*link_control & pcie::kLinkControlLinkDisable) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat(name, ": Link Disable is set in Link Control of downstream port ", ref->bdf,
                     "; someone took the link down on purpose, not retraining it")));
  }
  // A slot that is off (a quiesce turned it off, or it was never on): turning it on has
  // pciehp power it, wait for the link and enumerate what is there.
  std::optional<std::string> powered_on_slot;
  if (regs->power_slot.has_value() && present->empty()) {
    absl::StatusOr<bool> powered = SlotPowered(*ref, *regs->power_slot);
    if (!powered.ok()) return fail(powered.status());
    if (!*powered) {
      // The port's memory stays until something is found: a slot that stays off is still
      // quiesced, so a device pciehp enumerates there later is judged as the new circuit's.
      touched = true;
      if (absl::Status on = SetSlotPower(*ref, *regs->power_slot, true); !on.ok()) {
        return fail(on);
      }
      turned_on = regs->power_slot;
      powered_on_slot = regs->power_slot->name;
    }
  }
  // A hot-plug slot, quiesced, and functions are below it again: the kernel's hot-plug driver
  // (pciehp) saw the link come up on the new circuit and enumerated what is on it (seen on a
  // real kernel: tests/qemu). Retraining would pull the link from under the drivers it bound.
  // What is there is judged as a rescan's find would be; so is what a slot turned on brought.
  const bool enumerated_by_kernel =
      powered_on_slot.has_value() || (!present->empty() && regs->hot_plug && Memory(*ref).quiesced);
  if (!present->empty() && !enumerated_by_kernel) {
    std::vector<std::string> bdfs;
    for (const Function& fn : *present) bdfs.push_back(fn.bdf);
    return fail(absl::FailedPreconditionError(absl::StrCat(
        name, ": PCIe functions are still below downstream port ", ref->bdf, " (",
        absl::StrJoin(bdfs, ", "),
        "); quiesce the port first: retraining would pull the link from under their drivers")));
  }

  const absl::Time limit = std::min(deadline, clock_->Now() + options_.link_train_timeout);
  // Polls Link Status until `done`, or fails at `limit`: DEADLINE_EXCEEDED when the call's
  // deadline was the limit, UNAVAILABLE when the link had its full training time.
  auto wait_for = [&](auto done,
                      absl::string_view waiting_for) -> absl::StatusOr<pcie::LinkStatusFields> {
    for (;;) {
      ASSIGN_OR_RETURN(uint16_t raw, ReadRegister16(*regs, pcie::kLinkStatus));
      const pcie::LinkStatusFields f = pcie::DecodeLinkStatus(raw);
      if (done(f)) return f;
      const absl::Time now = clock_->Now();
      if (now >= limit) {
        const std::string state =
            f.training ? "Link Training still set" : "Data Link Layer Link Active still clear";
        if (now >= deadline) {
          return absl::DeadlineExceededError(absl::StrCat("deadline passed waiting for ",
                                                          waiting_for, " on ", name, " (", ref->bdf,
                                                          "): ", state));
        }
        return absl::UnavailableError(
            absl::StrCat("link did not train on ", name, " (", ref->bdf, ") within ",
                         absl::FormatDuration(options_.link_train_timeout), ": ", state));
      }
      absl::SleepFor(options_.poll_interval);
    }
  };

  // A port that cannot report DL Link Active shows only that training ended; whether the link
  // came up is then judged by what enumerates (as Linux judges such ports).
  const bool reports_dll = regs->dll_active_reporting;
  auto trained_link = [reports_dll](const pcie::LinkStatusFields& f) {
    return !f.training && (f.dll_active || !reports_dll);
  };
  absl::StatusOr<pcie::LinkStatusFields> trained;
  absl::StatusOr<std::vector<Function>> found;
  if (enumerated_by_kernel) {
    trained = wait_for(trained_link, "the link to train");
    if (!trained.ok()) return fail(trained.status());
    touched = true;
    // Listed again: the hot-plug driver may have been adding functions while the link came up.
    found = FunctionsBelowPort(*ref);
    if (!found.ok()) return fail(found.status());
  } else {
    // As Linux does before retraining: let a training already under way finish first, so the
    // Retrain Link request is not folded into it.
    absl::StatusOr<pcie::LinkStatusFields> idle =
        wait_for([](const pcie::LinkStatusFields& f) { return !f.training; },
                 "training under way to finish");
    if (!idle.ok()) return fail(idle.status());

    // Read-modify-write of the 16-bit Link Control only: a 4-byte write would also write Link
    // Status, whose bandwidth-notification bits are write-1-to-clear.
    const uint16_t retrain = *link_control | pcie::kLinkControlRetrainLink;
    const char bytes[2] = {static_cast<char>(retrain & 0xff), static_cast<char>(retrain >> 8)};
    touched = true;
    SetMemory(*ref, PortMemory{});
    if (absl::Status written = files_->WriteAt(
            regs->config_path, regs->pcie_cap + pcie::kLinkControl, absl::string_view(bytes, 2));
        !written.ok()) {
      return fail(WithContext(written, absl::StrCat("setting Retrain Link on ", ref->bdf)));
    }
    // Caveat: a port that was up before may still show its old, trained state on the first
    // poll if it has not yet entered Recovery. Linux's pcie_retrain_link has the same window;
    // a rescan that then finds nothing is UNAVAILABLE and the caller retries.
    trained = wait_for(trained_link, "the link to train");
    if (!trained.ok()) return fail(trained.status());
    if (!reports_dll) {
      // Nothing shows the link up: give a device the time the PCIe spec gives it after
      // training before configuration requests (Linux waits longer still, as it does not
      // watch Link Training).
      const absl::Duration settle =
          std::min(options_.settle_without_dll_reporting, deadline - clock_->Now());
      if (settle > absl::ZeroDuration()) absl::SleepFor(settle);
    }

    if (clock_->Now() >= deadline) {
      return fail(absl::DeadlineExceededError(
          absl::StrCat("deadline passed after the link on ", name, " trained at ",
                       LinkSummary(*trained), ", before the rescan")));
    }
    if (absl::Status rescanned = Rescan(*ref); !rescanned.ok()) return fail(rescanned);
    found = FunctionsBelowPort(*ref);
    if (!found.ok()) return fail(found.status());
  }
  if (found->empty()) {
    return fail(absl::UnavailableError(absl::StrCat(
        "no device appeared after ",
        powered_on_slot.has_value() ? "turning on slot " + *powered_on_slot : "rescan", " below ",
        ref->bdf, " (", name, "; link trained at ", LinkSummary(*trained), ")",
        reports_dll ? ""
                    : absl::StrCat("; ", kNoDllReporting,
                                   ", so an empty bus is all that "
                                   "shows a link that did not come up"))));
  }

  // What enumerated is this call's to judge now: the port is no longer quiesced.
  if (enumerated_by_kernel) SetMemory(*ref, PortMemory{});

  if (ExpectsDevice(expected)) {
    if (absl::Status verified = VerifyDevice(*ref, *regs, *found, expected); !verified.ok()) {
      turned_on.reset();  // VerifyDevice removed the device and turned the slot off.
      return fail(verified);
    }
  }

  CommandOutcome out{absl::OkStatus(), BaseLink(serial, port)};
  out.link.set_status(v1::LINK_STATUS_UP);
  out.link.set_link_speed_mts(trained->speed_mts);
  out.link.set_link_width(trained->width);
  std::vector<std::string> bdfs;
  for (const Function& fn : *found) bdfs.push_back(fn.bdf);
  out.link.set_detail(absl::StrCat(
      "link up at ", LinkSummary(*trained), " on ", ref->bdf,
      powered_on_slot.has_value() ? absl::StrCat(" (slot ", *powered_on_slot, " turned on)") : "",
      "; found ", absl::StrJoin(bdfs, ", "), "; ", kNoPowerNote));
  return out;
}

CommandOutcome PcieSysfsBackend::ReadPort(const std::string& serial, uint32_t port) {
  absl::StatusOr<PortRef> ref = FindPort(serial, port);
  if (!ref.ok()) {
    CommandOutcome out{ref.status(), BaseLink(serial, port)};
    out.link.set_detail(std::string(ref.status().message()));
    return out;
  }
  return Observe(*ref);
}

absl::Status PcieSysfsBackend::Blink(const std::string& serial, absl::Duration duration) {
  for (const OnicConfig& onic : options_.onics) {
    if (onic.serial != serial) continue;
    return absl::UnimplementedError(absl::StrCat(
        "O-NIC ", serial,
        ": the pcie-sysfs backend cannot blink the identify LED: the O-NIC exposes no LED "
        "control through sysfs (a PCIe slot's attention indicator, where the slot has one, "
        "is not the O-NIC's LED)"));
  }
  return absl::NotFoundError(absl::StrCat("no O-NIC with serial \"", serial, "\" on this host"));
}

}  // namespace fleet::onic_agent
