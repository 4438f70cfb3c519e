// Plan time of the scheduler on in-memory sites: a ring of 8, a plan that fills a switch,
// all-to-all rounds for 64 members, traffic-aware plans for 32, 64 and 128 members, a member
// replacement in a busy two-switch site, GetFabric's answer for 8 to 128 devices on 8 switches.
#include <benchmark/benchmark.h>

#include <random>

#include "scheduler/fabric_view.h"
#include "scheduler/planner.h"
#include "scheduler/replacement.h"
#include "tests/scheduler/synthetic_site.h"

namespace fleet::scheduler {
namespace {

using testing::AllPorts;
using testing::SyntheticSite;

struct Fabric {
  v1::Inventory site;
  FabricSnapshot snapshot;
};

Fabric Idle(const std::vector<testing::ClusterShape>& clusters) {
  Fabric f;
  f.site = SyntheticSite(clusters);
  f.snapshot = FabricSnapshot::Build(f.site, AllPorts(f.site), {}, {});
  return f;
}

v1::TopologySpec Template(v1::TemplateKind kind, const std::string& prefix, int n) {
  v1::TopologySpec spec;
  spec.mutable_template_()->set_kind(kind);
  for (int i = 1; i <= n; ++i) {
    spec.mutable_template_()->mutable_members()->add_devices(prefix + std::to_string(i));
  }
  return spec;
}

void Plan(benchmark::State& state, const FabricSnapshot& snapshot, const v1::TopologySpec& spec) {
  size_t circuits = 0;
  for (auto _ : state) {
    absl::StatusOr<v1::Plan> plan = PlanTopology(snapshot, {"bench", spec});
    if (!plan.ok()) {
      state.SkipWithError(std::string(plan.status().message()).c_str());
      return;
    }
    circuits = plan->circuits_size();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["circuits"] = circuits;
}

void BM_RingOfEight(benchmark::State& state) {
  static const Fabric f = Idle({{"", 8, 8, 2, 0}});  // A Gen1 cluster.
  Plan(state, f.snapshot, Template(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL, "gpu", 8));
}
BENCHMARK(BM_RingOfEight)->Unit(benchmark::kMicrosecond);

// 192 GPUs, two ports each, on a 384x384 switch: a bidirectional ring is 192 duplex links,
// 384 circuits, every ingress and egress of the switch.
void BM_FullSwitchPlan(benchmark::State& state) {
  static const Fabric f = Idle({{"", 0, 192, 0, 0}});
  Plan(state, f.snapshot, Template(v1::TEMPLATE_KIND_RING_BIDIRECTIONAL, "gpu", 192));
}
BENCHMARK(BM_FullSwitchPlan)->Unit(benchmark::kMicrosecond);

// 64 members with two ports (GPUs: 32 rounds) or six (CPUs: 11 rounds).
void BM_AllToAllRounds(benchmark::State& state) {
  static const Fabric f = Idle({{"", 64, 64, 0, 0}});
  const bool cpus = state.range(0) == 6;
  v1::AllToAllSpec spec;
  for (int i = 0; i < 64; ++i) {
    spec.mutable_members()->add_devices(cpus ? "server" + std::to_string(i / 2 + 1) + "-cpu" +
                                                   std::to_string(i % 2)
                                             : "gpu" + std::to_string(i + 1));
  }
  size_t rounds = 0;
  for (auto _ : state) {
    absl::StatusOr<std::vector<PlannedPhase>> phases =
        PlanAllToAllRounds(f.snapshot, "bench", spec);
    if (!phases.ok()) {
      state.SkipWithError(std::string(phases.status().message()).c_str());
      return;
    }
    rounds = phases->size();
    benchmark::DoNotOptimize(phases);
  }
  state.counters["rounds"] = rounds;
}
BENCHMARK(BM_AllToAllRounds)->ArgName("ports")->Arg(2)->Arg(6)->Unit(benchmark::kMillisecond);

// n members, a quarter CPUs (6 ports) and the rest GPUs (2 ports), every pair exchanging
// bytes: heavy for a few pairs, light for most, as in a training step.
void BM_TrafficAware(benchmark::State& state) {
  static const Fabric f = Idle({{"", 32, 96, 0, 0}});
  const int n = state.range(0);
  std::mt19937 rng(n);
  std::uniform_real_distribution<double> unit(0, 1);
  v1::TopologySpec spec;
  v1::TrafficSpec& t = *spec.mutable_traffic();
  for (int i = 0; i < n; ++i) {
    t.mutable_members()->add_devices(i % 4 == 0 ? "server" + std::to_string(i / 8 + 1) + "-cpu" +
                                                      std::to_string(i / 4 % 2)
                                                : "gpu" + std::to_string(i - i / 4));
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      v1::TrafficEntry* e = t.add_matrix();
      e->set_source(i);
      e->set_destination(j);
      e->set_bytes(unit(rng) < 0.05 ? 1e9 * unit(rng) : 1e6 * unit(rng));
    }
  }
  double share = 0;
  for (auto _ : state) {
    absl::StatusOr<v1::Plan> plan = PlanTopology(f.snapshot, {"bench", spec});
    if (!plan.ok()) {
      state.SkipWithError(std::string(plan.status().message()).c_str());
      return;
    }
    share = plan->direct_traffic_share();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["direct_share"] = share;
}
BENCHMARK(BM_TrafficAware)
    ->ArgName("members")
    ->Arg(32)
    ->Arg(64)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond);

// Two switches of 96 GPUs each. On a-ocs, a job's ring over a-gpu1..32 and another tenant's
// bidirectional ring over a-gpu33..92; on b-ocs, another tenant's ring over all 96. a-gpu5
// fails; the spares are a-gpu93..96.
void BM_MemberReplacement(benchmark::State& state) {
  static const auto* setup = [] {
    auto* out = new std::pair<Fabric, v1::Allocation>();
    Fabric& f = out->first;
    f.site = SyntheticSite({{"a-", 0, 96, 0, 0}, {"b-", 0, 96, 0, 0}});
    const std::vector<v1::SwitchPort> ports = AllPorts(f.site);
    std::vector<v1::Circuit> circuits;
    std::vector<v1::Allocation> holders;
    auto admit = [&](const std::string& id, const std::string& tenant, v1::TopologySpec spec) {
      const FabricSnapshot now = FabricSnapshot::Build(f.site, ports, circuits, holders);
      v1::Plan plan = PlanTopology(now, {tenant, spec}).value();
      v1::Allocation a;
      a.set_id(id);
      a.set_tenant(tenant);
      *a.mutable_members() = plan.members();
      for (int i = 0; i < plan.circuits_size(); ++i) {
        v1::Circuit* c = a.add_circuits();
        *c = plan.circuits(i);
        c->set_id(id + "-c" + std::to_string(i + 1));
        c->set_allocation_id(id);
        c->set_state(v1::CIRCUIT_STATE_ACTIVE);
        circuits.push_back(*c);
      }
      holders.push_back(a);
      return a;
    };
    out->second = admit("job", "a", Template(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL, "a-gpu", 32));
    v1::TopologySpec theirs;
    theirs.mutable_template_()->set_kind(v1::TEMPLATE_KIND_RING_BIDIRECTIONAL);
    for (int i = 33; i <= 92; ++i) {
      theirs.mutable_template_()->mutable_members()->add_devices("a-gpu" + std::to_string(i));
    }
    admit("theirs-a", "b", theirs);
    admit("theirs-b", "b", Template(v1::TEMPLATE_KIND_RING_BIDIRECTIONAL, "b-gpu", 96));
    f.snapshot = FabricSnapshot::Build(f.site, ports, circuits, holders);
    return out;
  }();
  std::string spare;
  for (auto _ : state) {
    absl::StatusOr<Replacement> r = PlanReplacement(setup->first.snapshot, setup->second, "a-gpu5");
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    spare = r->spare;
    benchmark::DoNotOptimize(r);
  }
  state.SetLabel("spare " + spare);
}
BENCHMARK(BM_MemberReplacement)->Unit(benchmark::kMicrosecond);

// GetFabric's answer (DescribeFabric) for N GPUs spread over 8 switches joined in a ring of
// trunk groups (4 each way): every ordered pair routed, most over one or more trunks.
void BM_DescribeFabric(benchmark::State& state) {
  static const Fabric* f = [] {
    std::vector<testing::ClusterShape> clusters;
    for (int s = 0; s < 8; ++s) clusters.push_back({std::string(1, char('a' + s)), 0, 16, 0, 0});
    auto* out = new Fabric{SyntheticSite(clusters), {}};
    for (int s = 0; s < 8; ++s) {
      const std::string from = std::string(1, char('a' + s)) + "ocs";
      const std::string to = std::string(1, char('a' + (s + 1) % 8)) + "ocs";
      testing::AddTrunks(out->site, from, to, 4);
      testing::AddTrunks(out->site, to, from, 4);
    }
    out->snapshot = FabricSnapshot::Build(out->site, AllPorts(out->site), {}, {});
    return out;
  }();
  FabricQuery query{.tenants = {"bench"}, .max_switch_hops = 8};
  for (int i = 0; i < state.range(0); ++i) {
    query.devices.push_back(std::string(1, char('a' + i % 8)) + "gpu" + std::to_string(i / 8 + 1));
  }
  size_t bytes = 0;
  for (auto _ : state) {
    absl::StatusOr<v1::GetFabricResponse> r = DescribeFabric(f->snapshot, query);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    bytes = r->ByteSizeLong();
    benchmark::DoNotOptimize(r);
  }
  state.counters["pairs"] = static_cast<double>(state.range(0) * (state.range(0) - 1));
  state.counters["response_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_DescribeFabric)->Arg(8)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond);

// What admission builds before it plans: the snapshot of a 192-GPU switch with the 96
// circuits of twelve rings of 8.
void BM_SnapshotBuild(benchmark::State& state) {
  static const auto* setup = [] {
    auto* out = new std::tuple<v1::Inventory, std::vector<v1::SwitchPort>, std::vector<v1::Circuit>,
                               std::vector<v1::Allocation>>();
    auto& [site, ports, circuits, holders] = *out;
    site = SyntheticSite({{"", 0, 192, 0, 0}});
    ports = AllPorts(site);
    for (int ring = 0; ring < 12; ++ring) {
      const std::string id = "ring" + std::to_string(ring);
      v1::TopologySpec spec;
      spec.mutable_template_()->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
      for (int i = 1; i <= 8; ++i) {
        spec.mutable_template_()->mutable_members()->add_devices("gpu" +
                                                                 std::to_string(8 * ring + i));
      }
      const FabricSnapshot now = FabricSnapshot::Build(site, ports, circuits, holders);
      v1::Plan plan = PlanTopology(now, {"t", spec}).value();
      v1::Allocation& a = holders.emplace_back();
      a.set_id(id);
      a.set_tenant("t");
      for (int i = 0; i < plan.circuits_size(); ++i) {
        v1::Circuit c = plan.circuits(i);
        c.set_id(id + "-c" + std::to_string(i + 1));
        c.set_allocation_id(id);
        circuits.push_back(c);
      }
    }
    return out;
  }();
  const auto& [site, ports, circuits, holders] = *setup;
  // 0: inventory only; 1: inventory and circuits; 2: the circuits added to a kept snapshot of
  // the inventory (what admission does).
  const FabricSnapshot idle = FabricSnapshot::Build(site, ports, {}, {});
  for (auto _ : state) {
    switch (state.range(0)) {
      case 0:
        benchmark::DoNotOptimize(FabricSnapshot::Build(site, ports, {}, {}));
        break;
      case 1:
        benchmark::DoNotOptimize(FabricSnapshot::Build(site, ports, circuits, holders));
        break;
      default:
        benchmark::DoNotOptimize(idle.WithCircuits(circuits, holders));
    }
  }
  state.counters["circuits"] = state.range(0) == 0 ? 0 : static_cast<double>(circuits.size());
}
BENCHMARK(BM_SnapshotBuild)->ArgName("from")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fleet::scheduler

BENCHMARK_MAIN();
