// fleetctl's command line: global flags, help, and dispatch to the verbs (get, describe,
// apply, topology, allocation, delete, drain, undrain, reconcile, events, link, health,
// version, completion and help), each group of which lives in its own *_verbs file.
//
// RunFleetctl turns a command line into a verb call; only fleetctl_main.cc reads argv and the
// environment and builds the real channel. The exit codes are in session.h.
#ifndef FLEET_CONTROLLER_CLI_COMMANDS_H_
#define FLEET_CONTROLLER_CLI_COMMANDS_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/grpc_tls.h"
#include "controller/cli/client_config.h"
#include "controller/cli/completion.h"
#include "controller/cli/session.h"

namespace fleet::cli {

// Every verb with its nouns and flags, and the global flags: what the parser accepts, for
// the completion scripts.
CommandLineSpec FleetctlCommandLine();

// What main() takes from the process: the FLEET_* variables, the caller's principal, the clock,
// whether stdout is a terminal that may be coloured, and the stop signal.
struct Environment {
  // The server when neither --server, FLEET_SERVER nor the context names one.
  std::string default_server = "localhost:50051";
  ClientEnvironment variables;
  // operator:$USER; sent only over plaintext (--insecure).
  std::string principal = "operator:unknown";
  const Clock* clock = nullptr;
  // --color=auto colours when this is true: stdout is a terminal and NO_COLOR is not set.
  bool color_terminal = false;
  StopSignal* stop = nullptr;  // Not owned; may be null.
};

// The values --color accepts: auto, always, never.
const std::vector<std::string>& ColorModeNames();

// Builds the stubs for a server address and credentials (client_config.h resolves both);
// main() passes one that opens a real channel. An error (an unreadable file) is printed as
// `error: CODE: message`.
using Connector =
    std::function<absl::StatusOr<ServerStubs>(const std::string& address, const ClientTlsFiles&)>;

// Runs one fleetctl command line (`args` without the program name) and returns the exit
// code. Global flags (--server, --ca, --cert, --key, --insecure, --context, --config,
// -o/--output, --timeout, --color) are accepted anywhere on the line.
// `connect` is called only for verbs that talk to the server, after the line is parsed and the
// connection resolved (no credentials and not --insecure: exit 2, naming what to give).
int RunFleetctl(const std::vector<std::string>& args, const Environment& env,
                const Connector& connect, std::ostream& out, std::ostream& err);

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_COMMANDS_H_
