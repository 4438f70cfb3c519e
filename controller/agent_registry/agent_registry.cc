#include "controller/agent_registry/agent_registry.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "fleet/v1/names.h"

namespace fleet::agent_registry {
// One agent's stream. Its state is under the registry's mu_. The message read (in_) is
// touched only by whoever owns the read: the reaction, or the work it handed to the events
// thread, which starts the next read when it is done. The reactor is deleted in OnDone, after
// Finish, which only the one who claims the finish (ClaimFinishLocked) calls.
class AgentRegistry::Connection final : public AgentRegistry::Reactor {
 public:
  Connection(AgentRegistry* registry, grpc::CallbackServerContext* context, AgentPeer peer)
      : context(context), registry_(registry), peer_(std::move(peer)) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      End("stream ended", grpc::Status::OK);
      return;
    }
    if (session_id_ == 0) {
      registry_->OnEventsThread([this] {
        absl::StatusOr<uint64_t> opened = registry_->Register(this, in_, peer_);
        if (!opened.ok()) {
          End("", ToGrpcStatus(opened.status()));
          return;
        }
        StartRead(&in_);
      });
      return;
    }
    if (in_.has_link_change()) {
      {
        // Its heartbeats wait behind this in the stream: alive until it is taken.
        absl::MutexLock lock(&registry_->mu_);
        waiting = true;
      }
      registry_->OnEventsThread([this] {
        registry_->TakeLinkChange(host_, session_id_, in_.link_change());
        {
          absl::MutexLock lock(&registry_->mu_);
          waiting = false;
          registry_->Heard(session_id_);
        }
        StartRead(&in_);
      });
      return;
    }
    {
      absl::MutexLock lock(&registry_->mu_);
      registry_->Take(host_, session_id_, in_);
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    const v1::ControllerMessage* next = nullptr;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&registry_->mu_);
      writing = false;
      const v1::ControllerMessage& written = outbox.front();
      if (ok && written.has_command()) {
        if (auto it = registry_->pending_.find(written.command().id());
            it != registry_->pending_.end()) {
          it->second->written = true;
        }
      }
      outbox.pop_front();
      if (!ok && !closing) {  // The reads end too, and End ends the session.
        closing = true;
        context->TryCancel();
      }
      if (!closing && !outbox.empty()) {
        writing = true;
        next = &outbox.front();  // Stays put (a deque's elements do) until written.
      } else {
        finish = ClaimFinishLocked();
      }
    }
    if (next != nullptr) {
      StartWrite(next);
    } else if (finish) {
      Finish(*finish);
    }
  }

  void OnDone() override { delete this; }

  // Once no read is outstanding (in a reaction, or on the events thread): the stream is over
  // (`why`, for the session's end), to end with `status` once what is being written is
  // written. The agent is listed as gone at once; its event and the listener follow on the
  // events thread.
  void End(const std::string& why, const grpc::Status& status) {
    // Once the lock is let go, another may finish and free this: only copies are used after.
    AgentRegistry* const registry = registry_;
    const std::string host = host_;
    bool was_current = false;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&registry->mu_);
      if (session_id_ != 0) was_current = registry->EndSession(session_id_, why);
      if (!status.ok()) status_ = status;
      reads_done_ = true;
      finish = ClaimFinishLocked();
    }
    if (was_current) registry->OnEventsThread([registry, host, why] { registry->Gone(host, why); });
    if (finish) Finish(*finish);
  }

  grpc::CallbackServerContext* const context;
  // Set once, by Register on the events thread (under mu_), before it starts the next read;
  // gRPC orders StartRead before the OnReadDone that reads them, and ClaimFinishLocked reads
  // them under mu_.
  uint64_t session_id_ = 0;
  std::string host_;
  // A link change of this stream waits for the events thread (HeartbeatLoop spares it).
  bool waiting ABSL_GUARDED_BY(registry_->mu_) = false;
  // What is queued for the stream; its front is being written while `writing`.
  std::deque<v1::ControllerMessage> outbox ABSL_GUARDED_BY(registry_->mu_);
  bool writing ABSL_GUARDED_BY(registry_->mu_) = false;
  // Replaced, dead, stuck or shutting down: nothing more is written.
  bool closing ABSL_GUARDED_BY(registry_->mu_) = false;

 private:
  // Claims the stream's end once the reads are over and no write is under way, and takes the
  // session out of the registry: the claimer calls Finish with the status returned.
  std::optional<grpc::Status> ClaimFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_->mu_) {
    if (!reads_done_ || writing || finished_) return std::nullopt;
    finished_ = true;
    if (session_id_ != 0) registry_->sessions_.erase(session_id_);
    return status_;
  }

  AgentRegistry* const registry_;
  const AgentPeer peer_;
  v1::AgentMessage in_;
  grpc::Status status_ ABSL_GUARDED_BY(registry_->mu_);
  bool reads_done_ ABSL_GUARDED_BY(registry_->mu_) = false;
  bool finished_ ABSL_GUARDED_BY(registry_->mu_) = false;
};

AgentRegistry::AgentRegistry(AgentRegistryOptions options, store::InventoryStore* inventory,
                             store::EventLog* events, const Clock* clock)
    : options_(options),
      inventory_(inventory),
      event_log_(events),
      clock_(clock),
      metrics_(options.metrics != nullptr ? *options.metrics
                                          : metrics::ControllerMetrics::Discarded()),
      // An identity unique to this run, so not from `clock`, which tests hold still.
      run_(absl::StrCat("r", absl::ToUnixMicros(absl::Now()))),
      events_thread_([this] {
        NameThisThread("fleet-agent-ev");
        EventsLoop();
      }),
      heartbeats_([this] {
        NameThisThread("fleet-heartbeat");
        HeartbeatLoop();
      }) {
  QueueCount();  // First on the events thread: before any agent registers and is told the interval.
}

AgentRegistry::~AgentRegistry() {
  Shutdown();
  {
    absl::MutexLock lock(&events_mu_);
    events_stop_ = true;
  }
  events_thread_.join();
}

void AgentRegistry::StopJudgingLiveness() {
  absl::MutexLock lock(&mu_);
  judging_liveness_ = false;
}

void AgentRegistry::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    judging_liveness_ = false;
    for (auto& [id, session] : sessions_) {
      session.connection->closing = true;
      session.connection->context->TryCancel();
    }
  }
  {
    // Work that starts from now on sees shutting_down_ and calls no listener: wait only for
    // the item under way, if any.
    absl::MutexLock lock(&events_mu_);
    const uint64_t started = events_started_;
    auto done = [this, started]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(events_mu_) { return events_done_ >= started; };
    events_mu_.Await(absl::Condition(&done));
  }
  absl::MutexLock join(&join_mu_);
  if (heartbeats_.joinable()) heartbeats_.join();
}

AgentRegistry::Reactor* AgentRegistry::Connect(grpc::CallbackServerContext* context,
                                               const AgentPeer& peer) {
  return new Connection(this, context, peer);
}

void AgentRegistry::OnEventsThread(std::function<void()> work) {
  absl::MutexLock lock(&events_mu_);
  events_.push_back(std::move(work));
}

void AgentRegistry::EventsLoop() {
  while (true) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&events_mu_);
      events_done_ = events_started_;
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(events_mu_) {
        return !events_.empty() || events_stop_;
      };
      events_mu_.Await(absl::Condition(&ready));
      if (events_.empty()) return;  // Stopping, and every stream is done.
      work = std::move(events_.front());
      events_.pop_front();
      ++events_started_;
    }
    work();
  }
}

void AgentRegistry::AppendEvent(const std::string& kind, const std::string& host,
                                v1::EventSeverity severity, const std::string& message) {
  v1::Event event;
  event.set_kind(kind);
  event.set_object_kind("agent");
  event.set_object_id(host);
  event.set_severity(severity);
  event.set_message(message);
  event.set_principal(absl::StrCat("agent:", host));
  if (absl::Status s = event_log_->AppendEvent(event); !s.ok()) {
    FLEET_LOG(ERROR) << "cannot record event " << kind << " for agent " << host << ": " << s;
  }
}

std::vector<std::string> AgentRegistry::Mismatches(const v1::RegisterAgent& reg,
                                                   std::set<std::string>& elsewhere) {
  std::vector<std::string> out;
  // An agent runs on a host (its CPUs' O-NICs) or on a device chassis's management
  // controller (the pooled devices' O-NICs); an O-NIC belongs to its device's host, or to the
  // device's chassis when it has no host. Only this place's rows are read (and a reported
  // serial found elsewhere), so a registration costs what the agent holds, not the site.
  auto unreadable = [&out](const absl::Status& status) {
    out.push_back(absl::StrCat("inventory could not be read: ", status.message()));
    return out;
  };
  absl::StatusOr<std::vector<v1::Onic>> here = inventory_->ListOnics({.place = reg.host()});
  if (!here.ok()) return unreadable(here.status());
  absl::StatusOr<std::vector<v1::Device>> pooled = inventory_->ListDevices({.chassis = reg.host()});
  if (!pooled.ok()) return unreadable(pooled.status());
  if (pooled->empty() && !inventory_->GetHost(reg.host()).ok()) {
    out.push_back(absl::StrCat("host ", reg.host(), " is not in inventory"));
  }
  std::map<std::string, const v1::Onic*> by_serial;
  for (const v1::Onic& o : *here) by_serial[o.serial()] = &o;
  std::set<std::string> reported;
  for (const v1::AgentOnic& onic : reg.onics()) {
    if (onic.serial().empty()) {  // An empty filter would match every O-NIC below.
      out.push_back("an O-NIC was reported without a serial");
      continue;
    }
    reported.insert(onic.serial());
    std::optional<v1::Onic> known;
    if (auto it = by_serial.find(onic.serial()); it != by_serial.end()) {
      known = *it->second;
    } else {
      absl::StatusOr<std::vector<v1::Onic>> found =
          inventory_->ListOnics({.serial = onic.serial()});
      if (!found.ok()) return unreadable(found.status());
      if (found->empty()) {
        out.push_back(absl::StrCat("O-NIC serial ", onic.serial(), " is not in inventory"));
        continue;
      }
      known = found->front();
      // Its place: its device's host, or its chassis when pooled.
      std::string place = known->host();
      if (place.empty()) {
        absl::StatusOr<v1::Device> device = inventory_->GetDevice(known->device());
        if (!device.ok()) return unreadable(device.status());
        place = device->chassis();
      }
      elsewhere.insert(onic.serial());
      out.push_back(absl::StrCat("O-NIC ", known->id(), " (serial ", onic.serial(), ") is on '",
                                 place, "' in inventory"));
    }
    if (!onic.pcie_address().empty() && !known->pcie_address().empty() &&
        onic.pcie_address() != known->pcie_address()) {
      out.push_back(absl::StrCat("O-NIC ", known->id(), ": agent reports PCIe ",
                                 onic.pcie_address(), ", inventory says ", known->pcie_address()));
    }
  }
  for (const v1::Onic& o : *here) {
    if (!reported.contains(o.serial())) {
      out.push_back(absl::StrCat("O-NIC ", o.id(), " (serial ", o.serial(),
                                 ") is in inventory but was not reported"));
    }
  }
  return out;
}

absl::Status AgentRegistry::MayReplace(const std::string& host, const std::string& identity) {
  auto current = current_.find(host);
  if (current == current_.end()) return absl::OkStatus();
  const std::string& holder = sessions_[current->second].identity;
  if (holder == identity) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("host ", host, " is connected as ", holder, "; ",
                                                  identity, " may not replace its stream"));
}

void AgentRegistry::Enqueue(Session& session, v1::ControllerMessage message) {
  Connection& c = *session.connection;
  if (c.closing) return;
  if (c.outbox.size() >= options_.max_queued_messages) {
    // A stream this far behind is stuck: drop it; the agent reconnects.
    c.closing = true;
    c.context->TryCancel();
    return;
  }
  c.outbox.push_back(std::move(message));
  if (!c.writing) {
    c.writing = true;
    to_write_.emplace_back(&c, &c.outbox.front());
  }
}

void AgentRegistry::StartWrites() {
  std::vector<std::pair<Connection*, const v1::ControllerMessage*>> claimed;
  {
    absl::MutexLock lock(&mu_);
    claimed.swap(to_write_);
  }
  // Each connection stays until its claimed write is done (ClaimFinishLocked waits for it).
  for (auto& [connection, message] : claimed) connection->StartWrite(message);
}

bool AgentRegistry::EndSession(uint64_t session_id, absl::string_view why) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return false;
  Session& session = it->second;
  session.connection->closing = true;
  session.connection->context->TryCancel();
  auto current = current_.find(session.host);
  if (current == current_.end() || current->second != session_id) return false;
  current_.erase(current);
  ForgetLinks(session.host);
  metrics_.SetAgentsConnected(static_cast<int>(current_.size()));
  v1::Agent& agent = agents_[session.host];
  agent.set_connected(false);
  for (auto& [id, pending] : pending_) {
    if (pending->host == session.host && !pending->result) {
      pending->failure =
          absl::UnavailableError(absl::StrCat("agent on host ", session.host, " went away: ", why));
    }
  }
  return true;
}

absl::StatusOr<v1::RegisterAgent> AgentRegistry::CheckRegister(const v1::AgentMessage& first,
                                                               const AgentPeer& peer) {
  if (!first.has_register_()) {
    return absl::FailedPreconditionError(
        "the first message on AgentService.Connect must be register");
  }
  const v1::RegisterAgent& reg = first.register_();
  if (reg.host().empty()) return absl::InvalidArgumentError("register.host is empty");
  if (peer.authenticated && reg.host() != peer.host) {
    return absl::PermissionDeniedError(
        peer.host.empty()
            ? absl::StrCat("identity ", peer.identity, " is not the agent of any host")
            : absl::StrCat("agent identity ", peer.identity, " may register as host ", peer.host,
                           " only, not ", reg.host()));
  }
  return reg;
}

uint64_t AgentRegistry::OpenSession(Connection* connection, const v1::RegisterAgent& reg,
                                    const AgentPeer& peer,
                                    const std::vector<std::string>& mismatches,
                                    const std::set<std::string>& elsewhere) {
  const std::string& host = reg.host();
  if (auto old = current_.find(host); old != current_.end()) {
    EndSession(old->second, "replaced by a new connection");
  }
  const uint64_t session_id = next_session_++;
  Session& session = sessions_[session_id];
  session.host = host;
  session.identity = peer.identity;
  session.connection = connection;
  session.last_heartbeat = clock_->Now();
  current_[host] = session_id;
  metrics_.SetAgentsConnected(static_cast<int>(current_.size()));

  v1::Agent& agent = agents_[host];
  agent.set_host(host);
  agent.set_backend(reg.backend());
  agent.set_software_version(reg.software_version());
  *agent.mutable_capabilities() = reg.capabilities();
  ForgetLinks(host);
  agent.clear_onic_serials();
  for (const v1::AgentOnic& onic : reg.onics()) {
    agent.add_onic_serials(onic.serial());
    // An authenticated agent is sent commands for its own host's O-NICs only.
    if (!peer.authenticated || !elsewhere.contains(onic.serial())) owner_[onic.serial()] = host;
    for (const v1::LinkState& link : onic.ports()) ReportLink(host, link);
  }
  agent.set_connected(true);
  const absl::Time now = clock_->Now();
  *agent.mutable_connected_since() = ToProtoTime(now);
  *agent.mutable_last_heartbeat() = ToProtoTime(now);
  agent.clear_inventory_mismatches();
  for (const std::string& m : mismatches) agent.add_inventory_mismatches(m);

  v1::ControllerMessage registered;
  // The next beat may be a longer interval away than the agents now connected call for (it
  // was set when more were): the agent is told the longer.
  *registered.mutable_registered()->mutable_heartbeat_interval() =
      ToProtoDuration(std::max(beat_interval_, HeartbeatInterval()));
  registered.mutable_registered()->set_takes_result_batches(true);
  Enqueue(session, std::move(registered));
  connection->session_id_ = session_id;
  connection->host_ = host;
  return session_id;
}

void AgentRegistry::TakeLinkChange(const std::string& host, uint64_t session_id,
                                   const v1::LinkState& link) {
  std::function<void(const std::string&, const std::vector<v1::LinkState>&)> links_down;
  {
    absl::MutexLock lock(&mu_);
    // A replaced connection's last words say nothing about the port now.
    auto current = current_.find(host);
    if (current != current_.end() && current->second == session_id) {
      ReportLink(host, link);
      // Only the owner's word on a port counts (Listener).
      auto owner = owner_.find(link.onic_serial());
      if (link.status() == v1::LINK_STATUS_DOWN && owner != owner_.end() && owner->second == host &&
          !shutting_down_) {
        links_down = listener_.links_down;
      }
    }
  }
  // Recorded outside the lock: it writes to the store.
  AppendEvent(
      "agent.link_change", host,
      link.status() == v1::LINK_STATUS_UP ? v1::EVENT_SEVERITY_INFO : v1::EVENT_SEVERITY_WARNING,
      absl::StrCat("O-NIC ", link.onic_serial(), " port ", link.port(), " on host ", host,
                   " is now ", v1::Name(link.status()), link.detail().empty() ? "" : ": ",
                   link.detail()));
  if (links_down) links_down(host, {link});
}

void AgentRegistry::Heard(uint64_t session_id) {
  auto it = sessions_.find(session_id);
  if (it != sessions_.end()) it->second.last_heartbeat = clock_->Now();
}

void AgentRegistry::Take(const std::string& host, uint64_t session_id,
                         const v1::AgentMessage& message) {
  auto current = current_.find(host);
  // A replaced stream's words are dropped; it is being cancelled.
  if (current == current_.end() || current->second != session_id) return;
  switch (message.message_case()) {
    case v1::AgentMessage::kHeartbeat: {
      const absl::Time now = clock_->Now();
      sessions_[session_id].last_heartbeat = now;
      *agents_[host].mutable_last_heartbeat() = ToProtoTime(now);
      break;
    }
    case v1::AgentMessage::kResult:
      TakeResult(host, message.result());
      break;
    case v1::AgentMessage::kResults:
      for (const v1::CommandResult& result : message.results().results()) {
        TakeResult(host, result);
      }
      break;
    default:
      FLEET_LOG(WARNING) << "agent " << host << ": ignoring unexpected message "
                         << message.message_case();
  }
}

absl::StatusOr<uint64_t> AgentRegistry::Register(Connection* connection,
                                                 const v1::AgentMessage& first,
                                                 const AgentPeer& peer) {
  ASSIGN_OR_RETURN(const v1::RegisterAgent reg, CheckRegister(first, peer));
  if (options_.commit_point != nullptr) {
    // An agent is taken only by a fleetd that may command it: a replica that does not lead
    // refuses it naming the leader, and the agent dials its next endpoint.
    RETURN_IF_ERROR(options_.commit_point->Pass(Effect::kAgentCommand));
  }
  const std::string& host = reg.host();
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("fleetd is stopping");
  }
  std::set<std::string> elsewhere;
  const std::vector<std::string> mismatches = Mismatches(reg, elsewhere);
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("fleetd is stopping");
    // Checked again when the session is made; here so that a refused stream records nothing.
    RETURN_IF_ERROR(MayReplace(host, peer.identity));
  }
  // Recorded before the agent is listed, so whoever sees it connected also finds the alarm.
  AppendEvent("agent.connected", host, v1::EVENT_SEVERITY_INFO,
              absl::StrCat("agent on host ", host, " connected as ",
                           peer.identity.empty() ? "anonymous" : peer.identity, " (", reg.backend(),
                           " backend, ", reg.onics_size(), " O-NICs, version ",
                           reg.software_version(), ")"));
  if (!mismatches.empty()) {
    AppendEvent("agent.inventory_mismatch", host, v1::EVENT_SEVERITY_ALARM,
                absl::StrCat("agent on host ", host,
                             " disagrees with inventory: ", absl::StrJoin(mismatches, "; ")));
  }
  uint64_t session_id = 0;
  std::function<void(const std::string&, const std::vector<std::string>&)> on_connect;
  std::function<void(const std::string&, const std::vector<v1::LinkState>&)> links_down;
  std::vector<v1::LinkState> down;  // Ports of its own O-NICs it registers DOWN.
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("fleetd is stopping");
    RETURN_IF_ERROR(MayReplace(host, peer.identity));
    session_id = OpenSession(connection, reg, peer, mismatches, elsewhere);
    on_connect = listener_.connected;
    links_down = listener_.links_down;
    for (const v1::AgentOnic& onic : reg.onics()) {
      auto owner = owner_.find(onic.serial());
      if (owner == owner_.end() || owner->second != host) continue;
      for (const v1::LinkState& link : onic.ports()) {
        if (link.status() == v1::LINK_STATUS_DOWN) down.push_back(link);
      }
    }
  }
  StartWrites();
  if (on_connect) {
    std::vector<std::string> serials;
    for (const v1::AgentOnic& onic : reg.onics()) serials.push_back(onic.serial());
    on_connect(host, serials);
  }
  // A link that went dark while fleetd or the agent was away is found here, not as a change.
  if (links_down && !down.empty()) links_down(host, down);
  return session_id;
}

absl::Duration AgentRegistry::HeartbeatInterval() const {
  if (options_.max_heartbeats_per_second <= 0) return options_.heartbeat_interval;
  const size_t agents = std::max(current_.size(), expected_agents_);
  const absl::Duration exact =
      absl::Seconds(static_cast<double>(agents) / options_.max_heartbeats_per_second);
  if (exact <= options_.heartbeat_interval) return options_.heartbeat_interval;
  // Rounded up to 100 ms, so that agents coming and going do not change it at every beat.
  return absl::Ceil(exact, absl::Milliseconds(100));
}

void AgentRegistry::CountExpectedAgents() {
  if (options_.max_heartbeats_per_second <= 0) return;  // The interval is fixed.
  const uint64_t version = inventory_->InventoryVersion();
  if (counted_version_ == version) return;
  absl::StatusOr<std::vector<v1::Device>> devices = inventory_->ListDevices({});
  if (!devices.ok()) {
    if (!count_failed_) {  // Once, not at every beat it is tried again.
      FLEET_LOG(WARNING) << "agent heartbeats: cannot count the agents inventory expects, "
                            "keeping the last count: "
                         << devices.status();
    }
    count_failed_ = true;
    return;
  }
  count_failed_ = false;
  std::set<std::string> places;  // As the store's OnicFilter::place: the host, else the chassis.
  for (const v1::Device& device : *devices) {
    const std::string& place = device.host().empty() ? device.chassis() : device.host();
    if (device.onics_size() > 0 && !place.empty()) places.insert(place);
  }
  counted_version_ = version;
  absl::MutexLock lock(&mu_);
  expected_agents_ = places.size();
}

void AgentRegistry::QueueCount() {
  {
    absl::MutexLock lock(&mu_);
    // Not once stopping: the events loop would run it while the registry is destroyed.
    if (count_queued_ || shutting_down_ || options_.max_heartbeats_per_second <= 0) return;
    count_queued_ = true;
  }
  OnEventsThread([this] {
    {
      absl::MutexLock lock(&mu_);
      count_queued_ = false;  // A change from now on is seen by the next one queued.
    }
    CountExpectedAgents();
  });
}

void AgentRegistry::HeartbeatLoop() {
  uint64_t sequence = 0;
  absl::Time next = absl::Now() + options_.heartbeat_interval;
  // Missed heartbeats are counted in the longest interval of the last `missed_heartbeats`
  // that have passed: an interval that just shrank (agents left) does not drop an agent for
  // the longer gaps before it. Each beat pushes the interval it starts, so one more is kept.
  std::deque<absl::Duration> recent;
  while (true) {
    std::vector<std::string> dropped;
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutting_down_; };
      mu_.AwaitWithDeadline(absl::Condition(&stopping), next);
      if (shutting_down_) return;
      const absl::Duration interval = HeartbeatInterval();
      beat_interval_ = interval;
      metrics_.SetAgentHeartbeatInterval(interval);
      next = absl::Now() + interval;
      recent.push_back(interval);
      while (recent.size() > static_cast<size_t>(std::max(options_.missed_heartbeats, 1)) + 1) {
        recent.pop_front();
      }
      const absl::Time now = clock_->Now();
      const absl::Duration limit = *absl::c_max_element(recent) * options_.missed_heartbeats;
      std::vector<std::pair<uint64_t, std::string>> dead;
      for (auto& [host, id] : current_) {
        Session& session = sessions_[id];
        if (judging_liveness_ && now - session.last_heartbeat > limit &&
            !session.connection->waiting) {
          dead.emplace_back(id, host);
          continue;
        }
        v1::ControllerMessage beat;
        beat.mutable_heartbeat()->set_sequence(++sequence);
        *beat.mutable_heartbeat()->mutable_sent() = ToProtoTime(now);
        *beat.mutable_heartbeat()->mutable_interval() = ToProtoDuration(interval);
        Enqueue(session, std::move(beat));
      }
      for (const auto& [id, host] : dead) {
        if (EndSession(id, "missed heartbeats")) dropped.push_back(host);
      }
    }
    StartWrites();
    for (const std::string& host : dropped) {
      FLEET_LOG(WARNING) << "agent on host " << host << " missed " << options_.missed_heartbeats
                         << " heartbeats; dropped it";
      Gone(host, absl::StrCat("missed ", options_.missed_heartbeats, " heartbeats"));
    }
    QueueCount();  // For the next beat, when inventory changed.
  }
}

absl::StatusOr<v1::CommandResult> AgentRegistry::SendCommand(const std::string& onic_serial,
                                                             v1::Command command,
                                                             absl::Time deadline) {
  std::vector<AddressedCommand> one;
  one.push_back({onic_serial, std::move(command)});
  return std::move(SendCommands(std::move(one), deadline).front());
}

// What Send handed over: the answers known at once (no owner) and the commands waiting.
// Dropped uncollected, it takes its commands out of the waiting list.
class AgentRegistry::Sent : public SentCommands {
 public:
  Sent(AgentRegistry* registry, size_t n, absl::Time deadline)
      : registry(registry),
        out(n, absl::UnknownError("not sent")),
        waiting(n),
        deadline(deadline) {}
  ~Sent() override {
    absl::MutexLock lock(&registry->mu_);
    for (const std::shared_ptr<Pending>& p : waiting) {
      if (p) registry->pending_.erase(p->command.id());
    }
  }
  AgentRegistry* const registry;
  std::vector<absl::StatusOr<v1::CommandResult>> out;
  std::vector<std::shared_ptr<Pending>> waiting;
  const absl::Time deadline;
};

std::unique_ptr<SentCommands> AgentRegistry::Send(std::vector<AddressedCommand> commands,
                                                  absl::Time deadline) {
  auto sent = std::make_unique<Sent>(this, commands.size(), deadline);
  // Outside the lock every stream needs, so that the fence never holds up the agents.
  if (options_.commit_point != nullptr) {
    if (absl::Status passed = options_.commit_point->Pass(Effect::kAgentCommand); !passed.ok()) {
      for (absl::StatusOr<v1::CommandResult>& out : sent->out) out = passed;
      return sent;
    }
  }
  SendLocked(commands, *sent);
  StartWrites();
  return sent;
}

void AgentRegistry::SendLocked(std::vector<AddressedCommand>& commands, Sent& sent) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < commands.size(); ++i) {
    const std::string& serial = commands[i].onic_serial;
    v1::Command& command = commands[i].command;
    auto owner = owner_.find(serial);
    if (owner == owner_.end()) {
      sent.out[i] =
          absl::UnavailableError(absl::StrCat("no agent has reported O-NIC serial ", serial));
      continue;
    }
    auto current = current_.find(owner->second);
    if (current == current_.end()) {
      sent.out[i] = absl::UnavailableError(absl::StrCat("the agent of host ", owner->second,
                                                        " (O-NIC ", serial, ") is not connected"));
      continue;
    }
    if (command.id().empty()) command.set_id(absl::StrCat(run_, "-c", next_command_++));
    // A retrain puts the port back in service (or tries to): from now on it is not known
    // to be quiesced, whatever its answer.
    if (command.has_retrain()) {
      link_status_.erase({command.retrain().onic_serial(), command.retrain().port()});
    }
    *command.mutable_deadline() = ToProtoTime(sent.deadline);
    auto pending = std::make_shared<Pending>();
    pending->host = owner->second;
    pending->command = command;
    pending_[command.id()] = pending;
    sent.waiting[i] = pending;
    v1::ControllerMessage message;
    *message.mutable_command() = std::move(command);
    Enqueue(sessions_[current->second], std::move(message));
  }
}

void AgentRegistry::AwaitWritten(const SentCommands& handed, absl::Duration limit) {
  const auto& sent = static_cast<const Sent&>(handed);
  const absl::Time until = std::min(sent.deadline, absl::Now() + limit);
  absl::MutexLock lock(&mu_);
  auto all_written = [&sent]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const auto& p : sent.waiting) {
      if (p && !p->written && !p->result && p->failure.ok()) return false;
    }
    return true;
  };
  mu_.AwaitWithDeadline(absl::Condition(&all_written), until);
}

std::vector<absl::StatusOr<v1::CommandResult>> AgentRegistry::Await(
    std::unique_ptr<SentCommands> handed) {
  auto* sent = static_cast<Sent*>(handed.get());
  {
    absl::MutexLock lock(&mu_);
    // A condition: the mutex wakes this thread once, when the last answer is in, rather than
    // at every answer of every agent.
    auto all_answered = [sent]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      for (const auto& p : sent->waiting) {
        if (p && !p->result && p->failure.ok()) return false;
      }
      return true;
    };
    mu_.AwaitWithDeadline(absl::Condition(&all_answered), sent->deadline);
    for (size_t i = 0; i < sent->waiting.size(); ++i) {
      const std::shared_ptr<Pending>& p = sent->waiting[i];
      if (!p) continue;
      if (p->result) {
        sent->out[i] = *p->result;
      } else if (!p->failure.ok()) {
        sent->out[i] = p->failure;
      } else {
        sent->out[i] = absl::DeadlineExceededError(absl::StrCat("command ", p->command.id(),
                                                                " to the agent of host ", p->host,
                                                                " got no answer in time"));
      }
    }
  }
  std::vector<absl::StatusOr<v1::CommandResult>> out = std::move(sent->out);
  handed.reset();  // Takes the commands out of the waiting list.
  return out;
}

void AgentRegistry::TakeResult(const std::string& host, const v1::CommandResult& result) {
  auto it = pending_.find(result.command_id());
  if (it == pending_.end() || it->second->host != host || it->second->result) return;
  // Only the answer to a command of this run that is still waiting says anything about the
  // port now.
  if (result.has_link()) ReportLink(host, result.link());
  it->second->result = result;
}

bool AgentRegistry::HasOwner(const std::string& onic_serial) {
  absl::MutexLock lock(&mu_);
  auto owner = owner_.find(onic_serial);
  return owner != owner_.end() && current_.contains(owner->second);
}

bool AgentRegistry::ArmsRetrains(const std::string& onic_serial) {
  absl::MutexLock lock(&mu_);
  auto owner = owner_.find(onic_serial);
  if (owner == owner_.end() || !current_.contains(owner->second)) return false;
  const v1::Agent& agent = agents_[owner->second];
  return absl::c_linear_search(agent.capabilities(), kArmedRetrain);
}

void AgentRegistry::SetListener(Listener listener) {
  absl::MutexLock lock(&mu_);
  listener_ = std::move(listener);
}

void AgentRegistry::ReportLink(const std::string& host, const v1::LinkState& link) {
  if (link.onic_serial().empty() || link.port() == 0) return;
  metrics_.PortRxPower(host, link.onic_serial(), link.port(), link.rx_power_dbm());
  // Only the O-NIC's owner speaks for its ports (two agents may claim one while it moves).
  auto owner = owner_.find(link.onic_serial());
  if (owner == owner_.end() || owner->second != host) return;
  link_status_[{link.onic_serial(), link.port()}] = link.status();
}

void AgentRegistry::ForgetLinks(const std::string& host) {
  for (auto it = link_status_.begin(); it != link_status_.end();) {
    auto owner = owner_.find(it->first.first);
    it = owner != owner_.end() && owner->second == host ? link_status_.erase(it) : std::next(it);
  }
}

bool AgentRegistry::KnownQuiesced(const std::string& onic_serial, uint32_t port) {
  return LastStatusIs(onic_serial, port, v1::LINK_STATUS_QUIESCED);
}

bool AgentRegistry::KnownUp(const std::string& onic_serial, uint32_t port) {
  return LastStatusIs(onic_serial, port, v1::LINK_STATUS_UP);
}

bool AgentRegistry::LastStatusIs(const std::string& onic_serial, uint32_t port,
                                 v1::LinkStatus status) {
  absl::MutexLock lock(&mu_);
  auto owner = owner_.find(onic_serial);
  if (owner == owner_.end() || !current_.contains(owner->second)) return false;
  auto it = link_status_.find({onic_serial, port});
  return it != link_status_.end() && it->second == status;
}

void AgentRegistry::Gone(const std::string& host, const std::string& why) {
  AppendEvent("agent.disconnected", host, v1::EVENT_SEVERITY_WARNING,
              absl::StrCat("agent on host ", host, " disconnected: ", why));
  std::vector<std::string> serials;
  Listener listener;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    for (const auto& [serial, owner] : owner_) {
      if (owner == host) serials.push_back(serial);
    }
    listener = listener_;
  }
  if (listener.gone) listener.gone(host, serials, why);
}

std::vector<v1::Agent> AgentRegistry::ListAgents() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Agent> out;
  for (const auto& [host, agent] : agents_) out.push_back(agent);
  return out;
}

}  // namespace fleet::agent_registry
