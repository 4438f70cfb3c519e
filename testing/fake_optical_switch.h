// An in-memory optical switch with the full OpticalSwitch contract, for tests of the code
// above the interface (engine, reconciler). Stateful, not scripted: it holds cross-connects
// and shutters, and can be told to fail. Light: every ingress is lit at kLaunchDbm; an egress
// cross-connected to it reads that less kLossDb and the drops set on both ports, or no light
// when either port has failed or a shutter is closed.
#ifndef FLEET_TESTING_FAKE_OPTICAL_SWITCH_H_
#define FLEET_TESTING_FAKE_OPTICAL_SWITCH_H_

#include <map>
#include <set>

#include "absl/synchronization/mutex.h"
#include "switch_adapters/optical_switch.h"

namespace fleet::testing {

class FakeOpticalSwitch : public switch_adapters::OpticalSwitch {
 public:
  FakeOpticalSwitch(uint32_t ingress_ports, uint32_t egress_ports);

  static constexpr double kLaunchDbm = 0.0;
  static constexpr double kLossDb = 1.5;

  absl::StatusOr<switch_adapters::SwitchIdentity> Identity() override;
  absl::StatusOr<std::vector<switch_adapters::CrossConnect>> ReadCrossConnects() override;
  absl::StatusOr<std::vector<switch_adapters::PortState>> ReadPorts() override;
  absl::StatusOr<std::vector<switch_adapters::PortPower>> ReadPower(
      const std::vector<uint32_t>& ports) override;
  absl::Status SetShutters(const std::vector<uint32_t>& ports, bool open) override;
  switch_adapters::ApplyResult Apply(const switch_adapters::CrossConnectBatch& batch) override;

  // --- Test controls ---
  // Every call fails with `status` until cleared with OkStatus().
  void SetUnreachable(absl::Status status);
  // The next Apply makes only its first `changes` changes (removes, then adds) and fails.
  void FailNextApplyAfter(int changes);
  // Makes a cross-connect behind the controller's back (drift).
  void ForceCrossConnect(switch_adapters::CrossConnect x);
  void SetPortFailed(uint32_t port, bool failed);
  // Light through `port` loses `db` more (0 clears): a dirty connector, a bent fiber.
  void SetPowerDrop(uint32_t port, double db);
  // While held, an Apply takes its failure budget (FailNextApplyAfter) and then waits,
  // changing nothing, until the switch is let go: so that requests queue behind it.
  void HoldApplies(bool hold);
  // Applies waiting because the switch is held.
  int held() const;
  // Changes made since construction (each cross-connect made or removed counts one).
  int changes() const;

 private:
  absl::Status CheckReachable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<switch_adapters::CrossConnect> SortedLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint32_t ingress_ports_;
  const uint32_t egress_ports_;
  mutable absl::Mutex mu_;
  std::map<uint32_t, uint32_t> by_ingress_ ABSL_GUARDED_BY(mu_);
  std::set<uint32_t> closed_ ABSL_GUARDED_BY(mu_);
  std::set<uint32_t> failed_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, double> drops_ ABSL_GUARDED_BY(mu_);
  absl::Status unreachable_ ABSL_GUARDED_BY(mu_);
  int fail_after_ ABSL_GUARDED_BY(mu_) = -1;
  int changes_ ABSL_GUARDED_BY(mu_) = 0;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fleet::testing

#endif  // FLEET_TESTING_FAKE_OPTICAL_SWITCH_H_
