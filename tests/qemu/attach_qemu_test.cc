// Attaching a pooled device to a host end to end, on a real kernel: fleetd, its switch
// (polatis-emu) and two agents run inside a QEMU guest; the host's agent runs the pcie-sysfs
// backend on the guest's own PCI tree, the pooled devices' chassis agent the emulated one.
//
// QEMU's links are always trained, so the stand-ins for the pooled devices (two Intel 82574
// NICs, e1000e, behind the host O-NIC's two ports) are present from boot; the test quiesces
// them first, as a host with nothing attached would be. An attach then brings the device up
// behind the port fleetd chose, checked by the host's agent against the PCIe identity the
// inventory gives the device; a release removes it. A device whose inventory identity is not
// what enumerates (a mis-cabled fiber, or a device attached to the wrong host) leaves the
// allocation DEGRADED with both named, and the device off the host.
//
// Each test runs on two layouts of the host's O-NIC: its ports as two root ports listed by hand
// in the agent's config, and as a PCIe switch on the card (QEMU's XIO3130) that the agent finds
// itself (`onic_discovery`), whose downstream ports do not report DL Link Active, so the agent
// judges their links by what enumerates.
#include <sys/stat.h>

#include <array>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"
#include "tests/qemu/guest_test.h"

namespace fleet::testing {
namespace {

using nlohmann::json;

// Where the host's O-NIC is in the guest, and how its agent knows it.
struct OnicLayout {
  std::string name;  // Of the test instance.
  // QEMU -device values: the O-NIC's ports, and an e1000e behind each. The ports have no
  // power controller: QEMU models a slot turned off as the device's ejection, but the pooled
  // device stays at the far end of its fiber (SlotPowerOnRealKernelTest works slot power).
  std::vector<std::string> devices;
  std::string serial;                // The O-NIC's, in inventory and as the agent reports it.
  std::string pcie;                  // The O-NIC's PCIe address.
  std::array<std::string, 2> ports;  // The downstream ports behind its optical ports 1 and 2.
  std::string agent_onics;           // The host agent config's `onics` or `onic_discovery`.
};

// Names the layout in test output, rather than its bytes.
void PrintTo(const OnicLayout& layout, std::ostream* os) { *os << layout.name; }

const OnicLayout kRootPorts{
    "RootPortsListedByHand",
    {"pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1,addr=0x2,power_controller_present=off",
     "pcie-root-port,id=rp2,bus=pcie.0,chassis=2,slot=2,addr=0x3,power_controller_present=off",
     "e1000e,bus=rp1,id=nic1,mac=52:54:00:00:01:01",
     "e1000e,bus=rp2,id=nic2,mac=52:54:00:00:01:02"},
    "ONIC-A",
    "0000:00:02.0",
    {"0000:00:02.0", "0000:00:03.0"},
    R"(onics:
  - serial: ONIC-A
    pcie: "0000:00:02.0"
    ports:
      - {downstream: "0000:00:02.0"}
      - {downstream: "0000:00:03.0"}
)"};

const OnicLayout kDiscoveredSwitch{
    "ASwitchTheAgentFinds",
    {"pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1,addr=0x2",
     "x3130-upstream,id=onic1,bus=rp1",
     "xio3130-downstream,id=dp1,bus=onic1,chassis=11,slot=1,addr=0x0,"
     "power_controller_present=off",
     "xio3130-downstream,id=dp2,bus=onic1,chassis=12,slot=2,addr=0x1,"
     "power_controller_present=off",
     "e1000e,bus=dp1,id=nic1,mac=52:54:00:00:01:01",
     "e1000e,bus=dp2,id=nic2,mac=52:54:00:00:01:02"},
    "server1-n0",
    "0000:01:00.0",
    {"0000:02:00.0", "0000:02:01.0"},
    R"(onic_discovery:
  match: ["104c:8232"]
  serial: "{host}-n{index}"
)"};

// @TL1@ is the emulator's TL1 port, known once it runs in the guest; @SERIAL@ and @PCIE@ the
// host O-NIC's.
constexpr char kInventory[] = R"(site: qemu
switches:
  - id: ocs1
    model: polatis-emu-16x16
    size: 16x16
    address: 127.0.0.1
    port: @TL1@
    protocol: tl1
hosts:
  - {name: server1}
devices:
  - id: server1-cpu0
    kind: cpu
    host: server1
    onics:
      - id: s1-n0
        serial: @SERIAL@
        pcie: "@PCIE@"
        ports:
          - {tx: ocs1/1, rx: ocs1/17}
          - {tx: ocs1/2, rx: ocs1/18}
  # QEMU's e1000e stands in for a pooled device: this is what it shows on PCIe.
  - id: nic1
    kind: other
    chassis: pool1
    pcie: {vendor: 8086, device: 10d3}
    onics:
      - id: nic1-n0
        serial: POOL-1
        ports:
          - {tx: ocs1/3, rx: ocs1/19}
          - {tx: ocs1/4, rx: ocs1/20}
  # A GPU the inventory says is there; what enumerates behind the host is the NIC.
  - id: gpu9
    kind: gpu
    chassis: pool1
    pcie: {vendor: 10de, device: 20b5}
    onics:
      - id: gpu9-n0
        serial: POOL-2
        ports:
          - {tx: ocs1/5, rx: ocs1/21}
          - {tx: ocs1/6, rx: ocs1/22}
)";

constexpr char kHostAgent[] = R"(host: server1
backend: pcie-sysfs
insecure: true
)";

constexpr char kChassisAgent[] = R"(host: pool1
backend: emulated
training_ms: 5
insecure: true
onics:
  - serial: POOL-1
    ports:
      - {tx_ingress: 3, rx_egress: 19}
      - {tx_ingress: 4, rx_egress: 20}
  - serial: POOL-2
    ports:
      - {tx_ingress: 5, rx_egress: 21}
      - {tx_ingress: 6, rx_egress: 22}
)";

constexpr char kCredentials[] = "switches:\n  ocs1: {user: admin, password: root}\n";

class AttachOnRealKernelTest : public GuestTest, public ::testing::WithParamInterface<OnicLayout> {
 protected:
  void SetUp() override {
    const OnicLayout& layout = GetParam();
    if (!BootGuest(layout.devices, "e1000e")) return;
    const std::string host_agent =
        WriteText("host-agent.yaml", absl::StrCat(kHostAgent, layout.agent_onics));
    // Nothing is attached yet: what the kernel found at boot goes, as a quiesce does.
    for (const char* port : {"1", "2"}) {
      Guest(absl::StrCat(BinaryPath("fleet-onic-agent"), " --config ", host_agent, " quiesce ",
                         layout.serial, " ", port));
    }
    for (const std::string& port : layout.ports) ASSERT_EQ(FunctionsBelow(port), "") << port;

    const std::string credentials = WriteText("switch-credentials.yaml", kCredentials);
    ASSERT_EQ(chmod(credentials.c_str(), 0600), 0) << credentials;  // fleetd insists.
    const std::string inventory = WriteText(
        "inventory.yaml.in",
        absl::StrReplaceAll(kInventory, {{"@SERIAL@", layout.serial}, {"@PCIE@", layout.pcie}}));
    const std::string chassis_agent = WriteText("chassis-agent.yaml", kChassisAgent);
    // Each program in the background with its output in /run/site, one step at a time; a step
    // waits for the line that says its program serves.
    Guest(absl::StrCat("mkdir -p /run/site && cd /run/site && (", BinaryPath("polatis-emu"),
                       " --size 16x16 --tl1-port 0 --rest-port 0 --switch-ms 25 --state "
                       "/run/site/switch.json > emu.out 2> emu.err &) && ",
                       Until("grep -q '^rest: ' emu.out")),
          absl::Seconds(280));
    Guest(absl::StrCat("cd /run/site && tl1=$(sed -n 's/^tl1: .*://p' emu.out) && sed "
                       "\"s/@TL1@/$tl1/\" ",
                       inventory, " > inventory.yaml && (", BinaryPath("fleetd"),
                       " --insecure --state-dir /run/site/state --inventory inventory.yaml "
                       "--switch-credentials ",
                       credentials,
                       " --grpc-port 0 --metrics-port 0 --agent-heartbeat-ms 200 > fleetd.out "
                       "2> fleetd.err &) && ",
                       Until("grep -q '^grpc: ' fleetd.out")),
          absl::Seconds(280));
    rest_ = Trimmed(Guest("sed -n 's/^rest: //p' /run/site/emu.out"));
    grpc_ = Trimmed(Guest("sed -n 's/^grpc: //p' /run/site/fleetd.out"));
    ASSERT_FALSE(rest_.empty());
    ASSERT_FALSE(grpc_.empty());
    // The host O-NIC's lasers: a real one's are always on; the emulated chassis agent lights
    // its own.
    for (const char* ingress : {"1", "2"}) {
      Guest(absl::StrCat("curl -sf -X PUT http://", rest_, "/sim/v1/signals/", ingress,
                         " -d '{\"name\":\"", layout.serial, "/", ingress, "\",\"power_dbm\":0}'"));
    }
    Guest(absl::StrCat(
              "cd /run/site && (", BinaryPath("fleet-onic-agent"), " --config ", host_agent,
              " --controller ", grpc_,
              " --metrics-port -1 > host-agent.out 2> host-agent.err &) && (",
              BinaryPath("fleet-onic-agent"), " --config ", chassis_agent, " --controller ", grpc_,
              " --simulator ", rest_,
              " --metrics-port -1 > chassis-agent.out 2> chassis-agent.err &) && ",
              Until(absl::StrCat(Fleetctl("get agents"), " | grep -c '  yes  ' | grep -qx 2"))),
          absl::Seconds(280));
  }

  void TearDown() override {
    PrintDiagnostics(
        "cd /run/site && tail -n 20 fleetd.err host-agent.err chassis-agent.err emu.err");
  }

  // A shell condition retried every 0.2 s for up to 240 s (within Guest's 280 s), as one
  // command that fails saying so when it runs out.
  static std::string Until(const std::string& condition) {
    return absl::StrCat("{ end=$(($(date +%s) + 240)); until ", condition,
                        "; do [ $(date +%s) -gt $end ] && { echo \"timed out waiting\"; exit 1; }; "
                        "sleep 0.2; done; }");
  }

  std::string Fleetctl(const std::string& args) const {
    return absl::StrCat(BinaryPath("fleetctl"), " --insecure --server ", grpc_, " ", args);
  }

  // The one live allocation, as fleetctl shows it.
  json Allocation() {
    json list = json::parse(Guest(Fleetctl("get allocations -o json")), nullptr, false);
    EXPECT_FALSE(list.is_discarded());
    if (list.is_discarded() || !list.contains("allocations") || list["allocations"].empty()) {
      return json::object();
    }
    return list["allocations"][0];
  }

  // The downstream port the allocation's circuit arrives on at the host.
  static std::string HostPortOf(const json& allocation) {
    for (const json& c : allocation.value("circuits", json::array())) {
      const int port = c["destination"].value("port", 0);
      if (c["destination"].value("onic", "") == "s1-n0" && (port == 1 || port == 2)) {
        return GetParam().ports[port - 1];
      }
    }
    return "";
  }

  std::string rest_;
  std::string grpc_;
};

TEST_P(AttachOnRealKernelTest, AnAttachedDeviceEnumeratesWithItsIdentityAndADetachRemovesIt) {
  const std::array<std::string, 2>& ports = GetParam().ports;
  const std::string request =
      WriteText("attach-nic1.yaml",
                "tenant: team-a\nname: nic\ntopology:\n  attach:\n    host: server1\n"
                "    devices: [nic1]\n");
  Guest(Fleetctl(absl::StrCat("topology request -f ", request, " --wait")), absl::Seconds(280));
  const json allocation = Allocation();
  ASSERT_EQ(allocation.value("state", ""), "ALLOCATION_STATE_READY") << allocation.dump();
  const std::string port = HostPortOf(allocation);
  ASSERT_FALSE(port.empty()) << allocation.dump();

  // The device is in the host's PCI tree, with the identity fleetd expected and its driver.
  const std::string function = FunctionsBelow(port);
  ASSERT_FALSE(function.empty());
  EXPECT_EQ(Trimmed(Guest(absl::StrCat("cat /sys/bus/pci/devices/", function, "/vendor ",
                                       "/sys/bus/pci/devices/", function, "/device"))),
            "0x8086\n0x10d3");
  EXPECT_EQ(DriverOf(function), "e1000e");
  // The other port was not touched.
  EXPECT_EQ(FunctionsBelow(port == ports[0] ? ports[1] : ports[0]), "");

  Guest(Fleetctl(absl::StrCat("topology release ", allocation.value("id", ""), " --wait")),
        absl::Seconds(280));
  EXPECT_EQ(FunctionsBelow(port), "");  // Detached: gone from the host.
}

TEST_P(AttachOnRealKernelTest, ADeviceThatIsNotTheOneInInventoryIsAWiringErrorAndNotKept) {
  const OnicLayout& layout = GetParam();
  const std::string request =
      WriteText("attach-gpu9.yaml",
                "tenant: team-a\nname: gpu\ntopology:\n  attach:\n    host: server1\n"
                "    devices: [gpu9]\n");
  Guest(Fleetctl(absl::StrCat("topology request -f ", request)), absl::Seconds(280));
  Guest(Until(absl::StrCat(Fleetctl("get allocations -o json"),
                           " | grep -q ALLOCATION_STATE_DEGRADED")),
        absl::Seconds(280));
  const json allocation = Allocation();
  const std::string reason = allocation.value("reason", "");
  std::cout << "DEGRADED: " << reason << std::endl;
  EXPECT_TRUE(absl::StrContains(reason, "wrong device behind O-NIC " + layout.serial)) << reason;
  EXPECT_TRUE(absl::StrContains(reason, "saw vendor 0x8086 device 0x10d3")) << reason;
  EXPECT_TRUE(absl::StrContains(reason, "expected vendor 0x10de device 0x20b5")) << reason;
  EXPECT_TRUE(absl::StrContains(reason, "removed it again")) << reason;
  // The device that was not the one given does not stay on the host (each retry of the link
  // enumerates it again for a moment, so the ports are read until both are empty at once).
  Guest(Until(absl::StrCat("[ -z \"$(ls -d /sys/bus/pci/devices/", layout.ports[0],
                           "/????:??:??.? /sys/bus/pci/devices/", layout.ports[1],
                           "/????:??:??.? 2>/dev/null)\" ]")),
        absl::Seconds(280));
}

INSTANTIATE_TEST_SUITE_P(OnicLayouts, AttachOnRealKernelTest,
                         ::testing::Values(kRootPorts, kDiscoveredSwitch),
                         [](const ::testing::TestParamInfo<OnicLayout>& layout) {
                           return layout.param.name;
                         });

}  // namespace
}  // namespace fleet::testing
