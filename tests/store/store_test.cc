// The SQLite Store (controller/store/store.h): inventory reads and writes, allocations and
// circuits (invariants 1 and 2), allocation updates, manual circuits, observed cross-connects,
// drain, deletes, the event log and waiting on it, and transactional behaviour.
#include "controller/store/store.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/store/sqlite.h"
#include "tests/store/store_test_util.h"

// Filters are built with designated initializers naming only the fields a test sets; the
// others keep their documented defaults, which is what this warning would flag.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace fleet::store {
namespace {

using ::fleet::store::testing_util::IsOk;
using ::fleet::store::testing_util::ScratchDir;
using ::fleet::store::testing_util::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

constexpr char kOperator[] = "operator:alice";

int64_t Micros(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1'000'000 + t.nanos() / 1000;
}

google::protobuf::Timestamp Stamp(absl::Time t) {
  google::protobuf::Timestamp out;
  const int64_t us = absl::ToUnixMicros(t);
  out.set_seconds(us / 1'000'000);
  out.set_nanos(static_cast<int32_t>((us % 1'000'000) * 1000));
  return out;
}

// Compares protos field by field and shows both on a difference.
MATCHER_P(EqualsProto, expected, "equals " + expected.ShortDebugString()) {
  std::string diff;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  if (differencer.Compare(expected, arg)) return true;
  *result_listener << "differences:\n" << diff;
  return false;
}

v1::SwitchPortRef PortRef(const std::string& switch_id, uint32_t port) {
  v1::SwitchPortRef ref;
  ref.set_switch_id(switch_id);
  ref.set_port(port);
  return ref;
}

v1::Switch MakeSwitch(const std::string& id, uint32_t ingress, uint32_t egress,
                      std::vector<uint32_t> reserved) {
  v1::Switch s;
  s.set_id(id);
  s.set_model(absl::StrCat("polatis-7000-", ingress, "x", egress));
  s.set_ingress_ports(ingress);
  s.set_egress_ports(egress);
  s.set_address(absl::StrCat(id, ".mgmt"));
  s.set_protocol(v1::SWITCH_PROTOCOL_TL1);
  s.set_management_port(3082);
  s.set_credentials_ref("/etc/fleet/polatis.cred");
  s.set_cluster("c1");
  for (uint32_t port : reserved) s.add_trunk_reserved_ports(port);
  return s;
}

v1::Device MakeDevice(const std::string& id, v1::DeviceKind kind, const std::string& host) {
  v1::Device d;
  d.set_id(id);
  d.set_kind(kind);
  d.set_host(host);
  d.set_chassis(host.empty() ? "jbog1" : "");
  d.set_model("model-x");
  return d;
}

// `wiring` is {tx port 1, rx port 1, tx port 2, rx port 2}.
v1::Onic MakeOnic(const std::string& id, const std::string& device, const std::string& serial,
                  const std::vector<v1::SwitchPortRef>& wiring) {
  v1::Onic o;
  o.set_id(id);
  o.set_device(device);
  o.set_serial(serial);
  o.set_pcie_address("0000:17:00.0");
  for (uint32_t index = 1; index <= 2; ++index) {
    v1::OnicPort* p = o.add_ports();
    p->set_index(index);
    *p->mutable_tx() = wiring[2 * (index - 1)];
    *p->mutable_rx() = wiring[2 * (index - 1) + 1];
  }
  return o;
}

v1::Trunk MakeTrunk(const std::string& id, v1::SwitchPortRef from, v1::SwitchPortRef to) {
  v1::Trunk t;
  t.set_id(id);
  *t.mutable_from() = std::move(from);
  *t.mutable_to() = std::move(to);
  return t;
}

// The small site every test starts from:
//   s1 8x8 (ingress 1-8, egress 9-16), ports 7, 8, 15, 16 reserved for trunks;
//   s2 4x4 (ingress 1-4, egress 5-8), ports 1 and 5 reserved for trunks;
//   host h1 with CPU h1-cpu0 and its O-NIC n-cpu: port 1 s1/1→s1/9, port 2 s1/2→s1/10;
//   pooled GPU gpu0 with O-NIC n-gpu: port 1 s1/3→s1/11, port 2 s2/2→s2/6;
//   trunk t1 s1/15 → s2/1 and trunk t2 s2/5 → s1/7.
InventoryWrite SmallSite() {
  InventoryWrite write;
  v1::Inventory& inv = write.objects;
  inv.set_site("test");
  *inv.add_switches() = MakeSwitch("s1", 8, 8, {7, 8, 15, 16});
  *inv.add_switches() = MakeSwitch("s2", 4, 4, {1, 5});
  v1::Host* host = inv.add_hosts();
  host->set_name("h1");
  host->set_address("10.0.0.11");
  host->set_cluster("c1");
  *inv.add_devices() = MakeDevice("h1-cpu0", v1::DEVICE_KIND_CPU, "h1");
  *inv.add_devices() = MakeDevice("gpu0", v1::DEVICE_KIND_GPU, "");
  *inv.add_onics() =
      MakeOnic("n-cpu", "h1-cpu0", "SN-CPU",
               {PortRef("s1", 1), PortRef("s1", 9), PortRef("s1", 2), PortRef("s1", 10)});
  *inv.add_onics() =
      MakeOnic("n-gpu", "gpu0", "SN-GPU",
               {PortRef("s1", 3), PortRef("s1", 11), PortRef("s2", 2), PortRef("s2", 6)});
  *inv.add_trunks() = MakeTrunk("t1", PortRef("s1", 15), PortRef("s2", 1));
  *inv.add_trunks() = MakeTrunk("t2", PortRef("s2", 5), PortRef("s1", 7));
  write.created = {"switch s1",  "switch s2",  "host h1",  "device h1-cpu0", "device gpu0",
                   "onic n-cpu", "onic n-gpu", "trunk t1", "trunk t2"};
  return write;
}

v1::CrossConnect Xc(const std::string& switch_id, uint32_t ingress, uint32_t egress) {
  v1::CrossConnect x;
  x.set_switch_id(switch_id);
  x.set_ingress(ingress);
  x.set_egress(egress);
  return x;
}

v1::Circuit MakeCircuit(const std::string& id, const std::string& src, uint32_t src_port,
                        const std::string& dst, uint32_t dst_port,
                        const std::vector<v1::CrossConnect>& hops,
                        v1::CircuitState state = v1::CIRCUIT_STATE_PLANNED,
                        const std::string& phase = "") {
  v1::Circuit c;
  c.set_id(id);
  c.mutable_source()->set_onic(src);
  c.mutable_source()->set_port(src_port);
  c.mutable_destination()->set_onic(dst);
  c.mutable_destination()->set_port(dst_port);
  for (const v1::CrossConnect& x : hops) *c.add_cross_connects() = x;
  c.set_state(state);
  c.set_phase(phase);
  return c;
}

// The two directions of the n-cpu port 1 ↔ n-gpu port 1 link on s1, as wired in SmallSite().
v1::Circuit CpuToGpu(const std::string& id = "c-up") {
  return MakeCircuit(id, "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)});
}
v1::Circuit GpuToCpu(const std::string& id = "c-down") {
  return MakeCircuit(id, "n-gpu", 1, "n-cpu", 1, {Xc("s1", 3, 9)});
}

v1::Allocation MakeAllocation(const std::string& id, const std::string& tenant,
                              v1::AllocationState state, std::vector<std::string> members,
                              std::vector<v1::Circuit> circuits) {
  v1::Allocation a;
  a.set_id(id);
  a.set_tenant(tenant);
  a.set_name(absl::StrCat("job-", id));
  a.set_state(state);
  a.mutable_request()->set_tenant(tenant);
  a.mutable_request()->set_name(absl::StrCat("job-", id));
  for (std::string& m : members) a.add_members(std::move(m));
  for (v1::Circuit& c : circuits) *a.add_circuits() = std::move(c);
  return a;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { OpenStore(":memory:"); }

  void OpenStore(const std::string& path) {
    store_.reset();
    absl::StatusOr<std::unique_ptr<Store>> store =
        OpenSqliteStore({.path = path, .clock = &clock_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
  }

  void WriteSite() { ASSERT_THAT(store_->WriteInventory(SmallSite(), kOperator), IsOk()); }

  std::vector<v1::Event> Events(EventFilter filter = {}) {
    absl::StatusOr<std::vector<v1::Event>> events = store_->ListEvents(filter);
    EXPECT_TRUE(events.ok()) << events.status();
    return events.ok() ? *events : std::vector<v1::Event>{};
  }

  v1::SwitchPort Port(const std::string& switch_id, uint32_t port) {
    absl::StatusOr<std::vector<v1::SwitchPort>> ports = store_->ListPorts(switch_id);
    EXPECT_TRUE(ports.ok()) << ports.status();
    if (ports.ok()) {
      for (const v1::SwitchPort& p : *ports) {
        if (p.ref().port() == port) return p;
      }
    }
    ADD_FAILURE() << "no port " << switch_id << "/" << port;
    return {};
  }

  // Counts of every kind of object, to show a failed write left nothing behind.
  struct Counts {
    size_t switches, ports, hosts, devices, onics, trunks, allocations, circuits, events;
    bool operator==(const Counts&) const = default;
    friend void PrintTo(const Counts& c, std::ostream* os) {
      *os << "{switches " << c.switches << ", ports " << c.ports << ", hosts " << c.hosts
          << ", devices " << c.devices << ", onics " << c.onics << ", trunks " << c.trunks
          << ", allocations " << c.allocations << ", circuits " << c.circuits << ", events "
          << c.events << "}";
    }
  };
  Counts Count() {
    Counts c{};
    if (auto v = store_->ListSwitches(); v.ok()) c.switches = v->size();
    if (auto v = store_->ListPorts(""); v.ok()) c.ports = v->size();
    if (auto v = store_->ListHosts(); v.ok()) c.hosts = v->size();
    if (auto v = store_->ListDevices({}); v.ok()) c.devices = v->size();
    if (auto v = store_->ListOnics({}); v.ok()) c.onics = v->size();
    if (auto v = store_->ListTrunks(); v.ok()) c.trunks = v->size();
    if (auto v = store_->ListAllocations({.include_released = true}); v.ok()) {
      c.allocations = v->size();
    }
    if (auto v = store_->ListCircuits({}); v.ok()) c.circuits = v->size();
    c.events = Events().size();
    return c;
  }

  ScratchDir dir_;  // For tests that need a file; outlives the store opened on it.
  FakeClock clock_;
  std::unique_ptr<Store> store_;
};

// ---------------------------------------------------------------------------------------
// Inventory reads

TEST_F(StoreTest, EmptyStoreListsNothing) {
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Switch> switches, store_->ListSwitches());
  EXPECT_THAT(switches, IsEmpty());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::SwitchPort> ports, store_->ListPorts(""));
  EXPECT_THAT(ports, IsEmpty());
  EXPECT_THAT(Events(), IsEmpty());
}

TEST_F(StoreTest, ListSwitchesReturnsEveryFieldAndTrunkReservations) {
  WriteSite();
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Switch> switches, store_->ListSwitches());
  ASSERT_THAT(switches, SizeIs(2));
  EXPECT_THAT(switches[0], EqualsProto(MakeSwitch("s1", 8, 8, {7, 8, 15, 16})));
  EXPECT_THAT(switches[1], EqualsProto(MakeSwitch("s2", 4, 4, {1, 5})));
  ASSERT_OK_AND_ASSIGN(v1::Switch s2, store_->GetSwitch("s2"));
  EXPECT_THAT(s2, EqualsProto(MakeSwitch("s2", 4, 4, {1, 5})));
}

TEST_F(StoreTest, ListPortsReturnsEveryPortInOrderWithDirectionReservationAndWiring) {
  WriteSite();
  ASSERT_OK_AND_ASSIGN(std::vector<v1::SwitchPort> ports, store_->ListPorts("s1"));
  ASSERT_THAT(ports, SizeIs(16));
  const std::set<uint32_t> reserved = {7, 8, 15, 16};
  for (uint32_t i = 0; i < 16; ++i) {
    const v1::SwitchPort& p = ports[i];
    const uint32_t number = i + 1;
    SCOPED_TRACE(absl::StrCat("port ", number));
    EXPECT_EQ(p.ref().switch_id(), "s1");
    EXPECT_EQ(p.ref().port(), number);
    EXPECT_EQ(p.direction(), number <= 8 ? v1::PORT_DIRECTION_INGRESS : v1::PORT_DIRECTION_EGRESS);
    EXPECT_EQ(p.reservation(),
              reserved.count(number) ? v1::PORT_RESERVATION_TRUNK : v1::PORT_RESERVATION_NONE);
    EXPECT_EQ(p.admin_state(), v1::ADMIN_STATE_ENABLED);
    EXPECT_EQ(p.oper_state(), v1::OPER_STATE_UNKNOWN);
    EXPECT_EQ(p.circuit_id(), "");
  }
  auto onic_port = [](const std::string& onic, uint32_t port) {
    v1::PortWiring w;
    w.mutable_onic_port()->set_onic(onic);
    w.mutable_onic_port()->set_port(port);
    return w;
  };
  auto trunk = [](const std::string& id) {
    v1::PortWiring w;
    w.set_trunk(id);
    return w;
  };
  // tx fibers on ingress ports, rx fibers on egress ports.
  EXPECT_THAT(ports[0].wiring(), EqualsProto(onic_port("n-cpu", 1)));   // s1/1 tx
  EXPECT_THAT(ports[8].wiring(), EqualsProto(onic_port("n-cpu", 1)));   // s1/9 rx
  EXPECT_THAT(ports[1].wiring(), EqualsProto(onic_port("n-cpu", 2)));   // s1/2 tx
  EXPECT_THAT(ports[9].wiring(), EqualsProto(onic_port("n-cpu", 2)));   // s1/10 rx
  EXPECT_THAT(ports[2].wiring(), EqualsProto(onic_port("n-gpu", 1)));   // s1/3 tx
  EXPECT_THAT(ports[10].wiring(), EqualsProto(onic_port("n-gpu", 1)));  // s1/11 rx
  EXPECT_THAT(ports[14].wiring(), EqualsProto(trunk("t1")));            // s1/15 trunk out
  EXPECT_THAT(ports[6].wiring(), EqualsProto(trunk("t2")));             // s1/7 trunk in
  for (uint32_t unwired : {4u, 5u, 6u, 8u, 12u, 13u, 14u, 16u}) {
    EXPECT_FALSE(ports[unwired - 1].has_wiring()) << "port " << unwired;
  }

  ASSERT_OK_AND_ASSIGN(std::vector<v1::SwitchPort> s2, store_->ListPorts("s2"));
  ASSERT_THAT(s2, SizeIs(8));
  EXPECT_THAT(s2[0].wiring(), EqualsProto(trunk("t1")));            // s2/1 trunk in
  EXPECT_THAT(s2[4].wiring(), EqualsProto(trunk("t2")));            // s2/5 trunk out
  EXPECT_THAT(s2[1].wiring(), EqualsProto(onic_port("n-gpu", 2)));  // s2/2 tx
  EXPECT_THAT(s2[5].wiring(), EqualsProto(onic_port("n-gpu", 2)));  // s2/6 rx
  EXPECT_EQ(s2[4].direction(), v1::PORT_DIRECTION_EGRESS);
  EXPECT_EQ(s2[3].direction(), v1::PORT_DIRECTION_INGRESS);
}

TEST_F(StoreTest, ListPortsOfEverySwitchIsOrderedBySwitchThenPort) {
  WriteSite();
  ASSERT_OK_AND_ASSIGN(std::vector<v1::SwitchPort> ports, store_->ListPorts(""));
  ASSERT_THAT(ports, SizeIs(24));
  for (size_t i = 0; i < ports.size(); ++i) {
    const bool on_s1 = i < 16;
    EXPECT_EQ(ports[i].ref().switch_id(), on_s1 ? "s1" : "s2") << i;
    EXPECT_EQ(ports[i].ref().port(), on_s1 ? i + 1 : i - 15) << i;
  }
}

TEST_F(StoreTest, ListPortsOfUnknownSwitchIsNotFound) {
  WriteSite();
  EXPECT_THAT(store_->ListPorts("s9"),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("switch"), HasSubstr("s9"))));
}

TEST_F(StoreTest, ListDevicesFiltersByHostAndKindAndFillsOnics) {
  WriteSite();
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Device> all, store_->ListDevices({}));
  ASSERT_THAT(all, SizeIs(2));
  EXPECT_EQ(all[0].id(), "gpu0");  // Ordered by id.
  EXPECT_EQ(all[0].kind(), v1::DEVICE_KIND_GPU);
  EXPECT_EQ(all[0].host(), "");
  EXPECT_EQ(all[0].chassis(), "jbog1");
  EXPECT_EQ(all[0].model(), "model-x");
  EXPECT_EQ(all[0].admin_state(), v1::ADMIN_STATE_ENABLED);
  EXPECT_THAT(all[0].onics(), ElementsAre("n-gpu"));
  EXPECT_EQ(all[1].id(), "h1-cpu0");
  EXPECT_EQ(all[1].host(), "h1");
  EXPECT_THAT(all[1].onics(), ElementsAre("n-cpu"));

  ASSERT_OK_AND_ASSIGN(std::vector<v1::Device> on_h1, store_->ListDevices({.host = "h1"}));
  ASSERT_THAT(on_h1, SizeIs(1));
  EXPECT_EQ(on_h1[0].id(), "h1-cpu0");
  EXPECT_EQ(on_h1[0].kind(), v1::DEVICE_KIND_CPU);

  ASSERT_OK_AND_ASSIGN(std::vector<v1::Device> gpus,
                       store_->ListDevices({.kind = v1::DEVICE_KIND_GPU}));
  ASSERT_THAT(gpus, SizeIs(1));
  EXPECT_EQ(gpus[0].id(), "gpu0");

  ASSERT_OK_AND_ASSIGN(std::vector<v1::Device> none,
                       store_->ListDevices({.host = "h1", .kind = v1::DEVICE_KIND_GPU}));
  EXPECT_THAT(none, IsEmpty());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Device> unknown_host, store_->ListDevices({.host = "h9"}));
  EXPECT_THAT(unknown_host, IsEmpty());

  ASSERT_OK_AND_ASSIGN(v1::Device cpu, store_->GetDevice("h1-cpu0"));
  EXPECT_THAT(cpu, EqualsProto(on_h1[0]));
}

TEST_F(StoreTest, DeviceListsEveryOnicInIdOrder) {
  WriteSite();
  InventoryWrite more;
  *more.objects.add_switches() = MakeSwitch("s3", 4, 4, {});
  *more.objects.add_onics() =
      MakeOnic("n-cpu-b", "h1-cpu0", "SN-CPU-B",
               {PortRef("s3", 1), PortRef("s3", 5), PortRef("s3", 2), PortRef("s3", 6)});
  more.created = {"switch s3", "onic n-cpu-b"};
  ASSERT_THAT(store_->WriteInventory(more, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Device cpu, store_->GetDevice("h1-cpu0"));
  EXPECT_THAT(cpu.onics(), ElementsAre("n-cpu", "n-cpu-b"));
}

TEST_F(StoreTest, ListOnicsFiltersByHostAndSwitchAndFillsPortsAndHost) {
  WriteSite();
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Onic> all, store_->ListOnics({}));
  ASSERT_THAT(all, SizeIs(2));
  EXPECT_EQ(all[0].id(), "n-cpu");
  EXPECT_EQ(all[1].id(), "n-gpu");

  v1::Onic expected_cpu =
      MakeOnic("n-cpu", "h1-cpu0", "SN-CPU",
               {PortRef("s1", 1), PortRef("s1", 9), PortRef("s1", 2), PortRef("s1", 10)});
  expected_cpu.set_host("h1");
  expected_cpu.set_admin_state(v1::ADMIN_STATE_ENABLED);
  for (v1::OnicPort& p : *expected_cpu.mutable_ports()) {
    p.set_admin_state(v1::ADMIN_STATE_ENABLED);
    p.set_oper_state(v1::OPER_STATE_UNKNOWN);
  }
  EXPECT_THAT(all[0], EqualsProto(expected_cpu));
  EXPECT_EQ(all[1].host(), "");  // A pooled GPU has no host.
  ASSERT_THAT(all[1].ports(), SizeIs(2));
  EXPECT_THAT(all[1].ports(1).tx(), EqualsProto(PortRef("s2", 2)));
  EXPECT_THAT(all[1].ports(1).rx(), EqualsProto(PortRef("s2", 6)));

  ASSERT_OK_AND_ASSIGN(std::vector<v1::Onic> on_h1, store_->ListOnics({.host = "h1"}));
  ASSERT_THAT(on_h1, SizeIs(1));
  EXPECT_THAT(on_h1[0], EqualsProto(expected_cpu));

  ASSERT_OK_AND_ASSIGN(std::vector<v1::Onic> on_s2, store_->ListOnics({.switch_id = "s2"}));
  ASSERT_THAT(on_s2, SizeIs(1));
  EXPECT_EQ(on_s2[0].id(), "n-gpu");
  // Filtering by switch keeps every port of the O-NIC, not only those on that switch.
  ASSERT_THAT(on_s2[0].ports(), SizeIs(2));
  EXPECT_THAT(on_s2[0].ports(0).tx(), EqualsProto(PortRef("s1", 3)));

  ASSERT_OK_AND_ASSIGN(std::vector<v1::Onic> on_s1, store_->ListOnics({.switch_id = "s1"}));
  EXPECT_THAT(on_s1, SizeIs(2));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Onic> h1_on_s2,
                       store_->ListOnics({.host = "h1", .switch_id = "s2"}));
  EXPECT_THAT(h1_on_s2, IsEmpty());

  ASSERT_OK_AND_ASSIGN(v1::Onic got, store_->GetOnic("n-cpu"));
  EXPECT_THAT(got, EqualsProto(expected_cpu));
}

TEST_F(StoreTest, ListHostsAndTrunks) {
  WriteSite();
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Host> hosts, store_->ListHosts());
  ASSERT_THAT(hosts, SizeIs(1));
  EXPECT_EQ(hosts[0].name(), "h1");
  EXPECT_EQ(hosts[0].address(), "10.0.0.11");
  EXPECT_EQ(hosts[0].cluster(), "c1");
  EXPECT_EQ(hosts[0].admin_state(), v1::ADMIN_STATE_ENABLED);
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Trunk> trunks, store_->ListTrunks());
  ASSERT_THAT(trunks, SizeIs(2));
  EXPECT_THAT(trunks[0], EqualsProto(MakeTrunk("t1", PortRef("s1", 15), PortRef("s2", 1))));
  EXPECT_THAT(trunks[1], EqualsProto(MakeTrunk("t2", PortRef("s2", 5), PortRef("s1", 7))));
}

TEST_F(StoreTest, GetOfMissingObjectIsNotFoundNamingKindAndId) {
  WriteSite();
  EXPECT_THAT(store_->GetSwitch("s9"),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("switch"), HasSubstr("s9"))));
  EXPECT_THAT(store_->GetHost("h9"),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("host"), HasSubstr("h9"))));
  EXPECT_THAT(store_->GetDevice("gpu9"),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("device"), HasSubstr("gpu9"))));
  EXPECT_THAT(store_->GetOnic("n-9"),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("onic"), HasSubstr("n-9"))));
  EXPECT_THAT(
      store_->GetAllocation("a9"),
      StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("allocation"), HasSubstr("a9"))));
}

TEST_F(StoreTest, LoadInventoryRoundTrips) {
  WriteSite();
  ASSERT_OK_AND_ASSIGN(v1::Inventory loaded, store_->LoadInventory());

  // What was written, plus the output-only fields and default states the store fills in.
  v1::Inventory expected = SmallSite().objects;
  expected.clear_site();  // The site name is not stored.
  // Lists come back ordered by id.
  expected.mutable_devices()->SwapElements(0, 1);
  for (v1::Host& h : *expected.mutable_hosts()) h.set_admin_state(v1::ADMIN_STATE_ENABLED);
  for (v1::Device& d : *expected.mutable_devices()) {
    d.set_admin_state(v1::ADMIN_STATE_ENABLED);
    d.add_onics(d.id() == "gpu0" ? "n-gpu" : "n-cpu");
  }
  for (v1::Onic& o : *expected.mutable_onics()) {
    o.set_admin_state(v1::ADMIN_STATE_ENABLED);
    o.set_host(o.id() == "n-cpu" ? "h1" : "");
    for (v1::OnicPort& p : *o.mutable_ports()) {
      p.set_admin_state(v1::ADMIN_STATE_ENABLED);
      p.set_oper_state(v1::OPER_STATE_UNKNOWN);
    }
  }
  EXPECT_THAT(loaded, EqualsProto(expected));

  // Writing what was loaded into a fresh store gives the same site back.
  FakeClock other_clock;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> other,
                       OpenSqliteStore({.path = ":memory:", .clock = &other_clock}));
  InventoryWrite copy;
  copy.objects = loaded;
  ASSERT_THAT(other->WriteInventory(copy, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Inventory reloaded, other->LoadInventory());
  EXPECT_THAT(reloaded, EqualsProto(loaded));
}

// ---------------------------------------------------------------------------------------
// Inventory writes and events

TEST_F(StoreTest, InventoryWriteAppendsOneEventPerChangeNamingPrincipalAtClockTime) {
  WriteSite();
  const int64_t first_time = absl::ToUnixMicros(clock_.Now());
  std::vector<v1::Event> events = Events();
  ASSERT_THAT(events, SizeIs(9));
  std::vector<std::string> objects;
  uint64_t last_sequence = 0;
  for (const v1::Event& e : events) {
    EXPECT_GT(e.sequence(), last_sequence);
    last_sequence = e.sequence();
    EXPECT_EQ(e.principal(), kOperator);
    EXPECT_EQ(e.kind(), "inventory.created");
    EXPECT_EQ(e.severity(), v1::EVENT_SEVERITY_INFO);
    EXPECT_EQ(Micros(e.time()), first_time);
    EXPECT_THAT(e.message(), HasSubstr(e.object_id()));
    objects.push_back(absl::StrCat(e.object_kind(), " ", e.object_id()));
  }
  EXPECT_EQ(objects, SmallSite().created);

  clock_.Advance(absl::Minutes(5));
  InventoryWrite update;
  v1::Host* host = update.objects.add_hosts();
  host->set_name("h1");
  host->set_address("10.0.0.99");
  update.updated = {"host h1"};
  ASSERT_THAT(store_->WriteInventory(update, "operator:bob"), IsOk());
  std::vector<v1::Event> after = Events({.after_sequence = last_sequence});
  ASSERT_THAT(after, SizeIs(1));
  EXPECT_EQ(after[0].kind(), "inventory.updated");
  EXPECT_EQ(after[0].principal(), "operator:bob");
  EXPECT_EQ(after[0].object_kind(), "host");
  EXPECT_EQ(after[0].object_id(), "h1");
  EXPECT_EQ(Micros(after[0].time()), first_time + absl::ToInt64Microseconds(absl::Minutes(5)));
  ASSERT_OK_AND_ASSIGN(v1::Host stored, store_->GetHost("h1"));
  EXPECT_EQ(stored.address(), "10.0.0.99");
}

TEST_F(StoreTest, EmptyPrincipalIsRecordedAsAnonymous) {
  InventoryWrite write;
  write.objects.add_hosts()->set_name("h1");
  write.created = {"host h1"};
  ASSERT_THAT(store_->WriteInventory(write, ""), IsOk());
  std::vector<v1::Event> events = Events();
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].principal(), "anonymous");
}

TEST_F(StoreTest, RewritingTheSameSiteKeepsCounts) {
  WriteSite();
  const Counts before = Count();
  InventoryWrite again = SmallSite();
  again.created.clear();
  ASSERT_THAT(store_->WriteInventory(again, kOperator), IsOk());
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Switch s1, store_->GetSwitch("s1"));
  EXPECT_THAT(s1.trunk_reserved_ports(), ElementsAre(7, 8, 15, 16));
}

TEST_F(StoreTest, UpdatingTrunkReservationsReplacesThem) {
  WriteSite();
  InventoryWrite update;
  *update.objects.add_switches() = MakeSwitch("s1", 8, 8, {8, 16});
  update.updated = {"switch s1"};
  ASSERT_THAT(store_->WriteInventory(update, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Switch s1, store_->GetSwitch("s1"));
  EXPECT_THAT(s1.trunk_reserved_ports(), ElementsAre(8, 16));
  EXPECT_EQ(Port("s1", 7).reservation(), v1::PORT_RESERVATION_NONE);
  EXPECT_EQ(Port("s1", 16).reservation(), v1::PORT_RESERVATION_TRUNK);
}

TEST_F(StoreTest, GrowingASwitchAddsEgressPorts) {
  WriteSite();
  InventoryWrite update;
  *update.objects.add_switches() = MakeSwitch("s1", 8, 10, {7, 8, 15, 16});
  update.updated = {"switch s1"};
  ASSERT_THAT(store_->WriteInventory(update, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::SwitchPort> ports, store_->ListPorts("s1"));
  ASSERT_THAT(ports, SizeIs(18));
  EXPECT_EQ(ports[17].ref().port(), 18u);
  EXPECT_EQ(ports[17].direction(), v1::PORT_DIRECTION_EGRESS);
  EXPECT_EQ(ports[0].wiring().onic_port().onic(), "n-cpu");  // Wiring survives.
}

TEST_F(StoreTest, ShrinkingASwitchOffFreePortsSucceeds) {
  WriteSite();
  InventoryWrite update;
  *update.objects.add_switches() = MakeSwitch("s1", 8, 7, {7, 8, 15});
  update.updated = {"switch s1"};
  ASSERT_THAT(store_->WriteInventory(update, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::SwitchPort> ports, store_->ListPorts("s1"));
  ASSERT_THAT(ports, SizeIs(15));
  EXPECT_EQ(ports.back().ref().port(), 15u);
}

TEST_F(StoreTest, AdministrativeStateIsKeptAcrossUpdates) {
  ASSERT_TRUE(dir_.ok());
  const std::string path = dir_.File("state.db");
  OpenStore(path);
  WriteSite();
  {
    // Drain is set by other means than an inventory write; emulate it.
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path));
    ASSERT_THAT(db->Exec("UPDATE hosts SET admin_state = 'drained' WHERE name = 'h1'"), IsOk());
    ASSERT_THAT(db->Exec("UPDATE switch_ports SET admin_state = 'drained' "
                         "WHERE switch_id = 's1' AND port = 4"),
                IsOk());
    ASSERT_THAT(db->Exec("UPDATE devices SET admin_state = 'drained' WHERE id = 'gpu0'"), IsOk());
  }
  InventoryWrite update = SmallSite();
  update.objects.mutable_hosts(0)->set_address("10.0.0.12");
  update.created.clear();
  update.updated = {"host h1"};
  ASSERT_THAT(store_->WriteInventory(update, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Host host, store_->GetHost("h1"));
  EXPECT_EQ(host.address(), "10.0.0.12");
  EXPECT_EQ(host.admin_state(), v1::ADMIN_STATE_DRAINED);
  EXPECT_EQ(Port("s1", 4).admin_state(), v1::ADMIN_STATE_DRAINED);
  ASSERT_OK_AND_ASSIGN(v1::Device gpu, store_->GetDevice("gpu0"));
  EXPECT_EQ(gpu.admin_state(), v1::ADMIN_STATE_DRAINED);
}

TEST_F(StoreTest, FailedWriteWithFiberToMissingSwitchPortLeavesNothing) {
  WriteSite();
  const Counts before = Count();
  InventoryWrite write;
  write.objects.add_hosts()->set_name("h2");
  *write.objects.add_devices() = MakeDevice("h2-cpu0", v1::DEVICE_KIND_CPU, "h2");
  // Port 99 does not exist on s1: the fiber's foreign key fails after the host, device and
  // O-NIC rows were written.
  *write.objects.add_onics() =
      MakeOnic("n-h2", "h2-cpu0", "SN-H2",
               {PortRef("s1", 4), PortRef("s1", 12), PortRef("s1", 5), PortRef("s1", 99)});
  write.created = {"host h2", "device h2-cpu0", "onic n-h2"};
  EXPECT_THAT(store_->WriteInventory(write, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("FOREIGN KEY")));
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetHost("h2"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("h2")));
  EXPECT_THAT(store_->GetDevice("h2-cpu0"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("h2")));
  EXPECT_THAT(store_->GetOnic("n-h2"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("n-h2")));
  EXPECT_FALSE(Port("s1", 4).has_wiring());
}

TEST_F(StoreTest, FailedWriteWithTwoOnicsOnOneSwitchPortLeavesNothing) {
  WriteSite();
  const Counts before = Count();
  InventoryWrite write;
  *write.objects.add_devices() = MakeDevice("gpu1", v1::DEVICE_KIND_GPU, "");
  // s1/1 already carries n-cpu port 1's tx fiber.
  *write.objects.add_onics() =
      MakeOnic("n-gpu1", "gpu1", "SN-GPU1",
               {PortRef("s1", 4), PortRef("s1", 12), PortRef("s1", 1), PortRef("s1", 13)});
  write.created = {"device gpu1", "onic n-gpu1"};
  EXPECT_THAT(store_->WriteInventory(write, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("UNIQUE")));
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetDevice("gpu1"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("gpu1")));
  EXPECT_FALSE(Port("s1", 4).has_wiring());
  EXPECT_EQ(Port("s1", 1).wiring().onic_port().onic(), "n-cpu");
}

TEST_F(StoreTest, FailedFirstWriteLeavesAnEmptyStore) {
  InventoryWrite write = SmallSite();
  // The second O-NIC's port 2 rx lands on the egress already holding n-cpu port 1's rx.
  write.objects.mutable_onics(1)->mutable_ports(1)->mutable_rx()->set_switch_id("s1");
  write.objects.mutable_onics(1)->mutable_ports(1)->mutable_rx()->set_port(9);
  EXPECT_THAT(store_->WriteInventory(write, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("UNIQUE")));
  EXPECT_EQ(Count(), Counts{});
}

TEST_F(StoreTest, FiberMayMoveBetweenPortsOfAnOnicInOneWrite) {
  WriteSite();
  InventoryWrite swap;
  // n-cpu's ports swap their switch ports; no circuit uses them.
  *swap.objects.add_onics() =
      MakeOnic("n-cpu", "h1-cpu0", "SN-CPU",
               {PortRef("s1", 2), PortRef("s1", 10), PortRef("s1", 1), PortRef("s1", 9)});
  swap.updated = {"onic n-cpu"};
  ASSERT_THAT(store_->WriteInventory(swap, kOperator), IsOk());
  EXPECT_EQ(Port("s1", 1).wiring().onic_port().port(), 2u);
  EXPECT_EQ(Port("s1", 2).wiring().onic_port().port(), 1u);
}

// ---------------------------------------------------------------------------------------
// Changes under circuits

TEST_F(StoreTest, ShrinkingASwitchUnderADesiredCircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  InventoryWrite shrink;
  *shrink.objects.add_switches() = MakeSwitch("s1", 8, 2, {7, 8});  // Egress 11 would vanish.
  shrink.updated = {"switch s1"};
  EXPECT_THAT(
      store_->WriteInventory(shrink, kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("s1"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Switch s1, store_->GetSwitch("s1"));
  EXPECT_EQ(s1.egress_ports(), 8u);
  EXPECT_THAT(s1.trunk_reserved_ports(), ElementsAre(7, 8, 15, 16));
}

TEST_F(StoreTest, ResplittingASwitchUnderADesiredCircuitIsRefused) {
  WriteSite();
  // n-gpu port 2 → n-cpu port 2 through t2: s2 2→5, then s1 7→10.
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-back", "n-gpu", 2, "n-cpu", 2,
                                              {Xc("s2", 2, 5), Xc("s1", 7, 10)})}),
                  kOperator),
              IsOk());
  InventoryWrite resplit;
  // Same 16 ports, but ingress 7 would become an egress.
  *resplit.objects.add_switches() = MakeSwitch("s1", 6, 10, {15, 16});
  resplit.updated = {"switch s1"};
  EXPECT_THAT(store_->WriteInventory(resplit, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("c-back")));
  EXPECT_EQ(Port("s1", 7).direction(), v1::PORT_DIRECTION_INGRESS);
}

TEST_F(StoreTest, RewiringAnOnicPortInACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  InventoryWrite rewire;
  // Port 1's tx moves from s1/1 to s1/5.
  *rewire.objects.add_onics() =
      MakeOnic("n-cpu", "h1-cpu0", "SN-CPU",
               {PortRef("s1", 5), PortRef("s1", 9), PortRef("s1", 2), PortRef("s1", 10)});
  rewire.updated = {"onic n-cpu"};
  EXPECT_THAT(store_->WriteInventory(rewire, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("n-cpu"), HasSubstr("port 1"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Onic onic, store_->GetOnic("n-cpu"));
  EXPECT_THAT(onic.ports(0).tx(), EqualsProto(PortRef("s1", 1)));
  EXPECT_EQ(Port("s1", 1).wiring().onic_port().onic(), "n-cpu");
  EXPECT_FALSE(Port("s1", 5).has_wiring());
}

TEST_F(StoreTest, RewiringTheDestinationPortOfACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  InventoryWrite rewire;
  // n-gpu port 1 is c-up's destination; its rx moves from s1/11 to s1/12.
  *rewire.objects.add_onics() =
      MakeOnic("n-gpu", "gpu0", "SN-GPU",
               {PortRef("s1", 3), PortRef("s1", 12), PortRef("s2", 2), PortRef("s2", 6)});
  rewire.updated = {"onic n-gpu"};
  EXPECT_THAT(store_->WriteInventory(rewire, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("n-gpu"), HasSubstr("port 1"), HasSubstr("c-up"))));
  EXPECT_EQ(Port("s1", 11).wiring().onic_port().onic(), "n-gpu");
}

TEST_F(StoreTest, RewiringAnOnicPortOutsideAnyCircuitSucceeds) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  InventoryWrite rewire;
  // Port 2 (in no circuit) moves its tx from s1/2 to s1/5; port 1 stays as it is.
  *rewire.objects.add_onics() =
      MakeOnic("n-cpu", "h1-cpu0", "SN-CPU",
               {PortRef("s1", 1), PortRef("s1", 9), PortRef("s1", 5), PortRef("s1", 10)});
  rewire.updated = {"onic n-cpu"};
  ASSERT_THAT(store_->WriteInventory(rewire, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Onic onic, store_->GetOnic("n-cpu"));
  EXPECT_THAT(onic.ports(1).tx(), EqualsProto(PortRef("s1", 5)));
  EXPECT_THAT(onic.ports(0).tx(), EqualsProto(PortRef("s1", 1)));
  EXPECT_FALSE(Port("s1", 2).has_wiring());
  EXPECT_EQ(Port("s1", 5).wiring().onic_port().port(), 2u);
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
}

// Regression: CheckRewireLocked once checked only the ports listed in the new O-NIC while
// WriteInventory deleted every fiber of it, so leaving port 1 out silently unwired circuit c-up
// (failed at commit 2d876cd). The inventory planner refuses O-NICs without two ports, but the
// Store contract refuses this on its own.
TEST_F(StoreTest, DroppingAnOnicPortInACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  InventoryWrite rewire;
  v1::Onic only_port2 =
      MakeOnic("n-cpu", "h1-cpu0", "SN-CPU",
               {PortRef("s1", 1), PortRef("s1", 9), PortRef("s1", 2), PortRef("s1", 10)});
  only_port2.mutable_ports()->DeleteSubrange(0, 1);
  *rewire.objects.add_onics() = only_port2;
  rewire.updated = {"onic n-cpu"};
  EXPECT_THAT(store_->WriteInventory(rewire, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("c-up")));
  EXPECT_EQ(Port("s1", 1).wiring().onic_port().onic(), "n-cpu");
}

TEST_F(StoreTest, ShrinkingASwitchUnderFibersIsRefusedAndChangesNothing) {
  WriteSite();
  const Counts before = Count();
  InventoryWrite shrink;
  // Egress 11..16 would vanish; s1/11 carries n-gpu port 1's rx fiber (no circuit).
  *shrink.objects.add_switches() = MakeSwitch("s1", 8, 2, {7, 8});
  shrink.updated = {"switch s1"};
  EXPECT_THAT(store_->WriteInventory(shrink, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("FOREIGN KEY")));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Switch s1, store_->GetSwitch("s1"));
  EXPECT_EQ(s1.egress_ports(), 8u);
  EXPECT_THAT(s1.trunk_reserved_ports(), ElementsAre(7, 8, 15, 16));
}

// Regression: WriteInventory once deleted and re-inserted trunks with no check, so moving t1
// off s1/15 silently stranded c-multi, whose cross-connect sends light out of s1/15 (failed at
// commit 2d876cd). DeleteObject("trunk") refuses the same situation.
TEST_F(StoreTest, RewiringATrunkCarryingACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2,
                                              {Xc("s1", 2, 15), Xc("s2", 1, 6)})}),
                  kOperator),
              IsOk());
  const Counts before = Count();
  InventoryWrite move;
  *move.objects.add_trunks() = MakeTrunk("t1", PortRef("s1", 16), PortRef("s2", 1));
  move.updated = {"trunk t1"};
  EXPECT_THAT(store_->WriteInventory(move, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("t1"), HasSubstr("c-multi"))));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 15).wiring().trunk(), "t1");
}

// ---------------------------------------------------------------------------------------
// Allocations and circuits

TEST_F(StoreTest, CreateAllocationPersistsEverything) {
  WriteSite();
  const absl::Time now = clock_.Now();
  v1::Allocation a = MakeAllocation(
      "a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING, {"h1-cpu0", "gpu0"},
      {MakeCircuit("c-up", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)}, v1::CIRCUIT_STATE_PROGRAMMED,
                   "dp"),
       MakeCircuit("c-down", "n-gpu", 1, "n-cpu", 1, {Xc("s1", 3, 9)}, v1::CIRCUIT_STATE_DEGRADED,
                   "dp"),
       MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 15), Xc("s2", 1, 6)},
                   v1::CIRCUIT_STATE_INACTIVE, "tp")});
  a.mutable_circuits(1)->set_reason("n-cpu port 1 did not train");
  a.set_reason("n-cpu port 1 did not train");
  a.add_phases("dp");
  a.add_phases("tp");
  a.set_active_phase("dp");
  a.mutable_request()->mutable_lease()->set_seconds(60);
  a.mutable_request()->set_request_id("req-1");
  a.mutable_request()->add_phases()->set_name("dp");
  a.mutable_request()->add_phases()->set_name("tp");
  *a.mutable_lease_expires() = Stamp(now + absl::Seconds(60));
  a.set_direct_traffic_share(0.75);
  for (const char* stage : {"plan", "persist"}) {
    v1::StageTiming* t = a.add_stage_timings();
    t->set_stage(stage);
    *t->mutable_started() = Stamp(now - absl::Milliseconds(3));
    t->mutable_duration()->set_nanos(1'500'000);
  }
  ASSERT_THAT(store_->CreateAllocation(a, "job:tenant-a"), IsOk());

  v1::Allocation expected = a;
  *expected.mutable_created() = Stamp(now);
  *expected.mutable_updated() = Stamp(now);
  for (v1::Circuit& c : *expected.mutable_circuits()) c.set_allocation_id("a1");
  ASSERT_OK_AND_ASSIGN(v1::Allocation got, store_->GetAllocation("a1"));
  EXPECT_THAT(got, EqualsProto(expected));

  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> listed, store_->ListAllocations({}));
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_THAT(listed[0], EqualsProto(expected));

  std::vector<v1::Event> events = Events({.object_kind = "allocation"});
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].kind(), "allocation.created");
  EXPECT_EQ(events[0].object_id(), "a1");
  EXPECT_EQ(events[0].principal(), "job:tenant-a");
  EXPECT_EQ(Micros(events[0].time()), absl::ToUnixMicros(now));
  EXPECT_THAT(events[0].message(), AllOf(HasSubstr("a1"), HasSubstr("tenant-a")));
}

TEST_F(StoreTest, CreateAllocationKeepsAGivenCreationTimeAndStampsUpdateFromClock) {
  WriteSite();
  clock_.Advance(absl::Hours(1));
  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"gpu0"}, {});
  *a.mutable_created() = Stamp(absl::FromUnixSeconds(1'600'000'000));
  ASSERT_THAT(store_->CreateAllocation(a, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation got, store_->GetAllocation("a1"));
  EXPECT_EQ(got.created().seconds(), 1'600'000'000);
  EXPECT_EQ(Micros(got.updated()), absl::ToUnixMicros(clock_.Now()));
}

// Regression: Circuit.trunks, the trunk fibers a multi-switch circuit crosses, was once not
// stored at all (failed at commit 2d876cd).
TEST_F(StoreTest, CircuitTrunksArePersisted) {
  WriteSite();
  v1::Circuit multi =
      MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 15), Xc("s2", 1, 6)});
  multi.add_trunks("t1");
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {multi}),
                                       kOperator),
              IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
  ASSERT_THAT(circuits, SizeIs(1));
  EXPECT_THAT(circuits[0].cross_connects(), SizeIs(2));
  EXPECT_THAT(circuits[0].trunks(), ElementsAre("t1"));
}

TEST_F(StoreTest, ListAllocationsFiltersByTenantStateAndHidesReleased) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0"}, {}), kOperator),
      IsOk());
  clock_.Advance(absl::Seconds(1));
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"gpu0"}, {}), kOperator),
      IsOk());
  clock_.Advance(absl::Seconds(1));
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a0-old", "tenant-a", v1::ALLOCATION_STATE_RELEASED, {"gpu0"}, {}),
                  kOperator),
              IsOk());
  auto ids = [](const std::vector<v1::Allocation>& list) {
    std::vector<std::string> out;
    for (const v1::Allocation& a : list) out.push_back(a.id());
    return out;
  };
  // Ordered by creation time, not id.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> live, store_->ListAllocations({}));
  EXPECT_THAT(ids(live), ElementsAre("a1", "a2"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> all,
                       store_->ListAllocations({.include_released = true}));
  EXPECT_THAT(ids(all), ElementsAre("a1", "a2", "a0-old"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> tenant_a,
                       store_->ListAllocations({.tenant = "tenant-a"}));
  EXPECT_THAT(ids(tenant_a), ElementsAre("a1"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> tenant_a_all,
                       store_->ListAllocations({.tenant = "tenant-a", .include_released = true}));
  EXPECT_THAT(ids(tenant_a_all), ElementsAre("a1", "a0-old"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> pending,
                       store_->ListAllocations({.state = v1::ALLOCATION_STATE_PENDING}));
  EXPECT_THAT(ids(pending), ElementsAre("a2"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> released,
                       store_->ListAllocations({.state = v1::ALLOCATION_STATE_RELEASED}));
  EXPECT_THAT(ids(released), ElementsAre("a0-old"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> nobody,
                       store_->ListAllocations({.tenant = "tenant-c"}));
  EXPECT_THAT(nobody, IsEmpty());
  // A released allocation is still readable by id.
  ASSERT_OK_AND_ASSIGN(v1::Allocation old, store_->GetAllocation("a0-old"));
  EXPECT_EQ(old.state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_THAT(old.members(), ElementsAre("gpu0"));
}

TEST_F(StoreTest, CreateAllocationWithKnownIdIsAlreadyExists) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"gpu0"}, {GpuToCpu()}),
          kOperator),
      StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("a1")));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation a1, store_->GetAllocation("a1"));
  EXPECT_EQ(a1.tenant(), "tenant-a");
  EXPECT_THAT(a1.members(), ElementsAre("h1-cpu0", "gpu0"));
}

TEST_F(StoreTest, CircuitOnABusyIngressIsRefusedAndNothingIsStored) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  // Its first circuit is fine; the second reuses s1 ingress 1 (c-up's).
  v1::Allocation a2 = MakeAllocation(
      "a2", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"gpu0"},
      {GpuToCpu(), MakeCircuit("c-clash", "n-gpu", 2, "n-cpu", 2, {Xc("s1", 1, 10)})});
  EXPECT_THAT(
      store_->CreateAllocation(a2, kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("s1/1"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetAllocation("a2"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("a2")));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> a2_circuits,
                       store_->ListCircuits({.allocation_id = "a2"}));
  EXPECT_THAT(a2_circuits, IsEmpty());
  EXPECT_EQ(Port("s1", 3).circuit_id(), "");   // c-down's ingress was not kept.
  EXPECT_EQ(Port("s1", 10).circuit_id(), "");  // Nor c-clash's egress.
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
}

TEST_F(StoreTest, CircuitOnABusyEgressIsRefusedAndNothingIsStored) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  v1::Allocation a2 =
      MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0"},
                     {MakeCircuit("c-clash", "n-cpu", 2, "n-gpu", 1, {Xc("s1", 2, 11)})});
  EXPECT_THAT(store_->CreateAllocation(a2, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("s1/11"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetAllocation("a2"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("a2")));
  EXPECT_EQ(Port("s1", 2).circuit_id(), "");
}

TEST_F(StoreTest, CircuitsOfOneAllocationMayNotShareAPort) {
  WriteSite();
  v1::Allocation a = MakeAllocation(
      "a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0", "gpu0"},
      {CpuToGpu(), MakeCircuit("c-twin", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 11)})});
  EXPECT_THAT(store_->CreateAllocation(a, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("s1/11"), HasSubstr("c-up"))));
  EXPECT_EQ(Count().allocations, 0u);
  EXPECT_EQ(Count().circuits, 0u);
  EXPECT_THAT(Events({.object_kind = "allocation"}), IsEmpty());
}

TEST_F(StoreTest, InactiveCircuitMayShareDesiredPorts) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  // Same ports as c-up, twice, in phases that are not active.
  v1::Allocation a2 =
      MakeAllocation("a2", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                     {MakeCircuit("c-later-1", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)},
                                  v1::CIRCUIT_STATE_INACTIVE, "p2"),
                      MakeCircuit("c-later-2", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)},
                                  v1::CIRCUIT_STATE_INACTIVE, "p3")});
  ASSERT_THAT(store_->CreateAllocation(a2, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> circuits,
                       store_->ListCircuits({.allocation_id = "a2"}));
  ASSERT_THAT(circuits, SizeIs(2));
  EXPECT_EQ(circuits[0].state(), v1::CIRCUIT_STATE_INACTIVE);
  // The ports still show the desired circuit, not the inactive ones.
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
  EXPECT_EQ(Port("s1", 11).circuit_id(), "c-up");
}

TEST_F(StoreTest, DesiredCircuitMayUsePortsOfAnInactiveOne) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-later", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)},
                                              v1::CIRCUIT_STATE_INACTIVE, "p2")}),
                  kOperator),
              IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "");
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                               kOperator),
      IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
}

// Stores a1 READY with c-up and c-down on the small site and returns the replacement of
// c-up by `add`, making a1 PROGRAMMING.
CircuitReplacement ReplacingCUp(Store& store, const v1::Circuit& add) {
  EXPECT_THAT(store.WriteInventory(SmallSite(), kOperator), IsOk());
  EXPECT_THAT(store.CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                    {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()}),
                                     kOperator),
              IsOk());
  CircuitReplacement r;
  r.allocation_id = "a1";
  r.remove = {"c-up"};
  r.add = {add};
  r.members = {"h1-cpu0"};
  r.state = v1::ALLOCATION_STATE_PROGRAMMING;
  return r;
}

TEST_F(StoreTest, ReplaceCircuitsSwapsCircuitsAndMembersInOneTransaction) {
  // c-up leaves; its ingress s1/1 goes to the new circuit in the same commit.
  CircuitReplacement r = ReplacingCUp(
      *store_,
      MakeCircuit("c-new", "n-cpu", 1, "n-cpu", 2, {Xc("s1", 1, 10)}, v1::CIRCUIT_STATE_PLANNED));
  r.members = {"h1-cpu0", "gpu0-spare"};
  r.event_message = "a1: gpu0 replaced";
  ASSERT_OK_AND_ASSIGN(v1::Allocation after, store_->ReplaceCircuits(r, kOperator));
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_PROGRAMMING);
  EXPECT_THAT(after.members(), ElementsAre("h1-cpu0", "gpu0-spare"));
  std::vector<std::string> ids;
  for (const v1::Circuit& c : after.circuits()) ids.push_back(c.id());
  EXPECT_THAT(ids, ElementsAre("c-down", "c-new"));
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-new");
  EXPECT_EQ(Port("s1", 11).circuit_id(), "");
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Event> events,
                       store_->ListEvents({.object_kind = "allocation", .object_id = "a1"}));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind(), "allocation.replace");
  EXPECT_EQ(events.back().message(), "a1: gpu0 replaced");
  // The switch may still hold c-up's cross-connect until the engine clears it.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> pending, store_->PendingRemovals("a1"));
  ASSERT_THAT(pending, SizeIs(1));
  EXPECT_THAT(pending[0], EqualsProto(CpuToGpu().cross_connects(0)));
  ASSERT_THAT(store_->ClearPendingRemovals("a1"), IsOk());
  ASSERT_OK_AND_ASSIGN(pending, store_->PendingRemovals("a1"));
  EXPECT_THAT(pending, IsEmpty());
}

TEST_F(StoreTest, RefusedReplaceCircuitsChangesNothing) {
  // s1/3 is c-down's ingress, which stays.
  CircuitReplacement r = ReplacingCUp(
      *store_,
      MakeCircuit("c-clash", "n-gpu", 1, "n-cpu", 2, {Xc("s1", 3, 10)}, v1::CIRCUIT_STATE_PLANNED));
  EXPECT_THAT(store_->ReplaceCircuits(r, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("c-down")));
  r.add.clear();
  r.remove = {"c-elsewhere"};
  EXPECT_THAT(store_->ReplaceCircuits(r, kOperator),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("c-elsewhere")));
  r.allocation_id = "a-none";
  EXPECT_THAT(store_->ReplaceCircuits(r, kOperator),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("a-none")));
  ASSERT_OK_AND_ASSIGN(v1::Allocation a, store_->GetAllocation("a1"));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_THAT(a.members(), ElementsAre("h1-cpu0", "gpu0"));
  EXPECT_EQ(a.circuits_size(), 2);
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> pending, store_->PendingRemovals("a1"));
  EXPECT_THAT(pending, IsEmpty());
}

TEST_F(StoreTest, CircuitFromAnUnknownOnicPortIsRefusedAndNothingIsStored) {
  WriteSite();
  const Counts before = Count();
  v1::Allocation a = MakeAllocation(
      "a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0"},
      {CpuToGpu(), MakeCircuit("c-ghost", "n-ghost", 1, "n-cpu", 2, {Xc("s1", 4, 10)})});
  EXPECT_THAT(store_->CreateAllocation(a, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("c-ghost"), HasSubstr("n-ghost"))));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 1).circuit_id(), "");
}

TEST_F(StoreTest, CrossConnectOnAMissingSwitchPortIsRefusedAndNothingIsStored) {
  WriteSite();
  const Counts before = Count();
  v1::Allocation a = MakeAllocation(
      "a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0"},
      {MakeCircuit("c-far", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11), Xc("s9", 1, 2)})});
  EXPECT_THAT(store_->CreateAllocation(a, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("FOREIGN KEY")));
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetAllocation("a1"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("a1")));
}

TEST_F(StoreTest, ListCircuitsFiltersBySwitchAndAllocation) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()}),
                               kOperator),
      IsOk());
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2,
                                              {Xc("s1", 2, 15), Xc("s2", 1, 6)})}),
                  kOperator),
              IsOk());
  auto ids = [](const std::vector<v1::Circuit>& list) {
    std::vector<std::string> out;
    for (const v1::Circuit& c : list) out.push_back(c.id());
    return out;
  };
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> all, store_->ListCircuits({}));
  EXPECT_THAT(ids(all), ElementsAre("c-up", "c-down", "c-multi"));  // Allocation, then position.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> on_s1, store_->ListCircuits({.switch_id = "s1"}));
  EXPECT_THAT(ids(on_s1), ElementsAre("c-up", "c-down", "c-multi"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> on_s2, store_->ListCircuits({.switch_id = "s2"}));
  ASSERT_THAT(ids(on_s2), ElementsAre("c-multi"));
  // A circuit keeps all its hops, in path order, even when listed for one switch.
  ASSERT_THAT(on_s2[0].cross_connects(), SizeIs(2));
  EXPECT_THAT(on_s2[0].cross_connects(0), EqualsProto(Xc("s1", 2, 15)));
  EXPECT_THAT(on_s2[0].cross_connects(1), EqualsProto(Xc("s2", 1, 6)));
  EXPECT_EQ(on_s2[0].allocation_id(), "a2");
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> of_a1,
                       store_->ListCircuits({.allocation_id = "a1"}));
  EXPECT_THAT(ids(of_a1), ElementsAre("c-up", "c-down"));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> a1_on_s2,
                       store_->ListCircuits({.switch_id = "s2", .allocation_id = "a1"}));
  EXPECT_THAT(a1_on_s2, IsEmpty());
}

TEST_F(StoreTest, ListPortsShowsTheDesiredCircuitOnBothEnds) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {CpuToGpu(), MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2,
                                                          {Xc("s1", 2, 15), Xc("s2", 1, 6)})}),
                  kOperator),
              IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
  EXPECT_EQ(Port("s1", 11).circuit_id(), "c-up");
  EXPECT_EQ(Port("s1", 2).circuit_id(), "c-multi");
  EXPECT_EQ(Port("s1", 15).circuit_id(), "c-multi");
  EXPECT_EQ(Port("s2", 1).circuit_id(), "c-multi");
  EXPECT_EQ(Port("s2", 6).circuit_id(), "c-multi");
  EXPECT_EQ(Port("s1", 3).circuit_id(), "");
  EXPECT_EQ(Port("s1", 9).circuit_id(), "");
  // Wiring is still reported next to the circuit.
  EXPECT_EQ(Port("s1", 15).wiring().trunk(), "t1");
}

// ---------------------------------------------------------------------------------------
// DeleteObject

TEST_F(StoreTest, DeleteOfUnknownKindIsInvalidArgument) {
  WriteSite();
  const Counts before = Count();
  EXPECT_THAT(store_->DeleteObject("allocation", "a1", kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("allocation")));
  EXPECT_THAT(store_->DeleteObject("", "s1", kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("switch")));
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, DeleteOfUnknownNameIsNotFound) {
  WriteSite();
  const Counts before = Count();
  for (const char* kind : {"switch", "host", "device", "onic", "trunk"}) {
    EXPECT_THAT(store_->DeleteObject(kind, "nope", kOperator),
                StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr(kind), HasSubstr("nope"))))
        << kind;
  }
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, DeletingADeviceInALiveAllocationIsRefused) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"gpu0"}, {}), kOperator),
      IsOk());
  const Counts before = Count();
  EXPECT_THAT(
      store_->DeleteObject("device", "gpu0", kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("gpu0"), HasSubstr("a1"))));
  EXPECT_EQ(Count(), before);
  EXPECT_THAT(store_->GetDevice("gpu0"), IsOk());
  EXPECT_THAT(store_->GetOnic("n-gpu"), IsOk());
}

TEST_F(StoreTest, DeletingADeviceOfAReleasedAllocationSucceeds) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_RELEASED, {"gpu0"}, {}), kOperator),
      IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("device", "gpu0", kOperator));
  EXPECT_THAT(deleted, ElementsAre("device gpu0", "onic n-gpu"));
  // The allocation keeps its history.
  ASSERT_OK_AND_ASSIGN(v1::Allocation a1, store_->GetAllocation("a1"));
  EXPECT_THAT(a1.members(), ElementsAre("gpu0"));
}

TEST_F(StoreTest, DeletingADeviceWhoseOnicIsInACircuitIsRefused) {
  WriteSite();
  // Membership names only the CPU; the GPU's O-NIC is still in c-up.
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(
      store_->DeleteObject("device", "gpu0", kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("gpu0"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, DeletingAnOnicInACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(store_->DeleteObject("onic", "n-gpu", kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("n-gpu"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 11).wiring().onic_port().onic(), "n-gpu");
}

TEST_F(StoreTest, DeletingAnOnicRemovesItsFibers) {
  WriteSite();
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("onic", "n-gpu", kOperator));
  EXPECT_THAT(deleted, ElementsAre("onic n-gpu"));
  EXPECT_THAT(store_->GetOnic("n-gpu"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("n-gpu")));
  EXPECT_FALSE(Port("s1", 3).has_wiring());
  EXPECT_FALSE(Port("s2", 6).has_wiring());
  ASSERT_OK_AND_ASSIGN(v1::Device gpu, store_->GetDevice("gpu0"));
  EXPECT_THAT(gpu.onics(), IsEmpty());
}

TEST_F(StoreTest, DeletingAHostWithDevicesIsRefused) {
  WriteSite();
  const Counts before = Count();
  EXPECT_THAT(store_->DeleteObject("host", "h1", kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("h1"), HasSubstr("h1-cpu0"))));
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, DeletingAnEmptyHostSucceeds) {
  WriteSite();
  ASSERT_THAT(store_->DeleteObject("device", "h1-cpu0", kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("host", "h1", kOperator));
  EXPECT_THAT(deleted, ElementsAre("host h1"));
  EXPECT_THAT(store_->GetHost("h1"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("h1")));
}

TEST_F(StoreTest, DeletingASwitchWithFibersOrTrunksIsRefused) {
  WriteSite();
  const Counts before = Count();
  EXPECT_THAT(
      store_->DeleteObject("switch", "s2", kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("s2"), HasSubstr("n-gpu"))));
  EXPECT_EQ(Count(), before);

  // Without the O-NIC, the trunks still hold it.
  ASSERT_THAT(store_->DeleteObject("onic", "n-gpu", kOperator), IsOk());
  const Counts without_onic = Count();
  absl::StatusOr<std::vector<std::string>> refused =
      store_->DeleteObject("switch", "s2", kOperator);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition,
                                AllOf(HasSubstr("s2"), HasSubstr("trunk"))));
  EXPECT_EQ(Count(), without_onic);

  ASSERT_THAT(store_->DeleteObject("trunk", "t1", kOperator), IsOk());
  ASSERT_THAT(store_->DeleteObject("trunk", "t2", kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("switch", "s2", kOperator));
  EXPECT_THAT(deleted, ElementsAre("switch s2"));
  EXPECT_THAT(store_->GetSwitch("s2"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("s2")));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::SwitchPort> ports, store_->ListPorts(""));
  EXPECT_THAT(ports, SizeIs(16));  // s2's ports went with it.
}

TEST_F(StoreTest, DeletingATrunkCarryingACircuitIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2,
                                              {Xc("s1", 2, 15), Xc("s2", 1, 6)})}),
                  kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(store_->DeleteObject("trunk", "t1", kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("t1"), HasSubstr("c-multi"))));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("trunk", "t2", kOperator));
  EXPECT_THAT(deleted, ElementsAre("trunk t2"));
}

TEST_F(StoreTest, DeletingAFreeDeviceDeletesItsOnicsAndRecordsEvents) {
  WriteSite();
  const uint64_t last = Events().back().sequence();
  clock_.Advance(absl::Seconds(30));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> deleted,
                       store_->DeleteObject("device", "gpu0", "operator:carol"));
  EXPECT_THAT(deleted, ElementsAre("device gpu0", "onic n-gpu"));
  EXPECT_THAT(store_->GetDevice("gpu0"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("gpu0")));
  EXPECT_THAT(store_->GetOnic("n-gpu"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("n-gpu")));
  EXPECT_FALSE(Port("s1", 3).has_wiring());
  EXPECT_FALSE(Port("s1", 11).has_wiring());
  EXPECT_FALSE(Port("s2", 2).has_wiring());
  // The O-NIC serial is free again.
  InventoryWrite again;
  *again.objects.add_devices() = MakeDevice("gpu1", v1::DEVICE_KIND_GPU, "");
  *again.objects.add_onics() =
      MakeOnic("n-gpu1", "gpu1", "SN-GPU",
               {PortRef("s1", 3), PortRef("s1", 11), PortRef("s2", 2), PortRef("s2", 6)});
  ASSERT_THAT(store_->WriteInventory(again, kOperator), IsOk());

  std::vector<v1::Event> events = Events({.after_sequence = last});
  ASSERT_THAT(events, SizeIs(2));
  std::vector<std::string> what;
  for (const v1::Event& e : events) {
    EXPECT_EQ(e.kind(), "inventory.deleted");
    EXPECT_EQ(e.principal(), "operator:carol");
    EXPECT_EQ(Micros(e.time()), absl::ToUnixMicros(clock_.Now()));
    what.push_back(absl::StrCat(e.object_kind(), " ", e.object_id()));
  }
  EXPECT_THAT(what, UnorderedElementsAre("device gpu0", "onic n-gpu"));
}

TEST_F(StoreTest, RefusedDeleteAppendsNoEvent) {
  WriteSite();
  const size_t before = Events().size();
  EXPECT_FALSE(store_->DeleteObject("host", "h1", kOperator).ok());
  EXPECT_FALSE(store_->DeleteObject("switch", "s1", kOperator).ok());
  EXPECT_FALSE(store_->DeleteObject("device", "nope", kOperator).ok());
  EXPECT_EQ(Events().size(), before);
}

// ---------------------------------------------------------------------------------------
// Events

TEST_F(StoreTest, ListEventsFiltersByObjectAndSequenceAndLimit) {
  WriteSite();
  std::vector<v1::Event> switches = Events({.object_kind = "switch"});
  ASSERT_THAT(switches, SizeIs(2));
  EXPECT_EQ(switches[0].object_id(), "s1");
  EXPECT_EQ(switches[1].object_id(), "s2");
  std::vector<v1::Event> s2 = Events({.object_kind = "switch", .object_id = "s2"});
  ASSERT_THAT(s2, SizeIs(1));
  EXPECT_EQ(s2[0].sequence(), switches[1].sequence());
  std::vector<v1::Event> by_id = Events({.object_id = "n-cpu"});
  ASSERT_THAT(by_id, SizeIs(1));
  EXPECT_EQ(by_id[0].object_kind(), "onic");

  std::vector<v1::Event> all = Events();
  ASSERT_THAT(all, SizeIs(9));
  std::vector<v1::Event> tail = Events({.after_sequence = all[6].sequence()});
  ASSERT_THAT(tail, SizeIs(2));
  EXPECT_EQ(tail[0].sequence(), all[7].sequence());
  EXPECT_THAT(Events({.after_sequence = all[8].sequence()}), IsEmpty());
  EXPECT_THAT(Events({.limit = 0}), SizeIs(9));  // 0 means the default limit, not none.

  std::vector<v1::Event> page = Events({.limit = 3});
  ASSERT_THAT(page, SizeIs(3));
  EXPECT_EQ(page[2].sequence(), all[2].sequence());
  std::vector<v1::Event> next = Events({.after_sequence = page[2].sequence(), .limit = 3});
  ASSERT_THAT(next, SizeIs(3));
  EXPECT_EQ(next[0].sequence(), all[3].sequence());
}

TEST_F(StoreTest, AppendEventStampsStoreClockAndDefaults) {
  clock_.Advance(absl::Milliseconds(1234));
  v1::Event event;
  event.set_kind("agent.mismatch");
  event.set_object_kind("agent");
  event.set_object_id("h1");
  event.set_severity(v1::EVENT_SEVERITY_ALARM);
  event.set_message("agent h1 reports serial SN-X not in inventory");
  event.set_principal("agent:h1");
  event.set_sequence(999);                                      // Ignored.
  *event.mutable_time() = Stamp(absl::FromUnixSeconds(12345));  // Ignored.
  ASSERT_THAT(store_->AppendEvent(event), IsOk());
  v1::Event defaults;
  defaults.set_kind("fleetd.started");
  defaults.set_message("started");
  ASSERT_THAT(store_->AppendEvent(defaults), IsOk());

  std::vector<v1::Event> events = Events();
  ASSERT_THAT(events, SizeIs(2));
  v1::Event expected = event;
  expected.set_sequence(events[0].sequence());
  *expected.mutable_time() = Stamp(clock_.Now());
  EXPECT_THAT(events[0], EqualsProto(expected));
  EXPECT_NE(events[0].sequence(), 999u);
  EXPECT_GT(events[1].sequence(), events[0].sequence());
  EXPECT_EQ(events[1].principal(), "anonymous");
  EXPECT_EQ(events[1].severity(), v1::EVENT_SEVERITY_INFO);
}

TEST_F(StoreTest, EventLogIsAppendOnly) {
  ASSERT_TRUE(dir_.ok());
  const std::string path = dir_.File("state.db");
  OpenStore(path);
  WriteSite();
  const std::vector<v1::Event> before = Events();
  ASSERT_THAT(before, SizeIs(9));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path));
  EXPECT_THAT(db->Exec("UPDATE events SET principal = 'someone-else'"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("append-only")));
  EXPECT_THAT(db->Exec("DELETE FROM events WHERE sequence = 1"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("append-only")));
  EXPECT_THAT(db->Exec("DELETE FROM events"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("append-only")));

  const std::vector<v1::Event> after = Events();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_THAT(after[i], EqualsProto(before[i]));
  // Appending through the store still works after the refused changes.
  ASSERT_THAT(store_->DeleteObject("trunk", "t1", kOperator), IsOk());
  EXPECT_THAT(Events(), SizeIs(10));
}

TEST_F(StoreTest, ConcurrentWritersGetDistinctIncreasingSequences) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < kPerThread; ++i) {
        v1::Event e;
        e.set_kind("test.concurrent");
        e.set_object_id(absl::StrCat(t, "-", i));
        e.set_message("x");
        EXPECT_THAT(store_->AppendEvent(e), IsOk());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<v1::Event> events = Events();
  ASSERT_THAT(events, SizeIs(kThreads * kPerThread));
  std::set<std::string> ids;
  for (size_t i = 0; i < events.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(events[i].sequence(), events[i - 1].sequence());
    }
    ids.insert(events[i].object_id());
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kThreads * kPerThread));
}

// ---------------------------------------------------------------------------------------
// UpdateAllocation

v1::StageTiming Timing(const std::string& stage, absl::Time started, absl::Duration took) {
  v1::StageTiming t;
  t.set_stage(stage);
  *t.mutable_started() = Stamp(started);
  t.mutable_duration()->set_seconds(absl::IDivDuration(took, absl::Seconds(1), &took));
  t.mutable_duration()->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(took)));
  return t;
}

// The circuit `id` of `a`, or an empty circuit (and a failure) when it has none.
v1::Circuit CircuitOf(const v1::Allocation& a, const std::string& id) {
  for (const v1::Circuit& c : a.circuits()) {
    if (c.id() == id) return c;
  }
  ADD_FAILURE() << "allocation " << a.id() << " has no circuit " << id;
  return {};
}

TEST_F(StoreTest, UpdateAllocationAppliesEveryFieldAndReturnsTheCommittedAllocation) {
  WriteSite();
  const absl::Time created = clock_.Now();
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()}),
                               kOperator),
      IsOk());
  const uint64_t before = Events().back().sequence();
  clock_.Advance(absl::Seconds(7));
  const absl::Time lease = clock_.Now() + absl::Hours(1);
  AllocationUpdate update;
  update.id = "a1";
  update.state = v1::ALLOCATION_STATE_DEGRADED;
  update.reason = "n-gpu port 1 did not train";
  update.stage_timings = std::vector<v1::StageTiming>{
      Timing("program", created, absl::Milliseconds(40)),
      Timing("train", created + absl::Milliseconds(40), absl::Milliseconds(2500))};
  update.lease_expires = lease;
  update.circuits["c-up"] = {.state = v1::CIRCUIT_STATE_ACTIVE};
  update.circuits["c-down"] = {.state = v1::CIRCUIT_STATE_DEGRADED,
                               .reason = "n-cpu port 1 saw no light"};
  ASSERT_OK_AND_ASSIGN(v1::Allocation returned, store_->UpdateAllocation(update, "engine"));

  ASSERT_OK_AND_ASSIGN(v1::Allocation stored, store_->GetAllocation("a1"));
  EXPECT_THAT(returned, EqualsProto(stored));
  EXPECT_EQ(stored.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_EQ(stored.reason(), "n-gpu port 1 did not train");
  ASSERT_THAT(stored.stage_timings(), SizeIs(2));
  EXPECT_THAT(stored.stage_timings(0), EqualsProto((*update.stage_timings)[0]));
  EXPECT_THAT(stored.stage_timings(1), EqualsProto((*update.stage_timings)[1]));
  EXPECT_EQ(Micros(stored.lease_expires()), absl::ToUnixMicros(lease));
  EXPECT_EQ(Micros(stored.created()), absl::ToUnixMicros(created));
  EXPECT_EQ(Micros(stored.updated()), absl::ToUnixMicros(clock_.Now()));
  EXPECT_EQ(CircuitOf(stored, "c-up").state(), v1::CIRCUIT_STATE_ACTIVE);
  EXPECT_EQ(CircuitOf(stored, "c-up").reason(), "");
  EXPECT_EQ(CircuitOf(stored, "c-down").state(), v1::CIRCUIT_STATE_DEGRADED);
  EXPECT_EQ(CircuitOf(stored, "c-down").reason(), "n-cpu port 1 saw no light");
  // What was not named is kept.
  EXPECT_EQ(stored.tenant(), "tenant-a");
  EXPECT_THAT(stored.members(), ElementsAre("h1-cpu0", "gpu0"));
  EXPECT_THAT(CircuitOf(stored, "c-up").cross_connects(0), EqualsProto(Xc("s1", 1, 11)));

  std::vector<v1::Event> events = Events({.after_sequence = before});
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].kind(), "allocation.state");
  EXPECT_EQ(events[0].object_kind(), "allocation");
  EXPECT_EQ(events[0].object_id(), "a1");
  EXPECT_EQ(events[0].principal(), "engine");
  EXPECT_EQ(events[0].severity(), v1::EVENT_SEVERITY_INFO);
  EXPECT_EQ(Micros(events[0].time()), absl::ToUnixMicros(clock_.Now()));
  EXPECT_THAT(events[0].message(),
              AllOf(HasSubstr("a1"), HasSubstr("degraded"), HasSubstr("did not train")));
}

// Watchers follow allocations through the commits the store keeps: each with what a read
// would have returned right after it, in order, and none left out while they are kept.
// Every write that appends an event about an allocation is one, with the allocation.
TEST_F(StoreTest, AllocationCommitsAreKeptInOrderWithWhatEachLeft) {
  WriteSite();
  const uint64_t start = store_->LastEventSequence();  // Inventory events: not allocations'.
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()}),
                               kOperator),
      IsOk());
  std::optional<std::vector<Store::AllocationCommit>> commits =
      store_->AllocationCommitsAfter(start);
  ASSERT_TRUE(commits.has_value());
  ASSERT_THAT(*commits, SizeIs(1));
  EXPECT_EQ((*commits)[0].id, "a1");
  EXPECT_EQ((*commits)[0].sequence, store_->LastEventSequence());
  ASSERT_NE((*commits)[0].allocation, nullptr);
  EXPECT_THAT(*(*commits)[0].allocation, EqualsProto(*store_->GetAllocation("a1")));
  std::optional<Store::AllocationCommit> last = store_->LastCommitted("a1");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->allocation, (*commits)[0].allocation);
  // A read of the database says which commits it reflects.
  ASSERT_OK_AND_ASSIGN(Store::AllocationCommit read, store_->ReadAllocation("a1"));
  EXPECT_EQ(read.sequence, store_->LastEventSequence());
  ASSERT_NE(read.allocation, nullptr);
  EXPECT_THAT(*read.allocation, EqualsProto(*store_->GetAllocation("a1")));
  EXPECT_THAT(store_->ReadAllocation("a9"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("a9")));
  // So does a read of many: the filter's allocations, each with the sequence the read saw.
  ASSERT_OK_AND_ASSIGN(std::vector<Store::AllocationCommit> many,
                       store_->ReadAllocations({"tenant-a", {}, false}));
  ASSERT_THAT(many, SizeIs(1));
  EXPECT_EQ(many[0].id, "a1");
  EXPECT_EQ(many[0].sequence, store_->LastEventSequence());
  ASSERT_NE(many[0].allocation, nullptr);
  EXPECT_THAT(*many[0].allocation, EqualsProto(*store_->GetAllocation("a1")));
  ASSERT_OK_AND_ASSIGN(many, store_->ReadAllocations({"nobody", {}, false}));
  EXPECT_THAT(many, IsEmpty());

  AllocationUpdate update;
  update.id = "a1";
  update.state = v1::ALLOCATION_STATE_TRAINING;
  update.circuits["c-up"] = {.state = v1::CIRCUIT_STATE_PROGRAMMED};
  ASSERT_OK_AND_ASSIGN(v1::Allocation training, store_->UpdateAllocation(update, "engine"));
  const uint64_t training_event = store_->LastEventSequence();
  ASSERT_OK_AND_ASSIGN(v1::Allocation stored, store_->GetAllocation("a1"));
  EXPECT_THAT(training, EqualsProto(stored));
  last = store_->LastCommitted("a1");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->sequence, training_event);
  ASSERT_NE(last->allocation, nullptr);
  EXPECT_THAT(*last->allocation, EqualsProto(stored));

  // A refused update commits nothing.
  AllocationUpdate wrong;
  wrong.id = "a1";
  wrong.state = v1::ALLOCATION_STATE_READY;
  wrong.circuits["c-none"] = {.state = v1::CIRCUIT_STATE_ACTIVE};
  EXPECT_THAT(store_->UpdateAllocation(wrong, "engine"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("c-none")));
  EXPECT_THAT(store_->AllocationCommitsAfter(training_event), Optional(IsEmpty()));

  // An event the engine records about the allocation is a commit of it too, unchanged.
  v1::Event note;
  note.set_kind("allocation.quiesce_skipped");
  note.set_object_kind("allocation");
  note.set_object_id("a1");
  note.set_message("no connected agent");
  ASSERT_THAT(store_->AppendEvent(note), IsOk());
  last = store_->LastCommitted("a1");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->sequence, store_->LastEventSequence());
  ASSERT_NE(last->allocation, nullptr);
  EXPECT_THAT(*last->allocation, EqualsProto(training));

  update.state = v1::ALLOCATION_STATE_READY;
  update.circuits["c-up"] = {.state = v1::CIRCUIT_STATE_ACTIVE};
  ASSERT_OK_AND_ASSIGN(v1::Allocation ready, store_->UpdateAllocation(update, "engine"));
  commits = store_->AllocationCommitsAfter(training_event);
  ASSERT_TRUE(commits.has_value());
  ASSERT_THAT(*commits, SizeIs(2));  // The note, then READY: each state, in order.
  EXPECT_LT((*commits)[0].sequence, (*commits)[1].sequence);
  ASSERT_NE((*commits)[0].allocation, nullptr);
  EXPECT_EQ((*commits)[0].allocation->state(), v1::ALLOCATION_STATE_TRAINING);
  ASSERT_NE((*commits)[1].allocation, nullptr);
  EXPECT_THAT(*(*commits)[1].allocation, EqualsProto(ready));

  // ReplaceCircuits reads it back too.
  CircuitReplacement r;
  r.allocation_id = "a1";
  r.remove = {"c-up"};
  r.add = {
      MakeCircuit("c-new", "n-cpu", 1, "n-cpu", 2, {Xc("s1", 1, 10)}, v1::CIRCUIT_STATE_PLANNED)};
  r.members = {"h1-cpu0"};
  ASSERT_OK_AND_ASSIGN(v1::Allocation replaced, store_->ReplaceCircuits(r, kOperator));
  ASSERT_OK_AND_ASSIGN(stored, store_->GetAllocation("a1"));
  EXPECT_THAT(replaced, EqualsProto(stored));
  last = store_->LastCommitted("a1");
  ASSERT_TRUE(last.has_value());
  ASSERT_NE(last->allocation, nullptr);
  EXPECT_THAT(*last->allocation, EqualsProto(stored));

  // Only the most recent commits are kept: a watcher further behind is told to read.
  const uint64_t recent = store_->LastEventSequence();
  for (int i = 0; i < 1030; ++i) ASSERT_THAT(store_->AppendEvent(note), IsOk());
  EXPECT_EQ(store_->AllocationCommitsAfter(start), std::nullopt);
  EXPECT_EQ(store_->AllocationCommitsAfter(recent), std::nullopt);
  commits = store_->AllocationCommitsAfter(store_->LastEventSequence() - 10);
  ASSERT_TRUE(commits.has_value());
  EXPECT_THAT(*commits, SizeIs(10));
}

TEST_F(StoreTest, AReleaseIntentIsKeptApartFromTheReasonShown) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  ASSERT_OK_AND_ASSIGN(std::optional<AllocationUpdate::ReleaseIntent> none,
                       store_->ReleaseIntentOf("a1"));
  EXPECT_FALSE(none.has_value());

  AllocationUpdate releasing{.id = "a1", .state = v1::ALLOCATION_STATE_RELEASING};
  releasing.release = AllocationUpdate::ReleaseIntent{v1::ALLOCATION_STATE_FAILED, "evicted"};
  ASSERT_THAT(store_->UpdateAllocation(releasing, "e").status(), IsOk());
  ASSERT_THAT(store_->UpdateAllocation({.id = "a1", .reason = "removal failed"}, "e").status(),
              IsOk());
  ASSERT_OK_AND_ASSIGN(std::optional<AllocationUpdate::ReleaseIntent> intent,
                       store_->ReleaseIntentOf("a1"));
  ASSERT_TRUE(intent.has_value());
  EXPECT_EQ(intent->state, v1::ALLOCATION_STATE_FAILED);
  EXPECT_EQ(intent->reason, "evicted");
  ASSERT_OK_AND_ASSIGN(v1::Allocation shown, store_->GetAllocation("a1"));
  EXPECT_EQ(shown.reason(), "removal failed");

  // A release ends RELEASED or FAILED; anything else is refused and changes nothing.
  AllocationUpdate wrong{.id = "a1"};
  wrong.release = AllocationUpdate::ReleaseIntent{v1::ALLOCATION_STATE_READY, ""};
  EXPECT_THAT(store_->UpdateAllocation(wrong, "e").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RELEASED or FAILED")));
  ASSERT_OK_AND_ASSIGN(intent, store_->ReleaseIntentOf("a1"));
  EXPECT_EQ(intent->state, v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(store_->ReleaseIntentOf("nope").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
}

TEST_F(StoreTest, UpdateAllocationLeavesUnsetFieldsAsTheyAre) {
  WriteSite();
  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_TRAINING,
                                    {"h1-cpu0", "gpu0"}, {CpuToGpu()});
  a.set_reason("waiting for agents");
  *a.add_stage_timings() = Timing("plan", clock_.Now(), absl::Milliseconds(3));
  *a.mutable_lease_expires() = Stamp(clock_.Now() + absl::Minutes(10));
  ASSERT_THAT(store_->CreateAllocation(a, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation original, store_->GetAllocation("a1"));

  clock_.Advance(absl::Seconds(1));
  ASSERT_OK_AND_ASSIGN(v1::Allocation updated,
                       store_->UpdateAllocation({.id = "a1", .reason = "agents answered"}, "e"));
  v1::Allocation expected = original;
  expected.set_reason("agents answered");
  *expected.mutable_updated() = Stamp(clock_.Now());
  EXPECT_THAT(updated, EqualsProto(expected));

  // An update naming nothing still stamps the time and leaves a record.
  clock_.Advance(absl::Seconds(1));
  const size_t events = Events().size();
  ASSERT_OK_AND_ASSIGN(v1::Allocation touched, store_->UpdateAllocation({.id = "a1"}, "e"));
  *expected.mutable_updated() = Stamp(clock_.Now());
  EXPECT_THAT(touched, EqualsProto(expected));
  EXPECT_THAT(Events(), SizeIs(events + 1));
}

TEST_F(StoreTest, UpdateAllocationReplacesStageTimingsEvenWithNone) {
  WriteSite();
  v1::Allocation a = MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"gpu0"}, {});
  *a.add_stage_timings() = Timing("plan", clock_.Now(), absl::Milliseconds(3));
  *a.add_stage_timings() = Timing("persist", clock_.Now(), absl::Milliseconds(1));
  ASSERT_THAT(store_->CreateAllocation(a, kOperator), IsOk());

  AllocationUpdate one;
  one.id = "a1";
  one.stage_timings =
      std::vector<v1::StageTiming>{Timing("program", clock_.Now(), absl::Seconds(2))};
  ASSERT_OK_AND_ASSIGN(v1::Allocation replaced, store_->UpdateAllocation(one, kOperator));
  ASSERT_THAT(replaced.stage_timings(), SizeIs(1));
  EXPECT_EQ(replaced.stage_timings(0).stage(), "program");
  EXPECT_EQ(replaced.stage_timings(0).duration().seconds(), 2);

  AllocationUpdate none;
  none.id = "a1";
  none.stage_timings = std::vector<v1::StageTiming>{};
  ASSERT_OK_AND_ASSIGN(v1::Allocation cleared, store_->UpdateAllocation(none, kOperator));
  EXPECT_THAT(cleared.stage_timings(), IsEmpty());
  ASSERT_OK_AND_ASSIGN(v1::Allocation stored, store_->GetAllocation("a1"));
  EXPECT_THAT(stored.stage_timings(), IsEmpty());
}

TEST_F(StoreTest, UpdateAllocationRecordsTheGivenEventKindMessageAndSeverity) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"gpu0"}, {}), kOperator),
      IsOk());
  AllocationUpdate update{.id = "a1",
                          .state = v1::ALLOCATION_STATE_DEGRADED,
                          .event_kind = "allocation.degraded",
                          .event_message = "gpu0's agent stopped answering",
                          .severity = v1::EVENT_SEVERITY_WARNING};
  ASSERT_THAT(store_->UpdateAllocation(update, "engine"), IsOk());
  std::vector<v1::Event> events = Events({.object_kind = "allocation", .object_id = "a1"});
  ASSERT_THAT(events, SizeIs(2));
  EXPECT_EQ(events[1].kind(), "allocation.degraded");
  EXPECT_EQ(events[1].message(), "gpu0's agent stopped answering");
  EXPECT_EQ(events[1].severity(), v1::EVENT_SEVERITY_WARNING);
  EXPECT_EQ(events[1].principal(), "engine");
}

TEST_F(StoreTest, UpdateOfUnknownAllocationIsNotFoundAndChangesNothing) {
  WriteSite();
  const Counts before = Count();
  EXPECT_THAT(
      store_->UpdateAllocation({.id = "a9", .state = v1::ALLOCATION_STATE_READY}, kOperator),
      StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("allocation"), HasSubstr("a9"))));
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, UpdateNamingACircuitNotOfTheAllocationIsNotFoundAndChangesNothing) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {GpuToCpu()}),
                                       kOperator),
              IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation original, store_->GetAllocation("a1"));
  const Counts before = Count();
  clock_.Advance(absl::Seconds(1));
  for (const char* circuit : {"c-down", "c-nowhere"}) {
    AllocationUpdate update{.id = "a1", .state = v1::ALLOCATION_STATE_DEGRADED};
    update.circuits["c-up"] = {.state = v1::CIRCUIT_STATE_DEGRADED};
    update.circuits[circuit] = {.state = v1::CIRCUIT_STATE_DEGRADED};
    EXPECT_THAT(store_->UpdateAllocation(update, kOperator),
                StatusIs(absl::StatusCode::kNotFound,
                         AllOf(HasSubstr("circuit"), HasSubstr(circuit), HasSubstr("a1"))));
    // Even with remove_circuits, which would have deleted the changes with the rows.
    update.remove_circuits = true;
    EXPECT_THAT(store_->UpdateAllocation(update, kOperator),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr(circuit)));
  }
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation after, store_->GetAllocation("a1"));
  EXPECT_THAT(after, EqualsProto(original));
  ASSERT_OK_AND_ASSIGN(v1::Allocation a2, store_->GetAllocation("a2"));
  EXPECT_EQ(CircuitOf(a2, "c-down").state(), v1::CIRCUIT_STATE_PLANNED);
}

TEST_F(StoreTest, UpdateOfAReleasedAllocationIsRefused) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_RELEASED, {"gpu0"}, {}), kOperator),
      IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation original, store_->GetAllocation("a1"));
  const Counts before = Count();
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(
      store_->UpdateAllocation({.id = "a1", .state = v1::ALLOCATION_STATE_READY}, kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("a1"), HasSubstr("released"))));
  EXPECT_THAT(store_->UpdateAllocation({.id = "a1", .reason = "rewritten"}, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("a1")));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation after, store_->GetAllocation("a1"));
  EXPECT_THAT(after, EqualsProto(original));
}

TEST_F(StoreTest, UpdateWithAnUnspecifiedStateIsInvalidArgument) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(
      store_->UpdateAllocation({.id = "a1", .state = v1::ALLOCATION_STATE_UNSPECIFIED}, kOperator),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a1")));
  AllocationUpdate update{.id = "a1"};
  update.circuits["c-up"] = {};
  EXPECT_THAT(store_->UpdateAllocation(update, kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("c-up")));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation a1, store_->GetAllocation("a1"));
  EXPECT_EQ(a1.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(CircuitOf(a1, "c-up").state(), v1::CIRCUIT_STATE_PLANNED);
}

TEST_F(StoreTest, RemovingCircuitsFreesTheirPortsForOthers) {
  WriteSite();
  ASSERT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PROGRAMMING, {"h1-cpu0", "gpu0"},
                         {CpuToGpu(), MakeCircuit("c-multi", "n-cpu", 2, "n-gpu", 2,
                                                  {Xc("s1", 2, 15), Xc("s2", 1, 6)})}),
          kOperator),
      IsOk());
  AllocationUpdate fail{.id = "a1",
                        .state = v1::ALLOCATION_STATE_FAILED,
                        .reason = "s1 refused the cross-connect",
                        .remove_circuits = true};
  ASSERT_OK_AND_ASSIGN(v1::Allocation failed, store_->UpdateAllocation(fail, "engine"));
  EXPECT_EQ(failed.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(failed.circuits(), IsEmpty());
  EXPECT_THAT(failed.members(), ElementsAre("h1-cpu0", "gpu0"));  // History is kept.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
  EXPECT_THAT(circuits, IsEmpty());
  for (const auto& [switch_id, port] : std::vector<std::pair<std::string, uint32_t>>{
           {"s1", 1}, {"s1", 11}, {"s1", 2}, {"s1", 15}, {"s2", 1}, {"s2", 6}}) {
    EXPECT_EQ(Port(switch_id, port).circuit_id(), "") << switch_id << "/" << port;
  }
  std::vector<v1::Event> events = Events({.object_kind = "allocation", .object_id = "a1"});
  ASSERT_THAT(events, SizeIs(2));
  EXPECT_THAT(events[1].message(),
              AllOf(HasSubstr("failed"), HasSubstr("refused"), HasSubstr("2 circuits")));

  // The same ports now go to another allocation.
  ASSERT_THAT(
      store_->CreateAllocation(MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu("c-up-2")}),
                               kOperator),
      IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up-2");
}

TEST_F(StoreTest, ReleasingWhileHoldingCircuitsIsRefused) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation original, store_->GetAllocation("a1"));
  const Counts before = Count();
  for (v1::AllocationState state : {v1::ALLOCATION_STATE_RELEASED, v1::ALLOCATION_STATE_FAILED}) {
    EXPECT_THAT(
        store_->UpdateAllocation({.id = "a1", .state = state}, kOperator),
        StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("a1"), HasSubstr("c-up"))));
  }
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation after, store_->GetAllocation("a1"));
  EXPECT_THAT(after, EqualsProto(original));
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");

  // Releasing step by step: REMOVING circuits keep their ports until they are removed.
  AllocationUpdate releasing{.id = "a1", .state = v1::ALLOCATION_STATE_RELEASING};
  releasing.circuits["c-up"] = {.state = v1::CIRCUIT_STATE_REMOVING};
  ASSERT_THAT(store_->UpdateAllocation(releasing, kOperator), IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
  ASSERT_OK_AND_ASSIGN(
      v1::Allocation released,
      store_->UpdateAllocation(
          {.id = "a1", .state = v1::ALLOCATION_STATE_RELEASED, .remove_circuits = true},
          kOperator));
  EXPECT_EQ(released.state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_THAT(released.circuits(), IsEmpty());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "");
}

TEST_F(StoreTest, PhaseSwitchHandsPortsFromTheOldPhaseToTheNewInOneUpdate) {
  WriteSite();
  // Both phases use n-cpu port 1 → n-gpu port 1 across s1 1→11.
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY, {"h1-cpu0", "gpu0"},
                                 {MakeCircuit("c-now", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)},
                                              v1::CIRCUIT_STATE_ACTIVE, "p1"),
                                  MakeCircuit("c-next", "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)},
                                              v1::CIRCUIT_STATE_INACTIVE, "p2")}),
                  kOperator),
              IsOk());
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-now");
  AllocationUpdate to_p2{.id = "a1", .state = v1::ALLOCATION_STATE_PROGRAMMING};
  // c-next sorts before c-now, so map order would take the ports before they are freed.
  to_p2.circuits["c-now"] = {.state = v1::CIRCUIT_STATE_INACTIVE};
  to_p2.circuits["c-next"] = {.state = v1::CIRCUIT_STATE_PLANNED};
  ASSERT_OK_AND_ASSIGN(v1::Allocation a1, store_->UpdateAllocation(to_p2, "engine"));
  EXPECT_EQ(CircuitOf(a1, "c-now").state(), v1::CIRCUIT_STATE_INACTIVE);
  EXPECT_EQ(CircuitOf(a1, "c-next").state(), v1::CIRCUIT_STATE_PLANNED);
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-next");
  EXPECT_EQ(Port("s1", 11).circuit_id(), "c-next");

  // The freed ports are now taken by p2: another allocation cannot have them.
  EXPECT_THAT(
      store_->CreateAllocation(MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING,
                                              {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                               kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("c-next")));
}

TEST_F(StoreTest, ActivatingACircuitOnABusyPortIsRefusedAndChangesNothing) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  // a2's later phase uses c-up's switch ports; a3's uses its O-NIC ports through other ones.
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_READY, {"gpu0"},
                                 {MakeCircuit("c-later", "n-gpu", 2, "n-cpu", 2, {Xc("s1", 1, 11)},
                                              v1::CIRCUIT_STATE_INACTIVE, "p2")}),
                  kOperator),
              IsOk());
  ASSERT_THAT(store_->CreateAllocation(
                  MakeAllocation("a3", "tenant-c", v1::ALLOCATION_STATE_READY, {"h1-cpu0"},
                                 {MakeCircuit("c-tx", "n-cpu", 1, "n-gpu", 2, {Xc("s1", 4, 12)},
                                              v1::CIRCUIT_STATE_INACTIVE, "p2")}),
                  kOperator),
              IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Allocation a2_before, store_->GetAllocation("a2"));
  const Counts before = Count();
  AllocationUpdate a2{.id = "a2", .state = v1::ALLOCATION_STATE_PROGRAMMING};
  a2.circuits["c-later"] = {.state = v1::CIRCUIT_STATE_PLANNED};
  EXPECT_THAT(store_->UpdateAllocation(a2, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("c-later"), HasSubstr("s1/1"), HasSubstr("c-up"))));
  AllocationUpdate a3{.id = "a3"};
  a3.circuits["c-tx"] = {.state = v1::CIRCUIT_STATE_PLANNED};
  EXPECT_THAT(store_->UpdateAllocation(a3, kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("c-tx"), HasSubstr("n-cpu port 1"), HasSubstr("c-up"))));
  EXPECT_EQ(Count(), before);
  ASSERT_OK_AND_ASSIGN(v1::Allocation a2_after, store_->GetAllocation("a2"));
  EXPECT_THAT(a2_after, EqualsProto(a2_before));
  EXPECT_EQ(Port("s1", 1).circuit_id(), "c-up");
  EXPECT_EQ(Port("s1", 4).circuit_id(), "");
}

// ---------------------------------------------------------------------------------------
// Manual circuits

v1::Circuit Manual(v1::Circuit c) {
  c.set_manual(true);
  return c;
}

TEST_F(StoreTest, CreateManualCircuitPersistsItWithAnEvent) {
  WriteSite();
  const uint64_t before = Events().back().sequence();
  v1::Circuit c =
      Manual(MakeCircuit("m-1", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 15), Xc("s2", 1, 6)},
                         v1::CIRCUIT_STATE_PROGRAMMED));
  c.add_trunks("t1");
  ASSERT_THAT(store_->CreateManualCircuit(c, "reconciler"), IsOk());

  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
  ASSERT_THAT(circuits, SizeIs(1));
  EXPECT_THAT(circuits[0], EqualsProto(c));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> on_s2, store_->ListCircuits({.switch_id = "s2"}));
  EXPECT_THAT(on_s2, SizeIs(1));
  EXPECT_EQ(Port("s1", 2).circuit_id(), "m-1");
  EXPECT_EQ(Port("s2", 6).circuit_id(), "m-1");
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Allocation> allocations,
                       store_->ListAllocations({.include_released = true}));
  EXPECT_THAT(allocations, IsEmpty());

  std::vector<v1::Event> events = Events({.after_sequence = before});
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].kind(), "circuit.created");
  EXPECT_EQ(events[0].object_kind(), "circuit");
  EXPECT_EQ(events[0].object_id(), "m-1");
  EXPECT_EQ(events[0].principal(), "reconciler");
  EXPECT_THAT(events[0].message(),
              AllOf(HasSubstr("manual"), HasSubstr("n-cpu"), HasSubstr("n-gpu")));
}

TEST_F(StoreTest, CreateManualCircuitRefusesACircuitThatIsNotManual) {
  WriteSite();
  const Counts before = Count();
  v1::Circuit not_manual = CpuToGpu("m-1");
  EXPECT_THAT(
      store_->CreateManualCircuit(not_manual, kOperator),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("m-1"), HasSubstr("manual"))));
  v1::Circuit owned = Manual(CpuToGpu("m-1"));
  owned.set_allocation_id("a1");
  EXPECT_THAT(store_->CreateManualCircuit(owned, kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("m-1"), HasSubstr("allocation"), HasSubstr("a1"))));
  EXPECT_THAT(store_->CreateManualCircuit(Manual(CpuToGpu("")), kOperator),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("id")));
  v1::Circuit stateless = Manual(CpuToGpu("m-1"));
  stateless.set_state(v1::CIRCUIT_STATE_UNSPECIFIED);
  EXPECT_THAT(
      store_->CreateManualCircuit(stateless, kOperator),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("m-1"), HasSubstr("state"))));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 1).circuit_id(), "");
}

TEST_F(StoreTest, ManualCircuitOnABusyPortIsRefusedAndNothingIsStored) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  const Counts before = Count();
  EXPECT_THAT(store_->CreateManualCircuit(
                  Manual(MakeCircuit("m-1", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 11)})), kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("s1/11"), HasSubstr("c-up"))));
  // The O-NIC's tx port is taken even through free switch ports.
  EXPECT_THAT(store_->CreateManualCircuit(
                  Manual(MakeCircuit("m-2", "n-cpu", 1, "n-gpu", 2, {Xc("s1", 4, 12)})), kOperator),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("m-2")));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 2).circuit_id(), "");
  EXPECT_EQ(Port("s1", 4).circuit_id(), "");

  // And the other way round: an allocation cannot take a manual circuit's port.
  ASSERT_THAT(store_->CreateManualCircuit(
                  Manual(MakeCircuit("m-3", "n-gpu", 1, "n-cpu", 1, {Xc("s1", 3, 9)})), kOperator),
              IsOk());
  EXPECT_THAT(
      store_->CreateAllocation(
          MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"gpu0"}, {GpuToCpu()}),
          kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("s1/3"), HasSubstr("m-3"))));
}

TEST_F(StoreTest, CircuitIdsAreUniqueAcrossManualAndAllocatedCircuits) {
  WriteSite();
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  ASSERT_THAT(store_->CreateManualCircuit(Manual(GpuToCpu("m-1")), kOperator), IsOk());
  const Counts before = Count();
  EXPECT_THAT(
      store_->CreateManualCircuit(
          Manual(MakeCircuit("c-up", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 12)})), kOperator),
      StatusIs(absl::StatusCode::kAlreadyExists, AllOf(HasSubstr("c-up"), HasSubstr("a1"))));
  EXPECT_THAT(
      store_->CreateManualCircuit(
          Manual(MakeCircuit("m-1", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 12)})), kOperator),
      StatusIs(absl::StatusCode::kAlreadyExists, AllOf(HasSubstr("m-1"), HasSubstr("manual"))));
  EXPECT_THAT(store_->CreateAllocation(
                  MakeAllocation("a2", "tenant-b", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0"},
                                 {MakeCircuit("m-1", "n-cpu", 2, "n-gpu", 2, {Xc("s1", 2, 12)})}),
                  kOperator),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("m-1")));
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, ManualCircuitFromAnUnknownOnicPortIsRefusedAndNothingIsStored) {
  WriteSite();
  const Counts before = Count();
  EXPECT_THAT(
      store_->CreateManualCircuit(
          Manual(MakeCircuit("m-ghost", "n-ghost", 1, "n-cpu", 2, {Xc("s1", 4, 10)})), kOperator),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("m-ghost"), HasSubstr("n-ghost"))));
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 4).circuit_id(), "");
}

TEST_F(StoreTest, AllocationUpdatesLeaveManualCircuitsAlone) {
  WriteSite();
  ASSERT_THAT(store_->CreateManualCircuit(Manual(GpuToCpu("m-1")), kOperator), IsOk());
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  AllocationUpdate other{.id = "a1"};
  other.circuits["m-1"] = {.state = v1::CIRCUIT_STATE_REMOVING};
  EXPECT_THAT(store_->UpdateAllocation(other, kOperator),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("m-1")));
  ASSERT_THAT(
      store_->UpdateAllocation(
          {.id = "a1", .state = v1::ALLOCATION_STATE_FAILED, .remove_circuits = true}, kOperator),
      IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Circuit> circuits, store_->ListCircuits({}));
  ASSERT_THAT(circuits, SizeIs(1));
  EXPECT_EQ(circuits[0].id(), "m-1");
  EXPECT_EQ(circuits[0].state(), v1::CIRCUIT_STATE_PLANNED);
  EXPECT_EQ(Port("s1", 3).circuit_id(), "m-1");
}

// ---------------------------------------------------------------------------------------
// Observed cross-connects

TEST_F(StoreTest, RecordObservedCrossConnectsReplacesThatSwitchsRows) {
  WriteSite();
  const Counts before = Count();
  const uint64_t last = store_->LastEventSequence();
  // Unordered, switch ids left out or given, and a port the inventory does not know.
  ASSERT_THAT(
      store_->RecordObservedCrossConnects("s1", {Xc("s1", 3, 9), Xc("", 1, 11), Xc("s1", 99, 100)}),
      IsOk());
  ASSERT_THAT(store_->RecordObservedCrossConnects("s2", {Xc("s2", 2, 6)}), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> s1, store_->ListObservedCrossConnects("s1"));
  ASSERT_THAT(s1, SizeIs(3));
  EXPECT_THAT(s1[0], EqualsProto(Xc("s1", 1, 11)));
  EXPECT_THAT(s1[1], EqualsProto(Xc("s1", 3, 9)));
  EXPECT_THAT(s1[2], EqualsProto(Xc("s1", 99, 100)));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> all, store_->ListObservedCrossConnects(""));
  ASSERT_THAT(all, SizeIs(4));
  EXPECT_THAT(all[3], EqualsProto(Xc("s2", 2, 6)));

  ASSERT_THAT(store_->RecordObservedCrossConnects("s1", {Xc("s1", 4, 12)}), IsOk());
  ASSERT_OK_AND_ASSIGN(s1, store_->ListObservedCrossConnects("s1"));
  ASSERT_THAT(s1, SizeIs(1));
  EXPECT_THAT(s1[0], EqualsProto(Xc("s1", 4, 12)));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> s2, store_->ListObservedCrossConnects("s2"));
  EXPECT_THAT(s2, SizeIs(1));  // Another switch's rows are untouched.

  ASSERT_THAT(store_->RecordObservedCrossConnects("s1", {}), IsOk());
  ASSERT_OK_AND_ASSIGN(s1, store_->ListObservedCrossConnects("s1"));
  EXPECT_THAT(s1, IsEmpty());

  // Observed state is not a change of the fleet: no event, and nothing else moves.
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(store_->LastEventSequence(), last);
  EXPECT_EQ(Port("s1", 4).circuit_id(), "");
}

TEST_F(StoreTest, ObservedCrossConnectsOfAnUnknownSwitchAreNotFound) {
  WriteSite();
  EXPECT_THAT(store_->RecordObservedCrossConnects("s9", {Xc("s9", 1, 2)}),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("switch"), HasSubstr("s9"))));
  EXPECT_THAT(store_->ListObservedCrossConnects("s9"),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("switch"), HasSubstr("s9"))));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> all, store_->ListObservedCrossConnects(""));
  EXPECT_THAT(all, IsEmpty());
}

TEST_F(StoreTest, RefusedObservationKeepsThePreviousOne) {
  WriteSite();
  ASSERT_THAT(store_->RecordObservedCrossConnects("s1", {Xc("s1", 1, 11)}), IsOk());
  EXPECT_THAT(
      store_->RecordObservedCrossConnects("s1", {Xc("s1", 2, 10), Xc("s1", 2, 12)}),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("s1"), HasSubstr("ingress 2"))));
  EXPECT_THAT(
      store_->RecordObservedCrossConnects("s1", {Xc("s2", 2, 6)}),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("s1"), HasSubstr("s2"))));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> s1, store_->ListObservedCrossConnects("s1"));
  ASSERT_THAT(s1, SizeIs(1));
  EXPECT_THAT(s1[0], EqualsProto(Xc("s1", 1, 11)));
}

TEST_F(StoreTest, DeletingASwitchDeletesWhatItWasObservedToHold) {
  WriteSite();
  InventoryWrite add;
  *add.objects.add_switches() = MakeSwitch("s3", 4, 4, {});
  add.created = {"switch s3"};
  ASSERT_THAT(store_->WriteInventory(add, kOperator), IsOk());
  ASSERT_THAT(store_->RecordObservedCrossConnects("s3", {Xc("s3", 1, 5)}), IsOk());
  ASSERT_THAT(store_->RecordObservedCrossConnects("s1", {Xc("s1", 1, 11)}), IsOk());
  ASSERT_THAT(store_->DeleteObject("switch", "s3", kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::CrossConnect> all, store_->ListObservedCrossConnects(""));
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].switch_id(), "s1");
}

// ---------------------------------------------------------------------------------------
// Drain

TEST_F(StoreTest, SetDrainedDrainsAndUndrainsEachKindOfTarget) {
  WriteSite();
  const uint64_t before = Events().back().sequence();
  ASSERT_THAT(store_->SetDrained({.switch_id = "s1", .port = 4}, true, "dirty connector", "ops"),
              IsOk());
  ASSERT_THAT(store_->SetDrained({.onic = "n-gpu"}, true, "firmware update", "ops"), IsOk());
  ASSERT_THAT(store_->SetDrained({.host = "h1"}, true, "kernel upgrade", "ops"), IsOk());
  EXPECT_EQ(Port("s1", 4).admin_state(), v1::ADMIN_STATE_DRAINED);
  EXPECT_EQ(Port("s1", 5).admin_state(), v1::ADMIN_STATE_ENABLED);
  EXPECT_EQ(Port("s2", 4).admin_state(), v1::ADMIN_STATE_ENABLED);  // Same number, other switch.
  ASSERT_OK_AND_ASSIGN(v1::Onic gpu_nic, store_->GetOnic("n-gpu"));
  EXPECT_EQ(gpu_nic.admin_state(), v1::ADMIN_STATE_DRAINED);
  ASSERT_OK_AND_ASSIGN(v1::Onic cpu_nic, store_->GetOnic("n-cpu"));
  EXPECT_EQ(cpu_nic.admin_state(), v1::ADMIN_STATE_ENABLED);
  ASSERT_OK_AND_ASSIGN(v1::Host host, store_->GetHost("h1"));
  EXPECT_EQ(host.admin_state(), v1::ADMIN_STATE_DRAINED);

  std::vector<v1::Event> events = Events({.after_sequence = before});
  ASSERT_THAT(events, SizeIs(3));
  const std::vector<std::pair<std::string, std::string>> objects = {
      {"port", "s1/4"}, {"onic", "n-gpu"}, {"host", "h1"}};
  const std::vector<std::string> reasons = {"dirty connector", "firmware update", "kernel upgrade"};
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].kind(), "drain");
    EXPECT_EQ(events[i].object_kind(), objects[i].first);
    EXPECT_EQ(events[i].object_id(), objects[i].second);
    EXPECT_EQ(events[i].principal(), "ops");
    EXPECT_THAT(events[i].message(), AllOf(HasSubstr(objects[i].second), HasSubstr(reasons[i])));
  }

  const uint64_t drained = Events().back().sequence();
  ASSERT_THAT(store_->SetDrained({.switch_id = "s1", .port = 4}, false, "cleaned", "ops"), IsOk());
  ASSERT_THAT(store_->SetDrained({.onic = "n-gpu"}, false, "", "ops"), IsOk());
  ASSERT_THAT(store_->SetDrained({.host = "h1"}, false, "done", "ops"), IsOk());
  EXPECT_EQ(Port("s1", 4).admin_state(), v1::ADMIN_STATE_ENABLED);
  ASSERT_OK_AND_ASSIGN(gpu_nic, store_->GetOnic("n-gpu"));
  EXPECT_EQ(gpu_nic.admin_state(), v1::ADMIN_STATE_ENABLED);
  ASSERT_OK_AND_ASSIGN(host, store_->GetHost("h1"));
  EXPECT_EQ(host.admin_state(), v1::ADMIN_STATE_ENABLED);
  std::vector<v1::Event> undrains = Events({.after_sequence = drained});
  ASSERT_THAT(undrains, SizeIs(3));
  for (const v1::Event& e : undrains) EXPECT_EQ(e.kind(), "undrain");
  EXPECT_THAT(undrains[0].message(), AllOf(HasSubstr("s1/4"), HasSubstr("cleaned")));
}

TEST_F(StoreTest, SetDrainedIsIdempotent) {
  WriteSite();
  ASSERT_THAT(store_->SetDrained({.host = "h1"}, true, "first", kOperator), IsOk());
  ASSERT_THAT(store_->SetDrained({.host = "h1"}, true, "again", kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Host host, store_->GetHost("h1"));
  EXPECT_EQ(host.admin_state(), v1::ADMIN_STATE_DRAINED);
  ASSERT_THAT(store_->SetDrained({.switch_id = "s2", .port = 3}, false, "", kOperator), IsOk());
  EXPECT_EQ(Port("s2", 3).admin_state(), v1::ADMIN_STATE_ENABLED);
}

TEST_F(StoreTest, SetDrainedNeedsExactlyOneTarget) {
  WriteSite();
  const Counts before = Count();
  const std::vector<DrainTargetRef> invalid = {
      {},
      {.switch_id = "s1", .port = 4, .onic = "n-cpu"},
      {.onic = "n-cpu", .host = "h1"},
      {.switch_id = "s1", .port = 4, .onic = "n-cpu", .host = "h1"},
      {.switch_id = "s1"},  // A switch without a port.
      {.port = 4},          // A port without a switch.
  };
  for (const DrainTargetRef& target : invalid) {
    EXPECT_THAT(store_->SetDrained(target, true, "why", kOperator),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("switch")))
        << "'" << target.switch_id << "' " << target.port << " '" << target.onic << "' '"
        << target.host << "'";
  }
  EXPECT_EQ(Count(), before);
  EXPECT_EQ(Port("s1", 4).admin_state(), v1::ADMIN_STATE_ENABLED);
  ASSERT_OK_AND_ASSIGN(v1::Onic onic, store_->GetOnic("n-cpu"));
  EXPECT_EQ(onic.admin_state(), v1::ADMIN_STATE_ENABLED);
  ASSERT_OK_AND_ASSIGN(v1::Host host, store_->GetHost("h1"));
  EXPECT_EQ(host.admin_state(), v1::ADMIN_STATE_ENABLED);
}

TEST_F(StoreTest, SetDrainedOfAnUnknownTargetIsNotFound) {
  WriteSite();
  const Counts before = Count();
  EXPECT_THAT(store_->SetDrained({.switch_id = "s1", .port = 99}, true, "", kOperator),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("port"), HasSubstr("s1/99"))));
  EXPECT_THAT(store_->SetDrained({.switch_id = "s9", .port = 1}, true, "", kOperator),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("s9/1")));
  EXPECT_THAT(store_->SetDrained({.onic = "n-9"}, false, "", kOperator),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("onic"), HasSubstr("n-9"))));
  EXPECT_THAT(store_->SetDrained({.host = "h9"}, true, "", kOperator),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("host"), HasSubstr("h9"))));
  EXPECT_EQ(Count(), before);
}

TEST_F(StoreTest, DrainSurvivesAnInventoryUpdateOfTheSameObjects) {
  WriteSite();
  ASSERT_THAT(store_->SetDrained({.onic = "n-cpu"}, true, "", kOperator), IsOk());
  ASSERT_THAT(store_->SetDrained({.switch_id = "s1", .port = 1}, true, "", kOperator), IsOk());
  InventoryWrite again = SmallSite();
  again.created.clear();
  ASSERT_THAT(store_->WriteInventory(again, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Onic onic, store_->GetOnic("n-cpu"));
  EXPECT_EQ(onic.admin_state(), v1::ADMIN_STATE_DRAINED);
  EXPECT_EQ(Port("s1", 1).admin_state(), v1::ADMIN_STATE_DRAINED);
}

// ---------------------------------------------------------------------------------------
// Following the event log

TEST_F(StoreTest, LastEventSequenceFollowsEveryCommittedWrite) {
  EXPECT_EQ(store_->LastEventSequence(), 0u);
  auto newest = [this] {
    std::vector<v1::Event> events = Events({.limit = 100'000});
    return events.empty() ? uint64_t{0} : events.back().sequence();
  };
  WriteSite();
  EXPECT_EQ(store_->LastEventSequence(), newest());
  EXPECT_EQ(store_->LastEventSequence(), 9u);

  v1::Event event;
  event.set_kind("test.event");
  event.set_message("x");
  ASSERT_THAT(store_->AppendEvent(event), IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());
  ASSERT_THAT(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_READY,
                                                      {"h1-cpu0", "gpu0"}, {CpuToGpu()}),
                                       kOperator),
              IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());
  ASSERT_THAT(store_->UpdateAllocation({.id = "a1", .reason = "x"}, kOperator), IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());
  ASSERT_THAT(store_->CreateManualCircuit(Manual(GpuToCpu("m-1")), kOperator), IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());
  ASSERT_THAT(store_->SetDrained({.host = "h1"}, true, "", kOperator), IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());
  ASSERT_THAT(store_->DeleteObject("trunk", "t2", kOperator), IsOk());
  EXPECT_EQ(store_->LastEventSequence(), newest());

  // Refused writes publish nothing.
  const uint64_t last = store_->LastEventSequence();
  EXPECT_FALSE(store_->UpdateAllocation({.id = "a9"}, kOperator).ok());
  EXPECT_FALSE(store_->CreateManualCircuit(Manual(CpuToGpu("m-2")), kOperator).ok());
  EXPECT_FALSE(store_->DeleteObject("host", "h1", kOperator).ok());
  EXPECT_FALSE(store_->SetDrained({.host = "h9"}, true, "", kOperator).ok());
  EXPECT_EQ(store_->LastEventSequence(), last);
  EXPECT_EQ(newest(), last);
  EXPECT_FALSE(store_->WaitForEvent(last, absl::InfinitePast()));
}

TEST_F(StoreTest, LastEventSequenceIsReadFromTheDatabaseAtOpen) {
  ASSERT_TRUE(dir_.ok());
  const std::string path = dir_.File("state.db");
  OpenStore(path);
  WriteSite();
  const uint64_t last = store_->LastEventSequence();
  ASSERT_EQ(last, Events().back().sequence());
  OpenStore(path);
  EXPECT_EQ(store_->LastEventSequence(), last);
  EXPECT_TRUE(store_->WaitForEvent(last - 1, absl::InfinitePast()));
  EXPECT_FALSE(store_->WaitForEvent(last, absl::InfinitePast()));
  // The next event continues the sequence.
  ASSERT_THAT(store_->SetDrained({.host = "h1"}, true, "", kOperator), IsOk());
  EXPECT_GT(store_->LastEventSequence(), last);
}

TEST_F(StoreTest, WaitForEventAnswersAtOnceWhenTheDeadlineHasPassed) {
  // No event yet: a past deadline gives up without waiting.
  EXPECT_FALSE(store_->WaitForEvent(0, absl::InfinitePast()));
  EXPECT_FALSE(store_->WaitForEvent(0, absl::Now() - absl::Hours(1)));
  WriteSite();
  const uint64_t last = store_->LastEventSequence();
  // An event newer than `after_sequence` is already there: no need to wait at all.
  EXPECT_TRUE(store_->WaitForEvent(0, absl::InfinitePast()));
  EXPECT_TRUE(store_->WaitForEvent(last - 1, absl::InfinitePast()));
  EXPECT_FALSE(store_->WaitForEvent(last, absl::InfinitePast()));
  EXPECT_FALSE(store_->WaitForEvent(last + 5, absl::InfinitePast()));
}

// The deadline is generous: the waits end when the write commits, long before it.
constexpr absl::Duration kGenerous = absl::Seconds(60);

TEST_F(StoreTest, WaitForEventWakesWhenAnotherThreadCommitsAnEvent) {
  WriteSite();
  const uint64_t last = store_->LastEventSequence();
  std::thread writer([this] {
    v1::Event event;
    event.set_kind("test.wake");
    event.set_message("wake up");
    EXPECT_THAT(store_->AppendEvent(event), IsOk());
  });
  EXPECT_TRUE(store_->WaitForEvent(last, absl::Now() + kGenerous));
  writer.join();
  std::vector<v1::Event> events = Events({.after_sequence = last});
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].kind(), "test.wake");
}

TEST_F(StoreTest, EveryKindOfWriteWakesWaiters) {
  WriteSite();
  const std::vector<std::pair<std::string, std::function<absl::Status()>>> writes = {
      {"AppendEvent",
       [this] {
         v1::Event e;
         e.set_kind("test");
         return store_->AppendEvent(e);
       }},
      {"WriteInventory",
       [this] {
         InventoryWrite w;
         w.objects.add_hosts()->set_name("h2");
         w.created = {"host h2"};
         return store_->WriteInventory(w, kOperator);
       }},
      {"DeleteObject", [this] { return store_->DeleteObject("host", "h2", kOperator).status(); }},
      {"CreateAllocation",
       [this] {
         return store_->CreateAllocation(
             MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PENDING, {"h1-cpu0", "gpu0"},
                            {CpuToGpu()}),
             kOperator);
       }},
      {"UpdateAllocation",
       [this] {
         return store_
             ->UpdateAllocation({.id = "a1", .state = v1::ALLOCATION_STATE_READY}, kOperator)
             .status();
       }},
      {"CreateManualCircuit",
       [this] { return store_->CreateManualCircuit(Manual(GpuToCpu("m-1")), kOperator); }},
      {"SetDrained", [this] { return store_->SetDrained({.host = "h1"}, true, "", kOperator); }},
  };
  for (const auto& [name, write] : writes) {
    SCOPED_TRACE(name);
    const uint64_t last = store_->LastEventSequence();
    bool woke = false;
    std::thread waiter([&] { woke = store_->WaitForEvent(last, absl::Now() + kGenerous); });
    EXPECT_THAT(write(), IsOk());
    waiter.join();
    EXPECT_TRUE(woke);
    EXPECT_GT(store_->LastEventSequence(), last);
  }
}

TEST_F(StoreTest, OneCommitWakesEveryWaiter) {
  WriteSite();
  const uint64_t last = store_->LastEventSequence();
  constexpr int kWaiters = 4;
  std::vector<int> woke(kWaiters, 0);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back(
        [&, i] { woke[i] = store_->WaitForEvent(last, absl::Now() + kGenerous) ? 1 : 0; });
  }
  ASSERT_THAT(store_->SetDrained({.onic = "n-cpu"}, true, "", kOperator), IsOk());
  for (std::thread& t : waiters) t.join();
  EXPECT_THAT(woke, ::testing::Each(1));
}

}  // namespace
}  // namespace fleet::store
