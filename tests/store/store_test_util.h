// Helpers shared by the store tests: status matchers (Abseil 20220623 has none), a one-value
// query, a recorded changeset, a private temporary directory, file reading for byte-for-byte
// comparisons, and the StoreTest fixture with the small site and the builders its tests share.
#ifndef FLEET_TESTS_STORE_STORE_TEST_UTIL_H_
#define FLEET_TESTS_STORE_STORE_TEST_UTIL_H_

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/proto_time.h"
#include "controller/store/changesets.h"
#include "controller/store/sqlite.h"
#include "controller/store/store.h"
#include "testing/fake_clock.h"

namespace fleet::store::testing_util {

// The matchers the store tests use, so that a test file takes everything here with one
// using-directive.
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

// Runs a one-column, one-row query and returns the column as text ("" on any failure, which
// the caller's expectation then reports).
inline std::string QueryText(Database& db, const std::string& sql) {
  absl::StatusOr<Statement> stmt = db.Prepare(sql);
  if (!stmt.ok()) {
    ADD_FAILURE() << sql << ": " << stmt.status();
    return "";
  }
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok() || !*row) {
    ADD_FAILURE() << sql << ": no row";
    return "";
  }
  return stmt->Text(0);
}

inline absl::Status ToStatus(const absl::Status& s) { return s; }
template <typename T>
absl::Status ToStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER(IsOk, "is OK") {
  absl::Status s = ToStatus(arg);
  if (!s.ok()) *result_listener << "status: " << s;
  return s.ok();
}

// StatusIs(code, message_matcher) for Status and StatusOr.
MATCHER_P2(StatusIs, code, message_matcher,
           "has code " + absl::StatusCodeToString(code) + " and a message that " +
               ::testing::DescribeMatcher<std::string>(message_matcher)) {
  absl::Status s = ToStatus(arg);
  *result_listener << "status: " << s;
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(s.message()), result_listener);
}

#define FLEET_TEST_CONCAT_INNER_(a, b) a##b
#define FLEET_TEST_CONCAT_(a, b) FLEET_TEST_CONCAT_INNER_(a, b)

// ASSERT_OK_AND_ASSIGN(lhs, expr): asserts `expr` (a StatusOr) is OK and moves its value.
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(FLEET_TEST_CONCAT_(statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, expr)             \
  auto statusor = (expr);                                           \
  ASSERT_TRUE(statusor.ok()) << #expr << ": " << statusor.status(); \
  lhs = std::move(statusor).value()

#define ASSERT_OK(expr) ASSERT_THAT((expr), ::fleet::store::testing_util::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::fleet::store::testing_util::IsOk())

// A fresh directory under the test's temporary directory, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string base = ::testing::TempDir();
    if (base.empty() || base.back() != '/') base += '/';
    std::string pattern = base + "fleet_store_test.XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  bool ok() const { return !path_.empty(); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "" when `before` and `after` are the same bytes, else where they first differ (a whole file
// would be too long to print).
inline std::string ByteDifference(const std::string& before, const std::string& after) {
  if (before == after) return "";
  size_t i = 0;
  while (i < before.size() && i < after.size() && before[i] == after[i]) ++i;
  std::ostringstream out;
  out << "sizes " << before.size() << " and " << after.size() << ", first difference at byte " << i;
  if (i < before.size() && i < after.size()) {
    out << ": " << static_cast<int>(static_cast<unsigned char>(before[i])) << " became "
        << static_cast<int>(static_cast<unsigned char>(after[i]));
  }
  return out.str();
}

constexpr char kOperator[] = "operator:alice";

inline int64_t Micros(const google::protobuf::Timestamp& t) {
  return absl::ToUnixMicros(FromProtoTime(t));
}

inline google::protobuf::Timestamp Stamp(absl::Time t) { return ToProtoTime(t); }

// Compares protos field by field and shows both on a difference.
MATCHER_P(EqualsProto, expected, "equals " + expected.ShortDebugString()) {
  std::string diff;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  if (differencer.Compare(expected, arg)) return true;
  *result_listener << "differences:\n" << diff;
  return false;
}

inline v1::SwitchPortRef PortRef(const std::string& switch_id, uint32_t port) {
  v1::SwitchPortRef ref;
  ref.set_switch_id(switch_id);
  ref.set_port(port);
  return ref;
}

inline v1::Switch MakeSwitch(const std::string& id, uint32_t ingress, uint32_t egress,
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

inline v1::Device MakeDevice(const std::string& id, v1::DeviceKind kind, const std::string& host) {
  v1::Device d;
  d.set_id(id);
  d.set_kind(kind);
  d.set_host(host);
  d.set_chassis(host.empty() ? "jbog1" : "");
  d.set_model("model-x");
  return d;
}

// `wiring` is {tx port 1, rx port 1, tx port 2, rx port 2}.
inline v1::Onic MakeOnic(const std::string& id, const std::string& device,
                         const std::string& serial, const std::vector<v1::SwitchPortRef>& wiring) {
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

inline v1::Trunk MakeTrunk(const std::string& id, v1::SwitchPortRef from, v1::SwitchPortRef to) {
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
inline InventoryWrite SmallSite() {
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

inline v1::CrossConnect Xc(const std::string& switch_id, uint32_t ingress, uint32_t egress) {
  v1::CrossConnect x;
  x.set_switch_id(switch_id);
  x.set_ingress(ingress);
  x.set_egress(egress);
  return x;
}

inline v1::Circuit MakeCircuit(const std::string& id, const std::string& src, uint32_t src_port,
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
inline v1::Circuit CpuToGpu(const std::string& id = "c-up") {
  return MakeCircuit(id, "n-cpu", 1, "n-gpu", 1, {Xc("s1", 1, 11)});
}
inline v1::Circuit GpuToCpu(const std::string& id = "c-down") {
  return MakeCircuit(id, "n-gpu", 1, "n-cpu", 1, {Xc("s1", 3, 9)});
}

inline v1::Allocation MakeAllocation(const std::string& id, const std::string& tenant,
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

// The update that releases allocation `id` for good, its circuits removed.
inline AllocationUpdate ReleaseOf(const std::string& id) {
  AllocationUpdate release;
  release.id = id;
  release.state = v1::ALLOCATION_STATE_RELEASED;
  release.release = AllocationUpdate::ReleaseIntent{v1::ALLOCATION_STATE_RELEASED, "done"};
  release.remove_circuits = true;
  return release;
}

// Every row of the one-column query `sql`, as text.
inline std::vector<std::string> Column(Database& db, const std::string& sql) {
  std::vector<std::string> out;
  absl::StatusOr<Statement> stmt = db.Prepare(sql);
  EXPECT_TRUE(stmt.ok()) << sql << ": " << stmt.status();
  if (!stmt.ok()) return out;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    EXPECT_TRUE(row.ok()) << sql << ": " << row.status();
    if (!row.ok() || !*row) break;
    out.push_back(stmt->Text(0));
  }
  return out;
}

// Runs `sql` on `writer` in one recorded transaction; returns its changeset.
inline std::string Recorded(Database& writer, const std::string& sql) {
  absl::StatusOr<Transaction> txn = Transaction::Begin(writer);
  EXPECT_TRUE(txn.ok()) << txn.status();
  absl::StatusOr<ChangeRecorder> recorder = ChangeRecorder::Start(writer);
  EXPECT_TRUE(recorder.ok()) << recorder.status();
  EXPECT_THAT(writer.Exec(sql), IsOk()) << sql;
  absl::StatusOr<std::string> changeset = recorder->Changeset();
  EXPECT_TRUE(changeset.ok()) << changeset.status();
  EXPECT_THAT(txn->Commit(), IsOk());
  return changeset.value_or("");
}

inline std::vector<std::string> Tables(Database& db) {
  return Column(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
}

// Every row of every table (sqlite_sequence included), in key order, as text.
inline std::string Dump(Database& db) {
  std::string out;
  for (const std::string& table : Tables(db)) {
    std::vector<std::string> columns =
        Column(db, absl::StrCat("SELECT name FROM pragma_table_info('", table, "')"));
    std::string row = "''";
    for (const std::string& c : columns) absl::StrAppend(&row, " || '|' || quote(\"", c, "\")");
    for (const std::string& r :
         Column(db, absl::StrCat("SELECT ", row, " FROM \"", table, "\" ORDER BY 1"))) {
      absl::StrAppend(&out, table, r, "\n");
    }
  }
  return out;
}

// A store on a private in-memory database (or a file in dir_) with a fake clock. Named, not
// in an anonymous namespace: every test file of the binary shares this one fixture.
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { OpenStore(":memory:"); }

  // `commit_log`, when given, outlives the store.
  void OpenStore(const std::string& path, CommitLog* commit_log = nullptr) {
    store_.reset();
    absl::StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore(
        {.path = path, .clock = &clock_, .commit_point = &commit_point_, .commit_log = commit_log});
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
    AllocationFilter every;
    every.include_released = true;
    if (auto v = store_->ListAllocations(every); v.ok()) c.allocations = v->size();
    if (auto v = store_->ListCircuits({}); v.ok()) c.circuits = v->size();
    c.events = Events().size();
    return c;
  }

  ScratchDir dir_;  // For tests that need a file; outlives the store opened on it.
  fleet::testing::FakeClock clock_;
  CommitPoint commit_point_;  // Every write passes it; no fence unless a test sets one.
  std::unique_ptr<Store> store_;
};

// `c` as a manual circuit.
inline v1::Circuit Manual(v1::Circuit c) {
  c.set_manual(true);
  return c;
}

}  // namespace fleet::store::testing_util

#endif  // FLEET_TESTS_STORE_STORE_TEST_UTIL_H_
