// The drivers of the site's switches: one OpticalSwitch per inventory switch, built on first
// use by the driver factory registered for the switch's protocol, from its inventory record
// and its credentials; rebuilt when the record's address, port or protocol changes. The
// engine and reconciler reach switches through it. It names no vendor: fleetd registers the
// drivers it speaks.
#ifndef FLEET_CONTROLLER_SWITCH_REGISTRY_SWITCH_REGISTRY_H_
#define FLEET_CONTROLLER_SWITCH_REGISTRY_SWITCH_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "controller/commit_point/commit_point.h"
#include "controller/metrics/controller_metrics.h"
#include "fleet/v1/inventory.pb.h"
#include "switch_adapters/optical_switch.h"

namespace fleet::switch_registry {

// The login a driver uses for one switch.
struct SwitchCredentials {
  std::string user;
  std::string password;
};

class SwitchRegistry {
 public:
  // Builds a driver for inventory switch `sw`, logging in with `credentials`, that asks
  // `before_change` before each changing command it writes (see ChangeGate): the registry's
  // commit point, so that a resend deep in a driver is fenced as the batch around it was.
  using DriverFactory =
      std::function<absl::StatusOr<std::unique_ptr<switch_adapters::OpticalSwitch>>(
          const v1::Switch& sw, const SwitchCredentials& credentials,
          const switch_adapters::ChangeGate& before_change)>;

  // `credentials` by switch id; `credentials_source` names where they came from, for errors.
  // Every command of every driver is counted and timed in `metrics` (null: nowhere), and
  // every command that changes a switch (Apply, SetShutters) passes `commit_point` first,
  // and each changing protocol command inside it again as the driver writes it (null: each
  // passes); a refused one is not sent and fails with the refusal. Neither is
  // owned; both outlive the registry.
  SwitchRegistry(std::map<std::string, SwitchCredentials> credentials,
                 std::string credentials_source, metrics::ControllerMetrics* metrics = nullptr,
                 const CommitPoint* commit_point = nullptr);
  // Waits for probes still under way (ProbeSwitches), each bounded by its driver's timeouts.
  ~SwitchRegistry();

  // Builds the drivers of switches speaking `protocol` from now on (replacing an earlier
  // factory for it). Their commands are labelled with the protocol's name in the metrics.
  void RegisterDriver(v1::SwitchProtocol protocol, DriverFactory factory);

  // The driver for `sw`. FAILED_PRECONDITION when the switch has no credentials or no driver
  // is registered for its protocol; a factory's error as it is. The pointer stays valid until
  // the registry is destroyed (a rebuilt driver replaces the map entry but the old one is
  // kept alive, since a caller may still hold it).
  absl::StatusOr<switch_adapters::OpticalSwitch*> Driver(const v1::Switch& sw);

  // Where the login of switch `switch_id` comes from: `credentials_source` when it has an
  // entry for the switch, else "" (its driver cannot be built).
  std::string CredentialsFile(const std::string& switch_id) const;

  // Identity and cross-connect count of `sw`, read live, compared with its inventory size.
  struct Probe {
    absl::Status status;      // Unreachable, refused login, or the size disagrees.
    std::string description;  // "VENDOR MODEL SN SERIAL, 12 cross-connects".
    // No answer: the status says "unreachable at ADDRESS:PORT (PROTOCOL): WHY".
    bool unreachable = false;
  };
  Probe ProbeSwitch(const v1::Switch& sw);

  // Probes every switch of `switches` at once, each on a thread of its own, and answers within
  // `timeout` whatever the switches do: one whose probe has not answered by then is
  // unreachable ("no answer within 2s") while its probe goes on. A later call waits for that
  // probe instead of starting another (unless the switch is now reached another way), so a
  // switch never has two probes at once at one address and a hung one holds one thread until
  // its driver gives up; probes that answered are joined at the next call. In the order of
  // `switches`.
  std::vector<Probe> ProbeSwitches(const std::vector<v1::Switch>& switches, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(probes_mu_);

 private:
  struct Entry {
    std::string key;  // protocol|address|port: what forces a rebuild.
    switch_adapters::OpticalSwitch* driver = nullptr;
  };
  metrics::ControllerMetrics& metrics_;
  const CommitPoint* const commit_point_;
  // commit_point_'s fence for switch commands, handed to every driver; empty without one.
  const switch_adapters::ChangeGate before_change_;
  const std::map<std::string, SwitchCredentials> credentials_;
  const std::string credentials_source_;
  absl::Mutex mu_;
  std::map<v1::SwitchProtocol, DriverFactory> factories_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<switch_adapters::OpticalSwitch>> owned_ ABSL_GUARDED_BY(mu_);

  // One probe of one switch under way or done, shared by its thread and its waiters.
  struct ProbeRun {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    Probe result ABSL_GUARDED_BY(mu);
    std::thread thread;  // Joined before the next probe of the switch, or by the destructor.
  };
  absl::Mutex probes_mu_;
  // By switch id and how it is reached (ConnectionKey).
  std::map<std::string, std::shared_ptr<ProbeRun>> probes_ ABSL_GUARDED_BY(probes_mu_);
};

}  // namespace fleet::switch_registry

#endif  // FLEET_CONTROLLER_SWITCH_REGISTRY_SWITCH_REGISTRY_H_
