// fleet-onic-agent's bring-up verbs: one backend call from the command line, without fleetd.
// For an operator bringing up a host (does this port's link train? is the device that should
// be behind it the one that enumerated?), and for the tests that run the backend on a real
// kernel. The verbs:
//
//   discover               every O-NIC in the config and each port's state
//   read SERIAL PORT       one port's state, changing nothing
//   quiesce SERIAL PORT    unbinds and removes the PCIe functions below the port
//   retrain SERIAL PORT [--expect-vendor HEX] [--expect-device HEX] [--expect-dsn HEX]
//                          retrains, rescans and checks the device found against those given
//   -                      reads such verbs from stdin, one a line, until it ends: one
//                          backend (and so one memory of what was quiesced) for all of them
//
// Each answer is one JSON object on its own line: {"verb", "code" (OK or the status code's
// name), "message", and "link" (the port's LinkState) or, for discover, "onics"}.
#ifndef FLEET_ONIC_AGENT_BRING_UP_H_
#define FLEET_ONIC_AGENT_BRING_UP_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "fleet/v1/agent.pb.h"
#include "onic_agent/backend.h"

namespace fleet::onic_agent {

struct BringUpCommand {
  std::string verb;
  std::string serial;
  uint32_t port = 0;
  // retrain: the device expected behind the port; zero fields are not checked.
  v1::PeerIdentity expected;
  // How long quiesce and retrain may take.
  absl::Duration timeout = absl::Seconds(30);
};

// The expected device as given on the command line: hex, with or without 0x; a DSN also as
// lspci prints it (52-54-00-ff-fe-12-34-56).
struct ExpectedDeviceText {
  std::string vendor;
  std::string device;
  std::string dsn;
};
// Declares --expect-vendor, --expect-device and --expect-dsn on `flags`, bound to `text`.
void DeclareExpectFlags(FlagSet& flags, ExpectedDeviceText* text);

// `words` are the positional arguments: the verb and its operands. INVALID_ARGUMENT naming the
// word and the rule (unknown verb, missing or extra operands, a port other than 1 or 2, an id
// that is not hex, an expected device given to a verb other than retrain).
absl::StatusOr<BringUpCommand> ParseBringUpCommand(const std::vector<std::string>& words,
                                                   const ExpectedDeviceText& expected);

// Runs `command` on `backend` and writes its answer to `out`; returns 0 when it succeeded,
// 1 otherwise.
int RunBringUpCommand(OnicBackend& backend, const BringUpCommand& command, std::ostream& out);

// The `-` form: runs each line of `in` (a verb with its operands and --expect-* flags) and
// writes each answer as it comes; a line that does not parse is answered INVALID_ARGUMENT.
// Returns 0 when `in` ends.
int RunBringUpSession(OnicBackend& backend, std::istream& in, std::ostream& out);

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_BRING_UP_H_
