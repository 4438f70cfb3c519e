// The drivers of the site's switches: one OpticalSwitch per inventory switch, built on first
// use from the switch's inventory record and its credentials, rebuilt when the record's
// address, port or protocol changes. The engine and reconciler reach switches through it.
#ifndef FLEET_CONTROLLER_FABRIC_SWITCH_REGISTRY_H_
#define FLEET_CONTROLLER_FABRIC_SWITCH_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "controller/metrics/controller_metrics.h"
#include "fleet/v1/inventory.pb.h"
#include "switch_adapters/optical_switch.h"
#include "switch_adapters/polatis/polatis_switch.h"

namespace fleet::fabric {

class SwitchRegistry {
 public:
  // Builds a driver for a switch; the real one is polatis::NewPolatisSwitch.
  using Factory =
      std::function<std::unique_ptr<switches::OpticalSwitch>(const polatis::PolatisSwitchOptions&)>;

  // `credentials` by switch id; `credentials_source` names where they came from, for errors.
  // Every command of every driver is counted and timed in `metrics` (null: nowhere).
  SwitchRegistry(Factory factory, std::map<std::string, polatis::Credentials> credentials,
                 std::string credentials_source, metrics::ControllerMetrics* metrics = nullptr);

  // The driver for `sw`. FAILED_PRECONDITION when the switch has no credentials. The pointer
  // stays valid until the registry is destroyed (a rebuilt driver replaces the map entry but
  // the old one is kept alive, since a caller may still hold it).
  absl::StatusOr<switches::OpticalSwitch*> Driver(const v1::Switch& sw);

  // Identity and cross-connect count of `sw`, read live, compared with its inventory size.
  struct Probe {
    absl::Status status;      // Unreachable, refused login, or the size disagrees.
    std::string description;  // e.g. "POLATIS N-VST-384x384 SN EMU-1, 12 cross-connects".
  };
  Probe ProbeSwitch(const v1::Switch& sw);

 private:
  struct Entry {
    std::string key;  // protocol|address|port: what forces a rebuild.
    switches::OpticalSwitch* driver = nullptr;
  };
  Factory factory_;
  metrics::ControllerMetrics& metrics_;
  const std::map<std::string, polatis::Credentials> credentials_;
  const std::string credentials_source_;
  absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<switches::OpticalSwitch>> owned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::fabric

#endif  // FLEET_CONTROLLER_FABRIC_SWITCH_REGISTRY_H_
