// Runs the project's real binaries from tests: start a daemon and read the addresses it
// prints, run a command to completion and capture its output. Every wait has a deadline,
// so a hung process fails the test instead of hanging it.
#ifndef FLEET_TESTS_INTEGRATION_SUBPROCESS_H_
#define FLEET_TESTS_INTEGRATION_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/eventually.h"
#include "tests/scratch.h"

namespace fleet::testing {

// A free loopback port below the kernel's ephemeral range, for a daemon that is restarted on
// the port it had (its clients redial it): a port from the ephemeral range can be handed to
// another test's outgoing connection while the daemon is down, and the restart then finds it
// taken. "0" (the kernel's choice) when none is found.
std::string PortOutsideEphemeralRange();

// Path of a project binary in the build tree (FLEET_BIN_DIR).
std::string BinaryPath(const std::string& name);

struct CommandResult {
  int exit_code = -1;  // -1 if killed by a signal or timed out.
  std::string out;
  std::string err;
};

// Runs `argv` to completion (killing it after `timeout`), capturing stdout and stderr.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout = absl::Seconds(60));

// How a test's fleetctl reaches fleetd: plaintext to HOST:PORT (a fleetd run --insecure), or,
// given a fleetctl config file, with its current context (the mutual-TLS demo's
// STATE/fleetctl.yaml, which `fleetd --demo` prints as `fleetctl-config:`).
struct FleetdAt {
  FleetdAt(std::string server) : server(std::move(server)) {}  // NOLINT: a plain address.
  FleetdAt(const char* server) : server(server) {}             // NOLINT
  static FleetdAt WithConfig(std::string fleetctl_config) {
    FleetdAt at("");
    at.fleetctl_config = std::move(fleetctl_config);
    return at;
  }
  std::string server;
  std::string fleetctl_config;
};

// Runs fleetctl against fleetd `at` with a 30 s RPC timeout.
CommandResult Fleetctl(const FleetdAt& at, std::vector<std::string> args);

// How many agents `fleetctl get agents` lists as connected.
int ConnectedAgents(const FleetdAt& at);

// Runs a fleetctl verb against `server` with `-o json` and parses its answer as `Response`;
// a failed run or an answer that does not parse fails the test.
template <typename Response>
Response FleetctlJson(const FleetdAt& at, std::vector<std::string> args) {
  args.insert(args.end(), {"-o", "json"});
  const CommandResult result = Fleetctl(at, std::move(args));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  Response response;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &response, options).ok())
      << result.out;
  return response;
}

// `name` from the counters of the polatis-emu whose REST port is `rest_address`
// (GET /sim/v1/counters); -1, failing the test, when it cannot be read.
int64_t EmulatorCounter(const std::string& rest_address, const std::string& name);

// Writes `text` to a fresh file named `name`.yaml and returns its path.
std::string WriteFile(const std::string& name, const std::string& text);

// A long-running child whose stdout is read line by line; stderr goes to a file for
// post-mortem messages. The destructor kills it if it still runs, and it is killed when the
// thread that started it ends (a test that crashes or times out leaves no daemon behind).
class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const std::vector<std::string>& argv);
  ~Daemon();

  // Reads stdout until a line starting with `prefix` (e.g. "grpc: ") and returns the rest
  // of that line. Lines read on the way are kept in output().
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix,
                                          absl::Duration timeout = absl::Seconds(30));
  // Sends `signal` and waits for exit; returns the exit code, or -signal if it was killed.
  absl::StatusOr<int> Stop(int signal, absl::Duration timeout = absl::Seconds(30));
  // Waits for the child to exit on its own.
  absl::StatusOr<int> Wait(absl::Duration timeout = absl::Seconds(30));
  std::string Stderr() const;
  const std::string& output() const { return output_; }
  pid_t pid() const { return pid_; }

 private:
  Daemon() = default;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string stderr_path_;
  std::string buffer_;
  std::string output_;
  std::optional<int> exit_code_;
};

struct HttpReply {
  int status = 0;
  std::string body;
};

// One HTTP/1.0 request to http://address/path over a plain socket (no client library, so
// tests of the project's HTTP code do not share code with it).
absl::StatusOr<HttpReply> HttpRequest(const std::string& address, const std::string& method,
                                      const std::string& path, const std::string& body = "");

// GET that expects 200; returns the body.
absl::StatusOr<std::string> HttpGet(const std::string& address, const std::string& path);

}  // namespace fleet::testing

#endif  // FLEET_TESTS_INTEGRATION_SUBPROCESS_H_
