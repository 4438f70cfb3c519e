// fleet_engine_bench: the reconfiguration engine end to end over real processes. fleetd runs
// in-process on a loopback gRPC port; polatis-emu (384x384) and one emulated fleet-onic-agent
// per chassis of a generated 160-GPU site run as children (fleetd's demo machinery). A job
// asks for a unidirectional ring over 8 named GPUs, through the public API; its latency runs
// from just before RequestTopology until a WatchAllocation stream, opened right after the
// answer, says READY. Prints:
//   1. one job at a time, 0 ms switching and training (the control plane's own cost): median
//      and p99, and the median of each stage the allocation reports;
//   2. 20 jobs at once, each on its own 8 GPUs: median and p99 across all jobs;
//   3. request → READY → release cycles per second, one after another;
//   4. real physics (25 ms switching, 100 ms training): the latency against the physical
//      time (the program stage plus the training time), the overhead and the ratio, next to
//      their targets;
//   5. the same with retrains not armed (sent only once the switch is verified), to show
//      what arming saves;
//   6. mutual TLS against plaintext;
//   7. a load of --load requests at once (2-GPU rings, 25 ms switching and 100 ms training;
//      those the site cannot hold are refused): the process's threads at their peak, which
//      holds fleetd (engine, gRPC server) and the bench's own callers.
// Never fails on timing; exits 1 only when the site cannot be started or a request fails.
//
//   fleet_engine_bench [--iterations 50] [--jobs 20] [--rounds 10] [--cycle-seconds 3]
//                      [--physics-iterations 40] [--switch-ms 25] [--training-ms 100]
//                      [--warmup 3] [--protocol tl1|rest] [--load 200]
#include <google/protobuf/util/time_util.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <latch>
#include <map>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/grpc_status.h"
#include "common/grpc_tls.h"
#include "common/log.h"
#include "common/mutex_checks.h"
#include "common/status_macros.h"
#include "controller/fleetd/daemon.h"
#include "controller/fleetd/demo.h"
#include "fleet/v1/inventory.grpc.pb.h"
#include "fleet/v1/topology.grpc.pb.h"
#include "tests/bench/bench_site.h"
#include "tests/integration/subprocess.h"
#include "tests/process_threads.h"

namespace {

using fleet::fleetd::Demo;
using fleet::fleetd::DemoOptions;
using fleet::fleetd::Fleetd;
using fleet::fleetd::FleetdConfig;
using google::protobuf::util::TimeUtil;
namespace v1 = fleet::v1;

using fleet::bench::AddStages;
using fleet::bench::BenchInventory;
using fleet::bench::kGpus;
using fleet::bench::kGpusPerChassis;
using fleet::bench::kIngressPorts;
using fleet::bench::kRings;
using fleet::bench::kRingSize;
using fleet::bench::kStages;
using fleet::bench::Median;
using fleet::bench::Ms;
using fleet::bench::PrintStages;
using fleet::bench::Site;
using fleet::bench::StageMs;
using fleet::bench::StageSamples;
using fleet::bench::Summarize;
using fleet::bench::Summary;

// Allocate-and-release cycles outside the figures: the first ones pay for connections and
// caches warming up.
absl::Status WarmUp(Site& site, int64_t cycles) {
  for (int64_t i = 0; i < cycles; ++i) {
    ASSIGN_OR_RETURN(Site::Job job, site.Allocate(static_cast<int>(i % kRings)));
    RETURN_IF_ERROR(site.Release(job.id));
  }
  return absl::OkStatus();
}

// 1: one job at a time, on the site with 0 ms physics.
absl::Status OneAtATime(Site& site, int64_t iterations) {
  std::vector<double> latency_ms, stage_sum_ms, release_ms;
  StageSamples stages;
  const int64_t commands_before = site.SwitchCommands();
  for (int64_t i = 0; i < iterations; ++i) {
    ASSIGN_OR_RETURN(Site::Job job, site.Allocate(static_cast<int>(i % kRings)));
    ASSIGN_OR_RETURN(v1::Allocation a, site.Get(job.id));
    latency_ms.push_back(Ms(job.latency));
    stage_sum_ms.push_back(AddStages(a, stages));
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(site.Release(job.id));
    release_ms.push_back(Ms(absl::Now() - start));
  }
  const Summary e2e = Summarize(latency_ms);
  const int64_t commands = site.SwitchCommands() - commands_before;
  std::printf("[1] one job at a time: %lld jobs\n", static_cast<long long>(iterations));
  std::printf("  switch commands (set up + release, reads included): %.2f per job\n",
              static_cast<double>(commands) / static_cast<double>(iterations));
  std::printf("  request -> READY   median %8.3f ms   p99 %8.3f ms   max %8.3f ms\n", e2e.median,
              e2e.p99, e2e.max);
  PrintStages(stages, latency_ms, stage_sum_ms);
  std::printf("  release (returns after the switch removal)   median %8.3f ms\n",
              Median(release_ms));
  std::fflush(stdout);
  return absl::OkStatus();
}

// 2: `jobs` jobs start together each round, each on its own ring; released after the round.
absl::Status Concurrent(Site& site, int64_t jobs, int64_t rounds) {
  std::vector<double> latency_ms, round_ms;
  StageSamples stages;
  const int64_t commands_before = site.SwitchCommands();
  for (int64_t r = 0; r < rounds; ++r) {
    std::vector<absl::StatusOr<Site::Job>> results(jobs, absl::UnknownError("not run"));
    std::vector<v1::Allocation> ready(jobs);
    std::latch start(jobs);
    std::latch all_ready(jobs);
    std::vector<std::thread> threads;
    for (int64_t j = 0; j < jobs; ++j) {
      threads.emplace_back([&, j] {
        start.arrive_and_wait();
        results[j] = site.Allocate(static_cast<int>(j));
        // Every job is READY before any looks itself up or lets go, so neither shows up in
        // another's latency.
        all_ready.arrive_and_wait();
        if (!results[j].ok()) return;
        absl::StatusOr<v1::Allocation> a = site.Get(results[j]->id);
        if (!a.ok()) {
          results[j] = a.status();
          return;
        }
        ready[j] = *std::move(a);
        if (absl::Status released = site.Release(results[j]->id); !released.ok()) {
          results[j] = released;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    absl::Duration slowest;
    for (int64_t j = 0; j < jobs; ++j) {
      if (!results[j].ok()) return results[j].status();
      latency_ms.push_back(Ms(results[j]->latency));
      slowest = std::max(slowest, results[j]->latency);
      AddStages(ready[j], stages);
    }
    round_ms.push_back(Ms(slowest));
  }
  const Summary e2e = Summarize(latency_ms);
  std::printf("[2] %lld jobs at once, each on its own 8 GPUs: %lld rounds, %zu jobs\n",
              static_cast<long long>(jobs), static_cast<long long>(rounds), latency_ms.size());
  std::printf("  request -> READY   median %8.3f ms   p99 %8.3f ms   max %8.3f ms\n", e2e.median,
              e2e.p99, e2e.max);
  std::printf("  slowest job of a round                        median %8.3f ms\n",
              Median(round_ms));
  // Requests plan in parallel and commit their intent one at a time: the wait for the
  // commits ahead of a request is in its persist stage.
  std::printf("  stage medians (GetAllocation after READY):\n");
  for (const char* stage : kStages) {
    std::printf("    %-24s %9.3f ms\n", stage, Median(stages[stage]));
  }
  // One job alone costs a read, the adds and a read-back to set up, and as many to release;
  // jobs that arrive together share them when the engine batches.
  const int64_t commands = site.SwitchCommands() - commands_before;
  std::printf(
      "  switch commands (set up + release, reads included): %lld for %zu jobs, %.2f per job\n",
      static_cast<long long>(commands), latency_ms.size(),
      static_cast<double>(commands) / static_cast<double>(latency_ms.size()));
  std::fflush(stdout);
  return absl::OkStatus();
}

// 3: request → READY → release, back to back, for about `seconds`.
absl::Status Cycles(Site& site, int64_t seconds) {
  const absl::Time start = absl::Now();
  const absl::Time until = start + absl::Seconds(seconds);
  int64_t cycles = 0;
  while (absl::Now() < until) {
    ASSIGN_OR_RETURN(Site::Job job, site.Allocate(static_cast<int>(cycles % kRings)));
    RETURN_IF_ERROR(site.Release(job.id));
    ++cycles;
  }
  const double elapsed_s = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("[3] allocate + release cycles, one after another: %lld cycles in %.2f s\n",
              static_cast<long long>(cycles), elapsed_s);
  std::printf("  %8.1f cycles/s   (%.3f ms per cycle)\n", static_cast<double>(cycles) / elapsed_s,
              1000.0 * elapsed_s / static_cast<double>(cycles));
  std::fflush(stdout);
  return absl::OkStatus();
}

// 4: one job at a time with real physics: how far the latency is above the physical time.
// The first pass over the rings uses ports no circuit has used since the agents connected, so
// they are quiesced first; later passes reuse ports the last release left quiesced, as a busy
// cluster does. Each is reported on its own.
// `warmed`: how many rings, from the first, the warm-up already used.
absl::Status Physics(Site& site, int64_t iterations, int64_t warmed, int switch_ms, int training_ms,
                     const char* label) {
  std::vector<double> latency_ms, physical_ms, stage_sum_ms, release_ms;
  std::vector<double> overhead_ms[2], ratio[2];  // [0] first use, [1] ports reused.
  StageSamples stages;
  for (int64_t i = 0; i < iterations; ++i) {
    ASSIGN_OR_RETURN(Site::Job job, site.Allocate(static_cast<int>(i % kRings)));
    ASSIGN_OR_RETURN(v1::Allocation a, site.Get(job.id));
    // The switch time actually spent (the program stage: the batch's commands, not its wait
    // in the queue or its read-back) plus the agents' training time.
    const double physical = StageMs(a, "program") + training_ms;
    const double e2e = Ms(job.latency);
    const int reused = i >= kRings || i % kRings < warmed;
    latency_ms.push_back(e2e);
    physical_ms.push_back(physical);
    overhead_ms[reused].push_back(e2e - physical);
    ratio[reused].push_back(e2e / physical);
    stage_sum_ms.push_back(AddStages(a, stages));
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(site.Release(job.id));
    release_ms.push_back(Ms(absl::Now() - start));
  }
  const Summary e2e = Summarize(latency_ms);
  std::printf("%s one job at a time, %d ms switching, %d ms training: %lld jobs\n", label,
              switch_ms, training_ms, static_cast<long long>(iterations));
  std::printf("  request -> READY   median %8.3f ms   p99 %8.3f ms   max %8.3f ms\n", e2e.median,
              e2e.p99, e2e.max);
  std::printf("  physical = program stage + %d ms training   median %8.3f ms   (nominal %d ms)\n",
              training_ms, Median(physical_ms), switch_ms + training_ms);
  for (int reused : {0, 1}) {
    if (overhead_ms[reused].empty()) continue;
    const Summary overhead = Summarize(overhead_ms[reused]);
    const double ratio_median = Median(ratio[reused]);
    std::printf("  %s (%zu jobs):\n",
                reused ? "ports reused, left quiesced by the last release"
                       : "ports used for the first time since the agents connected",
                overhead_ms[reused].size());
    std::printf(
        "    overhead = e2e - physical   median %8.3f ms   p99 %8.3f ms"
        "   target: < 1 ms median at 1 job (%s)\n",
        overhead.median, overhead.p99, overhead.median < 1.0 ? "met" : "not met");
    std::printf(
        "    ratio = e2e / physical      median %8.4f"
        "                    target: < 1.05 (%s)\n",
        ratio_median, ratio_median < 1.05 ? "met" : "not met");
  }
  std::printf("  ratio to the nominal %d ms   median %8.4f\n", switch_ms + training_ms,
              e2e.median / (switch_ms + training_ms));
  PrintStages(stages, latency_ms, stage_sum_ms);
  std::printf("  release (returns after the switch removal)   median %8.3f ms\n",
              Median(release_ms));
  std::fflush(stdout);
  return absl::OkStatus();
}

// 7: `requests` requests at once, each a ring over 2 GPUs (request j over GPUs 2j+1 and 2j+2,
// around the site again past its GPUs, so those beyond it conflict and are refused).
absl::Status Load(Site& site, int64_t requests) {
  const int before = fleet::testing::ProcessThreads();
  std::atomic<bool> sampling{true};
  std::atomic<int> peak{before};
  std::thread sampler([&] {
    while (sampling.load()) {
      peak = std::max(peak.load(), fleet::testing::ProcessThreads());
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  std::latch start(requests);
  std::vector<absl::StatusOr<Site::Job>> results(requests, absl::UnknownError("not run"));
  std::vector<std::thread> callers;
  for (int64_t j = 0; j < requests; ++j) {
    callers.emplace_back([&, j] {
      const int64_t pair = j % (kGpus / 2);
      start.arrive_and_wait();
      results[j] =
          site.Allocate({absl::StrCat("gpu", 2 * pair + 1), absl::StrCat("gpu", 2 * pair + 2)},
                        nullptr, absl::StrCat(" pair ", pair));
    });
  }
  for (std::thread& t : callers) t.join();
  sampling = false;
  sampler.join();
  std::vector<double> latency_ms;
  for (const absl::StatusOr<Site::Job>& r : results) {
    if (!r.ok()) continue;
    latency_ms.push_back(Ms(r->latency));
    RETURN_IF_ERROR(site.Release(r->id));
  }
  const Summary e2e = Summarize(latency_ms);
  std::printf("[7] %lld requests at once (2-GPU rings): %zu READY, %lld refused\n",
              static_cast<long long>(requests), latency_ms.size(),
              static_cast<long long>(requests) - static_cast<long long>(latency_ms.size()));
  std::printf("  request -> READY   median %8.3f ms   p99 %8.3f ms   max %8.3f ms\n", e2e.median,
              e2e.p99, e2e.max);
  std::printf(
      "  process threads: %d before, %d at the peak (of which %lld callers and 1 sampler); "
      "fleetd's: %lld at the peak\n",
      before, peak.load(), static_cast<long long>(requests),
      static_cast<long long>(peak.load()) - requests - 1);
  std::fflush(stdout);
  return absl::OkStatus();
}

// 6: the cost of mutual TLS: the same jobs, one at a time with 0 ms physics, on a plaintext
// site and on one with mutual TLS, and a read (GetAllocation) timed alone on each.
absl::Status TlsCost(const std::string& protocol, int64_t iterations, int64_t warmup) {
  std::printf("[6] mutual TLS against plaintext, one job at a time, 0 ms physics: %lld jobs each\n",
              static_cast<long long>(iterations));
  for (const bool tls : {false, true}) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<Site> site,
        Site::Start(
            {.protocol = protocol, .switch_ms = 0, .training_ms = 0, .inventory = BenchInventory()},
            absl::Seconds(5), tls));
    RETURN_IF_ERROR(WarmUp(*site, warmup));
    std::vector<double> latency_ms, read_ms;
    for (int64_t i = 0; i < iterations; ++i) {
      ASSIGN_OR_RETURN(Site::Job job, site->Allocate(static_cast<int>(i % kRings)));
      latency_ms.push_back(Ms(job.latency));
      const absl::Time start = absl::Now();
      RETURN_IF_ERROR(site->Get(job.id).status());
      read_ms.push_back(Ms(absl::Now() - start));
      RETURN_IF_ERROR(site->Release(job.id));
    }
    const Summary e2e = Summarize(latency_ms);
    std::printf(
        "  %-10s request -> READY median %8.3f ms   p99 %8.3f ms   GetAllocation median "
        "%7.3f ms\n",
        tls ? "mutual TLS" : "plaintext", e2e.median, e2e.p99, Median(read_ms));
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

absl::Status Run(int64_t iterations, int64_t jobs, int64_t rounds, int64_t cycle_seconds,
                 int64_t physics_iterations, int64_t switch_ms, int64_t training_ms, int64_t warmup,
                 const std::string& protocol, int64_t load) {
  std::printf(
      "fleet_engine_bench: unidirectional rings of %d GPUs on a %dx%d polatis-emu (%s), "
      "%d GPUs in chassis of %d\n",
      kRingSize, kIngressPorts, kIngressPorts, protocol.c_str(), kGpus, kGpusPerChassis);
  {
    ASSIGN_OR_RETURN(std::unique_ptr<Site> site, Site::Start({.protocol = protocol,
                                                              .switch_ms = 0,
                                                              .training_ms = 0,
                                                              .inventory = BenchInventory()}));
    std::printf("site: 0 ms switching, 0 ms training, %d agents connected\n", site->agents());
    std::fflush(stdout);
    RETURN_IF_ERROR(WarmUp(*site, warmup));
    RETURN_IF_ERROR(OneAtATime(*site, iterations));
    RETURN_IF_ERROR(Concurrent(*site, jobs, rounds));
    RETURN_IF_ERROR(Cycles(*site, cycle_seconds));
  }
  // [4] as fleetd runs by default, then [5] with retrains sent only once the switch is
  // verified, each on a site of its own.
  for (const bool armed : {true, false}) {
    ASSIGN_OR_RETURN(std::unique_ptr<Site> site,
                     Site::Start({.protocol = protocol,
                                  .switch_ms = static_cast<int>(switch_ms),
                                  .training_ms = static_cast<int>(training_ms),
                                  .inventory = BenchInventory()},
                                 armed ? absl::Seconds(5) : absl::ZeroDuration()));
    std::printf("site: %lld ms switching, %lld ms training, %d agents connected, retrains %s\n",
                static_cast<long long>(switch_ms), static_cast<long long>(training_ms),
                site->agents(), armed ? "armed" : "not armed (armed_light_wait_ms: 0)");
    std::fflush(stdout);
    const int64_t warmed = std::min<int64_t>(warmup, 2);
    RETURN_IF_ERROR(WarmUp(*site, warmed));
    RETURN_IF_ERROR(Physics(*site, physics_iterations, warmed, static_cast<int>(switch_ms),
                            static_cast<int>(training_ms), armed ? "[4]" : "[5]"));
    if (armed && load > 0) RETURN_IF_ERROR(Load(*site, load));
  }
  return TlsCost(protocol, iterations, warmup);
}

}  // namespace

int main(int argc, char** argv) {
  fleet::ConfigureMutexChecks();  // As the daemons run (common/mutex_checks.h).
  int64_t iterations = 50, jobs = kRings, rounds = 10, cycle_seconds = 3;
  int64_t physics_iterations = 40, switch_ms = 25, training_ms = 100, warmup = 3, load = 200;
  std::string protocol = "tl1";
  fleet::FlagSet flags(
      "fleet_engine_bench [--iterations 50] [--jobs 20] [--rounds 10] [--cycle-seconds 3] "
      "[--physics-iterations 40] [--switch-ms 25] [--training-ms 100]",
      "Times ring reconfigurations end to end: fleetd in-process, polatis-emu and agents.");
  flags.Int("iterations", &iterations, "[1] jobs timed one at a time, 0 ms physics");
  flags.Int("jobs", &jobs, "[2] jobs at once, each on its own 8 GPUs (at most 20)");
  flags.Int("rounds", &rounds, "[2] rounds of concurrent jobs");
  flags.Int("cycle-seconds", &cycle_seconds, "[3] how long to run allocate+release cycles");
  flags.Int("physics-iterations", &physics_iterations, "[4] jobs timed with real physics");
  flags.Int("switch-ms", &switch_ms, "[4] the emulator's switching time per command");
  flags.Int("training-ms", &training_ms, "[4] the agents' link training time");
  flags.Int("warmup", &warmup, "untimed allocate+release cycles on each site first");
  flags.String("protocol", &protocol, "how fleetd talks to the emulator: tl1 or rest");
  flags.Int("load", &load, "[7] requests at once for the thread count; 0: skip");
  absl::StatusOr<std::vector<std::string>> rest =
      flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!rest.ok() || flags.help_requested()) {
    std::cerr << (rest.ok() ? flags.Help() : std::string(rest.status().message())) << "\n";
    return rest.ok() ? 0 : 2;
  }
  if (iterations < 1 || jobs < 1 || jobs > kRings || rounds < 1 || cycle_seconds < 1 ||
      physics_iterations < 1 || switch_ms < 0 || training_ms < 0 || warmup < 0 || load < 0) {
    std::cerr << "counts must be at least 1 (warmup at least 0), --jobs at most " << kRings
              << ", times not negative\n"
              << flags.Help() << "\n";
    return 2;
  }
  // fleetd runs in this process; its per-request info lines would drown the figures.
  fleet::SetMinLogLevel(fleet::LogLevel::kWarning);
  absl::Status status = Run(iterations, jobs, rounds, cycle_seconds, physics_iterations, switch_ms,
                            training_ms, warmup, protocol, load);
  if (!status.ok()) {
    std::cerr << "fleet_engine_bench: " << status << "\n";
    return 1;
  }
  return 0;
}
