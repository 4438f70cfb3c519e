// The pcie-sysfs backend against a fake sysfs tree whose ports react like hardware
// (tests/onic_agent/fake_pcie_sysfs.h). Time is a fleet::testing::FakeClock that moves on each Link
// Status read, so timeouts are exact and take no wall-clock time.
#include "onic_agent/pcie_sysfs_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "testing/fake_clock.h"
#include "tests/onic_agent/fake_pcie_sysfs.h"

namespace fleet::onic_agent {
namespace {

using ::fleet::onic_agent::testing::ConfigWrite;
using ::fleet::onic_agent::testing::FakeFunction;
using ::fleet::onic_agent::testing::FakePcieSysfs;
using ::fleet::onic_agent::testing::FakePortSpec;
using ::fleet::onic_agent::testing::kFakePcieCap;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

constexpr char kOnicA[] = "ONIC-A";
constexpr char kOnicB[] = "ONIC-B";
constexpr char kPortA1[] = "0000:18:00.0";  // Secondary bus 0000:19.
constexpr char kPortA2[] = "0000:18:01.0";  // Secondary bus 0000:1b.
constexpr char kPortB1[] = "0000:5d:00.0";  // Secondary bus 0000:5e.
constexpr char kPortB2[] = "0000:5d:02.0";  // No pci_bus/ directory.

FakePortSpec Port(const std::string& bdf, const std::string& secondary_bus) {
  FakePortSpec spec;
  spec.bdf = bdf;
  spec.secondary_bus = secondary_bus;
  return spec;
}

FakeFunction Function(const std::string& bdf, uint16_t vendor, uint16_t device,
                      std::string driver = "") {
  FakeFunction fn;
  fn.bdf = bdf;
  fn.vendor = vendor;
  fn.device = device;
  fn.driver = std::move(driver);
  return fn;
}

// An H100-like GPU with its serial number.
FakeFunction Gpu(const std::string& bdf) {
  FakeFunction gpu = Function(bdf, 0x10de, 0x2330);
  gpu.dsn = 0x48b02d0300a1b2c3ULL;
  return gpu;
}

v1::PeerIdentity ExpectIds(uint32_t vendor, uint32_t device) {
  v1::PeerIdentity expected;
  expected.set_onic_serial("GPU-ONIC-7");  // Not observable over PCIe; must be ignored.
  expected.set_port(1);
  expected.set_pcie_vendor_id(vendor);
  expected.set_pcie_device_id(device);
  return expected;
}

class PcieSysfsBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = std::filesystem::temp_directory_path() / "fleet-pcie-sysfs-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    root_ = dir;
    fake_ = std::make_unique<FakePcieSysfs>(root_, &clock_);
    fake_->AddPort(Port(kPortA1, "0000:19"));
    fake_->AddPort(Port(kPortA2, "0000:1b"));
    fake_->AddPort(Port(kPortB1, "0000:5e"));
    fake_->AddPort(Port(kPortB2, ""));
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  PcieSysfsBackend::Options DefaultOptions() const {
    PcieSysfsBackend::Options options;
    options.sysfs_root = root_;
    options.onics = {{kOnicA, {kPortA1, kPortA2}, ""}, {kOnicB, {kPortB1, kPortB2}, ""}};
    options.poll_interval =
        absl::ZeroDuration();  // Time moves with the fleet::testing::FakeClock only.
    options.link_train_timeout = absl::Seconds(1);
    options.settle_without_dll_reporting = absl::ZeroDuration();
    return options;
  }
  std::unique_ptr<PcieSysfsBackend> MakeBackend(PcieSysfsBackend::Options options) {
    absl::StatusOr<std::unique_ptr<PcieSysfsBackend>> backend =
        PcieSysfsBackend::Create(std::move(options), fake_.get(), &clock_);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? std::move(*backend) : nullptr;
  }
  std::unique_ptr<PcieSysfsBackend> MakeBackend() { return MakeBackend(DefaultOptions()); }
  // DefaultOptions with a third O-NIC, ONIC-C, whose port 1 is a port the test adds at
  // 0000:3a:00.0 (secondary bus 0000:3b).
  PcieSysfsBackend::Options OptionsWithOnicC() const {
    PcieSysfsBackend::Options options = DefaultOptions();
    options.onics.push_back({"ONIC-C", {"0000:3a:00.0", "0000:3a:01.0"}, ""});
    return options;
  }
  // ONIC-C's port 1 as a hot-plug slot with a power controller, slot `name`, link up.
  static FakePortSpec PowerSlotPort(const std::string& name) {
    FakePortSpec spec = Port("0000:3a:00.0", "0000:3b");
    spec.link_up = true;
    spec.hot_plug = true;
    spec.power_slot = name;
    return spec;
  }
  absl::Time Generous() const { return clock_.Now() + absl::Hours(1); }

  std::string root_;
  fleet::testing::FakeClock clock_;
  std::unique_ptr<FakePcieSysfs> fake_;
};

// --- Options ---

TEST_F(PcieSysfsBackendTest, OptionsAreValidatedNamingTheField) {
  PcieSysfsBackend::Options options = DefaultOptions();
  options.onics[1].port_bdfs[1] = "0000:5D:02.0";
  absl::Status s = PcieSysfsBackend::ValidateOptions(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("onics[1] (ONIC-B) port 2 BDF \"0000:5D:02.0\""));

  options = DefaultOptions();
  options.onics[1].serial = kOnicA;
  s = PcieSysfsBackend::ValidateOptions(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("serial \"ONIC-A\" is configured twice"));

  options = DefaultOptions();
  options.onics[1].port_bdfs[0] = kPortA2;
  s = PcieSysfsBackend::ValidateOptions(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(s.message()),
      HasSubstr("0000:18:01.0 is given for O-NIC ONIC-B port 1 and for O-NIC ONIC-A port 2"));

  options = DefaultOptions();
  options.link_train_timeout = absl::ZeroDuration();
  EXPECT_EQ(PcieSysfsBackend::ValidateOptions(options).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PcieSysfsBackend::ValidateOptions(DefaultOptions()).ok());
}

TEST(IsPciBdfTest, AcceptsSysfsDeviceNamesOnly) {
  EXPECT_TRUE(IsPciBdf("0000:18:00.0"));
  EXPECT_TRUE(IsPciBdf("10000:01:1f.7"));  // VMD domain.
  EXPECT_FALSE(IsPciBdf("0000:18:00.8"));
  EXPECT_FALSE(IsPciBdf("0000:19"));  // pci_bus/ entry.
  EXPECT_FALSE(IsPciBdf("0000:18:00"));
  EXPECT_FALSE(IsPciBdf("consumer:pci:0000:19:00.0"));
  EXPECT_FALSE(IsPciBdf("0000:1A:00.0"));
}

// --- Quiesce ---

TEST_F(PcieSysfsBackendTest, QuiesceUnbindsAndRemovesFunctionsDeepestFirst) {
  // A switch (bridge, bound to pcieport) with an NVMe drive (bound) and an unbound function
  // behind it, and a second function next to the switch.
  FakeFunction bridge = Function("0000:19:00.0", 0x1000, 0xc010, "pcieport");
  bridge.children = {Function("0000:1a:00.0", 0x144d, 0xa808, "nvme"),
                     Function("0000:1a:00.1", 0x144d, 0xa809)};
  fake_->AddFunction(kPortA1, bridge);
  fake_->AddFunction(kPortA1, Function("0000:19:00.1", 0x1000, 0xc011));
  auto backend = MakeBackend();

  CommandOutcome out = backend->Quiesce(kOnicA, 1, Generous());
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_QUIESCED);
  EXPECT_EQ(out.link.onic_serial(), kOnicA);
  EXPECT_EQ(out.link.port(), 1u);
  EXPECT_THAT(out.link.detail(), HasSubstr("removed 4 PCIe functions below downstream port "
                                           "0000:18:00.0"));
  EXPECT_THAT(fake_->events(),
              ElementsAre("unbind 0000:1a:00.0", "remove 0000:1a:00.0", "remove 0000:1a:00.1",
                          "unbind 0000:19:00.0", "remove 0000:19:00.0", "remove 0000:19:00.1"));
  EXPECT_FALSE(fake_->HasFunction(kPortA1, "0000:19:00.0"));
  EXPECT_FALSE(fake_->HasFunction(kPortA1, "0000:19:00.1"));
  // The port itself and its other directories stay; the link is not touched.
  EXPECT_TRUE(std::filesystem::exists(fake_->PortPath(kPortA1) + "/config"));
  EXPECT_THAT(fake_->config_writes(), IsEmpty());
}

TEST_F(PcieSysfsBackendTest, QuiesceIsIdempotent) {
  fake_->AddFunction(kPortA1, Function("0000:19:00.0", 0x10de, 0x2330, "nvidia"));
  auto backend = MakeBackend();
  ASSERT_TRUE(backend->Quiesce(kOnicA, 1, Generous()).status.ok());
  const size_t events = fake_->events().size();
  EXPECT_EQ(events, 2u);

  CommandOutcome again = backend->Quiesce(kOnicA, 1, Generous());
  ASSERT_TRUE(again.status.ok()) << again.status;
  EXPECT_EQ(again.link.status(), v1::LINK_STATUS_QUIESCED);
  EXPECT_THAT(fake_->events(), SizeIs(events));  // Nothing more written.

  // A port with nothing below at all quiesces at once.
  CommandOutcome empty = backend->Quiesce(kOnicA, 2, Generous());
  ASSERT_TRUE(empty.status.ok()) << empty.status;
  EXPECT_EQ(empty.link.status(), v1::LINK_STATUS_QUIESCED);
  EXPECT_THAT(fake_->events(), SizeIs(events));
}

TEST_F(PcieSysfsBackendTest, QuiesceReportsFunctionsThatStayBehind) {
  fake_->AddFunction(kPortA1, Function("0000:19:00.0", 0x10de, 0x2330));
  fake_->SetRemoveIgnored(true);
  auto backend = MakeBackend();
  CommandOutcome out = backend->Quiesce(kOnicA, 1, Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("PCIe functions still below 0000:18:00.0 after remove: 0000:19:00.0"));
  EXPECT_NE(out.link.status(), v1::LINK_STATUS_QUIESCED);
  EXPECT_NE(backend->ReadPort(kOnicA, 1).link.status(), v1::LINK_STATUS_QUIESCED);
}

TEST_F(PcieSysfsBackendTest, QuiescePastItsDeadlineStopsAndSaysWhatIsLeft) {
  fake_->AddFunction(kPortA1, Function("0000:19:00.0", 0x10de, 0x2330));
  auto backend = MakeBackend();
  CommandOutcome out = backend->Quiesce(kOnicA, 1, clock_.Now());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("1 of 1 functions still present"));
  EXPECT_TRUE(fake_->HasFunction(kPortA1, "0000:19:00.0"));
  EXPECT_THAT(fake_->events(), IsEmpty());
}

// --- ReadPort ---

TEST_F(PcieSysfsBackendTest, ReadPortReportsLinkStateFromLinkStatus) {
  FakePortSpec up = Port("0000:3a:00.0", "0000:3b");
  up.link_up = true;
  up.speed_code = 3;
  up.width = 8;
  fake_->AddPort(up);
  PcieSysfsBackend::Options options = DefaultOptions();
  options.onics.push_back({"ONIC-C", {"0000:3a:00.0", "0000:3a:01.0"}, ""});
  auto backend = MakeBackend(options);

  CommandOutcome out = backend->ReadPort("ONIC-C", 1);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_UP);
  EXPECT_EQ(out.link.link_speed_mts(), 8000u);
  EXPECT_EQ(out.link.link_width(), 8u);
  EXPECT_DOUBLE_EQ(out.link.rx_power_dbm(), -99.99);
  EXPECT_DOUBLE_EQ(out.link.tx_power_dbm(), -99.99);
  EXPECT_THAT(out.link.detail(), HasSubstr("optical power is not readable through sysfs"));

  CommandOutcome down = backend->ReadPort(kOnicA, 1);
  ASSERT_TRUE(down.status.ok()) << down.status;
  EXPECT_EQ(down.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_EQ(down.link.link_speed_mts(), 0u);

  // Port 2 of ONIC-C does not exist on the bus: a configuration error, named.
  CommandOutcome missing = backend->ReadPort("ONIC-C", 2);
  EXPECT_EQ(missing.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(missing.status.message()), HasSubstr("0000:3a:01.0"));
  EXPECT_EQ(missing.link.status(), v1::LINK_STATUS_DOWN);
}

TEST_F(PcieSysfsBackendTest, ReadPortSaysQuiescedOnlyWhileNothingIsBelow) {
  FakePortSpec up = Port("0000:3a:00.0", "0000:3b");
  up.link_up = true;
  fake_->AddPort(up);
  fake_->AddFunction("0000:3a:00.0", Gpu("0000:3b:00.0"));
  PcieSysfsBackend::Options options = DefaultOptions();
  options.onics.push_back({"ONIC-C", {"0000:3a:00.0", "0000:3a:01.0"}, ""});
  auto backend = MakeBackend(options);
  EXPECT_EQ(backend->ReadPort("ONIC-C", 1).link.status(), v1::LINK_STATUS_UP);

  ASSERT_TRUE(backend->Quiesce("ONIC-C", 1, Generous()).status.ok());
  // The link is still up electrically, but the port is out of service.
  EXPECT_EQ(backend->ReadPort("ONIC-C", 1).link.status(), v1::LINK_STATUS_QUIESCED);

  // Someone rescans behind the agent's back: the function is back, so is the port.
  fake_->AddFunction("0000:3a:00.0", Gpu("0000:3b:00.0"));
  EXPECT_EQ(backend->ReadPort("ONIC-C", 1).link.status(), v1::LINK_STATUS_UP);
}

// --- Retrain ---

TEST_F(PcieSysfsBackendTest, RetrainWritesOnlyTheRetrainLinkBitAndWaitsForLinkActive) {
  FakePortSpec spec = Port("0000:3a:00.0", "0000:3b");
  spec.link_control = 0x0143;  // ASPM L0s+L1, Common Clock, Clock Power Management.
  spec.polls_to_train = 5;
  fake_->AddPort(spec);
  fake_->SetDeviceAfterRescan("0000:3a:00.0", Gpu("0000:3b:00.0"));
  PcieSysfsBackend::Options options = DefaultOptions();
  options.onics.push_back({"ONIC-C", {"0000:3a:00.0", "0000:3a:01.0"}, ""});
  auto backend = MakeBackend(options);

  CommandOutcome out = backend->Retrain("ONIC-C", 1, v1::PeerIdentity(), Generous());
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_UP);

  // One 2-byte write at Link Control: the old value with bit 5 added, nothing else.
  std::vector<ConfigWrite> writes = fake_->config_writes();
  ASSERT_THAT(writes, SizeIs(1));
  EXPECT_EQ(writes[0].bdf, "0000:3a:00.0");
  EXPECT_EQ(writes[0].offset, kFakePcieCap + 0x10);
  EXPECT_EQ(writes[0].bytes, std::string("\x63\x01", 2));
  // Retrain Link reads back 0 and the other bits are unchanged.
  EXPECT_EQ(fake_->LinkControl("0000:3a:00.0"), 0x0143);
  // It waited through the 5 reads that still saw Link Training: at least one read before
  // the write, 5 while training, 1 that saw the link up.
  EXPECT_GE(fake_->link_status_reads("0000:3a:00.0"), 7);
  // Rescanned the secondary bus only after the link was up, and found the device.
  EXPECT_THAT(fake_->events(), ElementsAre("rescan 0000:3a:00.0 bus"));
  EXPECT_THAT(out.link.detail(), HasSubstr("found 0000:3b:00.0"));
  EXPECT_EQ(backend->ReadPort("ONIC-C", 1).link.status(), v1::LINK_STATUS_UP);
}

TEST_F(PcieSysfsBackendTest, RetrainReportsNegotiatedSpeedAndWidth) {
  struct Case {
    uint8_t speed_code;
    uint8_t width;
    uint32_t mts;
  };
  const Case cases[] = {{1, 1, 2500},   {2, 4, 5000},   {3, 8, 8000},
                        {4, 16, 16000}, {5, 16, 32000}, {6, 16, 64000}};
  PcieSysfsBackend::Options options = DefaultOptions();
  int n = 0;
  for (const Case& c : cases) {
    FakePortSpec spec = Port(absl::StrCat("0000:4", n, ":00.0"), absl::StrCat("0000:5", n));
    spec.speed_code = c.speed_code;
    spec.width = c.width;
    spec.polls_to_train = 0;  // Trains at once.
    fake_->AddPort(spec);
    fake_->SetDeviceAfterRescan(spec.bdf, Gpu(absl::StrCat("0000:5", n, ":00.0")));
    options.onics.push_back(
        {absl::StrCat("ONIC-S", n), {spec.bdf, absl::StrCat("0000:4", n, ":01.0")}, ""});
    ++n;
  }
  auto backend = MakeBackend(options);
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    CommandOutcome out =
        backend->Retrain(absl::StrCat("ONIC-S", i), 1, v1::PeerIdentity(), Generous());
    ASSERT_TRUE(out.status.ok()) << out.status;
    EXPECT_EQ(out.link.link_speed_mts(), cases[i].mts);
    EXPECT_EQ(out.link.link_width(), cases[i].width);
  }
}

TEST_F(PcieSysfsBackendTest, ALinkThatNeverTrainsIsUnavailableAfterTheTrainTimeout) {
  // No usable far end: the port tries and falls back to Detect, link never active.
  FakePortSpec spec = Port("0000:3a:00.0", "0000:3b");
  spec.outcome = testing::FakeTrainingOutcome::kFallsBackToDetect;
  fake_->AddPort(spec);
  fake_->SetDeviceAfterRescan("0000:3a:00.0", Gpu("0000:3b:00.0"));
  PcieSysfsBackend::Options options = DefaultOptions();
  options.onics.push_back({"ONIC-C", {"0000:3a:00.0", "0000:3a:01.0"}, ""});
  options.link_train_timeout = absl::Milliseconds(50);
  auto backend = MakeBackend(options);

  const absl::Time start = clock_.Now();
  CommandOutcome out = backend->Retrain("ONIC-C", 1, v1::PeerIdentity(), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("link did not train on O-NIC ONIC-C port 1 (0000:3a:00.0) within 50ms: "
                        "Data Link Layer Link Active still clear"));
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_EQ(out.link.detail(), out.status.message());
  // Gave up at the train timeout, not before, and not much after (the fake clock moves 1 ms
  // on every read that covers Link Status, including the few outside the wait).
  EXPECT_GE(clock_.Now() - start, absl::Milliseconds(50));
  EXPECT_LE(clock_.Now() - start, absl::Milliseconds(55));
  // Never rescanned a port whose link is not up.
  EXPECT_THAT(fake_->events(), IsEmpty());
}

TEST_F(PcieSysfsBackendTest, ADeadlineBeforeTheLinkTrainsIsDeadlineExceeded) {
  FakePortSpec spec = Port("0000:3a:00.0", "0000:3b");
  spec.outcome = testing::FakeTrainingOutcome::kStaysTraining;
  fake_->AddPort(spec);
  PcieSysfsBackend::Options options = DefaultOptions();
  options.onics.push_back({"ONIC-C", {"0000:3a:00.0", "0000:3a:01.0"}, ""});
  options.link_train_timeout = absl::Seconds(10);
  auto backend = MakeBackend(options);

  CommandOutcome out =
      backend->Retrain("ONIC-C", 1, v1::PeerIdentity(), clock_.Now() + absl::Milliseconds(20));
  EXPECT_EQ(out.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("deadline passed waiting for the link to train on O-NIC ONIC-C port 1 "
                        "(0000:3a:00.0): Link Training still set"));
  // The state reached so far: still training.
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_TRAINING);

  // A deadline already past: nothing is touched.
  const size_t writes = fake_->config_writes().size();
  out = backend->Retrain(kOnicA, 1, v1::PeerIdentity(), clock_.Now());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(fake_->config_writes(), SizeIs(writes));
}

TEST_F(PcieSysfsBackendTest, RetrainConfirmsTheExpectedDeviceByVendorAndDeviceId) {
  // A GPU with its audio function; port 2 has an NVMe drive, which must not matter.
  fake_->SetFunctionsAfterRescan(kPortA1,
                                 {Gpu("0000:19:00.0"), Function("0000:19:00.1", 0x10de, 0x22ba)});
  fake_->AddFunction(kPortA2, Function("0000:1b:00.0", 0x144d, 0xa808));
  auto backend = MakeBackend();
  CommandOutcome out = backend->Retrain(kOnicA, 1, ExpectIds(0x10de, 0x2330), Generous());
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_UP);
  EXPECT_EQ(out.link.link_speed_mts(), 16000u);
  EXPECT_EQ(out.link.link_width(), 16u);
  EXPECT_THAT(out.link.detail(), HasSubstr("found 0000:19:00.0, 0000:19:00.1"));
  EXPECT_TRUE(fake_->HasFunction(kPortA1, "0000:19:00.0"));

  // Any one function may be the one expected: here the audio function.
  ASSERT_TRUE(backend->Quiesce(kOnicA, 1, Generous()).status.ok());
  out = backend->Retrain(kOnicA, 1, ExpectIds(0x10de, 0x22ba), Generous());
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_UP);
}

TEST_F(PcieSysfsBackendTest, RetrainConfirmsTheExpectedDeviceBySerialNumber) {
  fake_->SetDeviceAfterRescan(kPortA1, Gpu("0000:19:00.0"));
  auto backend = MakeBackend();
  v1::PeerIdentity expected;
  expected.set_device_serial_number(0x48b02d0300a1b2c3ULL);
  CommandOutcome out = backend->Retrain(kOnicA, 1, expected, Generous());
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_UP);
}

TEST_F(PcieSysfsBackendTest, AWrongDeviceIsNamedAndRemovedAgain) {
  // An NVMe drive where a GPU was expected: a wiring (or circuit) error.
  fake_->SetDeviceAfterRescan(kPortA1, Function("0000:19:00.0", 0x144d, 0xa808, "nvme"));
  auto backend = MakeBackend();
  CommandOutcome out = backend->Retrain(kOnicA, 1, ExpectIds(0x10de, 0x2330), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("wrong device behind O-NIC ONIC-A port 1: saw vendor 0x144d device 0xa808 "
                        "at 0000:19:00.0 (expected vendor 0x10de device 0x2330)"));
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_EQ(out.link.link_speed_mts(), 0u);
  EXPECT_THAT(out.link.detail(), HasSubstr("wrong device"));
  // This host must not keep someone else's device.
  EXPECT_FALSE(fake_->HasFunction(kPortA1, "0000:19:00.0"));
  EXPECT_THAT(fake_->events(),
              ElementsAre("rescan 0000:18:00.0 bus", "unbind 0000:19:00.0", "remove 0000:19:00.0"));
  CommandOutcome read = backend->ReadPort(kOnicA, 1);
  EXPECT_EQ(read.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_THAT(read.link.detail(), HasSubstr("wrong device"));
}

// Removed by someone else (a link loss's hot-plug removal, another rescan) between the
// backend's listing of what enumerated and its reading of the ids.
TEST_F(PcieSysfsBackendTest, ADeviceRemovedWhileItIsCheckedIsAnsweredAndNothingIsLeft) {
  fake_->SetDeviceAfterRescan(kPortA1, Gpu("0000:19:00.0"));
  fake_->SetRemovedWhenRead("0000:19:00.0");
  auto backend = MakeBackend();
  CommandOutcome out = backend->Retrain(kOnicA, 1, ExpectIds(0x10de, 0x2330), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("cannot verify the device behind O-NIC ONIC-A port 1 (expected vendor "
                        "0x10de device 0x2330)"));
  EXPECT_NE(out.link.status(), v1::LINK_STATUS_UP);
  EXPECT_FALSE(fake_->HasFunction(kPortA1, "0000:19:00.0"));
  EXPECT_THAT(fake_->events(), ::testing::Contains("removed by another 0000:19:00.0"));
  // The next retrain finds the device as it comes back.
  ASSERT_TRUE(backend->Quiesce(kOnicA, 1, Generous()).status.ok());
  out = backend->Retrain(kOnicA, 1, ExpectIds(0x10de, 0x2330), Generous());
  EXPECT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_UP);
}

TEST_F(PcieSysfsBackendTest, AWrongSerialNumberIsNamed) {
  FakeFunction other = Gpu("0000:19:00.0");
  other.dsn = 0x48b02d0300ffffffULL;
  fake_->SetDeviceAfterRescan(kPortA1, other);
  auto backend = MakeBackend();
  v1::PeerIdentity expected = ExpectIds(0x10de, 0x2330);
  expected.set_device_serial_number(0x48b02d0300a1b2c3ULL);
  CommandOutcome out = backend->Retrain(kOnicA, 1, expected, Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      std::string(out.status.message()),
      HasSubstr("saw vendor 0x10de device 0x2330 dsn 48-b0-2d-03-00-ff-ff-ff at 0000:19:00.0 "
                "(expected vendor 0x10de device 0x2330 dsn 48-b0-2d-03-00-a1-b2-c3)"));

  // And a device without the capability at all.
  ASSERT_TRUE(backend->Quiesce(kOnicA, 1, Generous()).status.ok());
  fake_->SetDeviceAfterRescan(kPortA1, Function("0000:19:00.0", 0x10de, 0x2330));
  out = backend->Retrain(kOnicA, 1, expected, Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("without a serial number"));
}

TEST_F(PcieSysfsBackendTest, NoDeviceAfterRescanIsUnavailable) {
  fake_->SetDeviceAfterRescan(kPortA1, std::nullopt);
  auto backend = MakeBackend();
  CommandOutcome out = backend->Retrain(kOnicA, 1, ExpectIds(0x10de, 0x2330), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("no device appeared after rescan below 0000:18:00.0"));
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_THAT(fake_->events(), ElementsAre("rescan 0000:18:00.0 bus"));
}

TEST_F(PcieSysfsBackendTest, WithoutASecondaryBusDirectoryThePortItselfIsRescanned) {
  fake_->SetDeviceAfterRescan(kPortB2, Gpu("0000:5f:00.0"));
  auto backend = MakeBackend();
  CommandOutcome out = backend->Retrain(kOnicB, 2, ExpectIds(0x10de, 0), Generous());
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_THAT(fake_->events(), ElementsAre("rescan 0000:5d:02.0 device"));
}

TEST_F(PcieSysfsBackendTest, RetrainRefusesWhileFunctionsAreStillBelow) {
  fake_->AddFunction(kPortA1, Gpu("0000:19:00.0"));
  auto backend = MakeBackend();
  CommandOutcome out = backend->Retrain(kOnicA, 1, v1::PeerIdentity(), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("still below downstream port 0000:18:00.0 (0000:19:00.0); quiesce the "
                        "port first"));
  EXPECT_THAT(fake_->config_writes(), IsEmpty());
  EXPECT_TRUE(fake_->HasFunction(kPortA1, "0000:19:00.0"));
}

// On a hot-plug slot the kernel (pciehp) enumerates what comes up on the new circuit before
// the agent retrains (seen on a real kernel: tests/qemu). After the agent's quiesce, that is
// the new device: judged as a rescan's find would be, without pulling the link.
TEST_F(PcieSysfsBackendTest, AfterAQuiesceADeviceTheKernelEnumeratedIsJudgedNotRetrained) {
  FakePortSpec spec = Port("0000:3a:00.0", "0000:3b");
  spec.link_up = true;
  spec.hot_plug = true;
  fake_->AddPort(spec);
  PcieSysfsBackend::Options options = DefaultOptions();
  options.onics.push_back({"ONIC-C", {"0000:3a:00.0", "0000:3a:01.0"}, ""});
  auto backend = MakeBackend(options);
  ASSERT_TRUE(backend->Quiesce("ONIC-C", 1, Generous()).status.ok());
  fake_->AddFunction("0000:3a:00.0", Gpu("0000:3b:00.0"));  // Hot-plugged by the kernel.

  CommandOutcome out = backend->Retrain("ONIC-C", 1, ExpectIds(0x10de, 0x2330), Generous());
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_UP);
  EXPECT_THAT(out.link.detail(), HasSubstr("found 0000:3b:00.0"));
  EXPECT_THAT(fake_->config_writes(), IsEmpty());  // No Retrain Link under its driver.
  EXPECT_TRUE(fake_->HasFunction("0000:3a:00.0", "0000:3b:00.0"));

  // The wrong device, enumerated the same way, is removed.
  ASSERT_TRUE(backend->Quiesce("ONIC-C", 1, Generous()).status.ok());
  fake_->AddFunction("0000:3a:00.0", Function("0000:3b:00.0", 0x144d, 0xa808));
  out = backend->Retrain("ONIC-C", 1, ExpectIds(0x10de, 0x2330), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fake_->HasFunction("0000:3a:00.0", "0000:3b:00.0"));

  // Without a quiesce first, functions below still mean "quiesce first".
  fake_->AddFunction("0000:3a:00.0", Gpu("0000:3b:00.0"));
  out = backend->Retrain("ONIC-C", 1, v1::PeerIdentity(), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("quiesce the port first"));
}

// A hot-plug slot with a power controller: a quiesce turns it off after removing what is
// below, a retrain turns it on and judges what pciehp enumerated; a wrong device is removed
// and the slot turned off again.
TEST_F(PcieSysfsBackendTest, QuiesceTurnsAPowerSlotOffAndRetrainTurnsItOnAndJudgesTheDevice) {
  fake_->AddPort(PowerSlotPort("7"));
  fake_->AddFunction("0000:3a:00.0", Function("0000:3b:00.0", 0x10de, 0x2330, "nvidia"));
  fake_->SetDeviceAfterRescan("0000:3a:00.0", Gpu("0000:3b:00.0"));
  const PcieSysfsBackend::Options options = OptionsWithOnicC();
  auto backend = MakeBackend(options);

  CommandOutcome out = backend->Quiesce("ONIC-C", 1, Generous());
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_QUIESCED);
  EXPECT_THAT(out.link.detail(), HasSubstr("removed 1 PCIe functions below downstream port "
                                           "0000:3a:00.0; slot 7 powered off"));
  EXPECT_THAT(fake_->events(),
              ElementsAre("unbind 0000:3b:00.0", "remove 0000:3b:00.0", "slot off 7"));
  EXPECT_FALSE(fake_->SlotPowered("0000:3a:00.0"));
  EXPECT_EQ(backend->ReadPort("ONIC-C", 1).link.status(), v1::LINK_STATUS_QUIESCED);
  ASSERT_TRUE(backend->Quiesce("ONIC-C", 1, Generous()).status.ok());  // Off already: no write.
  EXPECT_THAT(fake_->events(), SizeIs(3));
  // An agent started anew (no memory of its quiesce) reads the slot's power.
  out = MakeBackend(options)->ReadPort("ONIC-C", 1);
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_THAT(out.link.detail(),
              HasSubstr("slot 7 of downstream port 0000:3a:00.0 is powered off"));

  v1::PeerIdentity gpu = ExpectIds(0x10de, 0x2330);
  gpu.set_device_serial_number(0x48b02d0300a1b2c3ULL);
  out = backend->Retrain("ONIC-C", 1, gpu, Generous());
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_UP);
  EXPECT_EQ(out.link.link_width(), 16u);
  EXPECT_THAT(out.link.detail(), HasSubstr("(slot 7 turned on); found 0000:3b:00.0"));
  EXPECT_EQ(fake_->events().back(), "slot on 7");
  EXPECT_THAT(fake_->config_writes(), IsEmpty());  // pciehp trained it: no Retrain Link.
  EXPECT_TRUE(fake_->SlotPowered("0000:3a:00.0"));

  // Another device comes up on the next circuit: removed, and the slot is off again.
  ASSERT_TRUE(backend->Quiesce("ONIC-C", 1, Generous()).status.ok());
  fake_->SetDeviceAfterRescan("0000:3a:00.0", Function("0000:3b:00.0", 0x144d, 0xa808));
  out = backend->Retrain("ONIC-C", 1, gpu, Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("wrong device behind O-NIC ONIC-C port 1: saw vendor 0x144d"));
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("removed it again"));
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_FALSE(fake_->HasFunction("0000:3a:00.0", "0000:3b:00.0"));
  EXPECT_FALSE(fake_->SlotPowered("0000:3a:00.0"));
}

TEST_F(PcieSysfsBackendTest, APowerSlotThatStaysOffIsUnavailableNamingTheSlotAndTheKernel) {
  FakePortSpec spec = PowerSlotPort("8");
  spec.link_up = false;
  spec.slot_powered = false;  // An empty slot: pciehp keeps it off.
  fake_->AddPort(spec);
  auto backend = MakeBackend(OptionsWithOnicC());
  ASSERT_TRUE(backend->Quiesce("ONIC-C", 1, Generous()).status.ok());
  CommandOutcome out = backend->Retrain("ONIC-C", 1, v1::PeerIdentity(), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("slot 8 of downstream port 0000:3a:00.0 (O-NIC ONIC-C port 1) did not "
                        "turn on: it is still off"));
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("No such device"));
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_THAT(fake_->events(), ElementsAre("slot on refused 8"));
  EXPECT_EQ(backend->ReadPort("ONIC-C", 1).link.status(), v1::LINK_STATUS_QUIESCED);

  // Still quiesced: when the device arrives and pciehp turns the slot on for it (seen on a
  // real kernel: tests/qemu), the next retrain judges it.
  fake_->SetDeviceAfterRescan("0000:3a:00.0", Gpu("0000:3b:00.0"));
  ASSERT_TRUE(fake_->WriteFile(root_ + "/bus/pci/slots/8/power", "1").ok());
  out = backend->Retrain("ONIC-C", 1, ExpectIds(0x10de, 0x2330), Generous());
  EXPECT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_UP);
}

TEST_F(PcieSysfsBackendTest, WithSlotPowerOffAPowerSlotIsLeftAsItIs) {
  fake_->AddPort(PowerSlotPort("7"));
  fake_->AddFunction("0000:3a:00.0", Gpu("0000:3b:00.0"));
  PcieSysfsBackend::Options options = OptionsWithOnicC();
  options.slot_power = false;
  auto backend = MakeBackend(options);
  CommandOutcome out = backend->Quiesce("ONIC-C", 1, Generous());
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_THAT(out.link.detail(), Not(HasSubstr("slot")));
  EXPECT_THAT(fake_->events(), ElementsAre("remove 0000:3b:00.0"));
  EXPECT_TRUE(fake_->SlotPowered("0000:3a:00.0"));
}

// A failure after the slot came on (here its link went back into training) must not leave
// what pciehp enumerated on this host unjudged: it is removed and the slot turned off again.
TEST_F(PcieSysfsBackendTest, AFailureAfterASlotCameOnTurnsItOffAgain) {
  FakePortSpec spec = PowerSlotPort("7");
  spec.slot_powered = false;
  spec.link_up = false;
  spec.outcome = testing::FakeTrainingOutcome::kStaysTraining;
  fake_->AddPort(spec);
  fake_->SetDeviceAfterRescan("0000:3a:00.0", Gpu("0000:3b:00.0"));
  auto backend = MakeBackend(OptionsWithOnicC());
  ASSERT_TRUE(backend->Quiesce("ONIC-C", 1, Generous()).status.ok());
  CommandOutcome out = backend->Retrain("ONIC-C", 1, ExpectIds(0x10de, 0x2330), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("link did not train on O-NIC ONIC-C port 1 (0000:3a:00.0) within 1s"));
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("; slot 7 turned off again"));
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_THAT(fake_->events(), ElementsAre("slot on 7", "remove 0000:3b:00.0", "slot off 7"));
  EXPECT_FALSE(fake_->HasFunction("0000:3a:00.0", "0000:3b:00.0"));
  EXPECT_FALSE(fake_->SlotPowered("0000:3a:00.0"));
  EXPECT_EQ(backend->ReadPort("ONIC-C", 1).link.status(), v1::LINK_STATUS_QUIESCED);
}

TEST_F(PcieSysfsBackendTest, WithSlotPowerOffASlotThatIsOffReadsItsLinkDown) {
  FakePortSpec spec = PowerSlotPort("7");
  spec.slot_powered = false;
  spec.link_up = false;
  fake_->AddPort(spec);
  PcieSysfsBackend::Options options = OptionsWithOnicC();
  options.slot_power = false;
  CommandOutcome out = MakeBackend(options)->ReadPort("ONIC-C", 1);
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_THAT(out.link.detail(), HasSubstr("Link Active clear"));
  EXPECT_FALSE(fake_->SlotPowered("0000:3a:00.0"));
}

// Without hot-plug nothing but a rescan enumerates below a port: functions found there after a
// quiesce were put back by someone else's rescan (the old device), not judged as new.
TEST_F(PcieSysfsBackendTest, AfterAQuiesceFunctionsBelowAPortWithoutHotPlugAreStillRefused) {
  FakePortSpec spec = Port("0000:3a:00.0", "0000:3b");
  spec.link_up = true;
  fake_->AddPort(spec);
  PcieSysfsBackend::Options options = DefaultOptions();
  options.onics.push_back({"ONIC-C", {"0000:3a:00.0", "0000:3a:01.0"}, ""});
  auto backend = MakeBackend(options);
  ASSERT_TRUE(backend->Quiesce("ONIC-C", 1, Generous()).status.ok());
  fake_->AddFunction("0000:3a:00.0", Gpu("0000:3b:00.0"));
  CommandOutcome out = backend->Retrain("ONIC-C", 1, ExpectIds(0x10de, 0x2330), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("quiesce the port first"));
  EXPECT_THAT(fake_->config_writes(), IsEmpty());
}

// A port without DL Link Active reporting (optional below 5 GT/s; QEMU's switch downstream
// ports, tests/qemu) shows only that training ended: what enumerates is the judge.
TEST_F(PcieSysfsBackendTest, APortThatCannotReportLinkActiveIsJudgedByWhatEnumerates) {
  FakePortSpec spec = Port("0000:3a:00.0", "0000:3b");
  spec.dll_active_reporting = false;
  spec.link_up = true;
  fake_->AddPort(spec);
  fake_->SetDeviceAfterRescan("0000:3a:00.0", Gpu("0000:3b:00.0"));
  auto backend = MakeBackend(OptionsWithOnicC());
  CommandOutcome out = backend->ReadPort("ONIC-C", 1);
  EXPECT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_THAT(out.link.detail(),
              HasSubstr("nothing enumerated below 0000:3a:00.0; the port does not report Data "
                        "Link Layer Link Active (Link Capabilities bit 20)"));

  out = backend->Retrain("ONIC-C", 1, ExpectIds(0x10de, 0x2330), Generous());
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_UP);
  EXPECT_EQ(out.link.link_width(), 16u);
  EXPECT_THAT(fake_->config_writes(), SizeIs(1));  // Retrain Link.
  out = backend->ReadPort("ONIC-C", 1);
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_UP);
  EXPECT_THAT(out.link.detail(), HasSubstr("1 PCIe functions below (judged by them"));

  // Nothing comes up on the next circuit: an empty bus, said as such.
  ASSERT_TRUE(backend->Quiesce("ONIC-C", 1, Generous()).status.ok());
  fake_->SetDeviceAfterRescan("0000:3a:00.0", std::nullopt);
  out = backend->Retrain("ONIC-C", 1, ExpectIds(0x10de, 0x2330), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("no device appeared after rescan below 0000:3a:00.0"));
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("so an empty bus is all that shows a link that did not come up"));
  EXPECT_EQ(out.link.status(), v1::LINK_STATUS_DOWN);
}

TEST_F(PcieSysfsBackendTest, RetrainRefusesADisabledLink) {
  FakePortSpec spec = Port("0000:3a:00.0", "0000:3b");
  spec.link_control = 0x0010;  // Link Disable.
  fake_->AddPort(spec);
  PcieSysfsBackend::Options options = DefaultOptions();
  options.onics.push_back({"ONIC-C", {"0000:3a:00.0", "0000:3a:01.0"}, ""});
  auto backend = MakeBackend(options);
  CommandOutcome out = backend->Retrain("ONIC-C", 1, v1::PeerIdentity(), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("Link Disable is set"));
  EXPECT_THAT(fake_->config_writes(), IsEmpty());
}

// --- Broken config space and configuration errors ---

TEST_F(PcieSysfsBackendTest, ACapabilityLoopIsAClearErrorNotAHang) {
  // PCIe capability rewritten as an unknown one pointing back at PM (0x40 → 0x60 → 0x40 …).
  fake_->PokeConfig(kPortA1, kFakePcieCap, std::string("\x11\x40", 2));
  auto backend = MakeBackend();
  CommandOutcome out = backend->Retrain(kOnicA, 1, v1::PeerIdentity(), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()), HasSubstr(fake_->PortPath(kPortA1) + "/config"));
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("a loop"));
  EXPECT_THAT(fake_->config_writes(), IsEmpty());
  EXPECT_EQ(backend->ReadPort(kOnicA, 1).status.code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(PcieSysfsBackendTest, AMissingPcieCapabilityIsAClearError) {
  fake_->PokeConfig(kPortA1, 0x41, std::string("\x00", 1));  // PM is the last capability.
  auto backend = MakeBackend();
  CommandOutcome out = backend->Retrain(kOnicA, 1, v1::PeerIdentity(), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("has no PCI Express capability (ID 0x10): not a PCIe port"));
  EXPECT_THAT(fake_->config_writes(), IsEmpty());
}

TEST_F(PcieSysfsBackendTest, ABadCapabilityPointerIsAClearError) {
  fake_->PokeConfig(kPortA1, 0x41, std::string("\x08", 1));  // Into the header.
  auto backend = MakeBackend();
  CommandOutcome out = backend->ReadPort(kOnicA, 1);
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("capability pointer 0x08 at 0x41 is outside 0x40..0xfc"));
}

TEST_F(PcieSysfsBackendTest, AShortOrMissingConfigFileNamesThePath) {
  // What an agent without CAP_SYS_ADMIN reads: the first 64 bytes.
  fake_->ReplaceConfig(kPortA1, std::string(64, '\0'));
  auto backend = MakeBackend();
  CommandOutcome out = backend->Retrain(kOnicA, 1, v1::PeerIdentity(), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr(fake_->PortPath(kPortA1) + "/config gave 64 bytes of config space, "
                                                   "need 256"));

  std::filesystem::remove(fake_->PortPath(kPortA2) + "/config");
  out = backend->ReadPort(kOnicA, 2);
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr(fake_->PortPath(kPortA2) + "/config does not exist"));
}

TEST_F(PcieSysfsBackendTest, ABdfThatIsNotADownstreamPortIsRefused) {
  FakePortSpec endpoint = Port("0000:3a:00.0", "");
  endpoint.port_type = 0;
  fake_->AddPort(endpoint);
  PcieSysfsBackend::Options options = DefaultOptions();
  options.onics.push_back({"ONIC-C", {"0000:3a:00.0", "0000:3a:01.0"}, ""});
  auto backend = MakeBackend(options);
  CommandOutcome out = backend->Retrain("ONIC-C", 1, v1::PeerIdentity(), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("0000:3a:00.0 is not a PCIe downstream port (Device/Port Type 0"));
  EXPECT_THAT(fake_->config_writes(), IsEmpty());
}

TEST_F(PcieSysfsBackendTest, UnknownSerialOrPortIsNotFoundNamingIt) {
  auto backend = MakeBackend();
  CommandOutcome out = backend->Quiesce("ONIC-Z", 1, Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("\"ONIC-Z\""));
  EXPECT_EQ(out.link.onic_serial(), "ONIC-Z");

  out = backend->Retrain(kOnicA, 3, v1::PeerIdentity(), Generous());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("O-NIC ONIC-A has no port 3 (ports are 1 and 2)"));

  out = backend->ReadPort(kOnicB, 0);
  EXPECT_EQ(out.status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("has no port 0"));

  EXPECT_EQ(backend->Blink("ONIC-Z", absl::Seconds(5)).code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(fake_->events(), IsEmpty());
  EXPECT_THAT(fake_->config_writes(), IsEmpty());
}

TEST_F(PcieSysfsBackendTest, BlinkIsUnimplementedAndSaysWhy) {
  auto backend = MakeBackend();
  absl::Status s = backend->Blink(kOnicA, absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no LED control through sysfs"));
}

// --- Discover and concurrency ---

TEST_F(PcieSysfsBackendTest, DiscoverListsEveryOnicWithBothPorts) {
  std::filesystem::remove(fake_->PortPath(kPortB2) + "/config");
  auto backend = MakeBackend();
  EXPECT_EQ(backend->name(), "pcie-sysfs");
  absl::StatusOr<std::vector<v1::AgentOnic>> onics = backend->Discover();
  ASSERT_TRUE(onics.ok()) << onics.status();
  ASSERT_THAT(*onics, SizeIs(2));
  EXPECT_EQ((*onics)[0].serial(), kOnicA);
  EXPECT_EQ((*onics)[0].pcie_address(), kPortA1);
  ASSERT_EQ((*onics)[0].ports_size(), 2);
  EXPECT_EQ((*onics)[0].ports(0).port(), 1u);
  EXPECT_EQ((*onics)[0].ports(1).port(), 2u);
  EXPECT_EQ((*onics)[0].ports(0).status(), v1::LINK_STATUS_DOWN);
  EXPECT_EQ((*onics)[1].pcie_address(), kPortB1);
  // A port that cannot be read is still listed, with the reason.
  EXPECT_EQ((*onics)[1].ports(1).status(), v1::LINK_STATUS_DOWN);
  EXPECT_THAT((*onics)[1].ports(1).detail(), HasSubstr("0000:5d:02.0"));
  EXPECT_THAT((*onics)[1].ports(1).detail(), HasSubstr("does not exist"));
}

TEST_F(PcieSysfsBackendTest, DifferentOnicsRetrainConcurrently) {
  fake_->SetDeviceAfterRescan(kPortA1, Gpu("0000:19:00.0"));
  fake_->SetDeviceAfterRescan(kPortB1, Gpu("0000:5e:00.0"));
  auto backend = MakeBackend();
  CommandOutcome a, b;
  std::thread ta([&] { a = backend->Retrain(kOnicA, 1, ExpectIds(0x10de, 0x2330), Generous()); });
  std::thread tb([&] { b = backend->Retrain(kOnicB, 1, ExpectIds(0x10de, 0x2330), Generous()); });
  ta.join();
  tb.join();
  EXPECT_TRUE(a.status.ok()) << a.status;
  EXPECT_TRUE(b.status.ok()) << b.status;
  EXPECT_TRUE(fake_->HasFunction(kPortA1, "0000:19:00.0"));
  EXPECT_TRUE(fake_->HasFunction(kPortB1, "0000:5e:00.0"));
}

}  // namespace
}  // namespace fleet::onic_agent
