// fleetctl's verbs: get, describe, apply, topology, delete, drain, undrain, reconcile, events,
// link, health, version, completion (and help).
//
// Each verb takes its parsed arguments and a Session: where to write, which format, and the
// three service stubs. The stubs are StubInterfaces so tests can hand in stubs on an
// in-process server or mocks. RunFleetctl turns a command line into a verb call; only
// fleetctl_main.cc reads argv and the environment and builds the real channel.
//
// Exit codes: kExitOk; kExitFailed when the server (or an inventory file) refused, with
// `error: <CODE_NAME>: <message>` on the error stream; kExitUsage for a malformed command
// line, with the problem and a pointer to --help.
#ifndef FLEET_CONTROLLER_CLI_COMMANDS_H_
#define FLEET_CONTROLLER_CLI_COMMANDS_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/cli/completion.h"
#include "controller/cli/output.h"
#include "fleet/v1/admin.grpc.pb.h"
#include "fleet/v1/inventory.grpc.pb.h"
#include "fleet/v1/topology.grpc.pb.h"

namespace fleet::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// The metadata key every RPC carries the caller in (see fleet/v1/common.proto).
inline constexpr char kPrincipalMetadataKey[] = "x-fleet-principal";

struct ServerStubs {
  std::unique_ptr<v1::InventoryService::StubInterface> inventory;
  std::unique_ptr<v1::TopologyService::StubInterface> topology;
  std::unique_ptr<v1::AdminService::StubInterface> admin;
};

// Stubs for all three services over one channel.
ServerStubs NewServerStubs(const std::shared_ptr<grpc::ChannelInterface>& channel);

// Ctrl-C and SIGTERM for the verbs that run until interrupted (`get --watch`,
// `events --follow`). main() calls Stop() when such a signal arrives; a verb following a
// stream registers the stream's context meanwhile, so Stop() cancels the stream and the verb
// ends cleanly, flushing what it printed, with exit 0. Thread-safe.
class StopSignal {
 public:
  // Cancels the followed stream, if any, and returns whether there was one; when there was
  // none the caller should let the signal end the process as it normally would.
  bool Stop();
  bool stopped() const;

  // While one lives, Stop() cancels `context`; if Stop() came first, cancels it at once.
  class Following {
   public:
    Following(StopSignal* signal, grpc::ClientContext* context);  // `signal` may be null.
    ~Following();
    Following(const Following&) = delete;
    Following& operator=(const Following&) = delete;

   private:
    StopSignal* signal_;
  };

 private:
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* following_ ABSL_GUARDED_BY(mu_) = nullptr;  // Not owned.
};

// What a verb works with. Not owning: everything outlives the verb call.
struct Session {
  ServerStubs* server = nullptr;
  OutputFormat format = OutputFormat::kTable;
  // Deadline of each RPC; for a --wait, of the whole command.
  absl::Duration timeout = absl::Seconds(10);
  std::string principal;         // Sent as x-fleet-principal.
  const Clock* clock = nullptr;  // For ages.
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  bool color = false;          // Colour state words in tables (--color, or a terminal).
  StopSignal* stop = nullptr;  // May be null: nothing stops a follow but the server.

  // Runs one RPC with the deadline and principal set: `rpc(context)` calls the stub.
  grpc::Status Call(const std::function<grpc::Status(grpc::ClientContext*)>& rpc) const;
  // For a stream, which has no per-RPC deadline of its own: sets the principal, and the
  // deadline unless it is absl::InfiniteFuture().
  void Prepare(grpc::ClientContext* context, absl::Time deadline) const;
  // Prints `error: <CODE_NAME>: <message>` and returns kExitFailed.
  int Failed(const grpc::Status& status) const;
};

// `get KIND`: one List RPC, printed as a table or as the List response.
struct GetArgs {
  std::string kind;       // switches, ports, ... (singular accepted).
  std::string switch_id;  // Filters; each applies to some kinds only (see --help).
  std::string host;
  std::string kind_filter;  // A device kind for devices; an object kind for events.
  std::string tenant;
  std::string allocation;
  std::string object;  // Events: object id.
  int64_t after = 0;   // Events: after this sequence number.
  int64_t limit = 0;   // Events: at most this many; 0 is the server's default.
  // Print the list, then again each time it changes, until interrupted or the server ends
  // the event stream. The list is asked for again on each event recorded (WatchEvents), and
  // printed only when it differs: in a table under a WatchHeader, or as one streamed message
  // (a JSON line, a YAML document). For events this is `events --follow`.
  bool watch = false;
};
int Get(const Session& session, const GetArgs& args);

// `describe KIND NAME`: one object with what belongs to it (an allocation with its events).
int Describe(const Session& session, const std::string& kind, const std::string& name);

// `apply -f FILE`: read and parse the inventory file, then ApplyInventory.
struct ApplyArgs {
  std::string file;
  bool dry_run = false;
};
int Apply(const Session& session, const ApplyArgs& args);

// `topology request -f FILE [--dry-run] [--wait] [--lease DURATION]`: sends the request file's
// RequestTopology. With dry_run prints the plan; otherwise the allocation as admitted, or with
// `wait` a line per state change until it is READY (exit 0; then the allocation), FAILED or
// RELEASED (exit 1, with the reason), or the session's timeout passes (exit 1, naming the
// state it was in). DEGRADED is printed and waited through: it may recover.
struct TopologyRequestArgs {
  std::string file;
  bool dry_run = false;
  bool wait = false;
  std::string lease;  // absl::ParseDuration text; overrides the file's `lease:`.
};
int RequestTopology(const Session& session, const TopologyRequestArgs& args);

// `topology release ID [--wait]`: prints the allocation's state after the release; with
// `wait`, each change until RELEASED (exit 0) or FAILED, or the timeout (exit 1).
int ReleaseTopology(const Session& session, const std::string& id, bool wait);

// `topology keepalive ID`: renews the lease and prints when it now expires.
int KeepAlive(const Session& session, const std::string& id);

// `topology phase ID NAME [--wait]`: switches the allocation to phase NAME and prints the
// cross-connects removed and added; with `wait`, each state change until READY (exit 0, then
// the allocation), FAILED or RELEASED, or the timeout (exit 1).
int ActivatePhase(const Session& session, const std::string& id, const std::string& phase,
                  bool wait);

// `topology detach ID DEVICE... [--dry-run] [--wait]`: takes pooled devices out of an attach
// allocation and prints the cross-connects removed and the members left; with `wait`, each
// state change until READY again (exit 0, then the allocation), FAILED, or the timeout.
int DetachDevices(const Session& session, const std::string& id,
                  const std::vector<std::string>& devices, bool dry_run, bool wait);

// `allocation replace ID MEMBER [--spare DEVICE] [--dry-run] [--wait]`: substitutes a spare
// for a failed member and prints the spare and the cross-connects removed and added; with
// `wait`, each state change until READY (exit 0, then the allocation), FAILED or RELEASED, or
// the timeout (exit 1).
struct ReplaceMemberArgs {
  std::string id;
  std::string member;
  std::string spare;  // Empty: the scheduler picks one.
  bool dry_run = false;
  bool wait = false;
};
int ReplaceMember(const Session& session, const ReplaceMemberArgs& args);

// `delete KIND NAME`.
int Delete(const Session& session, const std::string& kind, const std::string& name);

// `drain port SWITCH/PORT | onic ID | host NAME [--evict] [--reason TEXT]`: new circuits are
// refused there; prints the allocations using it (failed with `evict`).
struct DrainArgs {
  std::string kind;  // port, onic or host (plurals accepted).
  std::string name;  // SWITCH/PORT for a port.
  bool evict = false;
  std::string reason;
};
int Drain(const Session& session, const DrainArgs& args);
// `undrain port|onic|host NAME`.
int Undrain(const Session& session, const std::string& kind, const std::string& name);

// `reconcile [--switch ID] [--adopt-unknown | --remove-unknown] [--dry-run]`: prints the drift
// found (and what was done about it) and the counts. Both policies at once is a usage error;
// neither leaves unknown cross-connects to the server's configured policy.
struct ReconcileArgs {
  std::string switch_id;
  bool adopt_unknown = false;
  bool remove_unknown = false;
  bool dry_run = false;
};
int Reconcile(const Session& session, const ReconcileArgs& args);

// `events [--follow] [--after N] [--object-kind K] [--object ID]`: without `follow` the same as
// `get events`; with it, WatchEvents, printing each event as it arrives (a table row, or one
// JSON object per line) until the server ends the stream or the process is interrupted.
struct EventsArgs {
  bool follow = false;
  int64_t after = 0;
  std::string object_kind;
  std::string object;
};
int Events(const Session& session, const EventsArgs& args);

// `link retrain ONIC PORT`: the O-NIC's agent retrains one port (1 or 2; anything else is a
// usage error); prints the port's state afterwards.
int LinkRetrain(const Session& session, const std::string& onic, int64_t port);
// `link status ONIC`: both ports' state as the O-NIC's agent reports it.
int LinkStatus(const Session& session, const std::string& onic);

int Health(const Session& session);

// Always prints the client version; the server's only if it answers Health. Exit 0 either way.
// With -o json|yaml, an object {client, server} (server left out when it did not answer).
int Version(const Session& session);

// `completion bash|zsh`: the shell's completion script, generated from FleetctlCommandLine().
int Completion(const Session& session, const std::string& shell);

// Every verb with its nouns and flags, and the global flags: what the parser accepts, for
// the completion scripts.
CommandLineSpec FleetctlCommandLine();

// What main() takes from the process: the default server address, the caller's principal,
// the clock, whether stdout is a terminal that may be coloured, and the stop signal.
struct Environment {
  std::string default_server = "localhost:50051";
  std::string principal = "operator:unknown";
  const Clock* clock = nullptr;
  // --color=auto colours when this is true: stdout is a terminal and NO_COLOR is not set.
  bool color_terminal = false;
  StopSignal* stop = nullptr;  // Not owned; may be null.
};

// The values --color accepts: auto, always, never.
const std::vector<std::string>& ColorModeNames();

// Builds the stubs for a server address; main() passes one that opens a real channel.
using Connector = std::function<ServerStubs(const std::string& address)>;

// Runs one fleetctl command line (`args` without the program name) and returns the exit
// code. Global flags (--server, -o/--output, --timeout, --color) are accepted anywhere on the
// line.
// `connect` is called only for verbs that talk to the server, after the line is parsed.
int RunFleetctl(const std::vector<std::string>& args, const Environment& env,
                const Connector& connect, std::ostream& out, std::ostream& err);

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_COMMANDS_H_
