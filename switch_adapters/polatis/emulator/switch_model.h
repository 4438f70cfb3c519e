// The one switch model behind polatis-emu's TL1 and REST front ends and its simulation
// side-channel (docs/polatis-emulator.md): an NxM optical cross-connect with shutters,
// FAILED ports, injected power drops, signals on ingress fibers, settling time, counters
// and fault settings, optionally persisted to a state file.
//
// Pure logic apart from the state file: no sockets, no threads, no sleeping. Time comes from
// a Clock so tests can move it by hand. Every method is thread-safe and atomic: a front end's
// command is one call, so two sessions never see each other's half-made changes.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_SWITCH_MODEL_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_SWITCH_MODEL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/base/clock.h"

namespace fleet::polatis_emu {

// How a front end waits (for settling or injected latency): returns after the duration, or
// sooner when its server is stopping, so an open session cannot hold up shutdown.
using Waiter = std::function<void(absl::Duration)>;

// Reported power when no light arrives or there is no reading (the switch's convention).
inline constexpr double kNoLightDbm = -99.99;

// Polatis NxM numbering: ingress ports 1..N, egress ports N+1..N+M.
struct SwitchSize {
  int ingress = 384;
  int egress = 384;

  int ports() const { return ingress + egress; }
  bool IsIngress(int64_t port) const { return port >= 1 && port <= ingress; }
  bool IsEgress(int64_t port) const { return port > ingress && port <= ingress + egress; }
  bool IsPort(int64_t port) const { return port >= 1 && port <= ports(); }
  std::string ToString() const;  // "384x384"
};

// Parses "NxM" (each side 1..4096).
absl::StatusOr<SwitchSize> ParseSwitchSize(absl::string_view text);

// What the switch says about itself (RTRV-NETYPE, RTRV-INV, product-information).
struct SwitchIdentity {
  std::string manufacturer;
  std::string model_name;  // "N-VST-384x384-EMU"
  std::string serial_number;
  std::string software_version;
};

// The identity of an emulated switch of `size`; the serial number is derived from `sid` so
// emulators given different SIDs report different serials.
SwitchIdentity MakeSwitchIdentity(const SwitchSize& size, absl::string_view sid);

struct CrossConnect {
  int ingress = 0;
  int egress = 0;
  bool operator==(const CrossConnect&) const = default;
};

enum class ConnectMode {
  // TL1 ENT-PATCH: a port already in a different patch is refused (SROF).
  kRefuseInUse,
  // REST PUT/PATCH: each pair is created or replaced, so an ingress may move to a new egress,
  // and an egress may be taken from an ingress that moves elsewhere in the same batch.
  kReplace,
};

// What one change did. `settled_at` is when the cross-connects it made carry light
// (InfinitePast when it made none): a front end answers after that time.
struct ChangeResult {
  int changed = 0;  // cross-connects made plus cross-connects removed
  int created = 0;  // pairs whose ingress had no cross-connect before
  absl::Time settled_at = absl::InfinitePast();
};

enum class PortStatus { kEnabled, kDisabled, kFailed };
absl::string_view PortStatusName(PortStatus status);  // "ENABLED", "DISABLED", "FAILED"

struct PortReading {
  int port = 0;
  PortStatus status = PortStatus::kEnabled;
  bool shutter_open = true;
  double power_dbm = kNoLightDbm;  // rounded to 0.01 dB
};

// What arrives at an egress fiber.
struct Light {
  std::optional<std::string> signal;  // nullopt: no light
  double power_dbm = kNoLightDbm;
};

struct Alarm {
  enum class Kind { kPortFailed, kLowPower };
  int port = 0;
  Kind kind = Kind::kPortFailed;
  bool operator==(const Alarm&) const = default;
};

struct Counters {
  int64_t tl1_commands = 0;
  int64_t rest_requests = 0;
  int64_t commands = 0;  // tl1_commands + rest_requests
  int64_t cross_connects_changed = 0;
  int64_t cross_connects = 0;
  int64_t sessions = 0;  // open TL1 connections
};

struct FaultSettings {
  int64_t deny_next = 0;
  absl::Duration latency = absl::ZeroDuration();
  std::optional<int64_t> fail_bulk_after;
};

// One PUT /sim/v1/faults: each field present replaces that setting.
struct FaultUpdate {
  std::optional<int64_t> deny_next;
  std::optional<absl::Duration> latency;
  std::optional<std::optional<int64_t>> fail_bulk_after;  // inner nullopt: clear
  bool expire_sessions = false;
};

struct SwitchModelOptions {
  SwitchSize size;
  absl::Duration switch_time = absl::Milliseconds(25);
  double insertion_loss_db = 1.5;
  std::string state_file;  // empty: nothing is persisted
};

class SwitchModel {
 public:
  // Loads `options.state_file` if it exists (its cross-connects count as settled, like the
  // real switch's RESTORE boot mode) and writes it once, so an unwritable path fails here
  // rather than at the first change. `clock` is not owned and must outlive the model.
  static absl::StatusOr<std::unique_ptr<SwitchModel>> Create(const SwitchModelOptions& options,
                                                             const Clock* clock);

  const SwitchSize& size() const { return options_.size; }
  absl::Duration switch_time() const { return options_.switch_time; }

  // --- Cross-connects. All-or-nothing: on error nothing changes, except the injected
  // fail_bulk_after fault, which makes the first K pairs and then returns ABORTED.
  // Errors: INVALID_ARGUMENT "Invalid OXC port: P" (out of range or wrong side),
  // FAILED_PRECONDITION "Port in use: P" (see ConnectMode; a port twice in one batch is in
  // use too), ABORTED "Operation failed after K of M", INTERNAL when the state file cannot
  // be written (nothing changed).
  absl::StatusOr<ChangeResult> Connect(const std::vector<CrossConnect>& pairs, ConnectMode mode);
  // Removes the cross-connects touching any of `ports` (either side); a port without one is
  // fine. INVALID_ARGUMENT when a port is out of range.
  absl::StatusOr<ChangeResult> Disconnect(const std::vector<int>& ports);
  absl::StatusOr<ChangeResult> DisconnectAll();
  std::vector<CrossConnect> CrossConnects() const;  // ordered by ingress
  std::optional<int> EgressOf(int ingress) const;

  // --- Shutters, all-or-nothing. (port, open) pairs; INVALID_ARGUMENT on a bad port.
  absl::Status SetShutters(const std::vector<std::pair<int, bool>>& ports);
  // Readings of `ports` in the order given.
  std::vector<PortReading> ReadPorts(const std::vector<int>& ports) const;
  std::vector<PortReading> ReadAllPorts() const;

  // --- Light (the side-channel). A signal lives on an ingress fiber.
  absl::Status SetSignal(int ingress, std::string name, double launch_dbm);
  absl::Status ClearSignal(int ingress);
  absl::StatusOr<Light> LightAt(int egress) const;

  // --- Port faults.
  absl::Status SetPortFailed(int port, bool failed);
  absl::Status SetPowerDrop(int port, double drop_db);  // 0 clears
  std::vector<Alarm> Alarms() const;                    // ordered by port

  // --- Protocol faults.
  FaultSettings UpdateFaults(const FaultUpdate& update);  // returns the new settings
  FaultSettings faults() const;
  // Consumes one injected denial; true when this command must be refused.
  bool TakeDenial();
  // Clears protocol and port faults (signals, shutters and cross-connects stay).
  void ClearFaults();
  // Bumped by expire_sessions: a TL1 session logged in under an older epoch is logged out.
  uint64_t session_epoch() const;

  // --- Counters.
  void CountTl1Command();
  void CountRestRequest();
  void SessionOpened();
  void SessionClosed();
  Counters counters() const;

 private:
  struct Patch {
    int egress = 0;
    absl::Time settled_at = absl::InfinitePast();
  };
  // What the state file holds, and what one change replaces as a whole.
  struct Config {
    std::map<int, Patch> by_ingress;
    std::map<int, int> by_egress;  // egress -> ingress
    std::set<int> closed_shutters;
  };
  struct Signal {
    std::string name;
    double launch_dbm = 0;
  };

  SwitchModel(const SwitchModelOptions& options, const Clock* clock)
      : options_(options), clock_(clock) {}

  absl::Status LoadState() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SaveState(const Config& config) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `next` to the state file, then makes it current.
  absl::Status Commit(Config next, int changed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes ingress -> egress in `config`, removing what is in the way.
  static int Apply(Config& config, const CrossConnect& pair, absl::Time settled_at);
  absl::Status CheckPort(int64_t port) const;
  double PowerLocked(int port, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Light LightLocked(int egress, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PortReading ReadLocked(int port, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double DropOf(int port) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SwitchModelOptions options_;
  const Clock* const clock_;

  mutable absl::Mutex mu_;
  Config config_ ABSL_GUARDED_BY(mu_);
  std::map<int, Signal> signals_ ABSL_GUARDED_BY(mu_);  // by ingress
  std::set<int> failed_ports_ ABSL_GUARDED_BY(mu_);
  std::map<int, double> power_drops_ ABSL_GUARDED_BY(mu_);
  FaultSettings faults_ ABSL_GUARDED_BY(mu_);
  uint64_t session_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  Counters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::polatis_emu

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_SWITCH_MODEL_H_
