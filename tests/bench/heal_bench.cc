// fleet_heal_bench: healing end to end over real processes (bench_site.h: fleetd in-process,
// polatis-emu and one emulated agent per chassis of a 160-GPU site). A READY ring of 8 GPUs
// whose request says `on_failure: {replace: true, within: 500ms} (--within-ms)` loses one member to
// a fault:
//   port    the emulator reports the member's rx egress FAILED
//   power   30 dB more loss at that egress (below fleetd's -20 dBm threshold)
//   device  an operator marks the member's device failed (AdminService.SetDeviceHealth)
//   agent   the agent of the member's chassis stops (the ring then has one member in each of
//           the 8 chassis, so the others are not hurt; fleetd replaces the member once its
//           links have not retrained for `within`, with a spare whose agent is there)
// Each `iterations` times, on a WatchAllocation stream opened before the fault: fault →
// DEGRADED (detection), DEGRADED → READY with the spare (the heal), and from the heal's stage
// timings its switch time (program + verify) and training time (retrain); the control part is
// the heal less those two and, for dim light and a lost agent (a link that will not retrain,
// not a failed part), less the policy's `within` that fleetd waits out before it replaces the
// member. For a lost agent `within` runs from fleetd's record of the loss, which the watch
// shows up to tens of ms later as DEGRADED, so its control part is counted from the fault:
// fault → READY less switch, training and `within`.
// Prints medians and p99s. Never fails on timing; exits 1 only when the site cannot be
// started or a heal does not happen.
//
//   fleet_heal_bench [--iterations 10] [--monitor-interval-ms 100] [--within-ms 500]
//                    [--switch-ms 25] [--training-ms 100] [--protocol tl1|rest]
#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/mutex_checks.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "tests/bench/bench_site.h"

namespace {

namespace v1 = fleet::v1;
using fleet::bench::DemoOptions;
using fleet::bench::kRings;
using fleet::bench::kRingSize;
using fleet::bench::Ms;
using fleet::bench::Site;
using fleet::bench::StageMs;
using fleet::bench::Summarize;
using fleet::bench::Summary;

// One heal's figures, in ms.
struct Heal {
  double detect = 0;        // Fault → DEGRADED on the watch.
  double heal = 0;          // DEGRADED → READY with the spare, on the watch.
  double switched = 0;      // The heal's program + verify stages.
  double trained = 0;       // The heal's retrain stage.
  double waited = 0;        // The policy's `within`, when fleetd waits it out.
  bool from_fault = false;  // `within` runs from the fault, not from DEGRADED.
  double control() const { return (from_fault ? detect : 0) + heal - switched - trained - waited; }
};

// The egress the circuit arriving at `device`'s O-NIC leaves the switch by.
absl::StatusOr<uint32_t> EgressInto(const v1::Allocation& a, const std::string& device) {
  for (const v1::Circuit& c : a.circuits()) {
    if (c.destination().onic() == device + "-n0") return c.cross_connects(0).egress();
  }
  return absl::NotFoundError(absl::StrCat("no circuit into ", device, " in ", a.id()));
}

absl::Status SetHealth(Site& site, const std::string& device, v1::DeviceHealth health) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::SetDeviceHealthRequest request;
  request.set_device(device);
  request.set_health(health);
  request.set_reason("fleet_heal_bench");
  v1::Device response;
  grpc::Status s = site.admin().SetDeviceHealth(&context, request, &response);
  return s.ok() ? absl::OkStatus() : absl::InternalError(s.error_message());
}

// Whether fleetd holds switch port `port` of ocs1 as well (no health record).
bool PortWell(Site& site, uint32_t port) {
  grpc::ClientContext context;
  v1::ListPortsRequest request;
  request.set_switch_id("ocs1");
  v1::ListPortsResponse response;
  if (!site.inventory().ListPorts(&context, request, &response).ok()) return false;
  for (const v1::SwitchPort& p : response.ports()) {
    if (p.ref().port() == port) {
      return p.oper_state() == v1::OPER_STATE_UNKNOWN || p.oper_state() == v1::OPER_STATE_UP;
    }
  }
  return false;
}

// The chassis of bench GPU `gpuN` (BenchInventory: 20 to a chassis).
std::string ChassisOf(const std::string& gpu) {
  int n = 0;
  if (!absl::SimpleAtoi(gpu.substr(3), &n)) return "";
  return absl::StrCat("pool-", (n - 1) / fleet::bench::kGpusPerChassis + 1);
}

// Injects `fault` on `member` of the READY ring `id` (whose rx egress is `egress`).
absl::Status Inject(Site& site, const std::string& fault, const std::string& member,
                    uint32_t egress) {
  if (fault == "port") {
    return site.Sim("PUT", absl::StrCat("/sim/v1/ports/", egress), R"({"failed":true})");
  }
  if (fault == "power") {
    return site.Sim("PUT", absl::StrCat("/sim/v1/ports/", egress), R"({"power_drop_db":30.0})");
  }
  if (fault == "agent") return site.StopAgent(ChassisOf(member));
  return SetHealth(site, member, v1::DEVICE_HEALTH_FAILED);
}

// One heal: a ring with the policy, READY; the fault; the watch until READY with the spare.
absl::StatusOr<Heal> OneHeal(Site& site, const std::string& fault, int ring,
                             absl::Duration within) {
  v1::FailurePolicy policy;
  policy.set_replace(true);
  *policy.mutable_within() = fleet::ToProtoDuration(within);
  policy.set_spares(v1::SPARE_SCOPE_ANY);
  // For an agent's loss, one member per chassis; else a ring of 8 consecutive GPUs.
  std::vector<std::string> members;
  for (int i = 1; i <= kRingSize; ++i) {
    members.push_back(
        fault == "agent"
            ? absl::StrCat("gpu", (i - 1) * fleet::bench::kGpusPerChassis + 1 + ring % 10)
            : absl::StrCat("gpu", kRingSize * ring + i));
  }
  ASSIGN_OR_RETURN(Site::Job job, site.Allocate(members, &policy, absl::StrCat(" ring ", ring)));
  ASSIGN_OR_RETURN(v1::Allocation ready, site.Get(job.id));
  const std::string member = members[3];
  ASSIGN_OR_RETURN(const uint32_t egress, EgressInto(ready, member));

  grpc::ClientContext watch_context;
  watch_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  v1::WatchAllocationRequest watch;
  watch.set_id(job.id);
  auto reader = site.topology().WatchAllocation(&watch_context, watch);
  v1::WatchAllocationResponse update;
  if (!reader->Read(&update)) return absl::UnavailableError("the watch did not start");
  const absl::Time fault_at = absl::Now();
  RETURN_IF_ERROR(Inject(site, fault, member, egress));
  absl::Time degraded_at = absl::InfiniteFuture(), healed_at = absl::InfiniteFuture();
  while (reader->Read(&update)) {
    const v1::Allocation& a = update.allocation();
    if (a.state() == v1::ALLOCATION_STATE_DEGRADED && degraded_at == absl::InfiniteFuture()) {
      degraded_at = absl::Now();
    }
    if (a.state() == v1::ALLOCATION_STATE_READY && a.replacements_size() > 0) {
      healed_at = absl::Now();
      break;
    }
    if (a.state() == v1::ALLOCATION_STATE_FAILED) {
      return absl::AbortedError(absl::StrCat(job.id, " FAILED: ", a.reason()));
    }
  }
  watch_context.TryCancel();
  (void)reader->Finish();
  if (healed_at == absl::InfiniteFuture()) {
    ASSIGN_OR_RETURN(v1::Allocation last, site.Get(job.id));
    return absl::DeadlineExceededError(
        absl::StrCat(job.id, " not healed after a ", fault, " fault: ", last.reason()));
  }
  ASSIGN_OR_RETURN(v1::Allocation healed, site.Get(job.id));
  Heal h;
  h.detect = Ms(degraded_at - fault_at);
  h.heal = Ms(healed_at - degraded_at);
  h.switched = StageMs(healed, "program") + StageMs(healed, "verify");
  h.trained = StageMs(healed, "retrain");
  // A failed port or device is replaced at once; dim light or a lost agent is a link that
  // will not retrain.
  h.waited = fault == "power" || fault == "agent" ? Ms(within) : 0;
  h.from_fault = fault == "agent";

  // Leave the site as it was: released, the fault cleared and seen cleared by the monitor.
  RETURN_IF_ERROR(site.Release(job.id));
  RETURN_IF_ERROR(site.Sim("DELETE", "/sim/v1/faults"));
  if (fault == "device") RETURN_IF_ERROR(SetHealth(site, member, v1::DEVICE_HEALTH_HEALTHY));
  if (fault == "agent") RETURN_IF_ERROR(site.AgentBack(ChassisOf(member)));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!PortWell(site, egress)) {
    if (absl::Now() > deadline) return absl::DeadlineExceededError("the port stays unwell");
    absl::SleepFor(absl::Milliseconds(20));
  }
  return h;
}

void Print(const std::string& fault, const std::vector<Heal>& heals) {
  auto column = [&](double (*of)(const Heal&)) {
    std::vector<double> v;
    for (const Heal& h : heals) v.push_back(of(h));
    return Summarize(std::move(v));
  };
  const std::pair<const char*, Summary> rows[] = {
      {"fault -> DEGRADED", column([](const Heal& h) { return h.detect; })},
      {"DEGRADED -> READY", column([](const Heal& h) { return h.heal; })},
      {"  switch (program+verify)", column([](const Heal& h) { return h.switched; })},
      {"  training (retrain)", column([](const Heal& h) { return h.trained; })},
      {"  waiting out `within`", column([](const Heal& h) { return h.waited; })},
      {"  control part", column([](const Heal& h) { return h.control(); })},
      {"fault -> READY", column([](const Heal& h) { return h.detect + h.heal; })},
  };
  std::printf("[%s] %zu heals\n", fault.c_str(), heals.size());
  for (const auto& [name, s] : rows) {
    std::printf("  %-26s median %8.3f ms   p99 %8.3f ms   max %8.3f ms\n", name, s.median, s.p99,
                s.max);
  }
  std::fflush(stdout);
}

absl::Status Run(int64_t iterations, int64_t monitor_ms, int64_t within_ms, int64_t switch_ms,
                 int64_t training_ms, const std::string& protocol) {
  DemoOptions options;
  options.protocol = protocol;
  options.switch_ms = static_cast<int>(switch_ms);
  options.training_ms = static_cast<int>(training_ms);
  options.inventory = fleet::bench::BenchInventory();
  ASSIGN_OR_RETURN(std::unique_ptr<Site> site, Site::Start(options, absl::Seconds(5), /*tls=*/false,
                                                           absl::Milliseconds(monitor_ms)));
  std::printf(
      "fleet_heal_bench: %s, monitor every %lld ms, within %lld ms, switching %lld ms, training "
      "%lld ms\n",
      protocol.c_str(), static_cast<long long>(monitor_ms), static_cast<long long>(within_ms),
      static_cast<long long>(switch_ms), static_cast<long long>(training_ms));
  int ring = 0;
  for (const std::string fault : {"port", "power", "device", "agent"}) {
    std::vector<Heal> heals;
    for (int64_t i = 0; i < iterations; ++i) {
      // Every other ring, so the spare (the best free GPU) is never a later ring's member.
      ASSIGN_OR_RETURN(Heal h, OneHeal(*site, fault, ring, absl::Milliseconds(within_ms)));
      ring = (ring + 2) % kRings;
      heals.push_back(h);
    }
    Print(fault, heals);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  fleet::ConfigureMutexChecks();  // As the daemons run (common/mutex_checks.h).
  int64_t iterations = 10, monitor_ms = 100, within_ms = 500, switch_ms = 25, training_ms = 100;
  std::string protocol = "tl1";
  fleet::FlagSet flags(
      "fleet_heal_bench [--iterations 10] [--monitor-interval-ms 100] [--within-ms 500] "
      "[--switch-ms 25] [--training-ms 100] [--protocol tl1|rest]",
      "Times heals of a ring with a spare: fleetd in-process, polatis-emu and agents.");
  flags.Int("iterations", &iterations, "heals timed per kind of fault");
  flags.Int("monitor-interval-ms", &monitor_ms, "fleetd's switch monitor interval");
  flags.Int("within-ms", &within_ms, "the rings' on_failure.within");
  flags.Int("switch-ms", &switch_ms, "the emulator's switching time per command");
  flags.Int("training-ms", &training_ms, "the agents' link training time");
  flags.String("protocol", &protocol, "how fleetd talks to the emulator: tl1 or rest");
  absl::StatusOr<std::vector<std::string>> rest =
      flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!rest.ok() || flags.help_requested()) {
    std::cerr << (rest.ok() ? flags.Help() : std::string(rest.status().message())) << "\n";
    return rest.ok() ? 0 : 2;
  }
  if (iterations < 1 || monitor_ms < 1 || within_ms < 1 || switch_ms < 0 || training_ms < 0) {
    std::cerr << "--iterations, --monitor-interval-ms and --within-ms must be at least 1, times "
                 "not negative\n"
              << flags.Help() << "\n";
    return 2;
  }
  fleet::SetMinLogLevel(fleet::LogLevel::kWarning);
  absl::Status status = Run(iterations, monitor_ms, within_ms, switch_ms, training_ms, protocol);
  if (!status.ok()) {
    std::cerr << "fleet_heal_bench: " << status << "\n";
    return 1;
  }
  return 0;
}
