// fleet_phase_bench: an Opus-style iteration loop over a job that changes topology while it
// runs (docs/benchmarks.md, "Phases"). One job of eight GPUs in two phases, dp (a
// unidirectional ring) and tp (duplex pairs), on the bench site (bench_site.h: fleetd
// in-process, polatis-emu and agents with real switching and training times). Each iteration
// activates tp, holds it for a compute time T, activates dp and holds it for T. For each T
// the loop runs three ways, in one run:
//   static   no phase switch at all: 2 T of compute, the floor;
//   in place the phases share the GPUs' ports; each switch reprograms and retrains;
//   prepared prepare_next_phase: each phase on its own ports, both kept on the switch, so a
//            switch is only a state change.
// Figures: the iteration's median, its overhead over static, and ActivatePhase → READY in
// the new phase as the job sees it (the RPC, then the watch if the answer was not READY).
#include <grpcpp/client_context.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/flags.h"
#include "common/mutex_checks.h"
#include "fleet/v1/phases.h"
#include "tests/bench/bench_site.h"

namespace fleet::bench {
namespace {

constexpr const char* kWays[] = {"static", "in place", "prepared"};

v1::RequestTopologyRequest TwoPhaseJob(bool prepared) {
  v1::RequestTopologyRequest r;
  r.set_tenant("bench");
  r.set_name(prepared ? "phases-prepared" : "phases-in-place");
  r.set_prepare_next_phase(prepared);
  v1::Phase* dp = r.add_phases();
  dp->set_name("dp");
  v1::TemplateSpec* ring = dp->mutable_topology()->mutable_template_();
  ring->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
  for (int i = 1; i <= kRingSize; ++i) ring->mutable_members()->add_devices(absl::StrCat("gpu", i));
  v1::Phase* tp = r.add_phases();
  tp->set_name("tp");
  for (int i = 1; i <= kRingSize; i += 2) {
    v1::Link* link = tp->mutable_topology()->mutable_links()->add_links();
    link->mutable_a()->set_device(absl::StrCat("gpu", i));
    link->mutable_b()->set_device(absl::StrCat("gpu", i + 1));
    link->set_duplex(true);
  }
  return r;
}

// ActivatePhase, then READY in it: how long the job waited.
absl::StatusOr<absl::Duration> SwitchTo(Site& site, const std::string& id,
                                        const std::string& phase) {
  const absl::Time start = absl::Now();
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(start + absl::Seconds(30)));
  v1::ActivatePhaseRequest request;
  request.set_id(id);
  request.set_phase(phase);
  v1::ActivatePhaseResponse response;
  if (grpc::Status s = site.topology().ActivatePhase(&context, request, &response); !s.ok()) {
    return absl::Status(fleet::FromGrpcStatus(s).code(),
                        absl::StrCat("ActivatePhase ", phase, ": ", s.error_message()));
  }
  const v1::Allocation& a = response.allocation();
  if (a.state() == v1::ALLOCATION_STATE_READY && a.active_phase() == phase) {
    return absl::Now() - start;  // Prepared: READY in the answer.
  }
  ASSIGN_OR_RETURN(const absl::Time ready,
                   site.WatchReady(id, absl::Now() + absl::Seconds(30), phase));
  return ready - start;
}

struct Figures {
  std::vector<double> iteration_ms;
  std::vector<double> switch_ms;  // ActivatePhase → READY, every switch.
  int prepared_phases = 0;        // Of the allocation, as admitted.
};

// `iterations` of tp for T, dp for T; `way` as kWays.
absl::StatusOr<Figures> Loop(Site& site, int way, absl::Duration t, int iterations) {
  Figures f;
  std::string id;
  if (way > 0) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::RequestTopologyResponse response;
    if (grpc::Status s =
            site.topology().RequestTopology(&context, TwoPhaseJob(way == 2), &response);
        !s.ok()) {
      return absl::InternalError(absl::StrCat("RequestTopology: ", s.error_message()));
    }
    id = response.allocation().id();
    RETURN_IF_ERROR(site.WatchReady(id, absl::Now() + absl::Seconds(30), "dp").status());
    ASSIGN_OR_RETURN(const v1::Allocation a, site.Get(id));
    for (const std::string& phase : a.phases()) {
      f.prepared_phases += phase != a.active_phase() && v1::PhaseOnSwitch(a, phase);
    }
  }
  for (int i = 0; i < iterations; ++i) {
    const absl::Time start = absl::Now();
    for (const char* phase : {"tp", "dp"}) {
      if (way > 0) {
        ASSIGN_OR_RETURN(const absl::Duration waited, SwitchTo(site, id, phase));
        f.switch_ms.push_back(Ms(waited));
      }
      absl::SleepFor(t);  // The compute that holds this phase's fabric.
    }
    f.iteration_ms.push_back(Ms(absl::Now() - start));
  }
  if (!id.empty()) RETURN_IF_ERROR(site.Release(id));
  return f;
}

absl::Status Run(const std::vector<int64_t>& compute_ms, int64_t iterations, int64_t switch_ms,
                 int64_t training_ms) {
  ASSIGN_OR_RETURN(std::unique_ptr<Site> site,
                   Site::Start({.switch_ms = static_cast<int>(switch_ms),
                                .training_ms = static_cast<int>(training_ms),
                                .inventory = BenchInventory()}));
  std::printf(
      "fleet_phase_bench: switch %lld ms, training %lld ms; %lld iterations per T; "
      "an iteration is tp for T then dp for T\n\n",
      static_cast<long long>(switch_ms), static_cast<long long>(training_ms),
      static_cast<long long>(iterations));
  std::printf("%8s  %-9s  %14s  %9s  %22s  %9s\n", "T (ms)", "switching", "iteration (ms)",
              "overhead", "ActivatePhase->READY", "prepared");
  std::printf("%8s  %-9s  %14s  %9s  %10s %11s  %9s\n", "", "", "median", "", "median", "max",
              "phases");
  for (int64_t t : compute_ms) {
    double floor = 0;
    for (int way = 0; way < 3; ++way) {
      ASSIGN_OR_RETURN(const Figures f,
                       Loop(*site, way, absl::Milliseconds(t), static_cast<int>(iterations)));
      const double median = Median(f.iteration_ms);
      if (way == 0) floor = median;
      const Summary switches = Summarize(f.switch_ms);
      std::printf("%8lld  %-9s  %14.1f  %8.1f%%  %10.2f %11.2f  %9s\n", static_cast<long long>(t),
                  kWays[way], median, 100.0 * (median - floor) / floor, switches.median,
                  switches.max, way == 0 ? "-" : absl::StrCat(f.prepared_phases).c_str());
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace fleet::bench

int main(int argc, char** argv) {
  fleet::ConfigureMutexChecks();  // As the daemons run (common/mutex_checks.h).
  int64_t iterations = 10, switch_ms = 25, training_ms = 100;
  std::string compute = "50,200,1000";
  fleet::FlagSet flags(
      "fleet_phase_bench [--compute-ms 50,200,1000] [--iterations 10] [--switch-ms 25] "
      "[--training-ms 100]",
      "An iteration loop over a two-phase job: static, in place and prepared (make before "
      "break), fleetd in-process, polatis-emu and agents.");
  flags.String("compute-ms", &compute, "the compute times T each phase is held, comma-separated");
  flags.Int("iterations", &iterations, "iterations per T and way of switching");
  flags.Int("switch-ms", &switch_ms, "the emulator's switching time per command");
  flags.Int("training-ms", &training_ms, "the agents' link training time");
  absl::StatusOr<std::vector<std::string>> rest =
      flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!rest.ok() || flags.help_requested()) {
    std::cerr << (rest.ok() ? flags.Help() : std::string(rest.status().message())) << "\n";
    return rest.ok() ? 0 : 2;
  }
  std::vector<int64_t> compute_ms;
  for (absl::string_view part : absl::StrSplit(compute, ',', absl::SkipEmpty())) {
    int64_t t = 0;
    if (!absl::SimpleAtoi(part, &t) || t < 1 || t > 60000) {
      std::cerr << "--compute-ms: '" << part << "' is not a time in 1..60000 ms\n";
      return 2;
    }
    compute_ms.push_back(t);
  }
  if (compute_ms.empty() || iterations < 1 || switch_ms < 0 || training_ms < 0) {
    std::cerr << "--compute-ms needs a time, --iterations at least 1, times not negative\n"
              << flags.Help() << "\n";
    return 2;
  }
  // fleetd runs in this process; its per-request info lines would drown the figures.
  fleet::SetMinLogLevel(fleet::LogLevel::kWarning);
  absl::Status status = fleet::bench::Run(compute_ms, iterations, switch_ms, training_ms);
  if (!status.ok()) {
    std::cerr << "fleet_phase_bench: " << status << "\n";
    return 1;
  }
  return 0;
}
