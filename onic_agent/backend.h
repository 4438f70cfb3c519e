// How the agent touches O-NIC hardware. One interface, two implementations:
// `pcie-sysfs` (real hosts: PCIe functions and link registers through sysfs) and `emulated`
// (the Polatis emulator's simulation side-channel).
//
// Contract:
// - Ports are numbered 1 and 2, as in inventory. An unknown O-NIC serial or port number is
//   NOT_FOUND naming it.
// - Every call returns a CommandOutcome: a status (OK, or why not) and the port's link state
//   as it is afterwards, so the controller always learns the state, also on failure.
// - Calls for different O-NICs may run concurrently; the agent never runs two calls for the
//   same port at once.
// - `deadline` bounds the call: past it the outcome is DEADLINE_EXCEEDED with the state
//   reached so far.
#ifndef FLEET_ONIC_AGENT_BACKEND_H_
#define FLEET_ONIC_AGENT_BACKEND_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "fleet/v1/agent.pb.h"

namespace fleet::onic_agent {

struct CommandOutcome {
  absl::Status status;
  v1::LinkState link;
};

class OnicBackend {
 public:
  virtual ~OnicBackend() = default;

  // "pcie-sysfs" or "emulated", as registered with fleetd.
  virtual std::string name() const = 0;

  // The O-NICs this host has, with each port's current link state.
  virtual absl::StatusOr<std::vector<v1::AgentOnic>> Discover() = 0;

  // Takes a port out of service ahead of a circuit change. On PCIe-over-optics: unbinds the
  // drivers of and removes the PCIe functions behind the port. Idempotent; ends QUIESCED.
  virtual CommandOutcome Quiesce(const std::string& serial, uint32_t port, absl::Time deadline) = 0;

  // Retrains a port after its circuit changed and checks the far end: UP when the link
  // trained and `expected` (if it names a peer or a device) is what is on the other end;
  // otherwise DOWN with the reason in `link.detail` and the status: FAILED_PRECONDITION for
  // a wrong peer or device (a wiring error, naming what was seen), UNAVAILABLE for no light
  // or a link that never trained, DEADLINE_EXCEEDED when the deadline passed first.
  virtual CommandOutcome Retrain(const std::string& serial, uint32_t port,
                                 const v1::PeerIdentity& expected, absl::Time deadline) = 0;

  // Whether AwaitLight works: the backend sees a peer's light arrive before training, so the
  // agent registers the `armed-retrain` capability and fleetd may send a retrain before the
  // circuit is made. `pcie-sysfs` cannot: Linux shows no optical power.
  virtual bool SeesLightArrive() const { return false; }

  // For an armed retrain: arms the port, which begins training as `expected`'s light (any
  // peer's when it names none) arrives at usable power, as an armed O-NIC does on signal
  // detect, however late the agent gets to run; the Retrain that follows for the port
  // finishes that training and judges it. Returns when the light arrived (at or before now).
  // DEADLINE_EXCEEDED at `until`; CANCELLED once `cancelled` is set (seen within a poll
  // interval); nothing began then. A backend that cannot see light arrive answers
  // FAILED_PRECONDITION at once.
  virtual absl::StatusOr<absl::Time> AwaitLight(const std::string& serial, uint32_t port,
                                                const v1::PeerIdentity& expected, absl::Time until,
                                                const std::atomic<bool>& cancelled) {
    (void)port, (void)expected, (void)until, (void)cancelled;
    return absl::FailedPreconditionError(
        absl::StrCat("backend ", name(), " cannot see light arrive at O-NIC ", serial));
  }

  // Reads a port's link state and optical power without changing anything.
  virtual CommandOutcome ReadPort(const std::string& serial, uint32_t port) = 0;

  // Blinks the O-NIC's identify LED for `duration` (returns at once).
  virtual absl::Status Blink(const std::string& serial, absl::Duration duration) = 0;
};

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_BACKEND_H_
