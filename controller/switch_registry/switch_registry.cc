#include "controller/switch_registry/switch_registry.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace fleet::switch_registry {
namespace {

// A driver whose every command is counted, timed and marks its switch up or down in the
// metrics: the one place all of fleetd's switch traffic passes.
class MeasuredSwitch : public switch_adapters::OpticalSwitch {
 public:
  MeasuredSwitch(std::unique_ptr<switch_adapters::OpticalSwitch> driver, std::string switch_id,
                 std::string protocol, metrics::ControllerMetrics& metrics)
      : driver_(std::move(driver)),
        switch_id_(std::move(switch_id)),
        protocol_(std::move(protocol)),
        metrics_(metrics) {}

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
    return Measure("set_shutters", [&] { return driver_->SetShutters(ports, open); });
  }
  switch_adapters::ApplyResult Apply(const switch_adapters::CrossConnectBatch& batch) override {
    return Measure("apply", [&] { return driver_->Apply(batch); });
  }

 private:
  static absl::StatusCode CodeOf(const absl::Status& s) { return s.code(); }
  template <typename T>
  static absl::StatusCode CodeOf(const absl::StatusOr<T>& s) {
    return s.status().code();
  }
  static absl::StatusCode CodeOf(const switch_adapters::ApplyResult& r) { return r.status.code(); }

  template <typename Command>
  auto Measure(const std::string& operation, Command command) -> decltype(command()) {
    const absl::Time start = absl::Now();
    auto result = command();
    metrics_.SwitchCommand(switch_id_, protocol_, operation, absl::Now() - start, CodeOf(result));
    return result;
  }

  const std::unique_ptr<switch_adapters::OpticalSwitch> driver_;
  const std::string switch_id_;
  const std::string protocol_;
  metrics::ControllerMetrics& metrics_;
};

// "tl1" for SWITCH_PROTOCOL_TL1: the protocol as the metrics and messages name it.
std::string ProtocolName(v1::SwitchProtocol protocol) {
  return absl::AsciiStrToLower(
      absl::StripPrefix(v1::SwitchProtocol_Name(protocol), "SWITCH_PROTOCOL_"));
}

}  // namespace

SwitchRegistry::SwitchRegistry(std::map<std::string, SwitchCredentials> credentials,
                               std::string credentials_source, metrics::ControllerMetrics* metrics)
    : metrics_(metrics != nullptr ? *metrics : metrics::ControllerMetrics::Discarded()),
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
  const std::string key = absl::StrCat(sw.protocol(), "|", sw.address(), "|", sw.management_port(),
                                       "|", sw.ca_bundle(), "|", sw.insecure_http());
  absl::MutexLock lock(&mu_);
  Entry& entry = entries_[sw.id()];
  if (entry.driver == nullptr || entry.key != key) {
    auto factory = factories_.find(sw.protocol());
    if (factory == factories_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "switch ", sw.id(), ": no driver for protocol ", ProtocolName(sw.protocol())));
    }
    absl::StatusOr<std::unique_ptr<switch_adapters::OpticalSwitch>> driver =
        factory->second(sw, creds->second);
    if (!driver.ok()) return driver.status();
    owned_.push_back(std::make_unique<MeasuredSwitch>(*std::move(driver), sw.id(),
                                                      ProtocolName(sw.protocol()), metrics_));
    entry = Entry{key, owned_.back().get()};
  }
  return entry.driver;
}

SwitchRegistry::Probe SwitchRegistry::ProbeSwitch(const v1::Switch& sw) {
  Probe probe;
  absl::StatusOr<switch_adapters::OpticalSwitch*> driver = Driver(sw);
  if (!driver.ok()) {
    probe.status = driver.status();
    return probe;
  }
  absl::StatusOr<switch_adapters::SwitchIdentity> id = (*driver)->Identity();
  if (!id.ok()) {
    probe.status = id.status();
    return probe;
  }
  absl::StatusOr<std::vector<switch_adapters::CrossConnect>> xs = (*driver)->ReadCrossConnects();
  if (!xs.ok()) {
    probe.status = xs.status();
    return probe;
  }
  probe.description = absl::StrCat(id->vendor, " ", id->model, " SN ", id->serial, ", ", xs->size(),
                                   " cross-connects");
  if (id->ingress_ports != sw.ingress_ports() || id->egress_ports != sw.egress_ports()) {
    probe.status = absl::FailedPreconditionError(
        absl::StrCat("switch ", sw.id(), " reports ", id->ingress_ports, "x", id->egress_ports,
                     " ports but inventory says ", sw.ingress_ports(), "x", sw.egress_ports()));
  }
  return probe;
}

}  // namespace fleet::switch_registry
