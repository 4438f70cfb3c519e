// The agent's pcie-sysfs backend on a real Linux kernel: Debian's kernel in a QEMU q35 guest,
// with PCIe root ports standing in for an O-NIC's downstream ports and QEMU's PCIe endpoints
// for the devices the optical links bring up. The agent binary runs in the guest as built
// (bring-up verbs, `fleet-onic-agent ... -`, one backend for a whole test, as the real agent
// keeps one); QMP hot-adds and removes devices as the optical link comes up or goes away.
//
// The guest: root ports 00:02.0 and 00:03.0 are O-NIC ONIC-A's ports 1 and 2, with an Intel
// 82574 NIC (e1000e, which carries a Device Serial Number made from its MAC) and an NVMe
// controller behind them; 00:04.0 and 00:05.0 are ONIC-B's, empty at boot. The guest's kernel
// hot-plugs natively (pciehp). These root ports have no power controller: slot power, which
// QEMU models as the device's ejection, is SlotPowerOnRealKernelTest's.
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/qemu/guest_test.h"

namespace fleet::testing {
namespace {

using nlohmann::json;

// QEMU's e1000e: vendor Intel, device 82574L; its DSN is its MAC with ff-ff in the middle.
constexpr char kNicMac[] = "52:54:00:12:34:56";
constexpr char kNicDsn[] = "52-54-00-ff-ff-12-34-56";
constexpr char kHotNicMac[] = "52:54:00:00:00:02";
constexpr char kHotNicDsn[] = "52-54-00-ff-ff-00-00-02";
constexpr char kIntelNic[] = "--expect-vendor 8086 --expect-device 10d3";
constexpr char kRootPort[] = "pcie-root-port,bus=pcie.0";
constexpr char kNoPower[] = ",power_controller_present=off";

constexpr char kAgentConfig[] = R"(backend: pcie-sysfs
onics:
  - serial: ONIC-A
    pcie: "0000:00:02.0"
    ports:
      - {downstream: "0000:00:02.0"}
      - {downstream: "0000:00:03.0"}
  - serial: ONIC-B
    pcie: "0000:00:04.0"
    ports:
      - {downstream: "0000:00:04.0"}
      - {downstream: "0000:00:05.0"}
)";

// A guest with the agent running in it on `config`, taking verbs one a line.
class AgentInGuestTest : public GuestTest {
 protected:
  void StartAgent(const std::string& config_text) {
    const std::string config = WriteText("agent.yaml", config_text);
    // The agent reads verbs from a FIFO it opens read-write, so it never sees the end of it.
    Guest(absl::StrCat("mkdir /run/agent && mkfifo /run/agent/in && : > /run/agent/out && (",
                       BinaryPath("fleet-onic-agent"), " --config ", config,
                       " - <> /run/agent/in > /run/agent/out 2> /run/agent/err & echo $! > "
                       "/run/agent/pid)"));
  }

  void TearDown() override { PrintDiagnostics("cat /run/agent/err"); }

  // Sends one verb line to the agent in the guest without waiting for its answer.
  void Send(const std::string& line) {
    Guest(absl::StrCat(
        "kill -0 $(cat /run/agent/pid) || { echo 'the agent is not running'; exit 1; }; "
        "timeout 10 sh -c \"echo '",
        line, "' > /run/agent/in\""));
    std::cout << line << std::endl;
  }

  // The answer to the oldest verb sent and not yet answered.
  json Answer() {
    ++answers_;
    // Waits at most 30 s for the answer (well within Run's 60 s), and not for a dead agent.
    const std::string output = Guest(absl::StrCat(
        "end=$(($(date +%s) + 30)); while [ $(wc -l < /run/agent/out) -lt ", answers_,
        " ]; do kill -0 $(cat /run/agent/pid) || exit 1; [ $(date +%s) -gt $end ] && exit 1; "
        "sleep 0.05; done; sed -n '",
        answers_, "p' /run/agent/out"));
    json answer = json::parse(output, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(answer.is_discarded()) << "answer " << answers_ << ": " << output;
    std::cout << " -> " << output;
    return answer;
  }

  // Sends one verb line and returns its JSON answer.
  json Agent(const std::string& line) {
    Send(line);
    return Answer();
  }

  int answers_ = 0;
};

class PcieSysfsOnRealKernelTest : public AgentInGuestTest {
 protected:
  void SetUp() override {
    if (!BootGuest(
            {
                absl::StrCat(kRootPort, ",id=rp1,chassis=1,slot=1,addr=0x2", kNoPower),
                absl::StrCat(kRootPort, ",id=rp2,chassis=2,slot=2,addr=0x3", kNoPower),
                absl::StrCat(kRootPort, ",id=rp3,chassis=3,slot=3,addr=0x4", kNoPower),
                absl::StrCat(kRootPort, ",id=rp4,chassis=4,slot=4,addr=0x5", kNoPower),
                absl::StrCat("e1000e,bus=rp1,id=nic1,mac=", kNicMac),
                "nvme,bus=rp2,id=nvme1,serial=FLEET-NVME-1",
            },
            // The drivers a host would have loaded, so that quiesce has drivers to unbind.
            "e1000e nvme")) {
      return;
    }
    StartAgent(kAgentConfig);
  }
};

TEST_F(PcieSysfsOnRealKernelTest, DiscoverReadsEachPortsLinkFromTheKernel) {
  json answer = Agent("discover");
  ASSERT_EQ(answer["code"], "OK") << answer.dump();
  ASSERT_EQ(answer["onics"].size(), 2u);
  const json& a = answer["onics"][0];
  EXPECT_EQ(a["serial"], "ONIC-A");
  // Both of ONIC-A's ports have a device that trained at what the kernel reports.
  for (int port = 0; port < 2; ++port) {
    const std::string bdf = port == 0 ? "0000:00:02.0" : "0000:00:03.0";
    EXPECT_EQ(a["ports"][port]["status"], "LINK_STATUS_UP") << a.dump();
    const std::string speed =
        Trimmed(Guest(absl::StrCat("cat /sys/bus/pci/devices/", bdf, "/current_link_speed")));
    const std::string width =
        Trimmed(Guest(absl::StrCat("cat /sys/bus/pci/devices/", bdf, "/current_link_width")));
    // sysfs says "2.5 GT/s PCIe"; the agent says MT/s.
    const int mts = static_cast<int>(std::stod(speed) * 1000 + 0.5);
    EXPECT_EQ(a["ports"][port]["link_speed_mts"], mts) << speed;
    EXPECT_EQ(a["ports"][port]["link_width"], std::stoi(width)) << width;
  }
  // ONIC-B's ports have nothing behind them: Data Link Layer Link Active is clear.
  for (const json& port : answer["onics"][1]["ports"]) {
    EXPECT_EQ(port["status"], "LINK_STATUS_DOWN") << port.dump();
    EXPECT_TRUE(absl::StrContains(port["detail"].get<std::string>(), "Link Active clear"))
        << port.dump();
  }
}

TEST_F(PcieSysfsOnRealKernelTest, QuiesceUnbindsAndRemovesThenRetrainFindsTheExpectedDevice) {
  const std::string nic = FunctionsBelow("0000:00:02.0");
  ASSERT_FALSE(nic.empty());
  ASSERT_EQ(DriverOf(nic), "e1000e");

  json quiesced = Agent("quiesce ONIC-A 1");
  EXPECT_EQ(quiesced["code"], "OK") << quiesced.dump();
  EXPECT_EQ(quiesced["link"]["status"], "LINK_STATUS_QUIESCED");
  EXPECT_EQ(FunctionsBelow("0000:00:02.0"), "");
  EXPECT_EQ(Agent("read ONIC-A 1")["link"]["status"], "LINK_STATUS_QUIESCED");
  EXPECT_EQ(Agent("quiesce ONIC-A 1")["code"], "OK");  // Idempotent.
  // The other port and its driver are untouched.
  EXPECT_EQ(DriverOf(FunctionsBelow("0000:00:03.0")), "nvme");

  json retrained = Agent(absl::StrCat("retrain ONIC-A 1 ", kIntelNic, " --expect-dsn ", kNicDsn));
  EXPECT_EQ(retrained["code"], "OK") << retrained.dump();
  EXPECT_EQ(retrained["link"]["status"], "LINK_STATUS_UP");
  EXPECT_EQ(retrained["link"]["link_width"], 1);
  // Back, and the kernel bound its driver again on the rescan.
  EXPECT_EQ(FunctionsBelow("0000:00:02.0"), nic);
  EXPECT_EQ(DriverOf(nic), "e1000e");

  // A retrain under a bound driver is refused: it would pull the link from under it.
  json refused = Agent("retrain ONIC-A 1");
  EXPECT_EQ(refused["code"], "FAILED_PRECONDITION") << refused.dump();
  EXPECT_TRUE(absl::StrContains(refused["message"].get<std::string>(), "quiesce the port first"));
  EXPECT_EQ(DriverOf(nic), "e1000e");
}

TEST_F(PcieSysfsOnRealKernelTest, AWrongDeviceIsRefusedNamedAndRemoved) {
  // Port 2 carries the NVMe controller; the Intel NIC was expected.
  ASSERT_EQ(Agent("quiesce ONIC-A 2")["code"], "OK");
  json wrong = Agent(absl::StrCat("retrain ONIC-A 2 ", kIntelNic));
  EXPECT_EQ(wrong["code"], "FAILED_PRECONDITION") << wrong.dump();
  const std::string message = wrong["message"].get<std::string>();
  EXPECT_TRUE(absl::StrContains(message, "wrong device behind O-NIC ONIC-A port 2")) << message;
  EXPECT_TRUE(absl::StrContains(message, "0x1b36")) << message;  // QEMU's NVMe, as seen.
  EXPECT_TRUE(absl::StrContains(message, "removed it again")) << message;
  EXPECT_EQ(wrong["link"]["status"], "LINK_STATUS_DOWN");
  EXPECT_EQ(FunctionsBelow("0000:00:03.0"), "");  // Nothing left bound.
  EXPECT_EQ(Agent("read ONIC-A 2")["link"]["status"], "LINK_STATUS_DOWN");

  // The right ids with another serial number: the DSN the device carries is named.
  ASSERT_EQ(Agent("quiesce ONIC-A 1")["code"], "OK");
  json other = Agent(absl::StrCat("retrain ONIC-A 1 ", kIntelNic, " --expect-dsn 0x1"));
  EXPECT_EQ(other["code"], "FAILED_PRECONDITION") << other.dump();
  EXPECT_TRUE(absl::StrContains(other["message"].get<std::string>(), "52-54-00-ff-ff-12-34-56"))
      << other.dump();
  EXPECT_EQ(FunctionsBelow("0000:00:02.0"), "");
}

TEST_F(PcieSysfsOnRealKernelTest, AnEmptySlotNeverTrains) {
  ASSERT_EQ(Agent("quiesce ONIC-B 1")["code"], "OK");
  json answer = Agent("retrain ONIC-B 1");
  EXPECT_EQ(answer["code"], "UNAVAILABLE") << answer.dump();
  EXPECT_TRUE(absl::StrContains(answer["message"].get<std::string>(), "link did not train"))
      << answer.dump();
  EXPECT_EQ(answer["link"]["status"], "LINK_STATUS_DOWN");
}

// On a hot-plug slot the kernel does not wait for the agent: as the link comes up, pciehp
// enumerates the device and binds its driver. A retrain after a quiesce then finds it there.
TEST_F(PcieSysfsOnRealKernelTest, ADeviceTheKernelHotPluggedAfterAQuiesceIsJudged) {
  ASSERT_EQ(Agent("quiesce ONIC-B 1")["code"], "OK");
  absl::StatusOr<json> added = guest_->Qmp(
      "device_add", {{"driver", "e1000e"}, {"bus", "rp3"}, {"id", "nic2"}, {"mac", kHotNicMac}});
  ASSERT_TRUE(added.ok()) << added.status();
  const std::string nic = AwaitFunctionBelow("0000:00:04.0");
  // The kernel bound its driver as well: retraining now would pull the link from under it.
  EXPECT_EQ(DriverOf(nic), "e1000e");
  json answer = Agent(absl::StrCat("retrain ONIC-B 1 ", kIntelNic, " --expect-dsn ", kHotNicDsn));
  EXPECT_EQ(answer["code"], "OK") << answer.dump();
  EXPECT_EQ(answer["link"]["status"], "LINK_STATUS_UP");
  EXPECT_EQ(FunctionsBelow("0000:00:04.0"), nic);

  // A wrong device the kernel enumerated on its own is removed all the same.
  ASSERT_EQ(Agent("quiesce ONIC-B 2")["code"], "OK");
  added = guest_->Qmp(
      "device_add",
      {{"driver", "nvme"}, {"bus", "rp4"}, {"id", "nvme2"}, {"serial", "FLEET-NVME-2"}});
  ASSERT_TRUE(added.ok()) << added.status();
  AwaitFunctionBelow("0000:00:05.0");
  json wrong = Agent(absl::StrCat("retrain ONIC-B 2 ", kIntelNic));
  EXPECT_EQ(wrong["code"], "FAILED_PRECONDITION") << wrong.dump();
  EXPECT_TRUE(absl::StrContains(wrong["message"].get<std::string>(),
                                "wrong device behind O-NIC ONIC-B port 2: saw vendor 0x1b36"))
      << wrong.dump();
  EXPECT_EQ(FunctionsBelow("0000:00:05.0"), "");
}

// A device removed while the agent retrains its port: a uevent listener in the guest asks for
// the NIC's removal the moment the agent's rescan adds it (before its driver has bound). The
// kernel serialises a removal with the rescan under way, so it runs as the rescan ends, racing
// the agent's check of what enumerated; which one goes first is the scheduler's choice (the
// test prints what it saw: on Debian's 6.1 kernel under TCG the agent's check went first in
// every run so far, then the device was gone). Every answer must be a clear one naming the port,
// the agent must keep serving, nothing it refused may stay bound, and once the removals stop a
// retrain brings the device back.
TEST_F(PcieSysfsOnRealKernelTest, RemovalsDuringRetrainsAreAnsweredAndLeaveNothingBound) {
  const std::string nic = FunctionsBelow("0000:00:02.0");
  ASSERT_FALSE(nic.empty());
  // Listens for the kernel's uevents (busybox's `uevent`, as udev would): each time the NIC is
  // added below the port (during the agent's rescan, before its driver has bound) it asks for its
  // removal at once, and counts it in /run/removed. The kernel runs that removal as soon as the
  // rescan lets go of its lock.
  Guest(absl::StrCat(
      "busybox uevent sh -c 'touch /run/listening; [ \"$ACTION\" = add ] && [ \"$SUBSYSTEM\" = "
      "pci ] && case $DEVPATH in */0000:00:02.0/",
      nic,
      ") [ -e /run/stop ] || { echo 1 > /sys$DEVPATH/remove && echo x >> /run/removed; };; esac' "
      "> /dev/null 2>&1 & echo $! > /run/uevent.pid"));
  // Listening once it has seen an event: a synthetic one from another device asks for one.
  Guest(
      "for i in $(seq 100); do echo change > /sys/bus/pci/devices/0000:00:03.0/uevent; "
      "[ -e /run/listening ] && exit 0; sleep 0.1; done; exit 1");
  std::map<std::string, int> outcomes;
  json last;
  for (int i = 0; i < 8; ++i) {
    json quiesced = Agent("quiesce ONIC-A 1");
    EXPECT_EQ(quiesced["code"], "OK") << quiesced.dump();
    last = Agent(absl::StrCat("retrain ONIC-A 1 ", kIntelNic, " --expect-dsn ", kNicDsn));
    const std::string code = last["code"].get<std::string>();
    ++outcomes[code];
    if (code != "OK") {
      EXPECT_TRUE(code == "FAILED_PRECONDITION" || code == "UNAVAILABLE") << last.dump();
      EXPECT_TRUE(absl::StrContains(last["message"].get<std::string>(), "ONIC-A port 1"))
          << last.dump();
      EXPECT_NE(last["link"]["status"], "LINK_STATUS_UP") << last.dump();
    }
  }
  Guest("touch /run/stop; kill $(cat /run/uevent.pid)");
  const int removed = std::atoi(Trimmed(Guest("cat /run/removed 2>/dev/null | wc -l")).c_str());
  std::cout << "removals asked for under the agent: " << removed << std::endl;
  for (const auto& [code, count] : outcomes) std::cout << code << ": " << count << std::endl;
  EXPECT_GT(removed, 0);  // The race was run, whichever way it went.
  if (last["code"] != "OK") {
    EXPECT_EQ(FunctionsBelow("0000:00:02.0"), "");
  }
  EXPECT_EQ(Agent("quiesce ONIC-A 1")["code"], "OK");
  json retrained = Agent(absl::StrCat("retrain ONIC-A 1 ", kIntelNic, " --expect-dsn ", kNicDsn));
  EXPECT_EQ(retrained["code"], "OK") << retrained.dump();
  EXPECT_EQ(FunctionsBelow("0000:00:02.0"), nic);
  EXPECT_EQ(DriverOf(nic), "e1000e");
}

// An O-NIC as the agent finds it on its own (onic_agent/onic_discovery.h): a PCIe switch whose
// upstream port matches the config's pattern, with two downstream ports below it. QEMU's TI
// XIO3130 switch (upstream 104c:8232, downstream ports 104c:8233) stands in for the card, behind
// a root port; an Intel 82574 NIC sits behind its first downstream port. Another root port with
// a device of its own is not an O-NIC and must not be taken for one.
//
// QEMU models the XIO3130's downstream ports as 2.5 GT/s ports that do not report Data Link
// Layer Link Active (Link Capabilities bit 20; the PCIe spec makes it optional below 5 GT/s
// without surprise-down reporting), so the agent cannot see their links come up: it judges
// them by what enumerates, and says so. The ports are given no power controller, so that a
// quiesce leaves the NIC in QEMU for the retrain to find again (slot power:
// SlotPowerOnRealKernelTest).
class OnicDiscoveryOnRealKernelTest : public AgentInGuestTest {
 protected:
  void SetUp() override {
    if (!BootGuest(
            {
                "pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1,addr=0x2",
                "x3130-upstream,id=onic1,bus=rp1",
                absl::StrCat("xio3130-downstream,id=dp1,bus=onic1,chassis=11,slot=1,addr=0x0",
                             kNoPower),
                absl::StrCat("xio3130-downstream,id=dp2,bus=onic1,chassis=12,slot=2,addr=0x1",
                             kNoPower),
                absl::StrCat("e1000e,bus=dp1,id=nic1,mac=", kNicMac),
                "pcie-root-port,id=rp2,bus=pcie.0,chassis=2,slot=2,addr=0x3",
                "nvme,bus=rp2,id=nvme1,serial=FLEET-NVME-1",
            },
            "e1000e nvme")) {
      return;
    }
    StartAgent(R"(host: qhost
backend: pcie-sysfs
onic_discovery:
  match: ["104c:8232"]
  serial: "{host}-n{index}"
)");
  }
};

TEST_F(OnicDiscoveryOnRealKernelTest, TheAgentFindsItsOnicAndWorksItsPortsByWhatEnumerates) {
  // The guest's PCI tree, as the kernel numbered it.
  constexpr char kUpstream[] = "0000:01:00.0";
  constexpr char kPort1[] = "0000:02:00.0";
  constexpr char kPort2[] = "0000:02:01.0";
  constexpr char kNoDllla[] =
      "does not report Data Link Layer Link Active (Link Capabilities bit 20)";
  ASSERT_EQ(Trimmed(Guest(absl::StrCat("cat /sys/bus/pci/devices/", kUpstream, "/device"))),
            "0x8232");

  json answer = Agent("discover");
  ASSERT_EQ(answer["code"], "OK") << answer.dump();
  ASSERT_EQ(answer["onics"].size(), 1u) << answer.dump();
  const json& onic = answer["onics"][0];
  EXPECT_EQ(onic["serial"], "qhost-n0");
  EXPECT_EQ(onic["pcie_address"], kUpstream);
  ASSERT_EQ(onic["ports"].size(), 2u);
  for (int port = 0; port < 2; ++port) {
    const std::string detail = onic["ports"][port]["detail"].get<std::string>();
    EXPECT_TRUE(absl::StrContains(detail, port == 0 ? kPort1 : kPort2)) << detail;
    EXPECT_TRUE(absl::StrContains(detail, kNoDllla)) << detail;
  }
  // Port 1 has the NIC below it, port 2 nothing.
  EXPECT_EQ(onic["ports"][0]["status"], "LINK_STATUS_UP") << onic.dump();
  EXPECT_EQ(onic["ports"][1]["status"], "LINK_STATUS_DOWN") << onic.dump();

  // Its first port is worked as a configured one would be: a quiesce unbinds and removes the NIC.
  const std::string nic = FunctionsBelow(kPort1);
  ASSERT_FALSE(nic.empty());
  ASSERT_EQ(DriverOf(nic), "e1000e");
  EXPECT_EQ(Agent("quiesce qhost-n0 1")["code"], "OK");
  EXPECT_EQ(FunctionsBelow(kPort1), "");
  // The retrain cannot watch the link come up; it finds the NIC again and checks it.
  json retrained = Agent(absl::StrCat("retrain qhost-n0 1 ", kIntelNic, " --expect-dsn ", kNicDsn));
  EXPECT_EQ(retrained["code"], "OK") << retrained.dump();
  EXPECT_EQ(retrained["link"]["status"], "LINK_STATUS_UP");
  EXPECT_EQ(FunctionsBelow(kPort1), nic);
  EXPECT_EQ(DriverOf(nic), "e1000e");
  // Port 2 has nothing at the far end: an empty bus is the answer, said as such.
  ASSERT_EQ(Agent("quiesce qhost-n0 2")["code"], "OK");
  json empty = Agent("retrain qhost-n0 2");
  EXPECT_EQ(empty["code"], "UNAVAILABLE") << empty.dump();
  EXPECT_TRUE(absl::StrContains(empty["message"].get<std::string>(), kNoDllla)) << empty.dump();
}

// Slot power on a hot-plug slot with a power controller (QEMU's root ports have one unless
// told otherwise): a quiesce turns the slot off through pciehp's `power`, a retrain of a slot
// that is off turns it on. QEMU models a slot turned off (power and its indicator off) as the
// device's ejection: it deletes the device, so a device arrives again by `device_add`, as the
// device at the far end of the next circuit would, and pciehp turns the slot on for it by
// itself; the agent's retrain then judges it.
class SlotPowerOnRealKernelTest : public AgentInGuestTest {
 protected:
  void SetUp() override {
    if (!BootGuest(
            {
                absl::StrCat(kRootPort, ",id=rp1,chassis=1,slot=1,addr=0x2"),
                absl::StrCat(kRootPort, ",id=rp2,chassis=2,slot=2,addr=0x3"),
                absl::StrCat("e1000e,bus=rp1,id=nic1,mac=", kNicMac),
            },
            "e1000e nvme")) {
      return;
    }
    StartAgent(R"(backend: pcie-sysfs
onics:
  - serial: ONIC-A
    ports:
      - {downstream: "0000:00:02.0"}
      - {downstream: "0000:00:03.0"}
)");
  }

  // What pciehp's `power` of the slot below root port `slot` (its Physical Slot Number) reads.
  std::string SlotPower(int slot) {
    return Trimmed(Guest(absl::StrCat("cat /sys/bus/pci/slots/", slot, "/power")));
  }
};

TEST_F(SlotPowerOnRealKernelTest, QuiesceTurnsTheSlotOffAndRetrainJudgesWhatComesUpWhenOn) {
  ASSERT_EQ(Trimmed(Guest("cat /sys/bus/pci/slots/1/address")), "0000:01:00");
  ASSERT_EQ(SlotPower(1), "1");
  const std::string nic = FunctionsBelow("0000:00:02.0");
  ASSERT_EQ(DriverOf(nic), "e1000e");

  json quiesced = Agent("quiesce ONIC-A 1");
  EXPECT_EQ(quiesced["code"], "OK") << quiesced.dump();
  EXPECT_EQ(quiesced["link"]["status"], "LINK_STATUS_QUIESCED");
  EXPECT_TRUE(
      absl::StrContains(quiesced["link"]["detail"].get<std::string>(), "slot 1 powered off"))
      << quiesced.dump();
  EXPECT_EQ(SlotPower(1), "0");
  EXPECT_EQ(FunctionsBelow("0000:00:02.0"), "");
  absl::StatusOr<json> ejected = guest_->AwaitEvent("DEVICE_DELETED");
  ASSERT_TRUE(ejected.ok()) << ejected.status();
  EXPECT_EQ((*ejected)["device"], "nic1");
  EXPECT_EQ(Agent("read ONIC-A 1")["link"]["status"], "LINK_STATUS_QUIESCED");

  // Nothing at the far end: the slot does not turn on, and the agent says so, naming the slot.
  json nothing = Agent(absl::StrCat("retrain ONIC-A 1 ", kIntelNic));
  EXPECT_EQ(nothing["code"], "UNAVAILABLE") << nothing.dump();
  EXPECT_TRUE(absl::StrContains(nothing["message"].get<std::string>(),
                                "slot 1 of downstream port 0000:00:02.0 (O-NIC ONIC-A port 1) "
                                "did not turn on: it is still off"))
      << nothing.dump();
  EXPECT_EQ(nothing["link"]["status"], "LINK_STATUS_DOWN");
  EXPECT_EQ(SlotPower(1), "0");

  // The next circuit's device arrives: pciehp turns the slot on and enumerates it; the agent's
  // retrain judges it by its serial number.
  ASSERT_TRUE(guest_
                  ->Qmp("device_add",
                        {{"driver", "e1000e"}, {"bus", "rp1"}, {"id", "nic2"}, {"mac", kHotNicMac}})
                  .ok());
  const std::string hot = AwaitFunctionBelow("0000:00:02.0");
  EXPECT_EQ(SlotPower(1), "1");
  json retrained =
      Agent(absl::StrCat("retrain ONIC-A 1 ", kIntelNic, " --expect-dsn ", kHotNicDsn));
  EXPECT_EQ(retrained["code"], "OK") << retrained.dump();
  EXPECT_EQ(retrained["link"]["status"], "LINK_STATUS_UP");
  EXPECT_EQ(FunctionsBelow("0000:00:02.0"), hot);
  EXPECT_EQ(DriverOf(hot), "e1000e");
}

// The link going away under a bound driver: QEMU 7.2 removes a device from a hot-plug slot
// as an attention-button press, which pciehp honours after 5 s by turning the slot off (an
// orderly removal; QEMU has no surprise removal, and completes a removal only on a slot with a
// power controller). The agent then reads the slot off and a retrain finds nothing to turn on.
TEST_F(SlotPowerOnRealKernelTest, ALinkThatWentAwayReadsDownAndDoesNotTrain) {
  absl::StatusOr<json> deleted = guest_->Qmp("device_del", {{"id", "nic1"}});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  absl::StatusOr<json> event = guest_->AwaitEvent("DEVICE_DELETED");
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ((*event)["device"], "nic1");
  EXPECT_EQ(FunctionsBelow("0000:00:02.0"), "");
  json read = Agent("read ONIC-A 1");
  EXPECT_EQ(read["link"]["status"], "LINK_STATUS_DOWN") << read.dump();
  EXPECT_TRUE(absl::StrContains(read["link"]["detail"].get<std::string>(),
                                "slot 1 of downstream port 0000:00:02.0 is powered off"))
      << read.dump();
  json retrained = Agent(absl::StrCat("retrain ONIC-A 1 ", kIntelNic));
  EXPECT_EQ(retrained["code"], "UNAVAILABLE") << retrained.dump();
  EXPECT_EQ(retrained["link"]["status"], "LINK_STATUS_DOWN");
}

// The empty slot pciehp keeps off reads DOWN naming its power; a wrong device that arrives on
// it is refused, removed, and the slot turned off again (which ejects it from QEMU).
TEST_F(SlotPowerOnRealKernelTest, AWrongDeviceIsRemovedAndItsSlotTurnedOffAgain) {
  json read = Agent("read ONIC-A 2");
  EXPECT_EQ(read["link"]["status"], "LINK_STATUS_DOWN") << read.dump();
  EXPECT_TRUE(absl::StrContains(read["link"]["detail"].get<std::string>(),
                                "slot 2 of downstream port 0000:00:03.0 is powered off"))
      << read.dump();

  ASSERT_EQ(Agent("quiesce ONIC-A 2")["code"], "OK");
  ASSERT_TRUE(
      guest_
          ->Qmp("device_add",
                {{"driver", "nvme"}, {"bus", "rp2"}, {"id", "nvme2"}, {"serial", "FLEET-NVME-2"}})
          .ok());
  AwaitFunctionBelow("0000:00:03.0");
  EXPECT_EQ(SlotPower(2), "1");
  json wrong = Agent(absl::StrCat("retrain ONIC-A 2 ", kIntelNic));
  EXPECT_EQ(wrong["code"], "FAILED_PRECONDITION") << wrong.dump();
  EXPECT_TRUE(absl::StrContains(wrong["message"].get<std::string>(),
                                "wrong device behind O-NIC ONIC-A port 2: saw vendor 0x1b36"))
      << wrong.dump();
  EXPECT_TRUE(absl::StrContains(wrong["message"].get<std::string>(), "removed it again"))
      << wrong.dump();
  EXPECT_EQ(FunctionsBelow("0000:00:03.0"), "");
  EXPECT_EQ(SlotPower(2), "0");
  absl::StatusOr<json> ejected = guest_->AwaitEvent("DEVICE_DELETED");
  ASSERT_TRUE(ejected.ok()) << ejected.status();
  EXPECT_EQ((*ejected)["device"], "nvme2");
}

}  // namespace
}  // namespace fleet::testing
