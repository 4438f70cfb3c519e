// fleetd's side of the O-NIC agents: every connected agent's stream, its liveness, what it
// reported, and commands to it.
//
// Each agent holds one AgentService.Connect stream (see proto/fleet/v1/agent.proto for the
// protocol), served on gRPC's callback API: a stream holds no thread. What may wait on the
// store runs on the registry's one events thread, in arrival order: a registration (which
// reads inventory and records events) and a link change (which records one and tells the
// listener), the stream reading nothing more until it is done (as the synchronous reader
// did; a stream waiting so is not dropped for the heartbeats queued behind), and the event
// and listener call of a stream's end (the agent is listed as gone at once), and the count of
// the agents inventory expects (below). Heartbeats and command answers are taken as they are
// read, and the heartbeat thread never waits on the store but to record an agent's going.
// Threads: the events thread and the heartbeat thread, however many agents connect.
// The registry:
// - accepts a stream only after its `register` message, compares the host and O-NIC serials
//   with inventory and, when they differ, accepts the agent but appends an ALARM event that
//   says what differs;
// - replaces an older stream of the same host (an agent that reconnected);
// - sends heartbeats every interval and drops an agent whose heartbeats stop for
//   `missed_heartbeats` intervals (its stream is cancelled, its commands fail UNAVAILABLE);
//   the interval grows with the agents so that they send at most `max_heartbeats_per_second`
//   between them (HeartbeatInterval), and every heartbeat tells the agent the interval it is
//   sent at. "The agents" are those connected or, when more, those inventory expects (one per
//   host or chassis holding an O-NIC): a big site's agents all register at a start, when
//   fleetd is busiest, and judging the first of them at the short interval of a few agents
//   dropped them for lateness that was fleetd's own;
// - routes a command to the agent that reported the O-NIC's serial and waits for the
//   answer until the command's deadline. No connected owner, or an owner that goes away
//   while the command waits → UNAVAILABLE at once. A caller that retries may reuse the
//   command id: the agent runs each id once and answers a repeat from its record.
#ifndef FLEET_CONTROLLER_AGENT_REGISTRY_AGENT_REGISTRY_H_
#define FLEET_CONTROLLER_AGENT_REGISTRY_AGENT_REGISTRY_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/commit_point/commit_point.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/store/event_log.h"
#include "controller/store/inventory_store.h"
#include "fleet/v1/agent.grpc.pb.h"
#include "fleet/v1/inventory.pb.h"

namespace fleet::agent_registry {

struct AgentRegistryOptions {
  absl::Duration heartbeat_interval = absl::Seconds(1);  // The shortest interval.
  int missed_heartbeats = 3;
  // Heartbeats a second from all agents together (each answers fleetd's), above which the
  // interval lengthens: a heartbeat costs fleetd a read and a write, and a big site's
  // heartbeats at a fixed interval would take its cores. 0: the interval is fixed.
  double max_heartbeats_per_second = 0;
  size_t max_queued_messages = 1024;  // Per agent; a stuck stream is dropped past this.
  // Where connected agents and the rx power agents report are exported; null: nowhere.
  metrics::ControllerMetrics* metrics = nullptr;
  // Every Send passes it before any of its commands is queued for a stream; refused, each
  // command's answer is the refusal (commit_point.h); an agent's stream is refused with it
  // when it registers (a replica that does not lead names the leader). Null: every Send
  // passes. Not owned; outlives the registry.
  const CommitPoint* commit_point = nullptr;
};

// Who opened an agent stream (service/caller's AgentPeerOf).
struct AgentPeer {
  std::string identity;  // Recorded in the connect event; compared when a stream is replaced.
  // When authenticated, the stream may register only as `host` (empty: as no host), may
  // replace only a stream of the same identity, and owns only the O-NICs that inventory
  // places on its host. Unauthenticated (fleetd --insecure), it is believed.
  std::string host;
  bool authenticated = false;
};

// A command for the agent owning one O-NIC.
struct AddressedCommand {
  std::string onic_serial;
  v1::Command command;
};

// Commands handed to agents whose answers have not been collected (CommandSender::Send).
// Dropping it uncollected abandons the answers.
class SentCommands {
 public:
  virtual ~SentCommands() = default;
};

// Commands a synchronous sender (a fake in tests) answered as they were handed over.
class AnsweredCommands : public SentCommands {
 public:
  explicit AnsweredCommands(std::vector<absl::StatusOr<v1::CommandResult>> results)
      : results(std::move(results)) {}
  std::vector<absl::StatusOr<v1::CommandResult>> results;
};

// Sending commands to agents, as the engine sees it; AgentRegistry is the real one.
class CommandSender {
 public:
  virtual ~CommandSender() = default;
  // Hands every command to its agent now and returns without waiting for answers, so the
  // caller can do other work (commit a state) while the agents run them. An agent runs the
  // commands for one port in the order they were handed over, whoever sent them.
  virtual std::unique_ptr<SentCommands> Send(std::vector<AddressedCommand> commands,
                                             absl::Time deadline) = 0;
  // Waits for every answer of `sent`, each until the deadline given to Send. The results are
  // in the order of the commands; each is what SendCommand would return.
  virtual std::vector<absl::StatusOr<v1::CommandResult>> Await(
      std::unique_ptr<SentCommands> sent) = 0;
  // Waits, at most `limit`, until every command of `sent` is written to its agent's stream
  // (or answered, or its agent gone). A caller with work of its own to do after Send (a state
  // commit) lets the commands leave first, so the agents start at once.
  virtual void AwaitWritten(const SentCommands& sent, absl::Duration limit) {
    (void)sent;
    (void)limit;
  }
  // Send, then Await.
  std::vector<absl::StatusOr<v1::CommandResult>> SendCommands(
      std::vector<AddressedCommand> commands, absl::Time deadline) {
    return Await(Send(std::move(commands), deadline));
  }
  // Whether a connected agent owns the O-NIC `onic_serial` now.
  virtual bool HasOwner(const std::string& onic_serial) = 0;
  // Whether the agent's last word on this port, in its current connection, is that it is
  // QUIESCED: out of service, and nobody has retrained it since. Quiescing it again would
  // change nothing, so a reconfiguration need not wait for it.
  virtual bool KnownQuiesced(const std::string& onic_serial, uint32_t port) {
    (void)onic_serial;
    (void)port;
    return false;
  }
  // Whether the agent's last word on this port, in its current connection, is that it is UP
  // (a link change or a command's answer): a DOWN reported before it is stale.
  virtual bool KnownUp(const std::string& onic_serial, uint32_t port) {
    (void)onic_serial;
    (void)port;
    return false;
  }
  // Whether the connected agent owning `onic_serial` registered `armed-retrain`: it may be
  // sent a retrain with `await_light` before the circuit is made.
  virtual bool ArmsRetrains(const std::string& onic_serial) {
    (void)onic_serial;
    return false;
  }
};

// The agent capability of RetrainPort.await_light.
inline constexpr char kArmedRetrain[] = "armed-retrain";

class AgentRegistry : public CommandSender {
 public:
  using Reactor = grpc::ServerBidiReactor<v1::AgentMessage, v1::ControllerMessage>;

  // `inventory` (read at registrations and to count the agents it expects), `events` (where
  // connections and disagreements with inventory are recorded) and `clock` are not owned. Heartbeat
  // times, liveness and connection times are read from `clock`; waits (heartbeat period, command
  // deadlines) are on the real clock, as absl::CondVar's are.
  AgentRegistry(AgentRegistryOptions options, store::InventoryStore* inventory,
                store::EventLog* events, const Clock* clock);
  // Stops the heartbeat and events threads. Destroy it after the gRPC server has shut down:
  // every stream's reactor is then done.
  ~AgentRegistry();

  // Serves one agent's stream (AgentService.Connect) until it ends, is replaced, or misses
  // heartbeats; the stream ends OK then. It ends PERMISSION_DENIED when `peer` may not
  // register as the host its register message names, or may not replace that host's current
  // stream (AgentPeer); FAILED_PRECONDITION or INVALID_ARGUMENT for a first message that is
  // not a register, or names no host; UNAVAILABLE once the registry is shutting down.
  Reactor* Connect(grpc::CallbackServerContext* context, const AgentPeer& peer = {});

  // Sends `command` to the agent that owns O-NIC
  // `onic_serial` and waits for the answer. An empty id is filled in; the deadline is set.
  // UNAVAILABLE when no connected agent owns it or the agent goes away; DEADLINE_EXCEEDED past
  // `deadline`. A result whose code is not OK is returned as a CommandResult, not as an error: the
  // caller reads code and link.
  absl::StatusOr<v1::CommandResult> SendCommand(const std::string& onic_serial, v1::Command command,
                                                absl::Time deadline);
  std::unique_ptr<SentCommands> Send(std::vector<AddressedCommand> commands,
                                     absl::Time deadline) override;
  std::vector<absl::StatusOr<v1::CommandResult>> Await(std::unique_ptr<SentCommands> sent) override;
  void AwaitWritten(const SentCommands& sent, absl::Duration limit) override;
  bool HasOwner(const std::string& onic_serial) override;
  // From the port states the agent gave at registration, in command results and in link
  // changes, since it last connected.
  bool KnownQuiesced(const std::string& onic_serial, uint32_t port) override;
  bool KnownUp(const std::string& onic_serial, uint32_t port) override;
  bool ArmsRetrains(const std::string& onic_serial) override;

  // Told when an agent registers (first time or reconnecting; after it is listed as
  // connected), when a connected agent goes away (stream ended, heartbeats missed, not
  // replaced), with the O-NIC serials it owned, and when the current stream of a host reports
  // ports of its own O-NICs DOWN (no light, a wrong peer, too little power: the agent's
  // `detail` says which), as they change or, right after `connected`, as it registers. Never during
  // Shutdown. Set before agents connect; called on the events or the heartbeat thread, without
  // the registry's lock: a listener that does more than a moment's work hands it to another thread,
  // as every stream's events wait for it.
  struct Listener {
    std::function<void(const std::string& host, const std::vector<std::string>& serials)> connected;
    std::function<void(const std::string& host, const std::vector<std::string>& serials,
                       const std::string& why)>
        gone;
    std::function<void(const std::string& host, const std::vector<v1::LinkState>& links)>
        links_down;
  };
  void SetListener(Listener listener);

  // Every agent seen since start, connected or not, by host.
  std::vector<v1::Agent> ListAgents();

  // Cancels every stream (for shutdown), refuses new ones, waits for the heartbeat thread and
  // for the events thread's work under way, so that no listener call is under way once this
  // returns and the listener's owner may go (the streams end with the gRPC server's Shutdown;
  // the events thread runs their ends until the destructor). Idempotent.
  void Shutdown();
  // From now on no agent is dropped for missed heartbeats (heartbeats are still sent, and a
  // stream that ends still ends): fleetd is stopping, its last transactions may keep it too
  // busy to read beats in time, and an agent dropped for that would only have its links
  // marked down in the store for the next start to retrain. The price: a command to an agent
  // that really died meanwhile waits for its deadline. Called first in fleetd's shutdown;
  // Shutdown implies it. Idempotent.
  void StopJudgingLiveness();

 private:
  struct Pending {
    std::string host;
    v1::Command command;
    std::optional<v1::CommandResult> result;
    absl::Status failure;  // Set when the agent went away.
    bool written = false;  // On the agent's stream.
  };
  class Sent;        // The registry's SentCommands.
  class Connection;  // A stream's reactor (agent_registry.cc).
  struct Session {
    std::string host;
    std::string identity;              // AgentPeer::identity.
    Connection* connection = nullptr;  // Valid while the session is in sessions_.
    absl::Time last_heartbeat;
  };

  void HeartbeatLoop();
  // The interval heartbeats are sent at with the agents now connected and expected:
  // `heartbeat_interval`, or longer, so that max(current_.size(), expected_agents_) /
  // interval <= max_heartbeats_per_second.
  absl::Duration HeartbeatInterval() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts the places (hosts, chassis of pooled devices) that hold a device with an O-NIC, each
  // served by one agent, into expected_agents_; reads inventory only when its version moved.
  // On the events thread (queued once at start, and by each beat when none is queued), so a
  // read waiting behind a long store write holds up no heartbeat. A failed read keeps the
  // last count.
  void CountExpectedAgents() ABSL_LOCKS_EXCLUDED(mu_);
  // Queues CountExpectedAgents on the events thread unless one is queued already.
  void QueueCount() ABSL_LOCKS_EXCLUDED(mu_);
  // A connection's steps. The first message must register a host this peer may speak for.
  static absl::StatusOr<v1::RegisterAgent> CheckRegister(const v1::AgentMessage& first,
                                                         const AgentPeer& peer);
  // Checks a registration, records it, and makes it `host`'s current session (ending the one
  // it replaces); returns the session's id, or why the stream may not register. Events thread.
  absl::StatusOr<uint64_t> Register(Connection* connection, const v1::AgentMessage& first,
                                    const AgentPeer& peer);
  // Makes the registration `host`'s current session and queues the answer; returns its id.
  uint64_t OpenSession(Connection* connection, const v1::RegisterAgent& reg, const AgentPeer& peer,
                       const std::vector<std::string>& mismatches,
                       const std::set<std::string>& elsewhere) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A heartbeat or answer read on session `session_id` of `host`; dropped when the session is
  // no longer the host's current one (replaced). A link change is taken on the events thread.
  void Take(const std::string& host, uint64_t session_id, const v1::AgentMessage& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeLinkChange(const std::string& host, uint64_t session_id, const v1::LinkState& link);
  // The session's stream was just heard from (its link change was taken): the heartbeats
  // read after it count from now.
  void Heard(uint64_t session_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes what Enqueue claimed for writing: each on its stream, without the lock, as gRPC
  // may run a reaction inside StartWrite on the calling thread. Every path that enqueues
  // calls it once it has let go of mu_.
  void StartWrites() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `work` on the events thread, after the work queued before it.
  void OnEventsThread(std::function<void()> work);
  void EventsLoop();
  // What an agent reports that disagrees with inventory; empty when it agrees. `elsewhere`
  // gets the reported serials that inventory places on another host or chassis.
  std::vector<std::string> Mismatches(const v1::RegisterAgent& reg,
                                      std::set<std::string>& elsewhere);
  // OK unless `host` has a current stream of an identity other than `identity`: an agent
  // that reconnects is the same identity, and another may not take its links over.
  absl::Status MayReplace(const std::string& host, const std::string& identity)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `message` for the session's stream and, when nothing is being written, claims its
  // write for StartWrites.
  void Enqueue(Session& session, v1::ControllerMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Send's part under the lock: each command routed and queued, or answered at once.
  void SendLocked(std::vector<AddressedCommand>& commands, Sent& sent) ABSL_LOCKS_EXCLUDED(mu_);
  // Closes a session (its stream is cancelled: gRPC runs no reaction inside TryCancel, and the
  // reactor overrides no OnCancel, so this is safe under mu_, which keeps the connection
  // alive); if it is its host's current one, the agent is marked disconnected and its waiting
  // commands fail. Returns true when it was current.
  bool EndSession(uint64_t session_id, absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AppendEvent(const std::string& kind, const std::string& host, v1::EventSeverity severity,
                   const std::string& message);
  // Records a connected agent's going away and tells the listener.
  void Gone(const std::string& host, const std::string& why);
  // Exports the rx power in `link`, as reported by the agent on `host`, and keeps its status.
  void ReportLink(const std::string& host, const v1::LinkState& link)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An answer from the agent on `host`'s current stream: it completes the pending command.
  void TakeResult(const std::string& host, const v1::CommandResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the owner's current connection last said `status` of this port.
  bool LastStatusIs(const std::string& onic_serial, uint32_t port, v1::LinkStatus status);
  // Forgets the link states of `host`'s O-NICs: a new or ended connection knows nothing.
  void ForgetLinks(const std::string& host) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AgentRegistryOptions options_;
  store::InventoryStore* const inventory_;
  store::EventLog* const event_log_;
  const Clock* const clock_;
  metrics::ControllerMetrics& metrics_;

  // Waiters wait for conditions on mu_ (absl evaluates them as it is released), so a change
  // wakes only the threads it concerns: a condition variable signalled at every change woke
  // every session's writer at every answer and every queued command.
  absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool judging_liveness_ ABSL_GUARDED_BY(mu_) = true;
  uint64_t next_session_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_command_ ABSL_GUARDED_BY(mu_) = 1;
  // Prefixes this run's command ids. Agents answer a repeated id from their cache without
  // running it, so ids must not repeat across fleetd restarts.
  const std::string run_;
  // The interval the heartbeat loop set at its last beat (until then, the shortest).
  absl::Duration beat_interval_ ABSL_GUARDED_BY(mu_) = options_.heartbeat_interval;
  size_t expected_agents_ ABSL_GUARDED_BY(mu_) = 0;  // CountExpectedAgents.
  bool count_queued_ ABSL_GUARDED_BY(mu_) = false;   // A count waits on the events thread.
  // The inventory CountExpectedAgents counted, and whether its last read failed; events
  // thread only.
  std::optional<uint64_t> counted_version_;
  bool count_failed_ = false;

  std::map<std::string, v1::Agent> agents_ ABSL_GUARDED_BY(mu_);   // By host.
  std::map<uint64_t, Session> sessions_ ABSL_GUARDED_BY(mu_);      // Open streams, by id.
  std::map<std::string, uint64_t> current_ ABSL_GUARDED_BY(mu_);   // Host → its session.
  std::map<std::string, std::string> owner_ ABSL_GUARDED_BY(mu_);  // Serial → host.
  std::map<std::string, std::shared_ptr<Pending>> pending_ ABSL_GUARDED_BY(mu_);  // By id.
  // The last status each agent reported per (O-NIC serial, port), in its current connection.
  std::map<std::pair<std::string, uint32_t>, v1::LinkStatus> link_status_ ABSL_GUARDED_BY(mu_);
  // Writes Enqueue claimed, each a connection and the message it is to write (the front of its
  // outbox), for StartWrites.
  std::vector<std::pair<Connection*, const v1::ControllerMessage*>> to_write_ ABSL_GUARDED_BY(mu_);
  Listener listener_ ABSL_GUARDED_BY(mu_);

  // The events thread's queue: at most one item per connection that reads nothing more until
  // it is done (a registration, a link change), one per session's end and one count
  // (QueueCount), so it is bounded by the connections.
  absl::Mutex events_mu_;  // Never taken with mu_ held.
  std::deque<std::function<void()>> events_ ABSL_GUARDED_BY(events_mu_);
  uint64_t events_started_ ABSL_GUARDED_BY(events_mu_) = 0;  // Items begun, and finished.
  uint64_t events_done_ ABSL_GUARDED_BY(events_mu_) = 0;
  bool events_stop_ ABSL_GUARDED_BY(events_mu_) = false;
  std::thread events_thread_;  // Started in the constructor, joined in the destructor.

  absl::Mutex join_mu_;  // Taken only to join heartbeats_, never with mu_.
  std::thread heartbeats_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace fleet::agent_registry

#endif  // FLEET_CONTROLLER_AGENT_REGISTRY_AGENT_REGISTRY_H_
