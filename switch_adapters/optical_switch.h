// The abstract optical circuit switch, in the controller's terms. The engine, the
// reconciler and the tools above them see only this interface; vendor protocols live in
// switch_adapters/<vendor>/.
//
// Port numbering is the switch's own: ingress 1..N, egress N+1..N+M.
//
// Contract of every implementation:
// - Thread-safe; calls on one switch are serialized inside the implementation.
// - Apply(batch): reads the switch's cross-connects first, then removes, then adds
//   (removes before adds, so an egress freed by a remove can be reused by an add of the
//   same batch), then reads back and verifies.
//   * Idempotent: an add that is already present is not sent to the switch; a remove of a
//     cross-connect that is absent is not sent either. Re-applying a batch that has taken
//     effect changes nothing on the switch.
//   * Preconditions checked against the state read first, before anything is sent:
//     a remove (i, e) where ingress i goes to another egress, or an add whose ingress or
//     egress is held by a cross-connect the batch does not remove, fails with
//     FAILED_PRECONDITION naming the ports; nothing is changed.
//   * Not atomic on the device: a failure part-way (the switch refuses a command, the link
//     drops) can leave some changes made. The result then carries the error and, when the
//     switch could be read again, what it holds now, so the caller can roll back to the last
//     good state or retry. Read-back that disagrees with the batch is an error (INTERNAL)
//     naming every port that differs.
//   * Error codes: UNAVAILABLE (the switch cannot be reached, or timed out: retry),
//     FAILED_PRECONDITION (the switch's state forbids the change), INVALID_ARGUMENT (a port
//     outside the switch, or a batch that contradicts itself), PERMISSION_DENIED (login
//     refused), INTERNAL (the switch did something else than asked).
// - Reads never change the switch.
#ifndef FLEET_SWITCH_ADAPTERS_OPTICAL_SWITCH_H_
#define FLEET_SWITCH_ADAPTERS_OPTICAL_SWITCH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fleet::switch_adapters {

// Light entering `ingress` leaves at `egress`.
struct CrossConnect {
  uint32_t ingress = 0;
  uint32_t egress = 0;
  friend bool operator==(const CrossConnect&, const CrossConnect&) = default;
  friend auto operator<=>(const CrossConnect&, const CrossConnect&) = default;
};

struct CrossConnectBatch {
  std::vector<CrossConnect> remove;  // Taken off first.
  std::vector<CrossConnect> add;     // Then made.
};

struct ApplyResult {
  absl::Status status;
  std::vector<CrossConnect> removed;  // Actually taken off by this call.
  std::vector<CrossConnect> added;    // Actually made by this call.
  // Every cross-connect on the switch after the call, sorted by ingress, when it could be
  // read (always on success).
  std::optional<std::vector<CrossConnect>> observed;
  int commands = 0;  // Protocol commands or requests sent, reads included.
  // Time spent reading back and verifying after the changes were sent (part of the call).
  absl::Duration verify_time;
};

struct SwitchIdentity {
  std::string vendor;
  std::string model;
  std::string serial;
  std::string software_version;
  uint32_t ingress_ports = 0;
  uint32_t egress_ports = 0;
};

enum class PortStatus {
  kEnabled,   // Shutter open; light may pass.
  kDisabled,  // Shutter closed; no light passes.
  kFailed,    // The switch reports the port as failed.
};

struct PortState {
  uint32_t port = 0;
  PortStatus status = PortStatus::kEnabled;
};

// Optical power measured at a port, in dBm with two decimals; kNoLight when there is none.
struct PortPower {
  static constexpr double kNoLight = -99.99;
  uint32_t port = 0;
  double dbm = kNoLight;
};

// Asked by a driver just before it writes each command that changes a switch (cross-connects,
// shutters), every resend after a reconnect or a timeout included; an answer other than OK
// keeps that command unsent and is returned as the command's status. Reads are not gated.
// Empty: every command passes. What it is for: fleetd's commit point, so that a replica that
// may have lost its lease (paused mid-batch, say) sends nothing more, however long it slept.
using ChangeGate = std::function<absl::Status()>;

class OpticalSwitch {
 public:
  virtual ~OpticalSwitch() = default;

  virtual absl::StatusOr<SwitchIdentity> Identity() = 0;
  // Every cross-connect, sorted by ingress.
  virtual absl::StatusOr<std::vector<CrossConnect>> ReadCrossConnects() = 0;
  // Every port, in port order.
  virtual absl::StatusOr<std::vector<PortState>> ReadPorts() = 0;
  // Power at `ports` (every port when empty), in port order.
  virtual absl::StatusOr<std::vector<PortPower>> ReadPower(const std::vector<uint32_t>& ports) = 0;
  // Opens (true) or closes (false) the shutters of `ports`. Idempotent.
  virtual absl::Status SetShutters(const std::vector<uint32_t>& ports, bool open) = 0;
  virtual ApplyResult Apply(const CrossConnectBatch& batch) = 0;
};

// Checks a batch against itself and a switch of `ingress_ports` x `egress_ports`: ports in
// range and on the right side, no port twice among the adds, no remove listed twice.
// Shared by every implementation so they refuse the same batches with the same words.
absl::Status ValidateBatch(const CrossConnectBatch& batch, uint32_t ingress_ports,
                           uint32_t egress_ports);

// What Apply must send, given what the switch holds now: removes that are present, adds
// that are absent. FAILED_PRECONDITION (naming the ports) when an add's port is held by a
// cross-connect the batch does not remove, or a remove names a cross-connect whose ingress
// goes elsewhere.
absl::StatusOr<CrossConnectBatch> PlanBatch(const CrossConnectBatch& batch,
                                            const std::vector<CrossConnect>& current);

// Checks `observed` holds every add and none of the removes of `batch`; INTERNAL naming
// every port that differs otherwise.
absl::Status VerifyBatch(const CrossConnectBatch& batch, const std::vector<CrossConnect>& observed);

// The Apply sequence every implementation runs, so they behave alike: validate against the
// switch's size, read, plan (PlanBatch), send removes, send adds, read back, verify
// (VerifyBatch), and fill `result` (removed/added from the read-back, so a partial failure
// reports what really happened). The driver talks to the device.
struct BatchDriver {
  std::function<absl::StatusOr<std::vector<CrossConnect>>()> read;
  std::function<absl::Status(const std::vector<CrossConnect>&)> remove;
  std::function<absl::Status(const std::vector<CrossConnect>&)> add;
};
absl::Status RunApply(const CrossConnectBatch& batch, uint32_t ingress_ports, uint32_t egress_ports,
                      const BatchDriver& driver, ApplyResult& result);

}  // namespace fleet::switch_adapters

#endif  // FLEET_SWITCH_ADAPTERS_OPTICAL_SWITCH_H_
