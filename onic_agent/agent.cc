#include "onic_agent/agent.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/backoff.h"
#include "common/log.h"
#include "common/proto_time.h"
#include "fleet/v1/names.h"

namespace fleet::onic_agent {
namespace {

// Monitor reads ride the port queues like commands, so a port is never read while a command
// works on it; their ids start with this and their answers become link_change reports.
constexpr char kMonitorPrefix[] = "monitor:";

std::string PortKey(const v1::Command& command) {
  switch (command.action_case()) {
    case v1::Command::kQuiesce:
      return v1::PortName(command.quiesce().onic_serial(), command.quiesce().port());
    case v1::Command::kRetrain:
      return v1::PortName(command.retrain().onic_serial(), command.retrain().port());
    case v1::Command::kReadPort:
      return v1::PortName(command.read_port().onic_serial(), command.read_port().port());
    case v1::Command::kBlink:
      return absl::StrCat(command.blink().onic_serial(), "/blink");
    default:
      return "none";
  }
}

// The command's name in metrics.
const char* CommandName(const v1::Command& command) {
  switch (command.action_case()) {
    case v1::Command::kQuiesce:
      return "quiesce";
    case v1::Command::kRetrain:
      return "retrain";
    case v1::Command::kReadPort:
      return "read_port";
    case v1::Command::kBlink:
      return "blink";
    default:
      return "none";
  }
}

// How long an agent with several fleetd endpoints waits to connect to one before the next.
constexpr absl::Duration kConnectWait = absl::Seconds(2);

}  // namespace

Agent::Agent(AgentOptions options, OnicBackend* backend)
    : options_(std::move(options)),
      backend_(backend),
      metrics_(options_.metrics != nullptr ? *options_.metrics : AgentMetrics::Discarded()),
      random_(options_.seed != 0 ? options_.seed
                                 : static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()))) {}

Agent::~Agent() {
  Stop();
  std::vector<std::thread> workers;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, queue] : ports_) {
      if (queue.worker.joinable()) workers.push_back(std::move(queue.worker));
    }
  }
  for (std::thread& t : workers) t.join();
}

void Agent::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  if (context_ != nullptr) context_->TryCancel();
  CancelArming();
}

void Agent::CancelArming() {
  for (auto& [key, queue] : ports_) {
    if (queue.arming) queue.cancel_arming = true;
  }
}

int Agent::registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

bool Agent::connected() const {
  absl::MutexLock lock(&mu_);
  return stream_ != nullptr && registrations_ > 0 && context_ != nullptr;
}

int Agent::commands_run() const {
  absl::MutexLock lock(&mu_);
  return commands_run_;
}

int Agent::commands_queued() const {
  absl::MutexLock lock(&mu_);
  int queued = 0;
  for (const auto& [key, queue] : ports_) queued += static_cast<int>(queue.commands.size());
  return queued;
}

void Agent::Run() {
  Backoff backoff(options_.min_backoff, options_.max_backoff);
  std::vector<std::string> endpoints;
  for (absl::string_view e : absl::StrSplit(options_.controller, ',', absl::SkipWhitespace())) {
    endpoints.emplace_back(absl::StripAsciiWhitespace(e));
  }
  if (endpoints.empty()) endpoints.push_back(options_.controller);
  size_t next = 0;
  size_t failed_in_a_row = 0;  // Endpoints tried since the last registration.
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    const std::string& endpoint = endpoints[next];
    // A fresh channel per attempt: a channel that lost its server waits out gRPC's own
    // reconnect backoff (1 s, growing to minutes) on top of ours, which would keep a restarted
    // fleetd waiting for its agents.
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        ClientCredentials(options_.tls);
    bool registered = false;
    if (!credentials.ok()) {
      FLEET_LOG(ERROR) << "cannot dial fleetd at " << endpoint << ": "
                       << credentials.status().message();
    } else {
      std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(endpoint, *credentials);
      // Of several, one that cannot be reached (a machine lost) is passed over after a
      // while, not after gRPC's 20 s connection timeout.
      if (endpoints.size() > 1 && !AwaitConnected(*channel, kConnectWait)) {
        FLEET_LOG(INFO) << "fleetd at " << endpoint << " cannot be reached";
      } else {
        registered = Session(channel, endpoint);
      }
    }
    if (endpoints.size() > 1) {
      // Of several replicas only the leader takes agents (the others refuse naming it): after
      // a refusal the next endpoint is tried at once, and the backoff grows only once every
      // endpoint has failed in a row; after a stream with the leader ends (it may be gone) the
      // next is tried after the backoff's minimum.
      next = (next + 1) % endpoints.size();
    }
    if (registered) {
      backoff.Reset();
      failed_in_a_row = 0;
    } else if (++failed_in_a_row % endpoints.size() != 0) {
      continue;
    }
    absl::MutexLock lock(&mu_);
    // Jittered: agents that lost fleetd together do not return together.
    const absl::Time until = absl::Now() + Jittered(backoff.Next(), random_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithDeadline(absl::Condition(&stopping), until);
  }
}

bool Agent::AwaitConnected(grpc::Channel& channel, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // In slices, so that Stop() is not kept waiting.
  while (absl::Now() < deadline) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return false;
    }
    const absl::Time slice = std::min(deadline, absl::Now() + absl::Milliseconds(100));
    if (channel.WaitForConnected(absl::ToChronoTime(slice))) return true;
  }
  return false;
}

bool Agent::Session(const std::shared_ptr<grpc::Channel>& channel, const std::string& endpoint) {
  std::unique_ptr<v1::AgentService::Stub> stub = v1::AgentService::NewStub(channel);
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    context_ = &context;
  }
  stream = stub->Connect(&context);

  // Register with the full current state, every time: fleetd may have restarted.
  v1::AgentMessage hello;
  v1::RegisterAgent* reg = hello.mutable_register_();
  reg->set_host(options_.host);
  reg->set_backend(backend_->name());
  reg->set_software_version(options_.software_version);
  if (backend_->SeesLightArrive()) reg->add_capabilities("armed-retrain");
  absl::StatusOr<std::vector<v1::AgentOnic>> onics = backend_->Discover();
  if (!onics.ok()) {
    FLEET_LOG(ERROR) << "cannot discover O-NICs: " << onics.status();
  } else {
    absl::MutexLock lock(&mu_);
    monitored_.clear();
    for (v1::AgentOnic& onic : *onics) {
      for (const v1::LinkState& port : onic.ports()) {
        monitored_.emplace_back(onic.serial(), port.port());
        last_status_[v1::PortName(onic.serial(), port.port())] = port.status();
      }
      *reg->add_onics() = std::move(onic);
    }
  }
  {
    // `register` goes first: the stream is shared (answers left from the last stream wait to
    // be sent on it) only once it is written.
    absl::MutexLock write(&write_mu_);
    stream->Write(hello);
    absl::MutexLock lock(&mu_);
    stream_ = stream.get();
    last_heard_ = absl::Now();
  }

  bool registered = false;
  std::thread heartbeats;
  v1::ControllerMessage message;
  while (stream->Read(&message)) {
    {
      absl::MutexLock lock(&mu_);
      last_heard_ = absl::Now();
    }
    switch (message.message_case()) {
      case v1::ControllerMessage::kRegistered: {
        absl::Duration interval = FromProtoDuration(message.registered().heartbeat_interval());
        if (interval <= absl::ZeroDuration()) interval = absl::Seconds(1);
        uint64_t session = 0;
        {
          absl::MutexLock lock(&mu_);
          ++registrations_;
          session = ++session_;
          batch_results_ = message.registered().takes_result_batches();
          heartbeat_interval_ = interval;
        }
        metrics_.SetConnected(true);
        if (!registered) {
          registered = true;
          FLEET_LOG(INFO) << "registered with fleetd at " << endpoint << " as host "
                          << options_.host;
          heartbeats = std::thread([this, session] { HeartbeatAndMonitor(session); });
        }
        break;
      }
      case v1::ControllerMessage::kHeartbeat: {
        // Answered at once by the heartbeat thread: this thread only reads.
        absl::MutexLock lock(&mu_);
        beat_due_ = registered;
        if (message.heartbeat().has_interval()) {
          const absl::Duration interval = FromProtoDuration(message.heartbeat().interval());
          if (interval > absl::ZeroDuration()) heartbeat_interval_ = interval;
        }
        break;
      }
      case v1::ControllerMessage::kCommand:
        Dispatch(message.command());
        break;
      default:
        FLEET_LOG(WARNING) << "ignoring unexpected message from fleetd";
    }
  }
  {
    absl::MutexLock write(&write_mu_);
    absl::MutexLock lock(&mu_);
    stream_ = nullptr;
    context_ = nullptr;
    ++session_;  // Ends this session's heartbeat thread.
    beat_due_ = false;
    batch_results_ = false;
    // An armed retrain's answer is for the fleetd that armed it, over this stream: it cannot
    // collect it now, and a fleetd that restarted knows nothing of it.
    CancelArming();
    metrics_.SetConnected(false);
  }
  if (heartbeats.joinable()) heartbeats.join();
  grpc::Status status = stream->Finish();
  FLEET_LOG(INFO) << "stream to fleetd at " << endpoint
                  << " ended: " << (status.ok() ? "closed" : status.error_message());
  return registered;
}

bool Agent::Send(const v1::AgentMessage& message) {
  absl::MutexLock write(&write_mu_);
  Stream* stream = nullptr;
  {
    absl::MutexLock lock(&mu_);
    stream = stream_;
  }
  // No stream: the answer is dropped. fleetd failed the waiting command when the stream
  // broke; a retry with the same id is answered from the record.
  return stream != nullptr && stream->Write(message);
}

void Agent::SendInOrder(v1::AgentMessage message) {
  {
    absl::MutexLock lock(&mu_);
    outbox_.push_back(std::move(message));
    if (sending_) return;  // The thread writing now sends it next.
    sending_ = true;
  }
  while (true) {
    std::vector<v1::AgentMessage> ready;
    bool batch = false;
    {
      absl::MutexLock lock(&mu_);
      if (outbox_.empty()) {
        sending_ = false;
        return;
      }
      ready.swap(outbox_);
      batch = batch_results_;
    }
    for (size_t i = 0; i < ready.size();) {
      if (!batch || !ready[i].has_result() || i + 1 == ready.size() || !ready[i + 1].has_result()) {
        const v1::AgentMessage& next = ready[i++];
        if (!Send(next) && next.has_link_change()) {
          // fleetd never heard of it: told on the next stream, by the next monitor round.
          const v1::LinkState& link = next.link_change();
          absl::MutexLock lock(&mu_);
          unreported_.insert(v1::PortName(link.onic_serial(), link.port()));
        }
        continue;
      }
      v1::AgentMessage results;  // Answers next to each other go as one message.
      while (i < ready.size() && ready[i].has_result()) {
        *results.mutable_results()->add_results() = std::move(*ready[i++].mutable_result());
      }
      Send(results);
    }
  }
}

void Agent::Beat() {
  v1::AgentMessage message;
  {
    absl::MutexLock lock(&mu_);
    beat_due_ = false;
    last_beat_ = absl::Now();
    message.mutable_heartbeat()->set_sequence(++beat_sequence_);
  }
  *message.mutable_heartbeat()->mutable_sent() = ToProtoTime(absl::Now());
  Send(message);
}

void Agent::HeartbeatAndMonitor(uint64_t session) {
  {
    absl::MutexLock lock(&mu_);
    last_beat_ = absl::Now();  // beat_due_ stays: fleetd's first may be in before this thread.
  }
  absl::Time next_monitor = absl::Now() + options_.monitor_interval;
  uint64_t monitor_round = 0;
  while (true) {
    bool beat = false, monitor = false;
    {
      absl::MutexLock lock(&mu_);
      // Woken early to answer fleetd's heartbeat, to stop, or when the session ends; not by
      // every command.
      auto wake = [this, session]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || session_ != session || beat_due_;
      };
      // Unanswered, fleetd's next heartbeat is due about an interval after its last: the
      // agent's own beat waits half an interval more, so that it does not race fleetd's and
      // send two. Read at every wake, as each of fleetd's heartbeats may change it.
      const absl::Duration own_beat_after = heartbeat_interval_ * 3 / 2;
      mu_.AwaitWithDeadline(absl::Condition(&wake),
                            std::min(last_beat_ + own_beat_after, next_monitor));
      if (stopping_ || session_ != session) return;
      if (absl::Now() - last_heard_ > 3 * heartbeat_interval_) {
        FLEET_LOG(WARNING) << "fleetd missed 3 heartbeats; reconnecting";
        if (context_ != nullptr) context_->TryCancel();
        return;
      }
      const absl::Time now = absl::Now();
      // An interval that changed during the wait came with beat_due_: own_beat_after holds.
      beat = beat_due_ || now >= last_beat_ + own_beat_after;
      monitor = now >= next_monitor;
    }
    if (beat) Beat();
    if (monitor) {
      // Up links are read every interval: their light can go, and so is a port whose change
      // fleetd never heard of. A port that is not up changes only by a retrain, which
      // reports itself; it is read every tenth interval to catch anything else. Reading every port
      // each second cost a chassis agent dozens of simulator round trips a second for nothing.
      ++monitor_round;
      std::vector<std::pair<std::string, uint32_t>> due;
      {
        absl::MutexLock lock(&mu_);
        for (const auto& [serial, port] : monitored_) {
          auto last = last_status_.find(v1::PortName(serial, port));
          const bool up = last != last_status_.end() && last->second == v1::LINK_STATUS_UP;
          if (up || monitor_round % 10 == 0 || unreported_.contains(v1::PortName(serial, port))) {
            due.emplace_back(serial, port);
          }
        }
      }
      for (const auto& [serial, port] : due) {
        v1::Command read;
        read.set_id(absl::StrCat(kMonitorPrefix, monitor_round, ":", v1::PortName(serial, port)));
        read.mutable_read_port()->set_onic_serial(serial);
        read.mutable_read_port()->set_port(port);
        Dispatch(read);
      }
      next_monitor = absl::Now() + options_.monitor_interval;
    }
  }
}

void Agent::Dispatch(const v1::Command& command) {
  std::optional<v1::CommandResult> repeat;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    if (auto done = results_.find(command.id()); done != results_.end()) {
      repeat = done->second;
    } else if (running_.contains(command.id())) {
      return;  // Its one answer comes when it finishes.
    } else {
      running_.insert(command.id());
      const std::string key = PortKey(command);
      PortQueue& queue = ports_[key];
      // Taking the port out of service ends a wait to bring it into service.
      if (command.has_quiesce() && queue.arming) queue.cancel_arming = true;
      queue.commands.push_back({command, session_});
      if (!queue.worker.joinable()) queue.worker = std::thread([this, key] { PortWorker(key); });
    }
  }
  if (repeat) {
    v1::AgentMessage message;
    *message.mutable_result() = *repeat;
    SendInOrder(std::move(message));
  }
}

void Agent::PortWorker(std::string key) {
  while (true) {
    v1::Command command;
    const std::atomic<bool>* cancel_arming = nullptr;
    {
      absl::MutexLock lock(&mu_);
      PortQueue& queue = ports_[key];
      // A condition on this queue alone: a command for one port wakes its worker, not every
      // port's (an agent of a GPU chassis has dozens).
      struct HasWork {
        const bool* stopping;
        const std::deque<Queued>* commands;
        bool operator()() const { return *stopping || !commands->empty(); }
      } has_work{&stopping_, &queue.commands};
      mu_.Await(absl::Condition(&has_work));
      if (stopping_) return;
      Queued next = std::move(queue.commands.front());
      queue.commands.pop_front();
      command = std::move(next.command);
      queue.arming = command.has_retrain() && command.retrain().has_await_light();
      // Cancelled as it starts: its stream has ended (nobody will collect the answer), or a
      // quiesce came in behind it.
      queue.cancel_arming =
          queue.arming && (next.session != session_ ||
                           std::any_of(queue.commands.begin(), queue.commands.end(),
                                       [](const Queued& q) { return q.command.has_quiesce(); }));
      cancel_arming = &queue.cancel_arming;
    }
    absl::Time started = absl::Now();
    v1::CommandResult result = Execute(command, *cancel_arming, &started);
    const bool monitor = command.id().rfind(kMonitorPrefix, 0) == 0;
    if (!monitor) metrics_.CommandFinished(CommandName(command), result.code() == 0);
    if (command.has_retrain()) metrics_.RetrainTook(absl::Now() - started);
    if (result.has_link()) metrics_.PortObserved(result.link());
    bool changed = false;
    {
      absl::MutexLock lock(&mu_);
      ports_[key].arming = false;
      running_.erase(command.id());
      const std::string port_key = PortKey(command);
      if (result.has_link()) {
        auto [it, fresh] = last_status_.emplace(port_key, result.link().status());
        changed = !fresh && it->second != result.link().status();
        it->second = result.link().status();
        if (monitor && unreported_.erase(port_key) > 0) changed = true;
      }
      if (!monitor) {
        ++commands_run_;
        results_[command.id()] = result;
        result_order_.push_back(command.id());
        while (result_order_.size() > options_.remembered_results) {
          results_.erase(result_order_.front());
          result_order_.pop_front();
        }
      }
    }
    v1::AgentMessage message;
    if (!monitor) {
      *message.mutable_result() = std::move(result);
      SendInOrder(std::move(message));
    } else if (changed) {
      *message.mutable_link_change() = result.link();
      SendInOrder(std::move(message));
    }
  }
}

v1::CommandResult Agent::Execute(const v1::Command& command, const std::atomic<bool>& cancel_arming,
                                 absl::Time* training_started) {
  v1::CommandResult result;
  result.set_command_id(command.id());
  const absl::Time deadline =
      command.has_deadline() ? FromProtoTime(command.deadline()) : absl::Now() + absl::Seconds(30);
  CommandOutcome outcome;
  if (absl::Now() >= deadline) {
    outcome.status = absl::DeadlineExceededError(
        absl::StrCat("command ", command.id(), " arrived after its deadline"));
  } else {
    switch (command.action_case()) {
      case v1::Command::kQuiesce:
        outcome =
            backend_->Quiesce(command.quiesce().onic_serial(), command.quiesce().port(), deadline);
        break;
      case v1::Command::kRetrain: {
        const v1::RetrainPort& retrain = command.retrain();
        if (retrain.has_await_light() && retrain.expected_peer().onic_serial().empty()) {
          // Any light would do, the old circuit's too: the wait would end before the switch
          // moves.
          outcome.status = absl::InvalidArgumentError(
              absl::StrCat("command ", command.id(), ": await_light needs an expected peer"));
          break;
        }
        if (retrain.has_await_light()) {
          const absl::Time until =
              std::min(deadline, absl::Now() + FromProtoDuration(retrain.await_light()));
          absl::StatusOr<absl::Time> lit = backend_->AwaitLight(
              retrain.onic_serial(), retrain.port(), retrain.expected_peer(), until, cancel_arming);
          if (!lit.ok()) {
            // Cancelled, or the light did not come: not trained. The port may still hear its
            // old circuit; fleetd retrains it once the switch is verified.
            outcome = backend_->ReadPort(retrain.onic_serial(), retrain.port());
            outcome.status =
                lit.status().code() == absl::StatusCode::kDeadlineExceeded
                    ? absl::UnavailableError(absl::StrCat(
                          lit.status().message(), "; not trained before the circuit is made"))
                    : lit.status();
            break;
          }
          // The light came and the port began training on it; the retrain finishes that and
          // judges the light.
          *training_started = *lit;
        }
        outcome = backend_->Retrain(retrain.onic_serial(), retrain.port(), retrain.expected_peer(),
                                    deadline);
        break;
      }
      case v1::Command::kReadPort:
        outcome = backend_->ReadPort(command.read_port().onic_serial(), command.read_port().port());
        break;
      case v1::Command::kBlink:
        outcome.status = backend_->Blink(command.blink().onic_serial(),
                                         FromProtoDuration(command.blink().duration()));
        break;
      default:
        outcome.status =
            absl::InvalidArgumentError(absl::StrCat("command ", command.id(), " has no action"));
    }
  }
  result.set_code(static_cast<int32_t>(outcome.status.code()));
  result.set_message(std::string(outcome.status.message()));
  if (outcome.link.ByteSizeLong() > 0) *result.mutable_link() = outcome.link;
  return result;
}

}  // namespace fleet::onic_agent
