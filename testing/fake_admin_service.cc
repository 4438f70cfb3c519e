#include "testing/fake_admin_service.h"

#include "common/proto_time.h"
#include "testing/stream_waits.h"

namespace fleet::testing {
namespace {

// s1c0-n0's ports as its agent would report them: port 1 up, port 2 dark.
v1::LinkState CannedLink(uint32_t port) {
  v1::LinkState state;
  state.set_onic_serial("FLT-S1C0-N0");
  state.set_port(port);
  if (port == 1) {
    state.set_status(v1::LINK_STATUS_UP);
    state.set_rx_power_dbm(-1.5);
    state.set_tx_power_dbm(0.8);
    state.set_peer_seen("FLT-GPU1-N0/1");
    state.set_link_speed_mts(16000);
    state.set_link_width(16);
  } else {
    state.set_status(v1::LINK_STATUS_DOWN);
    state.set_rx_power_dbm(-99.99);
    state.set_tx_power_dbm(0.5);
    state.set_detail("no light");
  }
  return state;
}

// Link operations know s1c0-n0; gpu3-n0's agent is away; any other O-NIC is unknown.
grpc::Status CheckLinkOnic(const std::string& onic) {
  if (onic == "s1c0-n0") return grpc::Status::OK;
  if (onic == "gpu3-n0") {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "agent on host jbog1 is not connected");
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND, "onic " + onic + " not found");
}

}  // namespace

FakeAdminService::FakeAdminService(absl::Time now) : now_(now) {
  AppendEvent("inventory.applied", "inventory", "", "inventory applied: created 59");
  AppendEvent("allocation.state", "allocation", "a1", "allocation a1 is ready");
  AppendEvent("switch.connected", "switch", "ocs1", "switch ocs1 connected over TL1");
  desired_ = {{1, {387, "c1"}}, {3, {388, "c2"}}};
  on_switch_ = {{1, {387, ""}}, {2, {390, ""}}};
}

void FakeAdminService::AppendEvent(const std::string& kind, const std::string& object_kind,
                                   const std::string& object_id, const std::string& message) {
  absl::MutexLock lock(&mu_);
  v1::Event event;
  event.set_sequence(events_.size() + 1);
  *event.mutable_time() = ToProtoTime(now_ + absl::Seconds(events_.size()));
  event.set_principal("fleetd");
  event.set_kind(kind);
  event.set_object_kind(object_kind);
  event.set_object_id(object_id);
  event.set_severity(v1::EVENT_SEVERITY_INFO);
  event.set_message(message);
  events_.push_back(std::move(event));
}

grpc::Status FakeAdminService::ListEvents(grpc::ServerContext*,
                                          const v1::ListEventsRequest* request,
                                          v1::ListEventsResponse* response) {
  absl::MutexLock lock(&mu_);
  for (const v1::Event& event : events_) {
    if (request->limit() != 0 && response->events_size() >= static_cast<int>(request->limit())) {
      break;
    }
    if (Matches(event, request->after_sequence(), request->object_kind(), request->object_id())) {
      *response->add_events() = event;
    }
  }
  return grpc::Status::OK;
}

grpc::Status FakeAdminService::WatchEvents(grpc::ServerContext* context,
                                           const v1::WatchEventsRequest* request,
                                           grpc::ServerWriter<v1::Event>* writer) {
  size_t next = 0;
  {
    absl::MutexLock lock(&mu_);
    ++event_watches_started_;
    last_watch_after_ = request->after_sequence();
  }
  while (true) {
    v1::Event event;
    {
      absl::MutexLock lock(&mu_);
      auto news = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return events_.size() > next || end_event_watches_;
      };
      while (!mu_.AwaitWithTimeout(absl::Condition(&news), kCancelPoll)) {
        if (context->IsCancelled()) return grpc::Status::CANCELLED;
      }
      if (events_.size() <= next) return grpc::Status::OK;  // EndEventWatches.
      event = events_[next++];
    }
    if (!Matches(event, request->after_sequence(), request->object_kind(), request->object_id())) {
      continue;
    }
    if (!writer->Write(event)) return grpc::Status::OK;
  }
}

void FakeAdminService::EndEventWatches() {
  absl::MutexLock lock(&mu_);
  end_event_watches_ = true;
}

uint64_t FakeAdminService::last_watch_after() {
  absl::MutexLock lock(&mu_);
  return last_watch_after_;
}

bool FakeAdminService::AwaitEventWatches(int n) {
  absl::MutexLock lock(&mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return event_watches_started_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), kStreamOpenLimit);
}

grpc::Status FakeAdminService::Drain(grpc::ServerContext*, const v1::DrainRequest* request,
                                     v1::DrainResponse* response) {
  absl::MutexLock lock(&mu_);
  drains_.push_back(*request);
  const v1::DrainTarget& t = request->target();
  if (t.has_onic() && t.onic() != "s1c0-n0" && t.onic() != "gpu3-n0") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "onic " + t.onic() + " not found");
  }
  bool used = (t.has_switch_port() && t.switch_port().switch_id() == "ocs1" &&
               t.switch_port().port() == 1) ||
              t.has_onic() || (t.has_host() && t.host() == "server1");
  if (used) response->add_affected_allocations("a1");
  if (used && request->evict()) {
    // As fleetd: moved off it by a replacement.
    v1::Eviction* e = response->add_evictions();
    e->set_allocation_id("a1");
    e->set_moved(true);
    v1::MemberReplacement* r = e->add_replacements();
    r->set_failed("gpu3");
    r->set_spare("gpu9");
  }
  return grpc::Status::OK;
}

grpc::Status FakeAdminService::Undrain(grpc::ServerContext*, const v1::UndrainRequest* request,
                                       v1::UndrainResponse*) {
  absl::MutexLock lock(&mu_);
  undrains_.push_back(*request);
  return grpc::Status::OK;
}

grpc::Status FakeAdminService::ReplaceMember(grpc::ServerContext*,
                                             const v1::ReplaceMemberRequest* request,
                                             v1::ReplaceMemberResponse* response) {
  if (request->allocation_id() != "a1") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "allocation " + request->allocation_id() + " not found");
  }
  if (request->member() != "gpu3") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "member: allocation a1 has no member " + request->member());
  }
  v1::Allocation& a = *response->mutable_allocation();
  a.set_id("a1");
  a.set_state(request->dry_run() ? v1::ALLOCATION_STATE_READY : v1::ALLOCATION_STATE_PROGRAMMING);
  for (const char* m : {"gpu1", "gpu2", "gpu5", "gpu4"}) response->mutable_plan()->add_members(m);
  for (auto [ingress, egress] : {std::pair{2, 387}, std::pair{3, 386}}) {
    v1::CrossConnect* x = response->mutable_plan()->add_remove();
    x->set_switch_id("ocs1");
    x->set_ingress(ingress);
    x->set_egress(egress);
  }
  for (auto [ingress, egress] : {std::pair{2, 389}, std::pair{5, 386}}) {
    v1::CrossConnect* x = response->mutable_plan()->add_add();
    x->set_switch_id("ocs1");
    x->set_ingress(ingress);
    x->set_egress(egress);
  }
  return grpc::Status::OK;
}

grpc::Status FakeAdminService::Reconcile(grpc::ServerContext*, const v1::ReconcileRequest* request,
                                         v1::ReconcileResponse* response) {
  absl::MutexLock lock(&mu_);
  reconciles_.push_back(*request);
  if (!request->switch_id().empty() && request->switch_id() != "ocs1") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "switch " + request->switch_id() + " not found");
  }
  auto add_drift = [&](v1::Drift::Kind kind, uint32_t ingress, uint32_t egress,
                       const std::string& circuit, const std::string& action) {
    v1::Drift* drift = response->add_drift();
    drift->set_kind(kind);
    drift->mutable_cross_connect()->set_switch_id("ocs1");
    drift->mutable_cross_connect()->set_ingress(ingress);
    drift->mutable_cross_connect()->set_egress(egress);
    drift->set_circuit_id(circuit);
    drift->set_action(action);
  };
  for (const auto& [ingress, want] : CrossConnects(desired_)) {
    if (on_switch_.contains(ingress)) continue;
    add_drift(v1::Drift::KIND_MISSING, ingress, want.first, want.second,
              request->dry_run() ? "reported" : "repaired");
    if (!request->dry_run()) {
      on_switch_[ingress] = want;
      response->set_repaired(response->repaired() + 1);
    }
  }
  for (const auto& [ingress, held] : CrossConnects(on_switch_)) {
    if (desired_.contains(ingress)) continue;
    std::string action = "reported";
    if (!request->dry_run() && request->unknown() == v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT) {
      action = "adopted";
      desired_[ingress] = {held.first, "m1"};
    } else if (!request->dry_run() &&
               request->unknown() == v1::UNKNOWN_CROSS_CONNECT_POLICY_REMOVE) {
      action = "removed";
      on_switch_.erase(ingress);
    }
    add_drift(v1::Drift::KIND_UNKNOWN, ingress, held.first, "", action);
  }
  return grpc::Status::OK;
}

std::vector<v1::DrainRequest> FakeAdminService::drains() {
  absl::MutexLock lock(&mu_);
  return drains_;
}

std::vector<v1::UndrainRequest> FakeAdminService::undrains() {
  absl::MutexLock lock(&mu_);
  return undrains_;
}

std::vector<v1::ReconcileRequest> FakeAdminService::reconciles() {
  absl::MutexLock lock(&mu_);
  return reconciles_;
}

grpc::Status FakeAdminService::RetrainLink(grpc::ServerContext*,
                                           const v1::RetrainLinkRequest* request,
                                           v1::LinkState* response) {
  {
    absl::MutexLock lock(&mu_);
    retrains_.push_back(*request);
  }
  grpc::Status status = CheckLinkOnic(request->onic());
  if (status.ok()) *response = CannedLink(request->port());
  return status;
}

grpc::Status FakeAdminService::GetLinkStatus(grpc::ServerContext*,
                                             const v1::GetLinkStatusRequest* request,
                                             v1::GetLinkStatusResponse* response) {
  grpc::Status status = CheckLinkOnic(request->onic());
  if (!status.ok()) return status;
  *response->add_ports() = CannedLink(1);
  *response->add_ports() = CannedLink(2);
  return grpc::Status::OK;
}

std::vector<v1::RetrainLinkRequest> FakeAdminService::retrains() {
  absl::MutexLock lock(&mu_);
  return retrains_;
}

grpc::Status FakeAdminService::Health(grpc::ServerContext*, const v1::HealthRequest*,
                                      v1::HealthResponse* response) {
  response->set_overall(v1::ComponentHealth::STATE_DEGRADED);
  response->set_version("0.1.0-test");
  v1::ComponentHealth* store = response->add_components();
  store->set_name("store");
  store->set_state(v1::ComponentHealth::STATE_OK);
  v1::ComponentHealth* sw = response->add_components();
  sw->set_name("switch/ocs1");
  sw->set_state(v1::ComponentHealth::STATE_DOWN);
  sw->set_detail("connection refused");
  return grpc::Status::OK;
}

bool FakeAdminService::Matches(const v1::Event& event, uint64_t after,
                               const std::string& object_kind, const std::string& object_id) {
  return event.sequence() > after && (object_kind.empty() || event.object_kind() == object_kind) &&
         (object_id.empty() || event.object_id() == object_id);
}

}  // namespace fleet::testing
