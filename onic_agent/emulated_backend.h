// The `emulated` O-NIC backend, for tests and the demo: the optics are the Polatis
// emulator's simulated light (docs/polatis-emulator.md, /sim/v1). Each O-NIC port lights its
// transmitter with its own identity, "SERIAL/PORT", on the switch ingress its tx fiber
// enters; a retrain succeeds only when the port's rx (the egress its rx fiber leaves) sees
// the expected peer's identity above a power threshold after the simulated training time.
#ifndef FLEET_ONIC_AGENT_EMULATED_BACKEND_H_
#define FLEET_ONIC_AGENT_EMULATED_BACKEND_H_

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "onic_agent/backend.h"

namespace fleet::onic_agent {

// The simulator's side-channel as the backend needs it.
class LightSimulator {
 public:
  struct Light {
    std::string signal;  // Empty: no light.
    double power_dbm = -99.99;
    // Since when the light has been there: as the simulator says, else since the copy's
    // update that first showed it; InfinitePast when unknown.
    absl::Time since = absl::InfinitePast();
  };
  virtual ~LightSimulator() = default;
  virtual absl::Status PutSignal(uint32_t ingress, const std::string& name, double power_dbm) = 0;
  // Asks the simulator: the light at `egress` now.
  virtual absl::StatusOr<Light> ReadLight(uint32_t egress) = 0;
  // Starts keeping a copy of the light at `egresses` (this host's rx fibers), which the
  // simulator refreshes as its light changes, as a real O-NIC's receiver reads its own power.
  virtual void Mirror(const std::vector<uint32_t>& egresses) { (void)egresses; }
  // The light at `egress` as the copy holds it: as of the simulator's last answer to the
  // copy's long poll, which it gives when that light may have changed, so the copy lags a
  // change by the time the answer takes to arrive (like a power monitor's sampling lag).
  // nullopt without one (not mirrored, not fetched yet, the simulator unreachable, or light
  // that comes over a trunk, which changes without this simulator knowing).
  virtual std::optional<Light> Mirrored(uint32_t egress) {
    (void)egress;
    return std::nullopt;
  }
  // Counts the copy's updates: read it before Mirrored, then AwaitMirrorChange with it, and no
  // update between the two is missed.
  virtual uint64_t MirrorVersion() { return 0; }
  // Waits until the copy's version differs from `seen` or `until` passes; returns the version.
  // Without a copy nothing changes: it waits until `until`.
  virtual uint64_t AwaitMirrorChange(uint64_t seen, absl::Time until) {
    absl::SleepFor(until - absl::Now());
    return seen;
  }
};

// Over HTTP to polatis-emu's REST port ("HOST:PORT").
std::unique_ptr<LightSimulator> NewHttpLightSimulator(const std::string& address);

class EmulatedBackend : public OnicBackend {
 public:
  struct OnicConfig {
    std::string serial;
    std::string pcie_address;
    std::array<uint32_t, 2> tx_ingress{};  // Ports 1 and 2.
    std::array<uint32_t, 2> rx_egress{};
  };
  struct Options {
    std::vector<OnicConfig> onics;
    absl::Duration training_time = absl::Milliseconds(100);
    // After training, how long to wait for light before reporting "no light".
    absl::Duration light_wait = absl::Seconds(2);
    absl::Duration poll_interval = absl::Milliseconds(5);
    double launch_power_dbm = 0.0;
    double min_rx_power_dbm = -20.0;
  };

  // Lights every port's transmitter. UNAVAILABLE when the simulator cannot be reached.
  static absl::StatusOr<std::unique_ptr<EmulatedBackend>> Create(
      Options options, std::unique_ptr<LightSimulator> simulator);

  std::string name() const override { return "emulated"; }
  absl::StatusOr<std::vector<v1::AgentOnic>> Discover() override;
  CommandOutcome Quiesce(const std::string& serial, uint32_t port, absl::Time deadline) override;
  CommandOutcome Retrain(const std::string& serial, uint32_t port, const v1::PeerIdentity& expected,
                         absl::Time deadline) override;
  CommandOutcome ReadPort(const std::string& serial, uint32_t port) override;
  // The light copy (LightSimulator::Mirror) shows the light arrive; without one, or for light
  // over a trunk, the simulator is asked every poll interval.
  bool SeesLightArrive() const override { return true; }
  absl::StatusOr<absl::Time> AwaitLight(const std::string& serial, uint32_t port,
                                        const v1::PeerIdentity& expected, absl::Time until,
                                        const std::atomic<bool>& cancelled) override;
  absl::Status Blink(const std::string& serial, absl::Duration duration) override;

 private:
  EmulatedBackend(Options options, std::unique_ptr<LightSimulator> simulator);
  // The O-NIC's config, or NOT_FOUND naming the serial or port.
  absl::StatusOr<const OnicConfig*> Find(const std::string& serial, uint32_t port) const;
  // The port's state from the light now and the last command's outcome.
  // The port's state; reads its light from the simulator unless `light` was just read.
  v1::LinkState Observe(const OnicConfig& onic, uint32_t port,
                        const LightSimulator::Light* light = nullptr);
  void SetStatus(const std::string& serial, uint32_t port, v1::LinkStatus status,
                 const std::string& detail);
  // Whether `light` lets a port train with `want` ("SERIAL/PORT"; empty: any peer).
  bool Usable(const LightSimulator::Light& light, const std::string& want) const;

  const Options options_;
  std::unique_ptr<LightSimulator> simulator_;
  absl::Mutex mu_;
  // The last command's outcome per (serial, port).
  std::map<std::pair<std::string, uint32_t>, std::pair<v1::LinkStatus, std::string>> status_
      ABSL_GUARDED_BY(mu_);
  // Armed ports whose light has come: since when they have been training (AwaitLight), until
  // their Retrain finishes it.
  std::map<std::pair<std::string, uint32_t>, absl::Time> training_since_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_EMULATED_BACKEND_H_
