// InventoryStore (controller/store/inventory_store.h) on SQLite: inventory reads, writes
// with their events, what a failed write leaves (nothing), and drain.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "controller/store/store.h"
#include "testing/fake_clock.h"
#include "tests/store/store_test_util.h"

// Filters are built with designated initializers naming only the fields a test sets; the
// others keep their documented defaults, which is what this warning would flag.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace fleet::store {
namespace {

using namespace ::fleet::store::testing_util;  // The fixture, its builders and matchers.

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
  // A chassis holds pooled devices only.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Device> in_jbog1, store_->ListDevices({.chassis = "jbog1"}));
  ASSERT_THAT(in_jbog1, SizeIs(1));
  EXPECT_EQ(in_jbog1[0].id(), "gpu0");
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Device> chassis_h1, store_->ListDevices({.chassis = "h1"}));
  EXPECT_THAT(chassis_h1, IsEmpty());

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

TEST_F(StoreTest, ADevicesPcieIdentityIsStoredWholeAndUpdated) {
  InventoryWrite site = SmallSite();
  for (v1::Device& d : *site.objects.mutable_devices()) {
    if (d.id() != "gpu0") continue;
    d.mutable_pcie()->set_vendor(0x10de);
    d.mutable_pcie()->set_device(0x20b5);
    d.mutable_pcie()->set_dsn(0xffee000000000001ULL);  // Past int64's top: SQLite's sign bit.
  }
  ASSERT_THAT(store_->WriteInventory(site, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(v1::Device gpu, store_->GetDevice("gpu0"));
  EXPECT_EQ(gpu.pcie().vendor(), 0x10deu);
  EXPECT_EQ(gpu.pcie().device(), 0x20b5u);
  EXPECT_EQ(gpu.pcie().dsn(), 0xffee000000000001ULL);
  ASSERT_OK_AND_ASSIGN(v1::Device cpu, store_->GetDevice("h1-cpu0"));
  EXPECT_FALSE(cpu.has_pcie());

  InventoryWrite cleared;
  *cleared.objects.add_devices() = gpu;
  cleared.objects.mutable_devices(0)->clear_pcie();
  cleared.objects.mutable_devices(0)->clear_onics();
  cleared.updated = {"device gpu0"};
  ASSERT_THAT(store_->WriteInventory(cleared, kOperator), IsOk());
  ASSERT_OK_AND_ASSIGN(gpu, store_->GetDevice("gpu0"));
  EXPECT_FALSE(gpu.has_pcie());
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

  // By the place an agent serves (a host's devices, or a chassis's pooled ones), and by serial;
  // each with its ports.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Onic> at_h1, store_->ListOnics({.place = "h1"}));
  ASSERT_THAT(at_h1, SizeIs(1));
  EXPECT_THAT(at_h1[0], EqualsProto(expected_cpu));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Onic> at_jbog1, store_->ListOnics({.place = "jbog1"}));
  ASSERT_THAT(at_jbog1, SizeIs(1));
  EXPECT_THAT(at_jbog1[0], EqualsProto(all[1]));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Onic> at_h9, store_->ListOnics({.place = "h9"}));
  EXPECT_THAT(at_h9, IsEmpty());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Onic> by_serial, store_->ListOnics({.serial = "SN-CPU"}));
  ASSERT_THAT(by_serial, SizeIs(1));
  EXPECT_THAT(by_serial[0], EqualsProto(expected_cpu));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Onic> no_serial, store_->ListOnics({.serial = "SN-9"}));
  EXPECT_THAT(no_serial, IsEmpty());
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
    d.set_health(v1::DEVICE_HEALTH_HEALTHY);
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
  fleet::testing::FakeClock other_clock;
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
  // The reason is kept with the state, not only in the event.
  EXPECT_EQ(Port("s1", 4).admin_reason(), "dirty connector");
  EXPECT_EQ(Port("s1", 5).admin_reason(), "");
  EXPECT_EQ(gpu_nic.admin_reason(), "firmware update");
  EXPECT_EQ(host.admin_reason(), "kernel upgrade");

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
  // An undrain's words are the event's; the state it leaves has no reason.
  EXPECT_EQ(Port("s1", 4).admin_reason(), "");
  EXPECT_EQ(gpu_nic.admin_reason(), "");
  EXPECT_EQ(host.admin_reason(), "");
  std::vector<v1::Event> undrains = Events({.after_sequence = drained});
  ASSERT_THAT(undrains, SizeIs(3));
  for (const v1::Event& e : undrains) EXPECT_EQ(e.kind(), "undrain");
  EXPECT_THAT(undrains[0].message(), AllOf(HasSubstr("s1/4"), HasSubstr("cleaned")));
}

TEST_F(StoreTest, PortHealthFirstReadWellIsRecordedWithoutAnEvent) {
  WriteSite();
  EXPECT_EQ(Port("s1", 11).oper_state(), v1::OPER_STATE_UNKNOWN);
  const uint64_t before = Events().back().sequence();
  ASSERT_OK(store_->SetPortHealth({{.ref = PortRef("s1", 11), .state = v1::OPER_STATE_UP}}));
  EXPECT_EQ(Port("s1", 11).oper_state(), v1::OPER_STATE_UP);
  EXPECT_EQ(Micros(Port("s1", 11).oper_changed()), absl::ToUnixMicros(clock_.Now()));
  EXPECT_THAT(Events({.after_sequence = before}), IsEmpty());

  // What follows is news, the way back to UP included.
  ASSERT_OK(store_->SetPortHealth({{.ref = PortRef("s1", 11),
                                    .state = v1::OPER_STATE_DEGRADED,
                                    .reason = "-31.20 dBm, below -20.00 dBm"}}));
  ASSERT_OK(store_->SetPortHealth({{.ref = PortRef("s1", 11), .state = v1::OPER_STATE_UP}}));
  std::vector<v1::Event> events = Events({.after_sequence = before});
  ASSERT_THAT(events, SizeIs(2));
  EXPECT_EQ(events[0].message(), "switch port s1/11 degraded: -31.20 dBm, below -20.00 dBm");
  EXPECT_EQ(events[1].message(), "switch port s1/11 up");
  // A port first read failed is news at once.
  ASSERT_OK(store_->SetPortHealth({{.ref = PortRef("s1", 12),
                                    .state = v1::OPER_STATE_FAILED,
                                    .reason = "the switch reports it failed"}}));
  EXPECT_THAT(Events({.after_sequence = events.back().sequence()}), SizeIs(1));
}

// An O-NIC port's oper state is its link's: the circuit arriving on it, as retrains left it.
TEST_F(StoreTest, OnicPortOperStateFollowsTheCircuitArrivingOnIt) {
  WriteSite();
  auto gpu_port = [&](uint32_t index) {
    absl::StatusOr<v1::Onic> onic = store_->GetOnic("n-gpu");
    EXPECT_TRUE(onic.ok()) << onic.status();
    return onic.ok() ? onic->ports(index - 1).oper_state() : v1::OPER_STATE_UNSPECIFIED;
  };
  EXPECT_EQ(gpu_port(1), v1::OPER_STATE_UNKNOWN);
  ASSERT_OK(store_->CreateAllocation(MakeAllocation("a1", "tenant-a", v1::ALLOCATION_STATE_PENDING,
                                                    {"h1-cpu0", "gpu0"}, {CpuToGpu(), GpuToCpu()}),
                                     kOperator));
  EXPECT_EQ(gpu_port(1), v1::OPER_STATE_UNKNOWN);  // Planned: not trained yet.
  AllocationUpdate trained{.id = "a1", .state = v1::ALLOCATION_STATE_READY};
  trained.circuits["c-up"] = {v1::CIRCUIT_STATE_ACTIVE, ""};
  ASSERT_OK(store_->UpdateAllocation(trained, "fleetd"));
  EXPECT_EQ(gpu_port(1), v1::OPER_STATE_UP);
  EXPECT_EQ(gpu_port(2), v1::OPER_STATE_UNKNOWN);  // No circuit arrives there.
  ASSERT_OK_AND_ASSIGN(v1::Onic cpu, store_->GetOnic("n-cpu"));
  EXPECT_EQ(cpu.ports(0).oper_state(), v1::OPER_STATE_UNKNOWN);  // c-down is still planned.
  AllocationUpdate hurt{.id = "a1", .state = v1::ALLOCATION_STATE_DEGRADED};
  hurt.circuits["c-up"] = {v1::CIRCUIT_STATE_DEGRADED, "no light"};
  ASSERT_OK(store_->UpdateAllocation(hurt, "fleetd"));
  EXPECT_EQ(gpu_port(1), v1::OPER_STATE_DEGRADED);
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

}  // namespace
}  // namespace fleet::store
