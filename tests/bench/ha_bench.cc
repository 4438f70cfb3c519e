// fleet_ha_bench: what replication on etcd costs and how fast a replica takes over
// (docs/ha.md), on a real three-member etcd cluster (Debian's etcd-server, started here on
// ports chosen at run time) and polatis-emu. Prints:
//   1. the latency a replicated store adds to a change: request -> READY of an 8-GPU ring at
//      0 ms physics, and KeepAlive (one store write), on the engine bench's site with fleetd
//      in-process, single and replicated (one replica leading), in alternating blocks (single,
//      replicated, single, replicated) in one run;
//   2. takeover after SIGKILL: two fleetd processes, the leader killed, the time until the
//      other answers gRPC's health check of fleet.v1.Leader SERVING (it has caught up, read
//      the switch and takes changes), over --takeovers runs, each killed replica started
//      again as a follower;
//   3. handover after SIGTERM (the leader resigns): the same measure;
//   4. with --soak-minutes N, a soak: changes one after another on a replicated leader with a
//      follower process; the follower's lag per change, and each minute etcd's database size
//      and the log's kept entries (snapshots and trims keep both flat).
// Never fails on timing; exits 1 only when the site cannot be started or a step fails.
//
//   fleet_ha_bench [--iterations 40] [--blocks 2] [--takeovers 10] [--lease-seconds 2]
//                  [--soak-minutes 0]
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/flags.h"
#include "common/leader_health.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "controller/etcd/replicated_log.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/bench/bench_site.h"
#include "tests/etcd/etcd_cluster.h"
#include "tests/integration/subprocess.h"

namespace fleet::bench {
namespace {

// fleetd's config for a replica of the bench's etcd cluster.
void Replicate(const testing::EtcdCluster& etcd, const std::string& advertise, absl::Duration lease,
               FleetdConfig& config) {
  const etcd::EtcdOptions options = etcd.ClientOptions();
  config.etcd = absl::StrJoin(options.endpoints, ",");
  config.etcd_ca_file = options.ca_file;
  config.etcd_cert_file = options.cert_file;
  config.etcd_key_file = options.key_file;
  config.advertise = advertise;
  config.leader_lease = lease;
  config.leader_margin = absl::Milliseconds(500);
}

// The bench site (BenchInventory) with 0 ms switching and training: what replication adds is
// all that is timed.
DemoOptions InstantBenchSite() {
  DemoOptions options;
  options.inventory = BenchInventory();
  options.switch_ms = 0;
  options.training_ms = 0;
  return options;
}

struct Latencies {
  std::vector<double> ready_ms;
  std::vector<double> keep_alive_ms;
};

// `iterations` rings requested and released one at a time, and as many KeepAlives of a live
// ring, on `site`.
absl::Status Measure(Site& site, int iterations, Latencies& out) {
  ASSIGN_OR_RETURN(Site::Job held, site.Allocate(1));
  for (int i = 0; i < iterations; ++i) {
    ASSIGN_OR_RETURN(Site::Job job, site.Allocate(0));
    out.ready_ms.push_back(Ms(job.latency));
    RETURN_IF_ERROR(site.Release(job.id));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::KeepAliveRequest request;
    request.set_id(held.id);
    v1::KeepAliveResponse response;
    const absl::Time start = absl::Now();
    if (grpc::Status s = site.topology().KeepAlive(&context, request, &response); !s.ok()) {
      return absl::InternalError(absl::StrCat("KeepAlive: ", s.error_message()));
    }
    out.keep_alive_ms.push_back(Ms(absl::Now() - start));
  }
  return site.Release(held.id);
}

absl::Status AddedLatency(int iterations, int blocks) {
  ASSIGN_OR_RETURN(std::unique_ptr<testing::EtcdCluster> etcd,
                   testing::EtcdCluster::Start(3, testing::FreshDirectory("ha-bench-etcd")));
  const DemoOptions options = InstantBenchSite();
  Latencies single, replicated;
  for (int block = 0; block < blocks; ++block) {
    {
      ASSIGN_OR_RETURN(std::unique_ptr<Site> site, Site::Start(options));
      RETURN_IF_ERROR(Measure(*site, iterations, single));
    }
    {
      // A fresh site each block, with a log of its own (a new prefix) for its new store.
      const std::string prefix = absl::StrCat("bench", block, "/");
      ASSIGN_OR_RETURN(std::unique_ptr<Site> site,
                       Site::Start(options, absl::Seconds(5), false, absl::ZeroDuration(),
                                   [&](FleetdConfig& config) {
                                     Replicate(*etcd, "127.0.0.1:1", absl::Seconds(2), config);
                                     config.etcd_prefix = prefix;
                                   }));
      RETURN_IF_ERROR(Measure(*site, iterations, replicated));
    }
  }
  // The floor: one write to etcd (a quorum's fsync), what every replicated commit waits for.
  ASSIGN_OR_RETURN(std::unique_ptr<etcd::EtcdClient> client,
                   etcd::EtcdClient::Connect(etcd->ClientOptions()));
  std::vector<double> put_ms;
  for (int i = 0; i < iterations; ++i) {
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(client->Put("bench/put", std::string(512, 'x')).status());
    put_ms.push_back(Ms(absl::Now() - start));
  }
  const Summary s_ready = Summarize(single.ready_ms), r_ready = Summarize(replicated.ready_ms);
  const Summary s_keep = Summarize(single.keep_alive_ms),
                r_keep = Summarize(replicated.keep_alive_ms);
  std::printf("[1] added latency of a replicated store (%d samples each, %d blocks)\n",
              iterations * blocks, blocks);
  std::printf("    %-28s %10s %10s %10s\n", "", "single", "replicated", "added");
  std::printf("    %-28s %7.2f ms %7.2f ms %7.2f ms\n", "request -> READY median", s_ready.median,
              r_ready.median, r_ready.median - s_ready.median);
  std::printf("    %-28s %7.2f ms %7.2f ms %7.2f ms\n", "request -> READY p99", s_ready.p99,
              r_ready.p99, r_ready.p99 - s_ready.p99);
  std::printf("    %-28s %7.2f ms %7.2f ms %7.2f ms\n", "KeepAlive (one write) median",
              s_keep.median, r_keep.median, r_keep.median - s_keep.median);
  std::printf("    %-28s %7.2f ms (a quorum's fsync: the floor of each replicated commit)\n",
              "etcd Put median", Median(put_ms));
  std::printf("    target: at most 1.5 ms added to request -> READY\n");
  return absl::OkStatus();
}

// Two fleetd processes replicating on `etcd`, on the emulator of `demo`.
class Replicas {
 public:
  Replicas(const testing::EtcdCluster& etcd, const FleetdConfig& demo_config, absl::Duration lease)
      : etcd_(etcd), demo_config_(demo_config), lease_(lease) {
    for (int i = 0; i < 2; ++i) {
      addresses_.push_back(absl::StrCat("127.0.0.1:", testing::PortOutsideEphemeralRange()));
      state_dirs_.push_back(testing::FreshDirectory(absl::StrCat("ha-bench-replica", i)));
    }
    processes_.resize(2);
  }

  absl::Status Start(int i) {
    FleetdConfig config;
    Replicate(etcd_, addresses_[i], lease_, config);
    std::vector<std::string> argv = {testing::BinaryPath("fleetd"),
                                     "--insecure",
                                     "--state-dir",
                                     state_dirs_[i],
                                     "--inventory",
                                     demo_config_.inventory,
                                     "--switch-credentials",
                                     demo_config_.switch_credentials,
                                     "--grpc-port",
                                     addresses_[i].substr(addresses_[i].rfind(':') + 1),
                                     "--metrics-port",
                                     "0",
                                     "--log-level",
                                     "warning",
                                     "--monitor-interval-ms",
                                     "0",
                                     "--etcd",
                                     config.etcd,
                                     "--etcd-ca",
                                     config.etcd_ca_file,
                                     "--etcd-cert",
                                     config.etcd_cert_file,
                                     "--etcd-key",
                                     config.etcd_key_file,
                                     "--advertise",
                                     addresses_[i],
                                     "--leader-lease-seconds",
                                     std::to_string(absl::ToInt64Seconds(lease_)),
                                     "--leader-margin-ms",
                                     "500"};
    ASSIGN_OR_RETURN(processes_[i], testing::Daemon::Start(argv));
    return processes_[i]->WaitForLine("grpc: ").status();
  }

  // Whether replica `i` answers the leader health check SERVING.
  bool Leads(int i) {
    auto stub = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel(addresses_[i], grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(200)));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(kLeaderHealthService);
    grpc::health::v1::HealthCheckResponse response;
    return stub->Check(&context, request, &response).ok() &&
           response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  }

  // The replica that leads, waiting up to `timeout`; the time it took.
  absl::StatusOr<std::pair<int, absl::Duration>> AwaitLeader(absl::Duration timeout,
                                                             int only = -1) {
    const absl::Time start = absl::Now();
    while (absl::Now() - start < timeout) {
      for (int i = 0; i < 2; ++i) {
        if ((only < 0 || i == only) && processes_[i] && Leads(i)) {
          return std::make_pair(i, absl::Now() - start);
        }
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    return absl::DeadlineExceededError("no replica leads");
  }

  absl::Status Stop(int i, int signal) {
    RETURN_IF_ERROR(processes_[i]->Stop(signal).status());
    processes_[i].reset();
    return absl::OkStatus();
  }

 private:
  const testing::EtcdCluster& etcd_;
  const FleetdConfig& demo_config_;
  const absl::Duration lease_;
  std::vector<std::string> addresses_;
  std::vector<std::string> state_dirs_;
  std::vector<std::unique_ptr<testing::Daemon>> processes_;
};

absl::Status Takeovers(int runs, absl::Duration lease) {
  ASSIGN_OR_RETURN(std::unique_ptr<testing::EtcdCluster> etcd,
                   testing::EtcdCluster::Start(3, testing::FreshDirectory("ha-bench-etcd")));
  FleetdConfig demo_config;
  demo_config.state_dir = testing::FreshDirectory("ha-bench-demo");
  demo_config.insecure = true;
  const DemoOptions options = InstantBenchSite();
  const std::string binary_dir =
      std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  ASSIGN_OR_RETURN(std::unique_ptr<Demo> demo, Demo::Prepare(demo_config, binary_dir, options));
  Replicas replicas(*etcd, demo_config, lease);
  RETURN_IF_ERROR(replicas.Start(0));
  RETURN_IF_ERROR(replicas.AwaitLeader(absl::Seconds(30)).status());
  RETURN_IF_ERROR(replicas.Start(1));
  for (const auto& [signal, name] : {std::pair<int, const char*>{SIGKILL, "takeover after SIGKILL"},
                                     {SIGTERM, "handover after SIGTERM"}}) {
    std::vector<double> ms;
    for (int run = 0; run < runs; ++run) {
      ASSIGN_OR_RETURN(auto leader, replicas.AwaitLeader(absl::Seconds(30)));
      const int other = 1 - leader.first;
      const absl::Time lost = absl::Now();
      RETURN_IF_ERROR(replicas.Stop(leader.first, signal));
      ASSIGN_OR_RETURN(auto taken, replicas.AwaitLeader(absl::Seconds(30), other));
      ms.push_back(Ms(absl::Now() - lost));
      (void)taken;
      RETURN_IF_ERROR(replicas.Start(leader.first));  // Back, as a follower.
    }
    const Summary s = Summarize(ms);
    std::printf("[%s] %s, %d runs, %s lease: median %.0f ms, p99 %.0f ms, max %.0f ms\n",
                signal == SIGKILL ? "2" : "3", name, runs, absl::FormatDuration(lease).c_str(),
                s.median, s.p99, s.max);
  }
  std::printf(
      "    targets: takeover median <= 2.5 s and p99 <= 4 s with a 2 s lease; handover "
      "<= 0.5 s\n");
  return absl::OkStatus();
}

// A series of the /metrics at `address` (NAME or NAME{LABELS}); -1 when it cannot be read.
double Scrape(const std::string& address, const std::string& name) {
  absl::StatusOr<std::string> text = testing::HttpGet(address, "/metrics");
  if (!text.ok()) return -1;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    double value = 0;
    if (absl::ConsumePrefix(&line, name + " ") && absl::SimpleAtod(line, &value)) return value;
  }
  return -1;
}

// [4] A soak: rings requested and released one after another for `minutes` on a replicated
// leader (in-process), with a follower process on the same log. For each change, how long
// the follower took to apply the leader's log up to it; each minute, etcd's database size and
// the log's bounds, which snapshots and trims must keep flat.
absl::Status Soak(int minutes, absl::Duration lease) {
  ASSIGN_OR_RETURN(std::unique_ptr<testing::EtcdCluster> etcd,
                   testing::EtcdCluster::Start(3, testing::FreshDirectory("ha-bench-etcd")));
  const DemoOptions options = InstantBenchSite();
  FleetdConfig leader_config;
  ASSIGN_OR_RETURN(std::unique_ptr<Site> site,
                   Site::Start(options, absl::Seconds(5), false, absl::ZeroDuration(),
                               [&](FleetdConfig& config) {
                                 Replicate(*etcd, "127.0.0.1:1", lease, config);
                                 leader_config = config;
                               }));
  // The follower: a fleetd process on the same site and log, never leading while the
  // in-process replica lives.
  const std::string follower_dir = testing::FreshDirectory("ha-bench-follower");
  ASSIGN_OR_RETURN(std::unique_ptr<testing::Daemon> follower,
                   testing::Daemon::Start({testing::BinaryPath("fleetd"),
                                           "--insecure",
                                           "--state-dir",
                                           follower_dir,
                                           "--inventory",
                                           leader_config.inventory,
                                           "--switch-credentials",
                                           leader_config.switch_credentials,
                                           "--grpc-port",
                                           "0",
                                           "--metrics-port",
                                           "0",
                                           "--log-level",
                                           "warning",
                                           "--etcd",
                                           leader_config.etcd,
                                           "--etcd-ca",
                                           leader_config.etcd_ca_file,
                                           "--etcd-cert",
                                           leader_config.etcd_cert_file,
                                           "--etcd-key",
                                           leader_config.etcd_key_file,
                                           "--advertise",
                                           "127.0.0.1:2",
                                           "--leader-lease-seconds",
                                           std::to_string(absl::ToInt64Seconds(lease)),
                                           "--leader-margin-ms",
                                           "500"}));
  RETURN_IF_ERROR(follower->WaitForLine("grpc: ").status());
  ASSIGN_OR_RETURN(const std::string follower_metrics, follower->WaitForLine("metrics: "));
  ASSIGN_OR_RETURN(std::unique_ptr<etcd::EtcdClient> client,
                   etcd::EtcdClient::Connect(etcd->ClientOptions()));
  etcd::ReplicatedLog log(client.get());

  std::printf(
      "[4] soak: %d min of rings requested and released on a replicated leader, one\n"
      "    follower process; follower lag = a change READY on the leader until the\n"
      "    follower has applied the log up to it\n",
      minutes);
  std::printf("    %6s %8s %12s %12s %14s %14s %18s\n", "minute", "changes", "lag median",
              "lag p99", "etcd db", "etcd db in use", "log entries kept");
  std::vector<double> all_lag_ms;
  int64_t changes = 0;
  const absl::Time start = absl::Now();
  for (int minute = 1; minute <= minutes; ++minute) {
    std::vector<double> lag_ms;
    while (absl::Now() - start < absl::Minutes(minute)) {
      ASSIGN_OR_RETURN(Site::Job job, site->Allocate(0));
      const absl::Time ready = absl::Now();
      // The log's head now holds every entry of the ring's way to READY.
      ASSIGN_OR_RETURN(const etcd::LogBounds bounds, log.Bounds());
      while (Scrape(follower_metrics, "fleet_ha_log_position") < static_cast<double>(bounds.head)) {
        if (absl::Now() - ready > absl::Seconds(30)) {
          return absl::DeadlineExceededError("the follower did not apply the log for 30 s");
        }
        absl::SleepFor(absl::Milliseconds(5));
      }
      lag_ms.push_back(Ms(absl::Now() - ready));
      RETURN_IF_ERROR(site->Release(job.id));
      changes += 2;
    }
    int64_t db = 0, in_use = 0;
    for (const etcd::MemberStatus& member : client->Members()) {
      db = std::max(db, member.db_size_bytes);
      in_use = std::max(in_use, member.db_size_in_use_bytes);
    }
    absl::StatusOr<etcd::LogBounds> bounds = log.Bounds();
    const std::string kept = bounds.ok() ? absl::StrCat(bounds->first, "..", bounds->head) : "?";
    const Summary lag = Summarize(lag_ms);
    std::printf("    %6d %8lld %9.1f ms %9.1f ms %11.1f MiB %11.1f MiB %18s\n", minute,
                static_cast<long long>(changes), lag.median, lag.p99, db / 1048576.0,
                in_use / 1048576.0, kept.c_str());
    std::fflush(stdout);
    all_lag_ms.insert(all_lag_ms.end(), lag_ms.begin(), lag_ms.end());
  }
  const Summary lag = Summarize(all_lag_ms);
  std::printf("    follower lag over the soak: median %.1f ms, p99 %.1f ms, max %.1f ms\n",
              lag.median, lag.p99, lag.max);
  return absl::OkStatus();
}

}  // namespace
}  // namespace fleet::bench

int main(int argc, char** argv) {
  int64_t iterations = 40, blocks = 2, takeovers = 10, lease_seconds = 2, soak_minutes = 0;
  fleet::FlagSet flags(
      "fleet_ha_bench [--iterations 40] [--blocks 2] [--takeovers 10] [--lease-seconds 2] "
      "[--soak-minutes 0]",
      "Times replicated fleetd on a real etcd cluster: added latency, takeover, handover.");
  flags.Int("iterations", &iterations, "[1] rings per block and kind");
  flags.Int("blocks", &blocks, "[1] alternating blocks of single and replicated");
  flags.Int("takeovers", &takeovers, "[2], [3] runs of each");
  flags.Int("lease-seconds", &lease_seconds, "[2], [3], [4] the leader lease");
  flags.Int("soak-minutes", &soak_minutes, "[4] minutes of the soak; 0: no soak");
  absl::StatusOr<std::vector<std::string>> rest =
      flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!rest.ok() || flags.help_requested()) {
    std::cerr << (rest.ok() ? flags.Help() : std::string(rest.status().message())) << "\n";
    return rest.ok() ? 0 : 2;
  }
  if (iterations < 1 || blocks < 1 || takeovers < 1 || lease_seconds < 2 || soak_minutes < 0) {
    std::cerr << "counts must be at least 1, the lease at least 2 s\n" << flags.Help() << "\n";
    return 2;
  }
  fleet::SetMinLogLevel(fleet::LogLevel::kWarning);
  if (absl::Status can = fleet::testing::EtcdCluster::CanStart(); !can.ok()) {
    std::cerr << "fleet_ha_bench: " << can.message() << "\n";
    return 1;
  }
  absl::Status status =
      fleet::bench::AddedLatency(static_cast<int>(iterations), static_cast<int>(blocks));
  if (status.ok()) {
    status = fleet::bench::Takeovers(static_cast<int>(takeovers), absl::Seconds(lease_seconds));
  }
  if (status.ok() && soak_minutes > 0) {
    status = fleet::bench::Soak(static_cast<int>(soak_minutes), absl::Seconds(lease_seconds));
  }
  if (!status.ok()) {
    std::cerr << "fleet_ha_bench: " << status << "\n";
    return 1;
  }
  return 0;
}
