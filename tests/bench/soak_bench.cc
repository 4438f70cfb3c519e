// fleet_soak_bench: fleetd under a steady load for as long as a leak takes to show, over real
// processes. Starts `fleetd --demo` (the built-in Gen1 site: polatis-emu and one emulated agent
// per host and chassis, 25 ms switching, 100 ms link training) as a child in a fresh state
// directory, waits until every demo agent is connected, then runs operations through the public
// gRPC API from several client threads. One cycle is three operations, the three changes a
// job makes:
//   RequestTopology of two GPUs picked by count, in two phases over them (see OpRequest),
//     then READY on a WatchAllocation stream;
//   ActivatePhase to the other phase, then READY in it;
//   ReleaseTopology.
// Cycle i starts at t0 + 3i/rate on whichever client is free; a start time at which every
// client is still busy is skipped and counted "behind", so slow cycles never lower the rate
// offered. The demo's eight GPUs hold four such allocations at once: the default four clients
// never ask for more than the site has. A watch of the tenant's allocations stays open all
// along, as a dashboard's would. fleetd's VmRSS is sampled from /proc once a second. Prints
// memory (before the load, after the first 10 % of the run, at the half, at the end, its slope over
// the second half), the database's size, throughput, errors and latency, and fleetd's fleet_store_*
// and fleet_retention_* metrics. Never fails on a figure: exits 1 only when fleetd cannot be
// started or dies during the run. SIGINT or SIGTERM ends the load early, with figures and clean-up.
//
//   fleet_soak_bench [--duration 60s] [--rate 50] [--clients 4] [--channel-per-op]
//                    [--fleetd PATH] [--keep-state] [--fleetd-arg ARG]...
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "fleet/v1/inventory.grpc.pb.h"
#include "fleet/v1/topology.grpc.pb.h"
#include "tests/bench/fleetd_child.h"
#include "tests/integration/subprocess.h"

namespace {

namespace v1 = fleet::v1;
using fleet::bench::FleetdProcess;

constexpr absl::Duration kStartTimeout = absl::Seconds(60);  // fleetd serving, agents in.
constexpr absl::Duration kStepTimeout = absl::Seconds(30);   // Each RPC, each wait for READY.
constexpr absl::Duration kStopGrace = absl::Seconds(20);     // SIGTERM, then SIGKILL.
constexpr absl::Duration kSampleEvery = absl::Seconds(1);
constexpr int kOpsPerCycle = 3;  // Request, phase switch, release.
constexpr int kFirstErrorsShown = 5;

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }
double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// SIGINT and SIGTERM end the run early and still clean up: blocked in every thread (the mask
// is set before any thread starts, and fleetd's child unblocks them), and taken with
// sigtimedwait by whichever thread is waiting on time anyway.
class Interrupts {
 public:
  Interrupts() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  // Waits up to `wait` for one; true once one has arrived, now or earlier.
  bool Poll(absl::Duration wait) {
    if (seen_.load()) return true;
    timespec timeout = absl::ToTimespec(std::max(wait, absl::ZeroDuration()));
    if (sigtimedwait(&set_, nullptr, &timeout) > 0) seen_.store(true);
    return seen_.load();
  }

 private:
  sigset_t set_;
  std::atomic<bool> seen_{false};
};

// Every place the demo started an agent for (its `agent-metrics: ADDRESS PLACE` lines) is
// connected. Measuring before that would time retrains against missing agents.
absl::Status WaitForAgents(FleetdProcess& fleetd, const std::string& grpc_address,
                           absl::Time deadline, Interrupts& interrupts, int& agents) {
  std::unique_ptr<v1::InventoryService::Stub> inventory = v1::InventoryService::NewStub(
      grpc::CreateChannel(grpc_address, grpc::InsecureChannelCredentials()));
  std::set<std::string> places, connected;
  while (true) {
    places.clear();
    for (const std::string& line : fleetd.LinesStartingWith("agent-metrics: ")) {
      places.insert(line.substr(line.rfind(' ') + 1));
    }
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::ListAgentsResponse response;
    connected.clear();
    if (inventory->ListAgents(&context, v1::ListAgentsRequest(), &response).ok()) {
      for (const v1::Agent& agent : response.agents()) {
        if (agent.connected()) connected.insert(agent.host());
      }
    }
    agents = static_cast<int>(places.size());
    if (!places.empty() &&
        std::includes(connected.begin(), connected.end(), places.begin(), places.end())) {
      return absl::OkStatus();
    }
    if (std::optional<int> code = fleetd.Exited()) {
      return absl::UnavailableError(absl::StrCat("fleetd exited (", *code, ") during start-up"));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(connected.size(), " of ", places.size(),
                                                      " demo agents connected after ",
                                                      absl::FormatDuration(kStartTimeout)));
    }
    if (interrupts.Poll(absl::Milliseconds(50))) return absl::CancelledError("interrupted");
  }
}

// Two GPUs by count, in two phases. Any shape over two members is mapped onto their ports in
// order (port 1 before port 2, a duplex link's two circuits on one port at each end), so a
// bidirectional ring over two is the same four circuits as a duplex chain of width 2, and a
// switch between such phases changes nothing. A chain of width 2 from the first GPU to the
// second, and the same chain reversed, need the same ports of each member (so the count picks
// the same two GPUs for both phases, each planned on the same snapshot) and share no circuit:
// each switch takes two cross-connects off and makes two, then the links retrain.
v1::RequestTopologyRequest OpRequest(int64_t index) {
  v1::RequestTopologyRequest request;
  request.set_tenant("soak");
  request.set_name(absl::StrCat("soak-", index));
  request.set_initial_phase("a");
  for (const bool reverse : {false, true}) {
    v1::Phase* phase = request.add_phases();
    phase->set_name(reverse ? "b" : "a");
    v1::TemplateSpec* chain = phase->mutable_topology()->mutable_template_();
    chain->set_kind(v1::TEMPLATE_KIND_CHAIN);
    chain->set_width(2);
    chain->set_reverse(reverse);
    v1::DeviceCount* gpus = chain->mutable_members()->add_counts();
    gpus->set_kind(v1::DEVICE_KIND_GPU);
    gpus->set_count(2);
  }
  return request;
}

// Why an operation failed: the step, and a gRPC code's name or the state the allocation
// reached instead of READY.
struct Failure {
  std::string step;
  std::string code;
  std::string message;
};

Failure RpcFailure(const std::string& step, const grpc::Status& s) {
  return {step, absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())),
          s.error_message()};
}

// The WatchAllocation stream an operation follows from admission to release.
class AllocationWatch {
 public:
  AllocationWatch(v1::TopologyService::Stub& stub, const std::string& id, absl::Time deadline) {
    context_.set_deadline(absl::ToChronoTime(deadline));
    v1::WatchAllocationRequest request;
    request.set_id(id);
    reader_ = stub.WatchAllocation(&context_, request);
  }
  ~AllocationWatch() {
    if (finished_) return;
    context_.TryCancel();
    (void)reader_->Finish();
  }

  // Until the allocation is READY in `phase`; a failure when it is DEGRADED, FAILED or
  // RELEASED first, or the stream ends.
  std::optional<Failure> WaitReady(const std::string& step, const std::string& phase) {
    v1::WatchAllocationResponse update;
    while (reader_->Read(&update)) {
      const v1::Allocation& a = update.allocation();
      if (a.state() == v1::ALLOCATION_STATE_READY && a.active_phase() == phase) return {};
      if (a.state() == v1::ALLOCATION_STATE_DEGRADED || a.state() == v1::ALLOCATION_STATE_FAILED ||
          a.state() == v1::ALLOCATION_STATE_RELEASED) {
        return Failure{
            step, v1::AllocationState_Name(a.state()),
            absl::StrCat("allocation ", a.id(), " in phase ", a.active_phase(), ": ", a.reason())};
      }
    }
    finished_ = true;
    const grpc::Status s = reader_->Finish();
    if (s.ok()) return Failure{step, "OK", "the watch ended before READY"};
    return RpcFailure(step, s);
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::WatchAllocationResponse>> reader_;
  bool finished_ = false;
};

// The tenant's allocations watched for the whole run, as a dashboard or `fleetctl get
// allocations --watch` does: fleetd's memory for such a watch must not grow with every
// allocation it has seen. Counts the updates it reads; ends when the run cancels it.
class TenantWatch {
 public:
  explicit TenantWatch(const std::string& address)
      : stub_(v1::TopologyService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        thread_([this] {
          v1::WatchAllocationRequest request;
          request.set_tenant("soak");
          auto reader = stub_->WatchAllocation(&context_, request);
          v1::WatchAllocationResponse update;
          while (reader->Read(&update)) updates_.fetch_add(1);
          (void)reader->Finish();
        }) {}
  ~TenantWatch() {
    context_.TryCancel();
    thread_.join();
  }
  int64_t updates() const { return updates_.load(); }

 private:
  std::unique_ptr<v1::TopologyService::Stub> stub_;
  grpc::ClientContext context_;
  std::atomic<int64_t> updates_{0};
  std::thread thread_;  // Last: starts once the rest is built.
};

struct OpRecord {
  absl::Duration start;  // From the load's t0.
  bool ok = false;
  double total_ms = 0, ready_ms = 0, phase_ms = 0, release_ms = 0;
  int members = 0, removed = 0, added = 0;  // Members; cross-connects of the phase switch.
};

grpc::Status Release(v1::TopologyService::Stub& stub, const std::string& id,
                     v1::ReleaseTopologyResponse& response) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kStepTimeout));
  v1::ReleaseTopologyRequest request;
  request.set_id(id);
  return stub.ReleaseTopology(&context, request, &response);
}

// One operation; fills `record`. A failed operation still releases what it holds, so the
// site's eight GPUs are not lost to later operations.
std::optional<Failure> RunOperation(v1::TopologyService::Stub& stub, int64_t index,
                                    OpRecord& record) {
  const absl::Time start = absl::Now();
  v1::RequestTopologyResponse admitted;
  {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(start + kStepTimeout));
    if (grpc::Status s = stub.RequestTopology(&context, OpRequest(index), &admitted); !s.ok()) {
      return RpcFailure("request", s);
    }
  }
  const std::string& id = admitted.allocation().id();
  record.members = admitted.allocation().members_size();
  std::optional<Failure> failure;
  {
    // The stream's deadline bounds both waits for READY; each RPC has its own.
    AllocationWatch watch(stub, id, absl::Now() + 2 * kStepTimeout);
    failure = watch.WaitReady("ready", "a");
    record.ready_ms = Ms(absl::Now() - start);
    const absl::Time switch_start = absl::Now();
    if (!failure) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(switch_start + kStepTimeout));
      v1::ActivatePhaseRequest request;
      request.set_id(id);
      request.set_phase("b");
      v1::ActivatePhaseResponse response;
      if (grpc::Status s = stub.ActivatePhase(&context, request, &response); !s.ok()) {
        failure = RpcFailure("phase", s);
      }
      record.removed = response.plan().remove_size();
      record.added = response.plan().add_size();
    }
    if (!failure) failure = watch.WaitReady("phase ready", "b");
    record.phase_ms = Ms(absl::Now() - switch_start);
  }
  const absl::Time release_start = absl::Now();
  v1::ReleaseTopologyResponse released;
  const grpc::Status s = Release(stub, id, released);
  record.release_ms = Ms(absl::Now() - release_start);
  record.total_ms = Ms(absl::Now() - start);
  if (failure) return failure;
  if (!s.ok()) return RpcFailure("release", s);
  if (released.allocation().state() != v1::ALLOCATION_STATE_RELEASED) {
    return Failure{
        "release", v1::AllocationState_Name(released.allocation().state()),
        absl::StrCat("allocation ", id, " after release: ", released.allocation().reason())};
  }
  record.ok = true;
  return {};
}

// Failures by step and code, each with its first message verbatim.
class ErrorLog {
 public:
  struct Kind {
    int64_t count = 0;
    std::string first;
  };
  void Add(const Failure& f) {
    absl::MutexLock lock(&mu_);
    Kind& kind = kinds_[absl::StrCat(f.step, " ", f.code)];
    if (kind.count++ == 0) kind.first = absl::StrCat(f.step, ": ", f.code, ": ", f.message);
  }
  std::map<std::string, Kind> kinds() const {
    absl::MutexLock lock(&mu_);
    return kinds_;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, Kind> kinds_ ABSL_GUARDED_BY(mu_);
};

struct Sample {
  double t_s = 0;  // From the load's t0.
  int64_t rss_kib = 0;
  int64_t db_bytes = 0, wal_bytes = 0;  // fleet.db, fleet.db-wal.
  int64_t ops = 0;                      // Operations finished by then.
};

// What the client threads and the sampler share.
struct Load {
  absl::Time t0;
  absl::Time end;         // No operation starts at or after it.
  absl::Duration period;  // Between scheduled starts.
  absl::Duration length;  // end - t0.
  std::atomic<int64_t> next_slot{0};
  std::atomic<int64_t> done{0}, errors{0}, behind{0};
  std::atomic<bool> stop{false};           // Interrupted, or fleetd died: no more starts.
  std::atomic<bool> finished{false};       // Every client has returned.
  bool died = false, interrupted = false;  // Written by the sampler only.
  ErrorLog error_log;
};

// A stub on a channel of its own: with a private subchannel pool, so that it opens its own
// connection instead of sharing one with the other channels to the same address.
std::unique_ptr<v1::TopologyService::Stub> NewStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return v1::TopologyService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

// `channel_per_op`: a connection per operation, as a job process per allocation (or fleetctl
// per step) makes; else one per client.
void Client(const std::string& address, bool channel_per_op, Load& load,
            std::vector<OpRecord>& records) {
  std::unique_ptr<v1::TopologyService::Stub> stub = NewStub(address);
  while (!load.stop.load()) {
    const int64_t slot = load.next_slot.fetch_add(1);
    const absl::Time at = load.t0 + slot * load.period;
    if (at >= load.end) return;
    const absl::Time now = absl::Now();
    // Every client was busy when this start came: skipped, as a fixed schedule does.
    if (now - at > load.period) {
      load.behind.fetch_add(1);
      continue;
    }
    if (at > now) absl::SleepFor(at - now);
    if (channel_per_op) stub = NewStub(address);
    OpRecord record;
    record.start = absl::Now() - load.t0;
    if (std::optional<Failure> failure = RunOperation(*stub, slot, record)) {
      load.errors.fetch_add(1);
      load.error_log.Add(*failure);
    }
    records.push_back(record);
    load.done.fetch_add(1);
  }
}

// VmRSS of `pid` in KiB (`field` "VmHWM:" for its peak); -1 once it is gone.
int64_t ReadStatusKib(pid_t pid, const std::string& field = "VmRSS:") {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (!absl::StartsWith(line, field)) continue;
    std::vector<std::string> parts =
        absl::StrSplit(line.substr(field.size()), ' ', absl::SkipWhitespace());
    int64_t kib = -1;
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &kib)) return kib;
  }
  return -1;
}

int64_t FileBytes(const std::string& path) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  return error ? 0 : static_cast<int64_t>(size);
}

Sample TakeSample(FleetdProcess& fleetd, const std::string& state_dir, const Load& load) {
  return {absl::ToDoubleSeconds(absl::Now() - load.t0), ReadStatusKib(fleetd.pid()),
          FileBytes(state_dir + "/fleet.db"), FileBytes(state_dir + "/fleet.db-wal"),
          load.done.load()};
}

// Once a second until the clients are done: a sample, and a progress line at every tenth of
// the run. Stops the load when fleetd dies or an interrupt comes.
void SampleLoop(FleetdProcess& fleetd, const std::string& state_dir, Load& load,
                Interrupts& interrupts, absl::Mutex& mu, std::vector<Sample>& samples) {
  absl::Time next_sample = load.t0;
  int next_progress = 1;
  while (!load.finished.load()) {
    if (absl::Now() >= next_sample) {
      next_sample += kSampleEvery;
      if (fleetd.Exited()) {
        load.died = true;
        load.stop.store(true);
        return;
      }
      const Sample s = TakeSample(fleetd, state_dir, load);
      {
        absl::MutexLock lock(&mu);
        samples.push_back(s);
      }
      if (next_progress <= 10 && s.t_s >= absl::ToDoubleSeconds(load.length) * next_progress / 10) {
        ++next_progress;
        std::printf(
            "  t=%5.0f s  rss %7.1f MiB  db %7.2f MiB  ops %7lld  errors %5lld  behind %5lld\n",
            s.t_s, s.rss_kib / 1024.0, MiB(s.db_bytes + s.wal_bytes), static_cast<long long>(s.ops),
            static_cast<long long>(load.errors.load()), static_cast<long long>(load.behind.load()));
        std::fflush(stdout);
      }
    }
    if (interrupts.Poll(std::min(next_sample - absl::Now(), absl::Milliseconds(100)))) {
      if (!load.interrupted) std::printf("  interrupted: no more operations start\n");
      load.interrupted = true;
      load.stop.store(true);
    }
  }
}

// Order statistics the way the other benchmarks take them: the sample at the rank.
struct Summary {
  double median = 0, p99 = 0, max = 0;
};
Summary Summarize(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[v.size() * 99 / 100], v.back()};
}

// Least-squares slope of RSS over time, in MiB per minute.
double SlopeMibPerMinute(const std::vector<Sample>& samples) {
  if (samples.size() < 2) return 0;
  double st = 0, sr = 0, stt = 0, str = 0;
  for (const Sample& s : samples) {
    const double t = s.t_s / 60.0, r = s.rss_kib / 1024.0;
    st += t;
    sr += r;
    stt += t * t;
    str += t * r;
  }
  const double n = static_cast<double>(samples.size());
  const double denominator = n * stt - st * st;
  return denominator == 0 ? 0 : (n * str - st * sr) / denominator;
}

// The first sample at or after `t_s`, else the last.
const Sample& SampleAt(const std::vector<Sample>& samples, double t_s) {
  for (const Sample& s : samples) {
    if (s.t_s >= t_s) return s;
  }
  return samples.back();
}

struct Figures {
  double ops_per_s = 0;
  int64_t ok = 0;
  Summary op;
  Sample before, warm, half, end;
  double slope = 0;
  int64_t max_rss_kib = 0, hwm_kib = -1;
};

void PrintLoad(const Load& load, const std::vector<OpRecord>& records, int64_t rate,
               double elapsed_s, Figures& f) {
  std::vector<double> total, ready, phase, release;
  std::vector<double> quarters[4];
  int min_members = 1 << 30, max_members = 0, removed = 0, added = 0, switches = 0;
  // Quarters of what ran: an interrupted run is shorter than scheduled.
  const double length_s = std::min(absl::ToDoubleSeconds(load.length), elapsed_s);
  for (const OpRecord& r : records) {
    if (!r.ok) continue;
    total.push_back(r.total_ms);
    ready.push_back(r.ready_ms);
    phase.push_back(r.phase_ms);
    release.push_back(r.release_ms);
    const int q = std::clamp(static_cast<int>(4 * absl::ToDoubleSeconds(r.start) / length_s), 0, 3);
    quarters[q].push_back(r.total_ms);
    min_members = std::min(min_members, r.members);
    max_members = std::max(max_members, r.members);
    removed += r.removed;
    added += r.added;
    ++switches;
  }
  const int64_t done = load.done.load(), errors = load.errors.load();
  f.ops_per_s = static_cast<double>(kOpsPerCycle * done) / elapsed_s;
  std::printf("[load] %.1f s, a cycle (%d operations) starts every %.1f ms (%lld ops/s)\n",
              elapsed_s, kOpsPerCycle, Ms(load.period), static_cast<long long>(rate));
  std::printf("  cycles done          %8lld   %.1f ops/s   (%lld ok, %.1f ops/s)\n",
              static_cast<long long>(done), f.ops_per_s, static_cast<long long>(total.size()),
              static_cast<double>(kOpsPerCycle * total.size()) / elapsed_s);
  std::printf("  cycles failed        %8lld\n", static_cast<long long>(errors));
  int shown = 0;
  for (const auto& [key, kind] : load.error_log.kinds()) {
    std::printf("    %-40s %8lld\n", key.c_str(), static_cast<long long>(kind.count));
    if (shown++ < kFirstErrorsShown) std::printf("      first: %s\n", kind.first.c_str());
  }
  std::printf("  behind (starts skipped, every client busy) %lld\n",
              static_cast<long long>(load.behind.load()));
  if (switches > 0) {
    std::printf(
        "  per allocation: %d..%d members; phase switch: %.1f cross-connects off, %.1f on\n",
        min_members, max_members, static_cast<double>(removed) / switches,
        static_cast<double>(added) / switches);
  }
  f.op = Summarize(total);
  f.ok = static_cast<int64_t>(total.size());
  std::printf("  latency of the operations that succeeded, ms    median        p99        max\n");
  for (const auto& [name, v] : {std::pair<const char*, std::vector<double>*>{"cycle", &total},
                                {"request -> READY", &ready},
                                {"ActivatePhase -> READY", &phase},
                                {"release", &release}}) {
    const Summary s = Summarize(*v);
    std::printf("    %-42s %10.2f %10.2f %10.2f\n", name, s.median, s.p99, s.max);
  }
  std::printf("  median operation by quarter of the run:");
  for (const std::vector<double>& q : quarters) {
    std::printf("%s", q.empty() ? " -" : absl::StrFormat(" %.2f", Summarize(q).median).c_str());
  }
  std::printf(" ms\n");
}

void PrintMemory(const std::vector<Sample>& samples, Figures& f) {
  const double end_s = samples.back().t_s;
  f.before = samples.front();
  f.warm = SampleAt(samples, end_s / 10);
  f.half = SampleAt(samples, end_s / 2);
  f.end = samples.back();
  std::vector<Sample> second_half;
  for (const Sample& s : samples) {
    f.max_rss_kib = std::max(f.max_rss_kib, s.rss_kib);
    if (s.t_s >= end_s / 2) second_half.push_back(s);
  }
  f.slope = SlopeMibPerMinute(second_half);
  std::printf("[fleetd memory] VmRSS from /proc, %zu samples, one a second\n", samples.size());
  const auto line = [](const char* what, const Sample& s) {
    std::printf("  %-29s t=%6.0f s %8.1f MiB   after %7lld cycles\n", what, s.t_s,
                s.rss_kib / 1024.0, static_cast<long long>(s.ops));
  };
  line("before the load", f.before);
  line("start (after 10 % of the run)", f.warm);
  line("half", f.half);
  line("end", f.end);
  // The kernel's peak (VmHWM) also sees a spike between two samples.
  f.max_rss_kib = std::max(f.max_rss_kib, f.hwm_kib);
  std::printf("  max                                      %8.1f MiB   (samples and VmHWM)\n",
              f.max_rss_kib / 1024.0);
  std::printf("  slope over the second half: %+.2f MiB/min (least squares over %zu samples)\n",
              f.slope, second_half.size());
  if (f.end.ops > f.warm.ops) {
    std::printf("  growth from the start to the end: %+.2f KiB per cycle\n",
                static_cast<double>(f.end.rss_kib - f.warm.rss_kib) /
                    static_cast<double>(f.end.ops - f.warm.ops));
  }
}

// The write-ahead log grows to its checkpoint size and is then reused, not shrunk: fleet.db
// alone is what grows with history.
void PrintDatabase(const Figures& f) {
  std::printf("[database] MiB               fleet.db  fleet.db-wal      total\n");
  for (const auto& [what, s] : {std::pair<const char*, const Sample*>{"before the load", &f.before},
                                {"start (after 10 %)", &f.warm},
                                {"end", &f.end}}) {
    std::printf("  %-24s %10.2f %13.2f %10.2f\n", what, MiB(s->db_bytes), MiB(s->wal_bytes),
                MiB(s->db_bytes + s->wal_bytes));
  }
  if (f.end.ops > f.warm.ops) {
    std::printf("  fleet.db from the start to the end: %+.1f KiB per 1000 operations\n",
                static_cast<double>(f.end.db_bytes - f.warm.db_bytes) / 1024.0 * 1000.0 /
                    static_cast<double>(f.end.ops - f.warm.ops));
  }
}

// fleetd's own figures on its database and what retention pruned, where it exports them.
void PrintStoreMetrics(const std::string& metrics_address) {
  std::printf("[fleetd metrics] lines starting fleet_store or fleet_retention\n");
  absl::StatusOr<std::string> body = fleet::testing::HttpGet(metrics_address, "/metrics");
  if (!body.ok()) {
    std::printf("  cannot read /metrics: %s\n", std::string(body.status().message()).c_str());
    return;
  }
  int shown = 0;
  for (absl::string_view line : absl::StrSplit(*body, '\n')) {
    if (absl::StartsWith(line, "fleet_store") || absl::StartsWith(line, "fleet_retention")) {
      std::printf("  %s\n", std::string(line).c_str());
      ++shown;
    }
  }
  if (shown == 0) std::printf("  (none exported)\n");
}

struct Options {
  absl::Duration duration = absl::Seconds(60);
  int64_t rate = 50;
  int64_t clients = 4;
  std::string fleetd;
  bool keep_state = false;
  bool channel_per_op = false;
  std::vector<std::string> fleetd_args;
};

// The load on a running site; figures printed, the one-line summary left in `summary` for
// the very end. False when fleetd died during it.
bool RunLoad(const Options& options, FleetdProcess& fleetd, const std::string& grpc_address,
             const std::string& metrics_address, const std::string& state_dir,
             Interrupts& interrupts, std::string& summary) {
  Load load;
  load.period = absl::Seconds(kOpsPerCycle) / options.rate;
  load.length = options.duration;
  load.t0 = absl::Now();
  load.end = load.t0 + load.length;
  absl::Mutex samples_mu;
  std::vector<Sample> samples;
  std::vector<std::vector<OpRecord>> records(options.clients);
  std::thread sampler(
      [&] { SampleLoop(fleetd, state_dir, load, interrupts, samples_mu, samples); });
  std::optional<TenantWatch> watch;
  watch.emplace(grpc_address);
  std::vector<std::thread> clients;
  for (int64_t c = 0; c < options.clients; ++c) {
    clients.emplace_back(
        [&, c] { Client(grpc_address, options.channel_per_op, load, records[c]); });
  }
  for (std::thread& t : clients) t.join();
  const double elapsed_s = absl::ToDoubleSeconds(absl::Now() - load.t0);
  const int64_t watched = watch->updates();
  watch.reset();
  load.finished.store(true);
  sampler.join();
  if (!fleetd.Exited()) samples.push_back(TakeSample(fleetd, state_dir, load));
  std::vector<OpRecord> all;
  for (const std::vector<OpRecord>& r : records) all.insert(all.end(), r.begin(), r.end());

  Figures f;
  f.hwm_kib = ReadStatusKib(fleetd.pid(), "VmHWM:");
  PrintLoad(load, all, options.rate, elapsed_s, f);
  std::printf("  a tenant-wide watch open for the whole run read %lld updates\n",
              static_cast<long long>(watched));
  if (samples.empty()) {
    std::printf("[fleetd memory] no sample: fleetd was gone\n");
  } else {
    PrintMemory(samples, f);
    PrintDatabase(f);
  }
  if (!fleetd.Exited()) PrintStoreMetrics(metrics_address);
  if (load.died) std::printf("fleetd DIED during the run\n");
  summary = absl::StrFormat(
      "summary: %s%.0f s at %lld ops/s offered, %lld clients: %lld cycles (%.1f ops/s, %lld ok), "
      "%lld failed, %lld behind; cycle median %.0f ms, p99 %.0f ms; RSS %.1f -> %.1f MiB (max "
      "%.1f), "
      "%+.2f MiB/min over the second half; fleet.db %.2f -> %.2f MiB (WAL %.2f)\n",
      load.died ? "fleetd DIED; " : "", elapsed_s, static_cast<long long>(options.rate),
      static_cast<long long>(options.clients), static_cast<long long>(load.done.load()),
      f.ops_per_s, static_cast<long long>(f.ok), static_cast<long long>(load.errors.load()),
      static_cast<long long>(load.behind.load()), f.op.median, f.op.p99, f.warm.rss_kib / 1024.0,
      f.end.rss_kib / 1024.0, f.max_rss_kib / 1024.0, f.slope, MiB(f.warm.db_bytes),
      MiB(f.end.db_bytes), MiB(f.end.wal_bytes));
  return !load.died;
}

// Starts fleetd, runs the load, stops fleetd. False when fleetd could not start or died.
bool Run(const Options& options, const std::string& state_dir, Interrupts& interrupts) {
  // Plaintext: the soak measures memory and disk over months of load, not the handshake
  // (fleet_engine_bench [6] gives TLS's cost); its clients name themselves by metadata.
  std::vector<std::string> argv = {options.fleetd,   "--demo", "--insecure",  "--grpc-port", "0",
                                   "--metrics-port", "0",      "--state-dir", state_dir};
  argv.insert(argv.end(), options.fleetd_args.begin(), options.fleetd_args.end());
  const std::string log_path = state_dir + "/fleetd.log";
  std::printf("fleet_soak_bench: %s\n", absl::StrJoin(argv, " ").c_str());
  std::printf(
      "one cycle, 3 operations: request 2 GPUs by count in phases a and b -> READY -> phase b -> "
      "READY -> release\n");
  absl::StatusOr<std::unique_ptr<FleetdProcess>> fleetd = FleetdProcess::Start(argv, log_path);
  if (!fleetd.ok()) {
    std::cerr << "fleet_soak_bench: cannot start fleetd: " << fleetd.status() << "\n";
    return false;
  }
  const absl::Time started = absl::Now();
  const absl::Time deadline = started + kStartTimeout;
  absl::StatusOr<std::string> grpc_address = (*fleetd)->WaitForLine("grpc: ", deadline);
  absl::StatusOr<std::string> metrics_address =
      grpc_address.ok() ? (*fleetd)->WaitForLine("metrics: ", deadline) : grpc_address.status();
  absl::StatusOr<std::string> fleetd_state =
      metrics_address.ok() ? (*fleetd)->WaitForLine("state: ", deadline) : metrics_address.status();
  int agents = 0;
  std::string summary;
  absl::Status up = fleetd_state.status();
  if (up.ok()) up = WaitForAgents(**fleetd, *grpc_address, deadline, interrupts, agents);
  bool ok = up.ok();
  if (!ok) {
    std::cerr << "fleet_soak_bench: fleetd did not come up: " << up << "\n";
  } else {
    std::printf("site: fleetd pid %d, gRPC %s, metrics %s, %d agents connected after %.1f s\n",
                (*fleetd)->pid(), grpc_address->c_str(), metrics_address->c_str(), agents,
                absl::ToDoubleSeconds(absl::Now() - started));
    std::printf("load: %s at %lld ops/s from %lld clients, a connection per %s; state %s\n",
                absl::FormatDuration(options.duration).c_str(),
                static_cast<long long>(options.rate), static_cast<long long>(options.clients),
                options.channel_per_op ? "cycle" : "client", fleetd_state->c_str());
    std::fflush(stdout);
    ok = RunLoad(options, **fleetd, *grpc_address, *metrics_address, *fleetd_state, interrupts,
                 summary);
  }
  const absl::Time stop_start = absl::Now();
  bool killed = false;
  const int code = (*fleetd)->Stop(kStopGrace, killed);
  std::printf("fleetd stopped: exit %d, %.1f s after SIGTERM%s\n", code,
              absl::ToDoubleSeconds(absl::Now() - stop_start),
              killed ? " (did not stop within the grace: SIGKILL)" : "");
  if (!ok) {
    // The end of its log says why it stopped; the whole log goes with the state directory.
    std::ifstream log(log_path);
    std::vector<std::string> tail;
    for (std::string line; std::getline(log, line);) {
      tail.push_back(line);
      if (tail.size() > 20) tail.erase(tail.begin());
    }
    std::cerr << "fleetd's log, last lines:\n" << absl::StrJoin(tail, "\n") << "\n";
  }
  if (options.keep_state) std::printf("state kept in %s\n", state_dir.c_str());
  std::printf("%s", summary.c_str());
  std::fflush(stdout);
  return ok;
}

// FlagSet keeps one value per flag, and a fleetd flag given as a value ("--config") would read
// as one of ours: --fleetd-arg and its value are taken out before parsing.
absl::StatusOr<std::vector<std::string>> TakeFleetdArgs(std::vector<std::string>& args) {
  std::vector<std::string> values, rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (args[i] == "--fleetd-arg") {
      if (i + 1 == args.size()) return absl::InvalidArgumentError("flag --fleetd-arg: no value");
      values.push_back(args[++i]);
    } else if (absl::StartsWith(args[i], "--fleetd-arg=")) {
      values.push_back(args[i].substr(std::string("--fleetd-arg=").size()));
    } else {
      rest.push_back(args[i]);
    }
  }
  args = std::move(rest);
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  options.fleetd =
      (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "fleetd").string();
  std::string duration = "60s", fleetd_arg_help;
  fleet::FlagSet flags(
      "fleet_soak_bench [--duration 60s] [--rate 50] [--clients 4] [--channel-per-op] "
      "[--fleetd PATH] [--keep-state] [--fleetd-arg ARG]...",
      "Runs `fleetd --demo` under a steady load of phased two-GPU allocations (request, READY,\n"
      "phase switch, READY, release) and prints its memory, database size, errors and latency.");
  flags.String("duration", &duration, "how long operations start (absl duration: 90s, 15m)");
  flags.Int("rate", &options.rate, "operations per second (a cycle is 3), on a fixed schedule");
  flags.Int("clients", &options.clients, "client threads, each with its own connection");
  flags.Bool("channel-per-op", &options.channel_per_op,
             "a new connection for every operation, as a process per job makes");
  flags.String("fleetd", &options.fleetd, "the fleetd binary");
  flags.Bool("keep-state", &options.keep_state,
             "keep the state directory (fleet.db, fleetd.log, the demo's logs) and print it");
  flags.String("fleetd-arg", &fleetd_arg_help,
               "an extra argument for fleetd, repeatable (e.g. --fleetd-arg=--config=soak.yaml)");
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<std::vector<std::string>> fleetd_args = TakeFleetdArgs(args);
  absl::StatusOr<std::vector<std::string>> rest =
      fleetd_args.ok() ? flags.Parse(args) : fleetd_args.status();
  if (!rest.ok() || flags.help_requested()) {
    std::cerr << (rest.ok() ? flags.Help() : std::string(rest.status().message())) << "\n";
    return rest.ok() ? 0 : 2;
  }
  options.fleetd_args = *fleetd_args;
  if (!absl::ParseDuration(duration, &options.duration) ||
      options.duration <= absl::ZeroDuration() || options.rate < 1 || options.clients < 1 ||
      !rest->empty()) {
    std::cerr << "--duration must be a positive duration, --rate and --clients at least 1, and "
                 "no positional arguments\n"
              << flags.Help() << "\n";
    return 2;
  }
  // Before any thread starts, so every thread inherits the mask.
  Interrupts interrupts;
  char dir[] = "/tmp/fleet-soak.XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    std::cerr << "fleet_soak_bench: cannot create a state directory\n";
    return 1;
  }
  const bool ok = Run(options, dir, interrupts);
  if (!options.keep_state) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  return ok ? 0 : 1;
}
