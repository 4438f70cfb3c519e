// The one switch model behind polatis-emu's TL1 and REST front ends and its simulation
// side-channel (docs/polatis-emulator.md): an NxM optical cross-connect with shutters,
// FAILED ports, injected power drops, signals on ingress fibers, settling time, counters
// and fault settings, optionally persisted to a state file, plus trunk fibers that bring light
// in from another emulator's egress.
//
// Pure logic apart from the state file: no sockets, no threads, no sleeping. Time comes from
// a Clock so tests can move it by hand, and light from across a trunk comes from a
// RemoteLight, so tests can join two models without sockets. Every method is thread-safe and
// atomic: a front end's command is one call, so two sessions never see each other's half-made
// changes.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_SWITCH_MODEL_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_SWITCH_MODEL_H_

#include <cstdint>
#include <deque>
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
#include "common/clock.h"

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
  // It came in over a trunk: the far emulator's changes move it, and this model's light
  // generation does not count them.
  bool via_trunk = false;
  // When the light at the egress last changed (a cross-connect to it settled, say): since
  // when a receiver there has seen it. InfinitePast when unknown (light over a trunk).
  absl::Time since = absl::InfinitePast();
};

// A trunk fiber: from egress `egress` of the emulator whose REST port is `from` to this
// switch's ingress `ingress`, losing `loss_db` on the way. Simulation config, like a signal.
struct Trunk {
  int ingress = 0;
  std::string from;  // "HOST:PORT"
  int egress = 0;    // on the far emulator
  double loss_db = 0.5;
  bool operator==(const Trunk&) const = default;
};

// Light crosses at most this many trunks: a loop of trunks and cross-connects would otherwise
// have the emulators asking each other for ever.
inline constexpr int kMaxTrunkHops = 8;
// A power read spends at most about this long asking far emulators across trunks (one
// fetch's timeout more at worst); ports not asked by then read no light. It keeps a read under
// a driver's command timeout however many trunks feed the switch and however slow the far
// ends answer.
inline constexpr absl::Duration kTrunkReadBudget = absl::Seconds(2);

// What arrives at an egress of another emulator, asked across a trunk.
class RemoteLight {
 public:
  virtual ~RemoteLight() = default;
  // The light at `egress` of the emulator whose REST port is `from`, as that emulator's
  // LightAt(egress, hops) answers it; `hops` counts the trunks already crossed, this one
  // included. Thread-safe. Blocks, so it is never called with a model's mutex held; a real
  // implementation gives up within about a second. An error (unreachable, a refusal, an
  // answer that makes no sense) is reported as such, not as no light, so it can be logged.
  virtual absl::StatusOr<Light> Fetch(const std::string& from, int egress, int hops) = 0;
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
  int64_t sessions = 0;      // open TL1 connections
  int64_t sim_requests = 0;  // side-channel (/sim/v1) requests, not commands
};

// One change of the switch's cross-connects or shutters (GET /sim/v1/changes): when, and which
// client made it, so that a test can tell whose commands changed the switch (two fleetd
// replicas must never be changing it at the same time).
struct ChangeRecord {
  absl::Time at;
  std::string origin;      // ChangeOrigin::Current() as it was committed; "" when none was set.
  int cross_connects = 0;  // Cross-connects made, moved or removed.
  bool shutters = false;   // Whether a shutter opened or closed.
};

// Names the client on whose thread changes are made, while it lives: a TL1 session for its
// commands ("tl1 session N"), a REST request ("rest HOST:PORT"). Every change the model commits
// on this thread is recorded with it; on destruction the previous name is back.
class ChangeOrigin {
 public:
  explicit ChangeOrigin(std::string origin);
  ~ChangeOrigin();
  ChangeOrigin(const ChangeOrigin&) = delete;
  ChangeOrigin& operator=(const ChangeOrigin&) = delete;
  // This thread's current origin; "" outside any.
  static const std::string& Current();

 private:
  std::string previous_;
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
  // rather than at the first change. `clock` and `remote_light` are not owned and must
  // outlive the model; without `remote_light` no trunk can be set.
  static absl::StatusOr<std::unique_ptr<SwitchModel>> Create(const SwitchModelOptions& options,
                                                             const Clock* clock,
                                                             RemoteLight* remote_light = nullptr);

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
  // Readings of `ports` in the order given. With `power`, each port's monitor reads what a
  // real one would, light from across a trunk included: an egress the light that arrives
  // there (as LightAt), a trunk-fed ingress the light arriving on the trunk fiber (the far
  // egress's, less the trunk's loss and this ingress's drop). Far emulators are asked outside
  // the mutex, once per port; after one fails to answer, the rest of this read's ports fed
  // from it read no light unasked, and none is asked once the read has spent
  // kTrunkReadBudget. Without `power` (state and shutters only) power_dbm is kNoLightDbm and
  // no far emulator is asked.
  std::vector<PortReading> ReadPorts(const std::vector<int>& ports, bool power = true) const;
  std::vector<PortReading> ReadAllPorts(bool power = true) const;

  // --- Light (the side-channel). A signal lives on an ingress fiber, or the ingress is fed
  // by a trunk; never both. Neither is written to the state file.
  // FAILED_PRECONDITION when the ingress is fed by a trunk.
  absl::Status SetSignal(int ingress, std::string name, double launch_dbm);
  absl::Status ClearSignal(int ingress);
  // Sets or replaces the trunk into `trunk.ingress`. INVALID_ARGUMENT for a port that is not
  // an ingress, `from` not HOST:PORT, a far egress < 1 or a loss that is not a finite number
  // >= 0; FAILED_PRECONDITION when the ingress carries a local signal or the model has no
  // RemoteLight. Nothing changes on an error.
  absl::Status SetTrunk(Trunk trunk);
  absl::Status ClearTrunk(int ingress);  // fine when there is none
  std::vector<Trunk> Trunks() const;     // ordered by ingress
  // What arrives at `egress`, `hops` trunks away from whoever asks first (0 for a local
  // reader). Light from a trunk is fetched from the far emulator outside the model's mutex;
  // when it cannot be fetched, or would cross more than kMaxTrunkHops trunks, nothing
  // arrives, and a warning is logged each time the trunk's problem changes.
  absl::StatusOr<Light> LightAt(int egress, int hops = 0) const;
  // Counts the changes that can move light at this switch's egresses (cross-connects,
  // shutters, signals, trunks, port faults, and a cross-connect settling, counted when
  // first asked after it), so a reader can tell whether what it read is still true. Light
  // from across a trunk is not counted (Light::via_trunk).
  uint64_t light_generation() const;
  // The last generation whose change could move the light at one of `egresses` (0 when
  // none has): what a reader read at generation G there is still true unless this is > G.
  uint64_t LightGenerationOf(const std::vector<int>& egresses) const;
  // The first time after `now` a cross-connect to one of `egresses` settles and starts
  // carrying light; InfiniteFuture when none is settling.
  absl::Time NextSettle(absl::Time now, const std::vector<int>& egresses) const;
  // Which egresses a change may have moved the light at; nullopt: any.
  using LightListener = std::function<void(const std::optional<std::set<int>>& egresses)>;
  // `listener` is called (with the model's mutex held: it must not call the model) after
  // each change light_generation counts. Returns an id for RemoveLightListener.
  int AddLightListener(LightListener listener);
  void RemoveLightListener(int id);

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
  void CountSimRequest();
  void SessionOpened();
  void SessionClosed();
  Counters counters() const;
  // The last kChangesKept changes, oldest first.
  std::vector<ChangeRecord> Changes() const;
  static constexpr size_t kChangesKept = 10000;

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
  struct TrunkFeed {
    Trunk trunk;
    // Why the last fetch across it failed ("" when the far end answered): a warning is
    // logged when this changes, not on every read.
    std::string problem;
    // Logged once per trunk setting. Not a `problem`: in a loop the same trunk is crossed
    // at several depths of one read, and answers at all but the deepest, so the problem
    // would come and go on every read.
    bool hop_limit_logged = false;
  };
  // Where the light at an egress comes from, decided under the mutex: a final answer, or a
  // trunk whose far end must be asked (outside it), less `loss_db` in all.
  struct LightSource {
    std::optional<Light> local;
    Trunk trunk;
    double loss_db = 0;
  };

  SwitchModel(const SwitchModelOptions& options, const Clock* clock, RemoteLight* remote_light)
      : options_(options), clock_(clock), remote_light_(remote_light) {}

  // Counts the cross-connects whose beam has settled by `now` as changes of their egress.
  void CountSettledLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts a change that may move the light at `egresses` (every egress when nullopt) and
  // tells the listeners.
  void LightChangedLocked(const std::optional<std::set<int>>& egresses)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The egress whose light `port` takes part in: itself, or an ingress's cross-connected
  // egress in `config` (none when it has no cross-connect).
  std::set<int> EgressesOf(const Config& config, int port) const;
  absl::Status LoadState() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SaveState(const Config& config) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `next` to the state file, then makes it current.
  absl::Status Commit(Config next, int changed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes ingress -> egress in `config`, removing what is in the way.
  static int Apply(Config& config, const CrossConnect& pair, absl::Time settled_at);
  absl::Status CheckPort(int64_t port) const;
  absl::Status CheckIngress(int port) const;  // for the side-channel: names the range
  double PowerLocked(int port, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the cross-connect ingress -> egress passes light now: settled, both shutters
  // open, neither port FAILED. The same for a local signal and for light from a trunk.
  bool CarriesLightLocked(int ingress, int egress, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Light LightLocked(int egress, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  LightSource SourceLocked(int egress, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The light `trunk` brings from its far egress, `hops` trunks from the first asker, less
  // `loss_db`; no light when the far end does not answer or the hop limit is reached. Called
  // without the mutex. `answered`, when given, says whether the far end answered.
  Light OverTrunk(const Trunk& trunk, int hops, double loss_db, bool* answered = nullptr) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Records how the far end of `trunk` answered, logging when that changed.
  void NoteFarAnswer(const Trunk& trunk, const absl::Status& answer) const;
  void NoteHopLimit(const Trunk& trunk, int hops) const;
  // The record of `trunk`, or null when it has been replaced or removed since it was read.
  TrunkFeed* FeedLocked(const Trunk& trunk) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A port's state and, with `power`, its local power (light from a trunk is added later).
  PortReading ReadLocked(int port, absl::Time now, bool power) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double DropOf(int port) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SwitchModelOptions options_;
  const Clock* const clock_;
  RemoteLight* const remote_light_;

  mutable absl::Mutex mu_;
  Config config_ ABSL_GUARDED_BY(mu_);
  std::map<int, Signal> signals_ ABSL_GUARDED_BY(mu_);  // by ingress
  // By ingress. Mutable for the logging records of TrunkFeed, which reading light updates.
  mutable std::map<int, TrunkFeed> trunks_ ABSL_GUARDED_BY(mu_);
  std::set<int> failed_ports_ ABSL_GUARDED_BY(mu_);
  std::map<int, double> power_drops_ ABSL_GUARDED_BY(mu_);
  FaultSettings faults_ ABSL_GUARDED_BY(mu_);
  uint64_t session_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  Counters counters_ ABSL_GUARDED_BY(mu_);
  std::deque<ChangeRecord> changes_ ABSL_GUARDED_BY(mu_);  // At most kChangesKept.
  // Mutable: a read counts the settles that happened before it (CountSettledLocked).
  mutable uint64_t light_generation_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::map<int, uint64_t> egress_changed_ ABSL_GUARDED_BY(mu_);  // Egress → generation.
  // When each egress's light last changed, and every egress's (Light::since).
  mutable std::map<int, absl::Time> egress_changed_at_ ABSL_GUARDED_BY(mu_);
  absl::Time everything_changed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Egresses whose cross-connect is still settling, by when; not yet counted.
  mutable std::multimap<absl::Time, int> settling_ ABSL_GUARDED_BY(mu_);
  uint64_t everything_changed_ ABSL_GUARDED_BY(mu_) = 0;  // The last change of every egress.
  std::map<int, LightListener> light_listeners_ ABSL_GUARDED_BY(mu_);  // By id.
  int next_listener_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace fleet::polatis_emu

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_SWITCH_MODEL_H_
