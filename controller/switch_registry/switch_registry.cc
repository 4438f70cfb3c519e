#include "controller/switch_registry/switch_registry.h"

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/thread_name.h"

namespace fleet::switch_registry {
namespace {

// Marks a refusal by the commit point's fence as a driver's change gate returns it, so the
// command it stopped is not taken for a switch that failed to answer.
constexpr char kFenceRefusal[] = "fleet.switch_registry/fence-refused";

bool RefusedByFence(const absl::Status& status) {
  return status.GetPayload(kFenceRefusal).has_value();
}

// A driver whose every command is counted, timed and marks its switch up or down in the
// metrics: the one place all of fleetd's switch traffic passes. A command that changes the
// switch passes the commit point first; refused, nothing is sent.
class MeasuredSwitch : public switch_adapters::OpticalSwitch {
 public:
  MeasuredSwitch(std::unique_ptr<switch_adapters::OpticalSwitch> driver, std::string switch_id,
                 std::string protocol, metrics::ControllerMetrics& metrics,
                 const CommitPoint* commit_point)
      : driver_(std::move(driver)),
        switch_id_(std::move(switch_id)),
        protocol_(std::move(protocol)),
        metrics_(metrics),
        commit_point_(commit_point) {}

  absl::StatusOr<switch_adapters::SwitchIdentity> Identity() override {
    return Measure("identity", [&] { return driver_->Identity(); });
  }
  absl::StatusOr<std::vector<switch_adapters::CrossConnect>> ReadCrossConnects() override {
    return Measure("read_cross_connects", [&] { return driver_->ReadCrossConnects(); });
  }
  absl::StatusOr<std::vector<switch_adapters::PortState>> ReadPorts() override {
    return Measure("read_ports", [&] { return driver_->ReadPorts(); });
  }
  absl::StatusOr<std::vector<switch_adapters::PortPower>> ReadPower(
      const std::vector<uint32_t>& ports) override {
    return Measure("read_power", [&] { return driver_->ReadPower(ports); });
  }
  absl::Status SetShutters(const std::vector<uint32_t>& ports, bool open) override {
    RETURN_IF_ERROR(Pass());
    return Measure("set_shutters", [&] { return driver_->SetShutters(ports, open); });
  }
  switch_adapters::ApplyResult Apply(const switch_adapters::CrossConnectBatch& batch) override {
    if (absl::Status passed = Pass(); !passed.ok()) {
      switch_adapters::ApplyResult refused;
      refused.status = std::move(passed);
      return refused;
    }
    return Measure("apply", [&] { return driver_->Apply(batch); });
  }

 private:
  static const absl::Status& StatusOf(const absl::Status& s) { return s; }
  template <typename T>
  static const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
    return s.status();
  }
  static const absl::Status& StatusOf(const switch_adapters::ApplyResult& r) { return r.status; }

  absl::Status Pass() const {
    return commit_point_ != nullptr ? commit_point_->Pass(Effect::kSwitchCommand)
                                    : absl::OkStatus();
  }

  template <typename Command>
  auto Measure(const std::string& operation, Command command) -> decltype(command()) {
    const absl::Time start = absl::Now();
    auto result = command();
    // A change the fence stopped inside the driver says nothing of the switch (whose state
    // metrics a deposed leader must not mark down); what was sent before it still counts.
    if (!RefusedByFence(StatusOf(result))) {
      metrics_.SwitchCommand(switch_id_, protocol_, operation, absl::Now() - start,
                             StatusOf(result).code());
    }
    return result;
  }

  const std::unique_ptr<switch_adapters::OpticalSwitch> driver_;
  const std::string switch_id_;
  const std::string protocol_;
  metrics::ControllerMetrics& metrics_;
  const CommitPoint* const commit_point_;
};

// "tl1" for SWITCH_PROTOCOL_TL1: the protocol as the metrics and messages name it.
std::string ProtocolName(v1::SwitchProtocol protocol) {
  return absl::AsciiStrToLower(
      absl::StripPrefix(v1::SwitchProtocol_Name(protocol), "SWITCH_PROTOCOL_"));
}

// What changes how `sw` is reached: a driver (or probe) for another key is another.
std::string ConnectionKey(const v1::Switch& sw) {
  return absl::StrCat(sw.protocol(), "|", sw.address(), "|", sw.management_port(), "|",
                      sw.ca_bundle(), "|", sw.insecure_http());
}

// A probe that got no answer from `sw`, naming where it was asked and why.
SwitchRegistry::Probe Unreachable(const v1::Switch& sw, const absl::Status& why) {
  SwitchRegistry::Probe probe;
  probe.unreachable = true;
  probe.status = absl::UnavailableError(
      absl::StrCat("unreachable at ", sw.address(),
                   sw.management_port() == 0 ? "" : absl::StrCat(":", sw.management_port()), " (",
                   ProtocolName(sw.protocol()), "): ", why.message()));
  return probe;
}

// A failed read of `sw`: unreachable when it did not answer (the driver's UNAVAILABLE), else
// what it answered (a refused login, say).
SwitchRegistry::Probe Failed(const v1::Switch& sw, const absl::Status& why) {
  if (why.code() == absl::StatusCode::kUnavailable ||
      why.code() == absl::StatusCode::kDeadlineExceeded) {
    return Unreachable(sw, why);
  }
  SwitchRegistry::Probe probe;
  probe.status = why;
  return probe;
}

}  // namespace

SwitchRegistry::SwitchRegistry(std::map<std::string, SwitchCredentials> credentials,
                               std::string credentials_source, metrics::ControllerMetrics* metrics,
                               const CommitPoint* commit_point)
    : metrics_(metrics != nullptr ? *metrics : metrics::ControllerMetrics::Discarded()),
      commit_point_(commit_point),
      before_change_(commit_point == nullptr
                         ? switch_adapters::ChangeGate()
                         : [commit_point] {
                             absl::Status passed = commit_point->Pass(Effect::kSwitchCommand);
                             if (!passed.ok()) passed.SetPayload(kFenceRefusal, absl::Cord());
                             return passed;
                           }),
      credentials_(std::move(credentials)),
      credentials_source_(std::move(credentials_source)) {}

std::string SwitchRegistry::CredentialsFile(const std::string& switch_id) const {
  return credentials_.contains(switch_id) ? credentials_source_ : "";
}

void SwitchRegistry::RegisterDriver(v1::SwitchProtocol protocol, DriverFactory factory) {
  absl::MutexLock lock(&mu_);
  factories_[protocol] = std::move(factory);
}

absl::StatusOr<switch_adapters::OpticalSwitch*> SwitchRegistry::Driver(const v1::Switch& sw) {
  auto creds = credentials_.find(sw.id());
  if (creds == credentials_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no credentials for switch ", sw.id(), " in ",
                     credentials_source_.empty() ? "(no switch credentials file configured)"
                                                 : credentials_source_));
  }
  // Whatever changes how the switch is reached gets a new driver.
  const std::string key = ConnectionKey(sw);
  absl::MutexLock lock(&mu_);
  Entry& entry = entries_[sw.id()];
  if (entry.driver == nullptr || entry.key != key) {
    auto factory = factories_.find(sw.protocol());
    if (factory == factories_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "switch ", sw.id(), ": no driver for protocol ", ProtocolName(sw.protocol())));
    }
    absl::StatusOr<std::unique_ptr<switch_adapters::OpticalSwitch>> driver =
        factory->second(sw, creds->second, before_change_);
    if (!driver.ok()) return driver.status();
    owned_.push_back(std::make_unique<MeasuredSwitch>(
        *std::move(driver), sw.id(), ProtocolName(sw.protocol()), metrics_, commit_point_));
    entry = Entry{key, owned_.back().get()};
  }
  return entry.driver;
}

SwitchRegistry::~SwitchRegistry() {
  absl::MutexLock lock(&probes_mu_);
  for (auto& [id, run] : probes_) {
    if (run->thread.joinable()) run->thread.join();
  }
}

SwitchRegistry::Probe SwitchRegistry::ProbeSwitch(const v1::Switch& sw) {
  Probe probe;
  absl::StatusOr<switch_adapters::OpticalSwitch*> driver = Driver(sw);
  if (!driver.ok()) {
    probe.status = driver.status();
    return probe;
  }
  absl::StatusOr<switch_adapters::SwitchIdentity> id = (*driver)->Identity();
  if (!id.ok()) return Failed(sw, id.status());
  absl::StatusOr<std::vector<switch_adapters::CrossConnect>> xs = (*driver)->ReadCrossConnects();
  if (!xs.ok()) return Failed(sw, xs.status());
  probe.description = absl::StrCat(id->vendor, " ", id->model, " SN ", id->serial, ", ", xs->size(),
                                   " cross-connects");
  if (id->ingress_ports != sw.ingress_ports() || id->egress_ports != sw.egress_ports()) {
    probe.status = absl::FailedPreconditionError(
        absl::StrCat("switch ", sw.id(), " reports ", id->ingress_ports, "x", id->egress_ports,
                     " ports but inventory says ", sw.ingress_ports(), "x", sw.egress_ports()));
  }
  return probe;
}

std::vector<SwitchRegistry::Probe> SwitchRegistry::ProbeSwitches(
    const std::vector<v1::Switch>& switches, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::shared_ptr<ProbeRun>> runs;
  {
    absl::MutexLock lock(&probes_mu_);
    // Probes that have answered are let go: their threads are ending, if not ended.
    for (auto it = probes_.begin(); it != probes_.end();) {
      bool done;
      {
        absl::MutexLock run_lock(&it->second->mu);
        done = it->second->done;
      }
      if (!done) {
        ++it;
        continue;
      }
      it->second->thread.join();
      it = probes_.erase(it);
    }
    for (const v1::Switch& sw : switches) {
      // By how the switch is reached too: a probe still waiting on its old address says
      // nothing of the new one.
      std::shared_ptr<ProbeRun>& run = probes_[absl::StrCat(sw.id(), "|", ConnectionKey(sw))];
      if (run != nullptr) {  // Still waiting on the switch: wait for that one.
        runs.push_back(run);
        continue;
      }
      run = std::make_shared<ProbeRun>();
      run->thread = std::thread([this, sw, run = run] {
        NameThisThread("fleet-probe");
        Probe probe = ProbeSwitch(sw);
        absl::MutexLock run_lock(&run->mu);
        run->result = std::move(probe);
        run->done = true;
      });
      runs.push_back(run);
    }
  }
  std::vector<Probe> out;
  for (size_t i = 0; i < switches.size(); ++i) {
    ProbeRun& run = *runs[i];
    absl::MutexLock run_lock(&run.mu);
    if (run.mu.AwaitWithDeadline(absl::Condition(&run.done), deadline)) {
      out.push_back(run.result);
    } else {
      out.push_back(
          Unreachable(switches[i], absl::DeadlineExceededError(absl::StrCat(
                                       "no answer within ", absl::FormatDuration(timeout)))));
    }
  }
  return out;
}

}  // namespace fleet::switch_registry
