// The desired state's reads, from the store's in-memory circuit index and, for comparison in
// the same run, from SQLite as ListCircuits read them before the index (the same query, on a
// second connection so that it waits for no writer): every circuit (admission's snapshot,
// failure reports, the monitor) and one O-NIC's (idle-port quiesces, drains), on sites of
// 1, 4, 16 and 64 full 384x384 switches (384 circuits each).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "controller/store/allocation_rows.h"
#include "controller/store/sqlite.h"
#include "controller/store/store.h"

namespace fleet::store {
namespace {

constexpr uint32_t kPorts = 384;      // Each switch is kPorts x kPorts.
constexpr int kOnicsPerSwitch = 192;  // Two ports each: every ingress and egress wired.
constexpr int kRing = 8;              // O-NICs per allocation.

v1::SwitchPortRef Port(const std::string& sw, uint32_t port) {
  v1::SwitchPortRef ref;
  ref.set_switch_id(sw);
  ref.set_port(port);
  return ref;
}

std::string OnicId(int s, int i) { return absl::StrCat("s", s, "-n", i); }
// O-NIC i of a switch sends port p (1 or 2) on ingress 2i+p-1 and receives on kPorts + that.
uint32_t Tx(int i, uint32_t p) { return 2 * i + p; }
uint32_t Rx(int i, uint32_t p) { return kPorts + 2 * i + p; }

InventoryWrite Site(int switches) {
  InventoryWrite write;
  v1::Inventory& inv = write.objects;
  inv.set_site("bench");
  for (int s = 0; s < switches; ++s) {
    const std::string sw = absl::StrCat("s", s);
    v1::Switch* x = inv.add_switches();
    x->set_id(sw);
    x->set_model("polatis-7000-384x384");
    x->set_ingress_ports(kPorts);
    x->set_egress_ports(kPorts);
    x->set_address(absl::StrCat(sw, ".mgmt"));
    x->set_protocol(v1::SWITCH_PROTOCOL_TL1);
    x->set_management_port(3082);
    x->set_cluster(sw);
    for (int i = 0; i < kOnicsPerSwitch; ++i) {
      v1::Device* d = inv.add_devices();
      d->set_id(absl::StrCat(OnicId(s, i), "-gpu"));
      d->set_kind(v1::DEVICE_KIND_GPU);
      d->set_chassis(absl::StrCat("jbog-", sw));
      d->set_model("gpu");
      v1::Onic* o = inv.add_onics();
      o->set_id(OnicId(s, i));
      o->set_device(d->id());
      o->set_serial(absl::StrCat("SN-", OnicId(s, i)));
      o->set_pcie_address("0000:17:00.0");
      for (uint32_t p = 1; p <= 2; ++p) {
        v1::OnicPort* port = o->add_ports();
        port->set_index(p);
        *port->mutable_tx() = Port(sw, Tx(i, p));
        *port->mutable_rx() = Port(sw, Rx(i, p));
      }
    }
  }
  return write;
}

// A store holding `switches` full switches: on each, rings of kRing O-NICs, one per port.
struct Filled {
  std::string dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<Database> reader;  // What ListCircuits queried before the index.
  size_t circuits = 0;
};

std::map<int, Filled>& AllFilled() {
  static std::map<int, Filled>* filled = new std::map<int, Filled>;
  return *filled;
}

Filled& FilledStore(int switches) {
  static SystemClock clock;
  Filled& f = AllFilled()[switches];
  if (f.store != nullptr) return f;
  char pattern[] = "/tmp/fleet_store_bench.XXXXXX";
  f.dir = mkdtemp(pattern);
  const std::string path = f.dir + "/fleet.db";
  f.store = std::move(OpenSqliteStore({.path = path, .clock = &clock})).value();
  if (absl::Status s = f.store->WriteInventory(Site(switches), "bench"); !s.ok()) std::abort();
  int next = 0;
  for (int s = 0; s < switches; ++s) {
    for (uint32_t p = 1; p <= 2; ++p) {
      for (int first = 0; first < kOnicsPerSwitch; first += kRing) {
        v1::Allocation a;
        a.set_id(absl::StrCat("a", next++));
        a.set_tenant("bench");
        a.set_state(v1::ALLOCATION_STATE_READY);
        for (int k = 0; k < kRing; ++k) {
          const int from = first + k, to = first + (k + 1) % kRing;
          a.add_members(absl::StrCat(OnicId(s, from), "-gpu"));
          v1::Circuit* c = a.add_circuits();
          c->set_id(absl::StrCat(a.id(), "-c", k));
          c->mutable_source()->set_onic(OnicId(s, from));
          c->mutable_source()->set_port(p);
          c->mutable_destination()->set_onic(OnicId(s, to));
          c->mutable_destination()->set_port(p);
          c->set_state(v1::CIRCUIT_STATE_ACTIVE);
          v1::CrossConnect* x = c->add_cross_connects();
          x->set_switch_id(absl::StrCat("s", s));
          x->set_ingress(Tx(from, p));
          x->set_egress(Rx(to, p));
        }
        if (!f.store->CreateAllocation(a, "bench").ok()) std::abort();
        f.circuits += kRing;
      }
    }
  }
  f.reader = std::move(Database::Open(path)).value();
  return f;
}

void BM_AllCircuitsFromIndex(benchmark::State& state) {
  Filled& f = FilledStore(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    absl::StatusOr<std::vector<v1::Circuit>> all = f.store->ListCircuits({});
    if (!all.ok() || all->size() != f.circuits) std::abort();
    benchmark::DoNotOptimize(all);
  }
  state.counters["circuits"] = static_cast<double>(f.circuits);
}

void BM_AllCircuitsFromSqlite(benchmark::State& state) {
  Filled& f = FilledStore(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    absl::StatusOr<std::vector<v1::Circuit>> all = SelectCircuits(*f.reader, {});
    if (!all.ok() || all->size() != f.circuits) std::abort();
    benchmark::DoNotOptimize(all);
  }
  state.counters["circuits"] = static_cast<double>(f.circuits);
}

// One O-NIC's circuits from SQLite, filtered in the query.
void BM_OneOnicFromSqlite(benchmark::State& state) {
  Filled& f = FilledStore(static_cast<int>(state.range(0)));
  CircuitFilter one;
  one.onic = OnicId(0, 5);
  for (auto _ : state) {
    absl::StatusOr<std::vector<v1::Circuit>> mine = SelectCircuits(*f.reader, one);
    if (!mine.ok() || mine->size() != 4) std::abort();
    benchmark::DoNotOptimize(mine);
  }
}

void BM_OneOnicFromIndex(benchmark::State& state) {
  Filled& f = FilledStore(static_cast<int>(state.range(0)));
  CircuitFilter one;
  one.onic = OnicId(0, 5);
  for (auto _ : state) {
    absl::StatusOr<std::vector<v1::Circuit>> mine = f.store->ListCircuits(one);
    if (!mine.ok() || mine->size() != 4) std::abort();  // In and out on each of its ports.
    benchmark::DoNotOptimize(mine);
  }
}

BENCHMARK(BM_AllCircuitsFromIndex)->Arg(1)->Arg(4)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllCircuitsFromSqlite)
    ->Arg(1)
    ->Arg(4)
    ->Arg(16)
    ->Arg(64)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OneOnicFromSqlite)->Arg(1)->Arg(4)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OneOnicFromIndex)->Arg(1)->Arg(4)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);

// Closes the stores and removes their files.
void RemoveFilled() {
  for (auto& [switches, f] : AllFilled()) {
    f.reader.reset();
    f.store.reset();
    std::filesystem::remove_all(f.dir);
  }
}

}  // namespace
}  // namespace fleet::store

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fleet::store::RemoveFilled();
  return 0;
}
