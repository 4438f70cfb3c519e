#include "tests/onic_agent/fake_pcie_sysfs.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "onic_agent/pcie_sysfs_backend.h"
#include "testing/fake_clock.h"

namespace fleet::onic_agent::testing {
namespace {

namespace fs = std::filesystem;

constexpr size_t kLinkControl = kFakePcieCap + 0x10;
constexpr size_t kLinkStatus = kFakePcieCap + 0x12;
constexpr uint16_t kRetrainLink = 1u << 5;
constexpr uint16_t kLinkTraining = 1u << 11;
constexpr uint16_t kDllActive = 1u << 13;
constexpr uint16_t kLinkWidthMask = 0x3f0;

void Put16(std::string& config, size_t offset, uint16_t value) {
  config[offset] = static_cast<char>(value & 0xff);
  config[offset + 1] = static_cast<char>(value >> 8);
}
void Put32(std::string& config, size_t offset, uint32_t value) {
  Put16(config, offset, static_cast<uint16_t>(value & 0xffff));
  Put16(config, offset + 2, static_cast<uint16_t>(value >> 16));
}

void WriteBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// DL Link Active only on a port that reports it (Link Capabilities bit 20).
uint16_t TrainedLinkStatus(const FakePortSpec& spec) {
  return static_cast<uint16_t>(spec.speed_code | spec.width << 4 |
                               (spec.dll_active_reporting ? kDllActive : 0));
}

// A type 1 (bridge) header with a PM capability at 0x40 pointing to the PCI Express
// capability at 0x60, and an AER extended capability at 0x100.
std::string PortConfig(const FakePortSpec& spec) {
  std::string c(4096, '\0');
  Put16(c, 0x00, spec.vendor);                // Vendor ID
  Put16(c, 0x02, spec.device);                // Device ID
  Put16(c, 0x06, 1u << 4);                    // Status: Capabilities List
  c[0x0e] = 0x01;                             // Header Type 1
  c[0x34] = 0x40;                             // Capabilities Pointer
  c[0x40] = 0x01;                             // PM capability …
  c[0x41] = static_cast<char>(kFakePcieCap);  // … next: PCI Express
  c[kFakePcieCap] = 0x10;
  c[kFakePcieCap + 1] = 0x00;
  Put16(c, kFakePcieCap + 0x02,
        static_cast<uint16_t>(0x2 | spec.port_type << 4 | (spec.hot_plug ? 1u << 8 : 0u)));
  if (spec.hot_plug) {
    // Slot Capabilities: Hot-Plug Capable, and Power Controller Present for a power slot.
    Put32(c, kFakePcieCap + 0x14, 1u << 6 | (spec.power_slot.empty() ? 0u : 1u << 1));
    Put16(c, kFakePcieCap + 0x18, 1u << 5);  // Slot Control: Hot-Plug Interrupt Enable.
  }
  Put32(c, kFakePcieCap + 0x0c,
        static_cast<uint32_t>(spec.speed_code | spec.width << 4) |
            (spec.dll_active_reporting ? 1u << 20 : 0u) |
            static_cast<uint32_t>(spec.port_number) << 24);
  Put16(c, kLinkControl, spec.link_control);
  Put16(c, kLinkStatus, spec.link_up ? TrainedLinkStatus(spec) : 0);
  Put32(c, 0x100, 0x00020001);  // AER, version 2, last.
  return c;
}

// An endpoint (or, with children, a switch upstream port) with AER at 0x100 and, when it has
// a serial number, the DSN capability at 0x140.
std::string FunctionConfig(const FakeFunction& fn, bool upstream_port = false) {
  const bool bridge = upstream_port || !fn.children.empty();
  std::string c(4096, '\0');
  Put16(c, 0x00, fn.vendor);
  Put16(c, 0x02, fn.device);
  Put16(c, 0x06, 1u << 4);
  c[0x0e] = bridge ? 0x01 : 0x00;
  c[0x34] = 0x40;
  c[0x40] = 0x10;
  Put16(c, 0x42, static_cast<uint16_t>(0x2 | (bridge ? 5 : 0) << 4));
  if (fn.dsn.has_value()) {
    Put32(c, 0x100, 0x14020001);  // AER, version 2, next 0x140.
    Put32(c, 0x140, 0x00010003);  // DSN, version 1, last.
    Put32(c, 0x144, static_cast<uint32_t>(*fn.dsn & 0xffffffffu));
    Put32(c, 0x148, static_cast<uint32_t>(*fn.dsn >> 32));
  } else {
    Put32(c, 0x100, 0x00020001);
  }
  return c;
}

std::string Hex4(uint16_t v) { return absl::StrCat("0x", absl::Hex(v, absl::kZeroPad4), "\n"); }

std::string Basename(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

bool FindBelow(const fs::path& dir, const std::string& bdf, fs::path* found) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_symlink()) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory() && it->path().filename() == bdf) {
      *found = it->path();
      return true;
    }
  }
  return false;
}

}  // namespace

FakePcieSysfs::FakePcieSysfs(std::string root, fleet::testing::FakeClock* clock,
                             absl::Duration poll_tick)
    : root_(std::move(root)), clock_(clock), poll_tick_(poll_tick) {
  fs::create_directories(root_ + "/bus/pci/devices");
  fs::create_directories(root_ + "/bus/pci/drivers");
}

void FakePcieSysfs::AddPort(const FakePortSpec& spec) {
  absl::MutexLock lock(&mu_);
  const fs::path dir = PortPath(spec.bdf);
  fs::create_directories(dir);
  WriteBytes(dir / "config", PortConfig(spec));
  WriteBytes(dir / "rescan", "");
  WriteBytes(dir / "remove", "");
  WriteBytes(dir / "vendor", Hex4(spec.vendor));
  WriteBytes(dir / "device", Hex4(spec.device));
  fs::create_directories(dir / "power");  // Not a function: must be skipped.
  if (!spec.secondary_bus.empty()) {
    fs::create_directories(dir / "pci_bus" / spec.secondary_bus);
    WriteBytes(dir / "pci_bus" / spec.secondary_bus / "rescan", "");
  }
  if (const std::string power = SlotPowerPath(spec); !power.empty()) {
    const fs::path slot = fs::path(power).parent_path();
    fs::create_directories(slot);
    WriteBytes(slot / "address", spec.secondary_bus + ":00\n");
    WriteBytes(power, spec.slot_powered ? "1\n" : "0\n");
  }
  ports_[spec.bdf].spec = spec;
}

void FakePcieSysfs::AddUpstreamPort(const FakeFunction& fn,
                                    const std::vector<std::string>& port_bdfs) {
  absl::MutexLock lock(&mu_);
  const fs::path dir = fs::path(root_) / "bus/pci/devices" / fn.bdf;
  fs::create_directories(dir);
  WriteBytes(dir / "config", FunctionConfig(fn, /*upstream_port=*/true));
  WriteBytes(dir / "vendor", Hex4(fn.vendor));
  WriteBytes(dir / "device", Hex4(fn.device));
  for (const std::string& port : port_bdfs) {
    fs::create_directory_symlink(PortPath(port), dir / port);
  }
  for (const FakeFunction& child : fn.children) WriteFunction(dir.string(), child);
}

void FakePcieSysfs::AddFunction(const std::string& port_bdf, const FakeFunction& fn) {
  absl::MutexLock lock(&mu_);
  WriteFunction(PortPath(port_bdf), fn);
}

void FakePcieSysfs::WriteFunction(const std::string& parent_dir, const FakeFunction& fn) {
  const fs::path dir = fs::path(parent_dir) / fn.bdf;
  fs::create_directories(dir);
  WriteBytes(dir / "config", FunctionConfig(fn));
  WriteBytes(dir / "vendor", Hex4(fn.vendor));
  WriteBytes(dir / "device", Hex4(fn.device));
  WriteBytes(dir / "remove", "");
  if (!fn.driver.empty()) {
    const fs::path driver = fs::path(root_) / "bus/pci/drivers" / fn.driver;
    fs::create_directories(driver);
    if (!fs::exists(driver / "unbind")) WriteBytes(driver / "unbind", "");
    fs::create_directory_symlink(driver, dir / "driver");
  }
  for (const FakeFunction& child : fn.children) WriteFunction(dir.string(), child);
}

void FakePcieSysfs::SetDeviceAfterRescan(const std::string& port_bdf,
                                         std::optional<FakeFunction> fn) {
  std::vector<FakeFunction> fns;
  if (fn.has_value()) fns.push_back(*std::move(fn));
  SetFunctionsAfterRescan(port_bdf, std::move(fns));
}

void FakePcieSysfs::SetFunctionsAfterRescan(const std::string& port_bdf,
                                            std::vector<FakeFunction> fns) {
  absl::MutexLock lock(&mu_);
  ports_[port_bdf].after_rescan = std::move(fns);
}

void FakePcieSysfs::SetRemoveIgnored(bool ignored) {
  absl::MutexLock lock(&mu_);
  remove_ignored_ = ignored;
}

void FakePcieSysfs::PokeConfig(const std::string& port_bdf, size_t offset,
                               const std::string& bytes) {
  absl::Status s = disk_.WriteAt(PortPath(port_bdf) + "/config", offset, bytes);
  if (!s.ok()) abort();  // The tree is the test's own; failing here is a broken test.
}

void FakePcieSysfs::ReplaceConfig(const std::string& port_bdf, const std::string& bytes) {
  WriteBytes(PortPath(port_bdf) + "/config", bytes);
}

std::string FakePcieSysfs::PortPath(const std::string& port_bdf) const {
  return absl::StrCat(root_, "/bus/pci/devices/", port_bdf);
}

bool FakePcieSysfs::HasFunction(const std::string& port_bdf, const std::string& bdf) const {
  fs::path found;
  return FindBelow(PortPath(port_bdf), bdf, &found);
}

bool FakePcieSysfs::HasDriver(const std::string& port_bdf, const std::string& bdf) const {
  fs::path found;
  return FindBelow(PortPath(port_bdf), bdf, &found) && fs::is_symlink(found / "driver");
}

bool FakePcieSysfs::SlotPowered(const std::string& port_bdf) const {
  absl::MutexLock lock(&mu_);
  auto it = ports_.find(port_bdf);
  if (it == ports_.end()) return false;
  absl::StatusOr<std::string> power = disk_.ReadFile(SlotPowerPath(it->second.spec));
  return power.ok() && absl::StartsWith(*power, "1");
}

std::string FakePcieSysfs::SlotPowerPath(const FakePortSpec& spec) const {
  if (!spec.hot_plug || spec.power_slot.empty() || spec.secondary_bus.empty()) return "";
  return absl::StrCat(root_, "/bus/pci/slots/", spec.power_slot, "/power");
}

absl::Status FakePcieSysfs::WriteSlotPower(Port& port, absl::string_view data) {
  const std::string path = SlotPowerPath(port.spec);
  const bool on = data == "1";
  absl::StatusOr<std::string> now = disk_.ReadFile(path);
  if (!now.ok()) return now.status();
  const bool was_on = absl::StartsWith(*now, "1");
  // pciehp: ENODEV for a slot that already is what was asked, and for an empty slot.
  const absl::Status no_device =
      absl::NotFoundError(absl::StrCat("write ", path, ": No such device"));
  if (on == was_on) return no_device;
  const std::string bdf = port.spec.bdf;
  if (!on) {
    for (const auto& entry : fs::directory_iterator(PortPath(bdf))) {
      if (onic_agent::IsPciBdf(entry.path().filename().string())) fs::remove_all(entry.path());
    }
    WriteConfig16(bdf, kLinkStatus, 0);
    WriteBytes(path, "0\n");
    events_.push_back("slot off " + port.spec.power_slot);
    return absl::OkStatus();
  }
  if (port.after_rescan.empty()) {
    events_.push_back("slot on refused " + port.spec.power_slot);
    return no_device;
  }
  if (port.spec.outcome == FakeTrainingOutcome::kUp) {
    WriteConfig16(bdf, kLinkStatus, TrainedLinkStatus(port.spec));
  } else {
    // pciehp saw the link up long enough to enumerate; then it went back into training.
    WriteConfig16(bdf, kLinkStatus, kLinkTraining);
    port.training = true;
    port.polls_left = port.spec.polls_to_train;
  }
  for (const FakeFunction& fn : port.after_rescan) WriteFunction(PortPath(bdf), fn);
  WriteBytes(path, "1\n");
  events_.push_back("slot on " + port.spec.power_slot);
  return absl::OkStatus();
}

uint16_t FakePcieSysfs::ReadConfig16(const std::string& bdf, size_t offset) const {
  absl::StatusOr<std::string> bytes = disk_.ReadAt(PortPath(bdf) + "/config", offset, 2);
  if (!bytes.ok() || bytes->size() != 2) return 0xffff;
  return static_cast<uint16_t>(static_cast<uint8_t>((*bytes)[0]) | static_cast<uint8_t>((*bytes)[1])
                                                                       << 8);
}

void FakePcieSysfs::WriteConfig16(const std::string& bdf, size_t offset, uint16_t value) {
  const char bytes[2] = {static_cast<char>(value & 0xff), static_cast<char>(value >> 8)};
  PokeConfig(bdf, offset, std::string(bytes, 2));
}

uint16_t FakePcieSysfs::LinkControl(const std::string& port_bdf) const {
  return ReadConfig16(port_bdf, kLinkControl);
}

std::vector<std::string> FakePcieSysfs::events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

std::vector<ConfigWrite> FakePcieSysfs::config_writes() const {
  absl::MutexLock lock(&mu_);
  return config_writes_;
}

int FakePcieSysfs::link_status_reads(const std::string& port_bdf) const {
  absl::MutexLock lock(&mu_);
  auto it = ports_.find(port_bdf);
  return it == ports_.end() ? 0 : it->second.link_status_reads;
}

FakePcieSysfs::Port* FakePcieSysfs::PortByConfigPath(const std::string& path) {
  for (auto& [bdf, port] : ports_) {
    if (path == PortPath(bdf) + "/config") return &port;
  }
  return nullptr;
}

// --- SysfsFiles ---

absl::StatusOr<std::vector<std::string>> FakePcieSysfs::ListDir(const std::string& path) {
  return disk_.ListDir(path);
}

bool FakePcieSysfs::Exists(const std::string& path) { return disk_.Exists(path); }

void FakePcieSysfs::SetRemovedWhenRead(const std::string& bdf) {
  absl::MutexLock lock(&mu_);
  removed_when_read_.insert(bdf);
}

absl::StatusOr<std::string> FakePcieSysfs::ReadFile(const std::string& path) {
  {
    absl::MutexLock lock(&mu_);
    const fs::path function = fs::path(path).parent_path();
    if (fs::path(path).filename() == "vendor" &&
        removed_when_read_.erase(function.filename().string()) > 0) {
      std::error_code ignored;
      fs::remove_all(function, ignored);
      events_.push_back("removed by another " + function.filename().string());
      return absl::NotFoundError(absl::StrCat(path, ": No such file or directory"));
    }
  }
  return disk_.ReadFile(path);
}

absl::StatusOr<std::string> FakePcieSysfs::ReadAt(const std::string& path, uint64_t offset,
                                                  size_t size) {
  absl::MutexLock lock(&mu_);
  Port* port = PortByConfigPath(path);
  if (port != nullptr && offset <= kLinkStatus && offset + size >= kLinkStatus + 2) {
    ++port->link_status_reads;
    clock_->Advance(poll_tick_);
    if (port->training) {
      if (port->polls_left > 0) {
        --port->polls_left;
      } else if (port->spec.outcome == FakeTrainingOutcome::kUp) {
        port->training = false;
        WriteConfig16(port->spec.bdf, kLinkStatus, TrainedLinkStatus(port->spec));
      } else if (port->spec.outcome == FakeTrainingOutcome::kFallsBackToDetect) {
        port->training = false;
        WriteConfig16(port->spec.bdf, kLinkStatus, 0);
      }
    }
  }
  return disk_.ReadAt(path, offset, size);
}

absl::Status FakePcieSysfs::WriteAt(const std::string& path, uint64_t offset,
                                    absl::string_view data) {
  absl::MutexLock lock(&mu_);
  Port* port = PortByConfigPath(path);
  if (port != nullptr) config_writes_.push_back({port->spec.bdf, offset, std::string(data)});
  if (absl::Status s = disk_.WriteAt(path, offset, data); !s.ok()) return s;
  if (port != nullptr && offset <= kLinkControl && offset + data.size() >= kLinkControl + 2) {
    const uint16_t control = ReadConfig16(port->spec.bdf, kLinkControl);
    if (control & kRetrainLink) {
      // Retrain Link always reads 0; the port enters Recovery: training, link not active.
      WriteConfig16(port->spec.bdf, kLinkControl, control & ~kRetrainLink);
      WriteConfig16(port->spec.bdf, kLinkStatus, kLinkTraining);
      port->training = true;
      port->polls_left = port->spec.polls_to_train;
    }
  }
  return absl::OkStatus();
}

absl::Status FakePcieSysfs::WriteFile(const std::string& path, absl::string_view data) {
  absl::MutexLock lock(&mu_);
  if (absl::EndsWith(path, "/driver/unbind")) {
    const std::string dir = path.substr(0, path.size() - std::string("/driver/unbind").size());
    if (data != Basename(dir)) {
      events_.push_back(absl::StrCat("unbind of ", Basename(dir), " with wrong BDF ", data));
      return absl::NotFoundError("no such device bound (ENODEV)");
    }
    events_.push_back(absl::StrCat("unbind ", data));
    if (absl::Status s = disk_.WriteFile(path, data); !s.ok()) return s;
    fs::remove(dir + "/driver");
    return absl::OkStatus();
  }
  if (absl::EndsWith(path, "/remove")) {
    const std::string dir = path.substr(0, path.size() - std::string("/remove").size());
    if (absl::Status s = disk_.WriteFile(path, data); !s.ok()) return s;
    events_.push_back(absl::StrCat("remove ", Basename(dir)));
    if (!remove_ignored_) fs::remove_all(dir);
    return absl::OkStatus();
  }
  if (absl::EndsWith(path, "/rescan")) {
    if (absl::Status s = disk_.WriteFile(path, data); !s.ok()) return s;
    for (auto& [bdf, port] : ports_) {
      const bool via_bus =
          !port.spec.secondary_bus.empty() &&
          path == absl::StrCat(PortPath(bdf), "/pci_bus/", port.spec.secondary_bus, "/rescan");
      if (!via_bus && path != PortPath(bdf) + "/rescan") continue;
      events_.push_back(absl::StrCat("rescan ", bdf, via_bus ? " bus" : " device"));
      // A trained link has a width (also on a port that does not report DL Link Active).
      const uint16_t status = ReadConfig16(bdf, kLinkStatus);
      const bool link_up = (status & kLinkWidthMask) != 0 && (status & kLinkTraining) == 0;
      if (!link_up) continue;  // Config reads below a down link find nothing.
      for (const FakeFunction& fn : port.after_rescan) {
        fs::path existing;
        if (!FindBelow(PortPath(bdf), fn.bdf, &existing)) WriteFunction(PortPath(bdf), fn);
      }
    }
    return absl::OkStatus();
  }
  for (auto& [bdf, port] : ports_) {
    if (path == SlotPowerPath(port.spec)) return WriteSlotPower(port, data);
  }
  return disk_.WriteFile(path, data);
}

}  // namespace fleet::onic_agent::testing
