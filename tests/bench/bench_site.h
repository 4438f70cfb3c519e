// The site the end-to-end benchmarks (fleet_engine_bench, fleet_heal_bench) run on: one
// 384x384 polatis-emu and 160 GPUs in chassis of 20 with an emulated agent each (fleetd's demo
// machinery), fleetd in-process, a client of its public API; and the figures' arithmetic.
#ifndef FLEET_TESTS_BENCH_BENCH_SITE_H_
#define FLEET_TESTS_BENCH_BENCH_SITE_H_

#include <google/protobuf/util/time_util.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <latch>
#include <map>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/grpc_status.h"
#include "common/grpc_tls.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "controller/fleetd/daemon.h"
#include "controller/fleetd/demo.h"
#include "fleet/v1/admin.grpc.pb.h"
#include "fleet/v1/inventory.grpc.pb.h"
#include "fleet/v1/topology.grpc.pb.h"
#include "tests/integration/subprocess.h"

namespace fleet::bench {

using fleet::fleetd::Demo;
using fleet::fleetd::DemoOptions;
using fleet::fleetd::Fleetd;
using fleet::fleetd::FleetdConfig;
using google::protobuf::util::TimeUtil;

inline constexpr int kGpus = 160;
inline constexpr int kGpusPerChassis = 20;  // 8 chassis, so 8 agents.
inline constexpr int kRingSize = 8;
inline constexpr int kRings = kGpus / kRingSize;  // Disjoint rings the site holds at once: 20.
inline constexpr int kIngressPorts = 384;
// The stages an allocation reports, in transaction order.
inline constexpr const char* kStages[] = {"plan",    "persist", "quiesce",
                                          "program", "verify",  "retrain"};

// One 384x384 switch and 160 GPUs in chassis of 20, each GPU with one O-NIC whose two ports
// take consecutive ingress ports and the matching egress ports. Nothing is reserved for
// trunks. The switch's address, port and protocol are the placeholders Demo points at the
// emulator.
inline std::string BenchInventory() {
  std::string yaml =
      "site: engine-bench\n"
      "switches:\n"
      "  - id: ocs1\n"
      "    model: polatis\n"
      "    size: 384x384\n"
      "    address: 192.0.2.10\n"
      "    protocol: tl1\n"
      "    port: 3082\n"
      "    credentials: x\n"
      "devices:\n";
  for (int n = 1; n <= kGpus; ++n) {
    absl::StrAppendFormat(&yaml,
                          "  - id: gpu%d\n"
                          "    kind: gpu\n"
                          "    chassis: pool-%d\n"
                          "    onics:\n"
                          "      - id: gpu%d-n0\n"
                          "        serial: FLT-GPU%d-N0\n"
                          "        pcie: \"0000:%02x:00.0\"\n"
                          "        ports:\n"
                          "          - {tx: ocs1/%d, rx: ocs1/%d}\n"
                          "          - {tx: ocs1/%d, rx: ocs1/%d}\n",
                          n, (n - 1) / kGpusPerChassis + 1, n, n, (n - 1) % kGpusPerChassis + 1,
                          2 * n - 1, kIngressPorts + 2 * n - 1, 2 * n, kIngressPorts + 2 * n);
  }
  return yaml;
}

inline double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }
inline double Ms(const google::protobuf::Duration& d) {
  return static_cast<double>(TimeUtil::DurationToNanoseconds(d)) / 1e6;
}

// Order statistics the way the other benchmarks take them: the sample at the rank, no
// interpolation (so with fewer than 100 samples the p99 is the maximum).
struct Summary {
  double median = 0, p99 = 0, max = 0;
};
inline Summary Summarize(std::vector<double> samples) {
  if (samples.empty()) return {};
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples[samples.size() * 99 / 100], samples.back()};
}
inline double Median(std::vector<double> samples) { return Summarize(std::move(samples)).median; }

// Stage name → its duration in each allocation, in ms.
using StageSamples = std::map<std::string, std::vector<double>>;

// Records each stage's duration; returns their sum.
inline double AddStages(const v1::Allocation& a, StageSamples& stages) {
  double sum = 0;
  for (const v1::StageTiming& t : a.stage_timings()) {
    stages[t.stage()].push_back(Ms(t.duration()));
    sum += Ms(t.duration());
  }
  return sum;
}

inline double StageMs(const v1::Allocation& a, const std::string& stage) {
  for (const v1::StageTiming& t : a.stage_timings()) {
    if (t.stage() == stage) return Ms(t.duration());
  }
  return 0;
}

// The median of each stage, their sum, and what the latency holds besides them (the state
// commits between stages, the RPCs and the watch), which no stage timing covers.
inline void PrintStages(const StageSamples& stages, const std::vector<double>& latency_ms,
                        const std::vector<double>& stage_sum_ms) {
  std::printf("  stage medians (GetAllocation after READY):\n");
  for (const char* stage : kStages) {
    auto it = stages.find(stage);
    if (it == stages.end()) {
      std::printf("    %-24s %9s\n", stage, "absent");
      continue;
    }
    std::printf("    %-24s %9.3f ms\n", stage, Median(it->second));
  }
  std::vector<double> outside;
  for (size_t i = 0; i < latency_ms.size(); ++i) outside.push_back(latency_ms[i] - stage_sum_ms[i]);
  std::printf("    %-24s %9.3f ms\n", "sum of stages", Median(stage_sum_ms));
  std::printf("    %-24s %9.3f ms\n", "outside the stages", Median(outside));
}

// One site: the emulator and the agents (fleetd's demo machinery), fleetd in-process, and a
// client of fleetd's public API. Stopped in that order's reverse by the destructor.
class Site {
 public:
  // `armed_light_wait`: fleetd's (0: retrains are sent only after the switch is verified).
  // `tls`: mutual TLS on the demo's PKI, the bench calling as its operator; else plaintext.
  // `monitor_interval`: the switch monitor's (0: off, so no read lands among the timed work).
  // `configure`, when set, changes fleetd's config last (a replicated fleetd's etcd).
  static absl::StatusOr<std::unique_ptr<Site>> Start(
      const DemoOptions& options, absl::Duration armed_light_wait = absl::Seconds(5),
      bool tls = false, absl::Duration monitor_interval = absl::ZeroDuration(),
      const std::function<void(FleetdConfig&)>& configure = nullptr) {
    std::unique_ptr<Site> site(new Site());
    char dir[] = "/tmp/fleet-engine-bench.XXXXXX";
    if (mkdtemp(dir) == nullptr) return absl::InternalError("cannot create a state directory");
    site->state_dir_ = dir;
    FleetdConfig config;
    config.listen_address = "127.0.0.1";
    config.grpc_port = 0;
    config.metrics_port = 0;
    config.state_dir = site->state_dir_;
    config.agent_heartbeat = absl::Seconds(1);
    config.shutdown_grace = absl::Seconds(2);
    // A periodic pass holds the switch while it reads it back: an outlier that says nothing
    // about the reconfiguration path.
    config.reconcile_interval = absl::ZeroDuration();
    config.armed_light_wait = armed_light_wait;
    config.monitor_interval = monitor_interval;
    config.insecure = !tls;
    // polatis-emu and fleet-onic-agent are built next to this executable.
    const std::string binary_dir =
        std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
    ASSIGN_OR_RETURN(site->demo_, Demo::Prepare(config, binary_dir, options));
    if (configure) configure(config);
    ASSIGN_OR_RETURN(site->fleetd_, Fleetd::Start(config, &site->clock_));
    RETURN_IF_ERROR(site->demo_->StartAgents(site->fleetd_->grpc_address()));
    const std::string pki = site->state_dir_ + "/pki/";
    fleet::ClientTlsFiles files;
    if (tls) {
      files = {config.tls_ca_file, pki + "operator.pem", pki + "operator.key"};
    } else {
      files.insecure = true;
    }
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                     fleet::ClientCredentials(files));
    site->channel_ = grpc::CreateChannel(site->fleetd_->grpc_address(), credentials);
    site->topology_ = v1::TopologyService::NewStub(site->channel_);
    site->inventory_ = v1::InventoryService::NewStub(site->channel_);
    site->admin_ = v1::AdminService::NewStub(site->channel_);
    RETURN_IF_ERROR(site->WaitForAgents(absl::Seconds(30)));
    return site;
  }

  ~Site() {
    if (fleetd_ != nullptr) fleetd_->Shutdown(absl::Seconds(2));
    fleetd_.reset();
    demo_.reset();  // Stops the agents, then the emulator.
    if (!state_dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(state_dir_, ignored);
    }
  }

  int agents() const { return demo_->agents(); }
  // Stops the agent of `place` (a chassis), as a crash would; AgentBack starts it again and
  // waits until every agent is connected.
  absl::Status StopAgent(const std::string& place) { return demo_->StopAgent(place); }
  absl::Status AgentBack(const std::string& place) {
    RETURN_IF_ERROR(demo_->RestartAgent(place));
    return WaitForAgents(absl::Seconds(30));
  }
  v1::TopologyService::Stub& topology() { return *topology_; }
  v1::InventoryService::Stub& inventory() { return *inventory_; }
  v1::AdminService::Stub& admin() { return *admin_; }
  // A request to the emulator's simulation side (/sim/v1/...): faults, counters.
  absl::Status Sim(const std::string& method, const std::string& path,
                   const std::string& body = "") {
    absl::StatusOr<fleet::testing::HttpReply> reply =
        fleet::testing::HttpRequest(demo_->switches().front().rest, method, path, body);
    if (!reply.ok()) return reply.status();
    if (reply->status >= 300) {
      return absl::InternalError(
          absl::StrCat(method, " ", path, ": ", reply->status, " ", reply->body));
    }
    return absl::OkStatus();
  }
  // Protocol commands the emulated switch has served (reads included), from its counters.
  int64_t SwitchCommands() {
    absl::StatusOr<std::string> body =
        fleet::testing::HttpGet(demo_->switches().front().rest, "/sim/v1/counters");
    if (!body.ok()) return -1;
    const std::string key = "\"commands\":";
    const size_t at = body->find(key);
    int64_t n = -1;
    if (at == std::string::npos) return n;
    const std::string rest = body->substr(at + key.size());
    if (!absl::SimpleAtoi(rest.substr(0, rest.find_first_of(",}")), &n)) return -1;
    return n;
  }

  struct Job {
    std::string id;
    absl::Duration latency;  // From just before RequestTopology to READY seen on the watch.
  };

  // Requests the ring gpu(8r+1) → … → gpu(8r+8) → gpu(8r+1), with `on_failure` when given,
  // and waits until it is READY.
  absl::StatusOr<Job> Allocate(int ring, const v1::FailurePolicy* on_failure = nullptr) {
    std::vector<std::string> members;
    for (int i = 1; i <= kRingSize; ++i)
      members.push_back(absl::StrCat("gpu", kRingSize * ring + i));
    return Allocate(members, on_failure, absl::StrCat(" ring ", ring));
  }
  // The same over `members`; `what` names the ring in errors.
  absl::StatusOr<Job> Allocate(const std::vector<std::string>& members,
                               const v1::FailurePolicy* on_failure, const std::string& what) {
    v1::RequestTopologyRequest request;
    if (on_failure != nullptr) *request.mutable_on_failure() = *on_failure;
    request.set_tenant("bench");
    request.set_name(absl::StrCat("ring-of-", members.front()));
    v1::TemplateSpec* ring_spec = request.mutable_topology()->mutable_template_();
    ring_spec->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
    for (const std::string& m : members) ring_spec->mutable_members()->add_devices(m);
    Job job;
    const absl::Time start = absl::Now();
    grpc::ClientContext request_context;
    request_context.set_deadline(absl::ToChronoTime(start + absl::Seconds(30)));
    v1::RequestTopologyResponse response;
    if (grpc::Status s = topology_->RequestTopology(&request_context, request, &response);
        !s.ok()) {
      return Prefixed(absl::StrCat("RequestTopology", what), s);
    }
    job.id = response.allocation().id();
    ASSIGN_OR_RETURN(const absl::Time ready,
                     WatchReady(job.id, start + absl::Seconds(30), "", what));
    job.latency = ready - start;
    return job;
  }

  // Watches allocation `id` until it is READY (in phase `phase` unless empty): the time that
  // was seen; ABORTED when it is DEGRADED, FAILED or RELEASED first (naming the phase it is
  // in); DEADLINE_EXCEEDED when the watch ends first (at `deadline`). `what` follows the id
  // in errors.
  absl::StatusOr<absl::Time> WatchReady(const std::string& id, absl::Time deadline,
                                        const std::string& phase = "",
                                        const std::string& what = "") {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    v1::WatchAllocationRequest watch;
    watch.set_id(id);
    std::unique_ptr<grpc::ClientReader<v1::WatchAllocationResponse>> reader =
        topology_->WatchAllocation(&context, watch);
    const std::string in_phase = phase.empty() ? "" : absl::StrCat(" in phase ", phase);
    v1::WatchAllocationResponse update;
    absl::StatusOr<absl::Time> outcome = absl::DeadlineExceededError(
        absl::StrCat("allocation ", id, what, ": the watch ended before READY", in_phase));
    while (reader->Read(&update)) {
      const v1::Allocation& a = update.allocation();
      if (a.state() == v1::ALLOCATION_STATE_READY && (phase.empty() || a.active_phase() == phase)) {
        outcome = absl::Now();
        break;
      }
      if (a.state() == v1::ALLOCATION_STATE_DEGRADED || a.state() == v1::ALLOCATION_STATE_FAILED ||
          a.state() == v1::ALLOCATION_STATE_RELEASED) {
        outcome = absl::AbortedError(absl::StrCat(
            "allocation ", id, what, " is ", v1::AllocationState_Name(a.state()),
            a.active_phase().empty() ? "" : absl::StrCat(" in phase ", a.active_phase()),
            phase.empty() ? "" : absl::StrCat(" (waited for ", phase, ")"), ": ", a.reason()));
        break;
      }
    }
    // The stream follows the allocation until it ends; we are done with it at READY.
    context.TryCancel();
    (void)reader->Finish();
    return outcome;
  }

  absl::StatusOr<v1::Allocation> Get(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::GetAllocationRequest request;
    request.set_id(id);
    v1::Allocation a;
    if (grpc::Status s = topology_->GetAllocation(&context, request, &a); !s.ok()) {
      return Prefixed("GetAllocation " + id, s);
    }
    return a;
  }

  // Returns after the circuits are off the switch and the allocation is RELEASED.
  absl::Status Release(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::ReleaseTopologyRequest request;
    request.set_id(id);
    v1::ReleaseTopologyResponse response;
    if (grpc::Status s = topology_->ReleaseTopology(&context, request, &response); !s.ok()) {
      return Prefixed("ReleaseTopology " + id, s);
    }
    if (response.allocation().state() != v1::ALLOCATION_STATE_RELEASED) {
      return absl::AbortedError(absl::StrCat(
          "allocation ", id, " is ", v1::AllocationState_Name(response.allocation().state()),
          " after release: ", response.allocation().reason()));
    }
    return absl::OkStatus();
  }

 private:
  Site() = default;

  static absl::Status Prefixed(const std::string& what, const grpc::Status& s) {
    absl::Status status = fleet::FromGrpcStatus(s);
    return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
  }

  // Measuring before every agent is in would time retrains against missing agents.
  absl::Status WaitForAgents(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    int connected = 0;
    while (absl::Now() < deadline) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      v1::ListAgentsResponse response;
      if (inventory_->ListAgents(&context, v1::ListAgentsRequest(), &response).ok()) {
        connected = 0;
        for (const v1::Agent& agent : response.agents()) connected += agent.connected() ? 1 : 0;
        if (connected == demo_->agents()) return absl::OkStatus();
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return absl::DeadlineExceededError(absl::StrCat(connected, " of ", demo_->agents(),
                                                    " agents connected after ",
                                                    absl::FormatDuration(timeout)));
  }

  fleet::SystemClock clock_;
  std::string state_dir_;
  std::unique_ptr<Demo> demo_;
  std::unique_ptr<Fleetd> fleetd_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::TopologyService::Stub> topology_;
  std::unique_ptr<v1::InventoryService::Stub> inventory_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
};

}  // namespace fleet::bench

#endif  // FLEET_TESTS_BENCH_BENCH_SITE_H_
