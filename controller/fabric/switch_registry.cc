#include "controller/fabric/switch_registry.h"

#include "absl/strings/str_cat.h"

namespace fleet::fabric {

SwitchRegistry::SwitchRegistry(Factory factory,
                               std::map<std::string, polatis::Credentials> credentials,
                               std::string credentials_source)
    : factory_(std::move(factory)),
      credentials_(std::move(credentials)),
      credentials_source_(std::move(credentials_source)) {}

absl::StatusOr<switches::OpticalSwitch*> SwitchRegistry::Driver(const v1::Switch& sw) {
  auto creds = credentials_.find(sw.id());
  if (creds == credentials_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no credentials for switch ", sw.id(), " in ",
                     credentials_source_.empty() ? "(no switch credentials file configured)"
                                                 : credentials_source_));
  }
  const std::string key = absl::StrCat(sw.protocol(), "|", sw.address(), "|", sw.management_port());
  absl::MutexLock lock(&mu_);
  Entry& entry = entries_[sw.id()];
  if (entry.driver == nullptr || entry.key != key) {
    polatis::PolatisSwitchOptions options;
    options.name = sw.id();
    options.protocol = sw.protocol() == v1::SWITCH_PROTOCOL_REST ? polatis::Protocol::kRest
                                                                 : polatis::Protocol::kTl1;
    options.host = sw.address();
    options.port = static_cast<uint16_t>(sw.management_port());
    options.credentials = creds->second;
    owned_.push_back(factory_(options));
    entry = Entry{key, owned_.back().get()};
  }
  return entry.driver;
}

SwitchRegistry::Probe SwitchRegistry::ProbeSwitch(const v1::Switch& sw) {
  Probe probe;
  absl::StatusOr<switches::OpticalSwitch*> driver = Driver(sw);
  if (!driver.ok()) {
    probe.status = driver.status();
    return probe;
  }
  absl::StatusOr<switches::SwitchIdentity> id = (*driver)->Identity();
  if (!id.ok()) {
    probe.status = id.status();
    return probe;
  }
  absl::StatusOr<std::vector<switches::CrossConnect>> xs = (*driver)->ReadCrossConnects();
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

}  // namespace fleet::fabric
