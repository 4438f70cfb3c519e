// The O-NIC agent's connection to fleetd: it dials out to AgentService.Connect, registers
// its host and O-NICs, answers commands through its backend, exchanges heartbeats, reports
// link changes it notices, and reconnects with jittered exponential backoff whenever the
// stream breaks, registering its full state again.
//
// Commands: each is answered exactly once per arrival. A command id seen before is not run
// again: if it is still running, its one answer will come; if it is done, the recorded
// answer is sent again. Commands for different ports run concurrently; those for one port
// run in arrival order. A command whose deadline has passed is answered DEADLINE_EXCEEDED
// without running.
#ifndef FLEET_ONIC_AGENT_AGENT_H_
#define FLEET_ONIC_AGENT_AGENT_H_

#include <grpcpp/channel.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/grpc_tls.h"
#include "fleet/v1/agent.grpc.pb.h"
#include "onic_agent/agent_metrics.h"
#include "onic_agent/backend.h"

namespace fleet::onic_agent {

struct AgentOptions {
  // fleetd's gRPC address, HOST:PORT; or several, comma-separated, for the replicas of a
  // replicated site: the agent stays with the one that takes it (the leader), and on a
  // refusal or a lost stream tries the next at once, backing off once all have failed.
  std::string controller;
  // How to dial it: mutual TLS, or plaintext with `tls.insecure`. The files are read again on
  // every connection attempt, so a renewed certificate is picked up at the next reconnect.
  ClientTlsFiles tls;
  std::string host;
  std::string software_version;
  absl::Duration min_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(10);
  // How often ports are read to notice link changes nobody asked about.
  absl::Duration monitor_interval = absl::Seconds(1);
  size_t remembered_results = 1024;  // Answers kept for repeated command ids.
  uint64_t seed = 0;                 // Backoff jitter; 0 seeds from the clock.
  // Where commands, retrain times and port states are counted; null: nowhere.
  AgentMetrics* metrics = nullptr;
};

class Agent {
 public:
  // `backend` is not owned and must outlive the agent.
  Agent(AgentOptions options, OnicBackend* backend);
  ~Agent();

  // Connects and serves until Stop(). Blocks.
  void Run();
  // Ends Run() promptly: cancels the stream and wakes any backoff wait. Thread-safe.
  void Stop();

  // For tests and the agent's own status: registrations accepted so far, and whether a
  // stream is registered now.
  int registrations() const;
  bool connected() const;
  // How many times the backend actually ran a command (repeated ids excluded).
  int commands_run() const;
  // Commands waiting behind another on their port.
  int commands_queued() const;

 private:
  using Stream = grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>;
  struct Queued {
    v1::Command command;
    uint64_t session = 0;  // session_ when it arrived: an armed retrain is its stream's.
  };
  struct PortQueue {
    std::deque<Queued> commands;
    std::thread worker;
    // An armed retrain is waiting for its light (RetrainPort.await_light). A quiesce of the
    // port, the stream's end or Stop sets `cancel_arming`, which ends the wait.
    bool arming = false;
    std::atomic<bool> cancel_arming{false};
  };

  // One connection: register, then read until the stream ends. Returns whether it ever
  // registered (a registered connection resets the backoff).
  bool Session(const std::shared_ptr<grpc::Channel>& channel, const std::string& endpoint);
  // Whether `channel` connects within `timeout`; false at once when stopping.
  bool AwaitConnected(grpc::Channel& channel, absl::Duration timeout);
  void Dispatch(const v1::Command& command);
  void PortWorker(std::string key);
  // Runs `command` on the backend. `cancel_arming` ends an armed retrain's wait for light;
  // `training_started` is set to when the backend began (after any such wait).
  v1::CommandResult Execute(const v1::Command& command, const std::atomic<bool>& cancel_arming,
                            absl::Time* training_started);
  // Ends every armed retrain's wait for light.
  void CancelArming() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `message` on the stream; false when there is none or the write failed.
  bool Send(const v1::AgentMessage& message);
  // Sends an answer or a link change after every one handed over before it, so fleetd never
  // hears a port's older state last. To a fleetd that takes batches, answers that pile up
  // while another message is being written go together in the next, so ports that finish
  // training at once cost one message, not one each, and none waits for company.
  void SendInOrder(v1::AgentMessage message);
  // Until `session` ends, at heartbeat_interval_ as it is then.
  void HeartbeatAndMonitor(uint64_t session);
  // Sends a heartbeat, on the heartbeat thread. The agent answers each of fleetd's at once,
  // and beats on its own only when fleetd's have not come for an interval and a half: fleetd
  // sends every agent's together, so the answers come back together and fleetd reads them in
  // a few wakeups, not one per agent at its own phase (most of fleetd's idle CPU with many
  // agents).
  void Beat() ABSL_LOCKS_EXCLUDED(mu_, write_mu_);

  const AgentOptions options_;
  OnicBackend* const backend_;
  AgentMetrics& metrics_;

  // Waiters wait for conditions on mu_ (a port's worker for its queue, the heartbeat loop
  // for its session's end), so a command wakes only the worker of its port.
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  Stream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 0;  // Increments per registered stream.
  absl::Time last_heard_ ABSL_GUARDED_BY(mu_);
  absl::Time last_beat_ ABSL_GUARDED_BY(mu_);  // When this agent last sent a heartbeat.
  uint64_t beat_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  bool beat_due_ ABSL_GUARDED_BY(mu_) = false;  // fleetd's heartbeat came, unanswered yet.
  // fleetd's interval: from `registered`, then from each heartbeat that names one.
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  int commands_run_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, PortQueue> ports_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> running_ ABSL_GUARDED_BY(mu_);  // Command ids queued or running.
  std::map<std::string, v1::CommandResult> results_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> result_order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::LinkStatus> last_status_ ABSL_GUARDED_BY(mu_);  // For link_change.
  // Ports ("SERIAL/PORT") whose link change could not be written (the stream had ended): the
  // next monitor round reads them and reports what it finds, changed or not.
  std::set<std::string> unreported_ ABSL_GUARDED_BY(mu_);
  // Every port discovered at registration (O-NIC serial, port), for the link monitor.
  std::vector<std::pair<std::string, uint32_t>> monitored_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 random_ ABSL_GUARDED_BY(mu_);

  // The current stream's fleetd takes `results` batches (its `registered` said so).
  bool batch_results_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<v1::AgentMessage> outbox_ ABSL_GUARDED_BY(mu_);  // For SendInOrder.
  bool sending_ ABSL_GUARDED_BY(mu_) = false;                  // A thread is emptying it.

  absl::Mutex write_mu_;  // One Write at a time on the stream.
};

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_AGENT_H_
