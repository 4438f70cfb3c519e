#include "controller/service/services.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/proto_time.h"
#include "common/status_macros.h"

namespace fleet::service {
namespace {

// Copies a StatusOr<vector<T>> into a repeated field, or returns the error.
template <typename T>
grpc::Status Fill(absl::StatusOr<std::vector<T>> items,
                  google::protobuf::RepeatedPtrField<T>* out) {
  if (!items.ok()) return ToGrpcStatus(items.status());
  for (T& item : *items) *out->Add() = std::move(item);
  return grpc::Status::OK;
}

template <typename T>
grpc::Status Assign(absl::StatusOr<T> item, T* out) {
  if (!item.ok()) return ToGrpcStatus(item.status());
  *out = std::move(*item);
  return grpc::Status::OK;
}

grpc::Status RequireName(const std::string& value, absl::string_view field) {
  if (!value.empty()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat(field, " is empty"));
}

// A change is answered only once what it committed is durable (Store::Sync), so what a
// client was told is done survives a power loss of the host, not only a crash of fleetd. A
// refusal is synced too: a change may have committed part of its work before it failed. A
// dry run commits nothing and is not synced.
grpc::Status Durable(store::Store* store, grpc::Status answer, bool dry_run = false) {
  if (store == nullptr || dry_run) return answer;
  if (absl::Status synced = store->Sync(); !synced.ok()) {
    FLEET_LOG(ERROR) << "a change is committed but not durable: " << synced;
    if (answer.ok()) {
      return ToGrpcStatus(absl::Status(
          synced.code(),
          absl::StrCat("the change is stored but could not be made durable: ", synced.message())));
    }
  }
  return answer;
}

}  // namespace

std::string PrincipalOf(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("x-fleet-principal");
  if (it == metadata.end() || it->second.empty()) return "anonymous";
  return std::string(it->second.data(), it->second.size());
}

engine::Caller CallerOf(const grpc::ServerContext& context) {
  engine::Caller caller = engine::Caller::FromPrincipal(PrincipalOf(context));
  // gRPC gives an infinite deadline as the largest time_point, which absl::FromChrono maps
  // to the infinite future.
  caller.deadline = absl::FromChrono(context.deadline());
  return caller;
}

// --- InventoryService ---

grpc::Status InventoryServiceImpl::ListSwitches(grpc::ServerContext*,
                                                const v1::ListSwitchesRequest*,
                                                v1::ListSwitchesResponse* response) {
  return Fill(store_->ListSwitches(), response->mutable_switches());
}

grpc::Status InventoryServiceImpl::GetSwitch(grpc::ServerContext*,
                                             const v1::GetSwitchRequest* request,
                                             v1::Switch* response) {
  if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
  return Assign(store_->GetSwitch(request->id()), response);
}

grpc::Status InventoryServiceImpl::ListPorts(grpc::ServerContext*,
                                             const v1::ListPortsRequest* request,
                                             v1::ListPortsResponse* response) {
  return Fill(store_->ListPorts(request->switch_id()), response->mutable_ports());
}

grpc::Status InventoryServiceImpl::ListHosts(grpc::ServerContext*, const v1::ListHostsRequest*,
                                             v1::ListHostsResponse* response) {
  return Fill(store_->ListHosts(), response->mutable_hosts());
}

grpc::Status InventoryServiceImpl::GetHost(grpc::ServerContext*, const v1::GetHostRequest* request,
                                           v1::Host* response) {
  if (grpc::Status s = RequireName(request->name(), "name"); !s.ok()) return s;
  return Assign(store_->GetHost(request->name()), response);
}

grpc::Status InventoryServiceImpl::ListDevices(grpc::ServerContext*,
                                               const v1::ListDevicesRequest* request,
                                               v1::ListDevicesResponse* response) {
  store::DeviceFilter filter{request->host(), request->kind()};
  return Fill(store_->ListDevices(filter), response->mutable_devices());
}

grpc::Status InventoryServiceImpl::GetDevice(grpc::ServerContext*,
                                             const v1::GetDeviceRequest* request,
                                             v1::Device* response) {
  if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
  return Assign(store_->GetDevice(request->id()), response);
}

grpc::Status InventoryServiceImpl::ListOnics(grpc::ServerContext*,
                                             const v1::ListOnicsRequest* request,
                                             v1::ListOnicsResponse* response) {
  store::OnicFilter filter{request->host(), request->switch_id()};
  return Fill(store_->ListOnics(filter), response->mutable_onics());
}

grpc::Status InventoryServiceImpl::GetOnic(grpc::ServerContext*, const v1::GetOnicRequest* request,
                                           v1::Onic* response) {
  if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
  return Assign(store_->GetOnic(request->id()), response);
}

grpc::Status InventoryServiceImpl::ListTrunks(grpc::ServerContext*, const v1::ListTrunksRequest*,
                                              v1::ListTrunksResponse* response) {
  return Fill(store_->ListTrunks(), response->mutable_trunks());
}

grpc::Status InventoryServiceImpl::ListCircuits(grpc::ServerContext*,
                                                const v1::ListCircuitsRequest* request,
                                                v1::ListCircuitsResponse* response) {
  store::CircuitFilter filter{request->switch_id(), request->allocation_id()};
  return Fill(store_->ListCircuits(filter), response->mutable_circuits());
}

grpc::Status InventoryServiceImpl::ApplyInventory(grpc::ServerContext* context,
                                                  const v1::ApplyInventoryRequest* request,
                                                  v1::ApplyInventoryResponse* response) {
  return Durable(
      store_,
      Assign(applier_->Apply(request->inventory(), request->dry_run(), PrincipalOf(*context)),
             response),
      request->dry_run());
}

grpc::Status InventoryServiceImpl::DeleteObject(grpc::ServerContext* context,
                                                const v1::DeleteObjectRequest* request,
                                                v1::DeleteObjectResponse* response) {
  if (grpc::Status s = RequireName(request->kind(), "kind"); !s.ok()) return s;
  if (grpc::Status s = RequireName(request->name(), "name"); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> deleted =
      store_->DeleteObject(request->kind(), request->name(), PrincipalOf(*context));
  if (!deleted.ok()) return ToGrpcStatus(deleted.status());
  for (std::string& what : *deleted) response->add_deleted(std::move(what));
  return Durable(store_, grpc::Status::OK);
}

grpc::Status InventoryServiceImpl::ListAgents(grpc::ServerContext*, const v1::ListAgentsRequest*,
                                              v1::ListAgentsResponse* response) {
  if (agents_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this fleetd has no agent registry");
  }
  for (v1::Agent& agent : agents_->ListAgents()) *response->add_agents() = std::move(agent);
  return grpc::Status::OK;
}

// --- TopologyService ---

namespace {

grpc::Status NoEngine() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "this fleetd has no reconfiguration engine");
}

// Hands `on_event` the committed events after `after` matching the filter, in order, up to
// `upto` or a page of them; returns the sequence read up to, or nullopt when `on_event` said
// stop or the log could not be read.
std::optional<uint64_t> ReadEvents(store::Store* store, uint64_t after, uint64_t upto,
                                   const std::string& object_kind, const std::string& object_id,
                                   const std::function<bool(const v1::Event&)>& on_event) {
  constexpr uint32_t kPage = 1000;
  absl::StatusOr<std::vector<v1::Event>> events =
      store->ListEvents({after, kPage, object_kind, object_id});
  if (!events.ok()) return std::nullopt;
  for (const v1::Event& e : *events) {
    if (e.sequence() > upto) break;
    if (!on_event(e)) return std::nullopt;
  }
  if (events->size() == kPage && events->back().sequence() < upto) {
    return events->back().sequence();
  }
  return upto;
}

// Whether a watcher should go on: its client is there and fleetd is not stopping.
bool Following(engine::Engine* engine, grpc::ServerContext* context) {
  return !context->IsCancelled() && !(engine != nullptr && engine->stopping());
}

// The newest committed sequence, once it is past `after`; nullopt after up to 200 ms without
// one, so that the caller checks again whether to go on.
std::optional<uint64_t> NewerThan(store::Store* store, uint64_t after) {
  const uint64_t upto = store->LastEventSequence();
  if (upto > after) return upto;
  // Woken by a commit, or after 200 ms to notice a cancelled client or a stop.
  store->WaitForEvent(after, absl::Now() + absl::Milliseconds(200));
  return std::nullopt;
}

// Follows the event log after `after`: calls `on_event` for each committed event matching
// the filter, in order, until it returns false, the client goes away or fleetd stops.
void FollowEvents(store::Store* store, engine::Engine* engine, grpc::ServerContext* context,
                  uint64_t after, const std::string& object_kind, const std::string& object_id,
                  const std::function<bool(const v1::Event&)>& on_event) {
  while (Following(engine, context)) {
    const std::optional<uint64_t> upto = NewerThan(store, after);
    if (!upto) continue;
    std::optional<uint64_t> next =
        ReadEvents(store, after, *upto, object_kind, object_id, on_event);
    if (!next) return;
    after = *next;
  }
}

// What a watcher is told about: the state, the reason and each circuit's state.
std::string WatchedPart(const v1::Allocation& a) {
  std::string key = absl::StrCat(a.state(), "|", a.reason());
  for (const v1::Circuit& c : a.circuits()) absl::StrAppend(&key, "|", c.state());
  return key;
}

bool Ended(const v1::Allocation& a) {
  return a.state() == v1::ALLOCATION_STATE_FAILED || a.state() == v1::ALLOCATION_STATE_RELEASED;
}

}  // namespace

grpc::Status TopologyServiceImpl::RequestTopology(grpc::ServerContext* context,
                                                  const v1::RequestTopologyRequest* request,
                                                  v1::RequestTopologyResponse* response) {
  if (engine_ == nullptr) return NoEngine();
  return Durable(store_, Assign(engine_->RequestTopology(*request, CallerOf(*context)), response),
                 request->dry_run());
}

grpc::Status TopologyServiceImpl::GetAllocation(grpc::ServerContext* context,
                                                const v1::GetAllocationRequest* request,
                                                v1::Allocation* response) {
  if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
  if (engine_ == nullptr) return Assign(store_->GetAllocation(request->id()), response);
  return Assign(engine_->GetAllocation(request->id(), CallerOf(*context)), response);
}

grpc::Status TopologyServiceImpl::ListAllocations(grpc::ServerContext* context,
                                                  const v1::ListAllocationsRequest* request,
                                                  v1::ListAllocationsResponse* response) {
  if (engine_ == nullptr) {
    store::AllocationFilter filter{request->tenant(), request->state(),
                                   request->include_released()};
    return Fill(store_->ListAllocations(filter), response->mutable_allocations());
  }
  return Fill(engine_->ListAllocations(*request, CallerOf(*context)),
              response->mutable_allocations());
}

grpc::Status TopologyServiceImpl::WatchAllocation(
    grpc::ServerContext* context, const v1::WatchAllocationRequest* request,
    grpc::ServerWriter<v1::WatchAllocationResponse>* writer) {
  if (engine_ == nullptr) return NoEngine();
  const engine::Caller caller = CallerOf(*context);
  if (absl::Status s = engine_->CheckWatch(request->id(), request->tenant(), caller); !s.ok()) {
    return ToGrpcStatus(s);
  }
  // Taken before the first read, so no change between the read and the follow is missed.
  uint64_t after = store_->LastEventSequence();
  std::map<std::string, std::string> sent;  // Allocation id → WatchedPart last sent.
  // Allocation id → the sequence its last state considered reflects: a commit no newer is
  // not sent, so a state read from the database is never followed by an older one.
  std::map<std::string, uint64_t> as_of;
  // A tenant-wide watch forgets an allocation once it has sent its end and followed past it
  // (no commit or event at or before `after` is considered again), so a watch left open for
  // months holds only the allocations that are live.
  std::multimap<uint64_t, std::string> ended_at;  // The sequence of its end → allocation id.
  auto forget_ended = [&] {
    while (!ended_at.empty() && ended_at.begin()->first <= after) {
      sent.erase(ended_at.begin()->second);
      as_of.erase(ended_at.begin()->second);
      ended_at.erase(ended_at.begin());
    }
  };
  bool ended = false;
  // False once the watch is over: the client went away or the watched allocation ended.
  auto send = [&](const v1::Allocation& a) {
    if (!request->tenant().empty() && a.tenant() != request->tenant()) return true;
    std::string part = WatchedPart(a);
    if (sent[a.id()] == part) return true;
    v1::WatchAllocationResponse message;
    *message.mutable_allocation() = a;
    if (!writer->Write(message)) return false;
    sent[a.id()] = std::move(part);
    ended = !request->id().empty() && Ended(a);
    return !ended;
  };
  // Sends the state `commit` left; read from the database for a watch's first state and for a
  // watcher too far behind for the commits the store keeps.
  auto consider = [&](store::Store::AllocationCommit commit) -> absl::StatusOr<bool> {
    if (auto seen = as_of.find(commit.id); seen != as_of.end() && commit.sequence <= seen->second) {
      return true;
    }
    if (!commit.allocation) {
      ASSIGN_OR_RETURN(commit, store_->ReadAllocation(commit.id));
    }
    as_of[commit.id] = commit.sequence;
    const bool go_on = send(*commit.allocation);
    if (go_on && request->id().empty() && Ended(*commit.allocation)) {
      ended_at.emplace(commit.sequence, commit.id);
    }
    return go_on;
  };
  std::vector<store::Store::AllocationCommit> first;
  if (!request->id().empty()) {
    std::optional<store::Store::AllocationCommit> kept = store_->LastCommitted(request->id());
    first.push_back(kept ? *std::move(kept)
                         : store::Store::AllocationCommit{0, request->id(), nullptr});
  } else {
    absl::StatusOr<std::vector<store::Store::AllocationCommit>> all =
        store_->ReadAllocations({request->tenant(), {}, false});
    if (!all.ok()) return ToGrpcStatus(all.status());
    first = *std::move(all);
  }
  for (store::Store::AllocationCommit& commit : first) {
    absl::StatusOr<bool> go_on = consider(std::move(commit));
    if (!go_on.ok() && !request->id().empty()) return ToGrpcStatus(go_on.status());
    if (go_on.ok() && !*go_on) return grpc::Status::OK;
  }
  // The watched allocation's commits, or the tenant's (an allocation that is gone is read,
  // and the read says so).
  auto watched = [&](const store::Store::AllocationCommit& c) {
    if (!request->id().empty()) return c.id == request->id();
    return c.allocation == nullptr || request->tenant().empty() ||
           c.allocation->tenant() == request->tenant();
  };
  while (Following(engine_, context)) {
    const std::optional<uint64_t> upto = NewerThan(store_, after);
    if (!upto) continue;
    // Each committed state, in order, from the commits the store keeps.
    if (std::optional<std::vector<store::Store::AllocationCommit>> commits =
            store_->AllocationCommitsAfter(after)) {
      bool go_on = true;
      for (store::Store::AllocationCommit& commit : *commits) {
        if (!watched(commit)) continue;
        absl::StatusOr<bool> sent_it = consider(std::move(commit));
        if (sent_it.ok() && !*sent_it) {
          go_on = false;
          break;
        }
      }
      if (!go_on) break;
      after = std::max(*upto, commits->empty() ? 0 : commits->back().sequence);
      forget_ended();
      continue;
    }
    // A watcher this far behind reads the log, and each allocation it names as it is now.
    std::optional<uint64_t> next =
        ReadEvents(store_, after, *upto, "allocation", request->id(), [&](const v1::Event& e) {
          absl::StatusOr<bool> go_on = consider({e.sequence(), e.object_id(), nullptr});
          return !go_on.ok() || *go_on;
        });
    if (!next) break;
    after = *next;
    forget_ended();
  }
  if (ended || context->IsCancelled()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fleetd is stopping");
}

grpc::Status TopologyServiceImpl::ReleaseTopology(grpc::ServerContext* context,
                                                  const v1::ReleaseTopologyRequest* request,
                                                  v1::ReleaseTopologyResponse* response) {
  if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
  if (engine_ == nullptr) return NoEngine();
  return Durable(store_, Assign(engine_->ReleaseTopology(request->id(), CallerOf(*context)),
                                response->mutable_allocation()));
}

grpc::Status TopologyServiceImpl::KeepAlive(grpc::ServerContext* context,
                                            const v1::KeepAliveRequest* request,
                                            v1::KeepAliveResponse* response) {
  if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
  if (engine_ == nullptr) return NoEngine();
  absl::StatusOr<absl::Time> expires = engine_->KeepAlive(request->id(), CallerOf(*context));
  if (!expires.ok()) return ToGrpcStatus(expires.status());
  *response->mutable_lease_expires() = ToProtoTime(*expires);
  return Durable(store_, grpc::Status::OK);
}

grpc::Status TopologyServiceImpl::ActivatePhase(grpc::ServerContext* context,
                                                const v1::ActivatePhaseRequest* request,
                                                v1::ActivatePhaseResponse* response) {
  if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
  if (grpc::Status s = RequireName(request->phase(), "phase"); !s.ok()) return s;
  if (engine_ == nullptr) return NoEngine();
  return Durable(store_, Assign(engine_->ActivatePhase(*request, CallerOf(*context)), response));
}

grpc::Status TopologyServiceImpl::DetachDevices(grpc::ServerContext* context,
                                                const v1::DetachDevicesRequest* request,
                                                v1::DetachDevicesResponse* response) {
  if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
  if (engine_ == nullptr) return NoEngine();
  return Durable(store_, Assign(engine_->DetachDevices(*request, CallerOf(*context)), response),
                 request->dry_run());
}

// --- AdminService ---

grpc::Status AdminServiceImpl::Health(grpc::ServerContext*, const v1::HealthRequest*,
                                      v1::HealthResponse* response) {
  response->set_version(version_);
  v1::ComponentHealth* store = response->add_components();
  store->set_name("store");
  // A read through the store proves the database answers.
  absl::StatusOr<std::vector<v1::Switch>> switches = store_->ListSwitches();
  if (switches.ok()) {
    store->set_state(v1::ComponentHealth::STATE_OK);
    store->set_detail(absl::StrCat(switches->size(), " switches in inventory"));
  } else {
    store->set_state(v1::ComponentHealth::STATE_DOWN);
    store->set_detail(std::string(switches.status().message()));
  }
  // Each switch is read live: reachable, logged in, and the size inventory expects.
  if (switches.ok() && switches_ != nullptr) {
    for (const v1::Switch& sw : *switches) {
      fabric::SwitchRegistry::Probe probe = switches_->ProbeSwitch(sw);
      v1::ComponentHealth* c = response->add_components();
      c->set_name(absl::StrCat("switch/", sw.id()));
      if (probe.status.ok()) {
        c->set_state(v1::ComponentHealth::STATE_OK);
        c->set_detail(probe.description);
      } else {
        c->set_state(probe.status.code() == absl::StatusCode::kFailedPrecondition &&
                             !probe.description.empty()
                         ? v1::ComponentHealth::STATE_DEGRADED
                         : v1::ComponentHealth::STATE_DOWN);
        c->set_detail(std::string(probe.status.message()));
      }
    }
  }
  v1::ComponentHealth::State overall = v1::ComponentHealth::STATE_OK;
  for (const v1::ComponentHealth& c : response->components())
    overall = std::max(overall, c.state());
  response->set_overall(overall);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListEvents(grpc::ServerContext*,
                                          const v1::ListEventsRequest* request,
                                          v1::ListEventsResponse* response) {
  store::EventFilter filter;
  filter.after_sequence = request->after_sequence();
  filter.limit = request->limit() == 0 ? 1000 : std::min<uint32_t>(request->limit(), 10000);
  filter.object_kind = request->object_kind();
  filter.object_id = request->object_id();
  return Fill(store_->ListEvents(filter), response->mutable_events());
}

absl::StatusOr<v1::LinkState> AdminServiceImpl::LinkCommand(grpc::ServerContext* context,
                                                            const std::string& onic_id,
                                                            v1::Command command) {
  if (agents_ == nullptr) return absl::UnavailableError("this fleetd has no agent registry");
  absl::StatusOr<v1::Onic> onic = store_->GetOnic(onic_id);
  if (!onic.ok()) return onic.status();
  // The caller's deadline bounds the command, at most 30 s.
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    deadline = std::min(deadline, absl::FromChrono(context->deadline()));
  }
  absl::StatusOr<v1::CommandResult> result =
      agents_->SendCommand(onic->serial(), std::move(command), deadline);
  if (!result.ok()) return result.status();
  if (result->code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(result->code()),
                        absl::StrCat("O-NIC ", onic_id, ": ", result->message()));
  }
  return result->link();
}

grpc::Status AdminServiceImpl::RetrainLink(grpc::ServerContext* context,
                                           const v1::RetrainLinkRequest* request,
                                           v1::LinkState* response) {
  if (request->port() != 1 && request->port() != 2) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("port must be 1 or 2, not ", request->port()));
  }
  absl::StatusOr<v1::Onic> onic = store_->GetOnic(request->onic());
  if (!onic.ok()) return ToGrpcStatus(onic.status());
  v1::Command command;
  v1::RetrainPort* retrain = command.mutable_retrain();
  retrain->set_onic_serial(onic->serial());
  retrain->set_port(request->port());
  // The expected peer is the source of the desired circuit arriving on this port's rx.
  absl::StatusOr<std::vector<v1::Circuit>> circuits = store_->ListCircuits({});
  if (!circuits.ok()) return ToGrpcStatus(circuits.status());
  for (const v1::Circuit& c : *circuits) {
    if (c.state() == v1::CIRCUIT_STATE_INACTIVE || c.destination().onic() != request->onic() ||
        c.destination().port() != request->port()) {
      continue;
    }
    absl::StatusOr<v1::Onic> peer = store_->GetOnic(c.source().onic());
    if (!peer.ok()) return ToGrpcStatus(peer.status());
    retrain->mutable_expected_peer()->set_onic_serial(peer->serial());
    retrain->mutable_expected_peer()->set_port(c.source().port());
  }
  return Assign(LinkCommand(context, request->onic(), std::move(command)), response);
}

grpc::Status AdminServiceImpl::GetLinkStatus(grpc::ServerContext* context,
                                             const v1::GetLinkStatusRequest* request,
                                             v1::GetLinkStatusResponse* response) {
  absl::StatusOr<v1::Onic> onic = store_->GetOnic(request->onic());
  if (!onic.ok()) return ToGrpcStatus(onic.status());
  for (uint32_t port : {1u, 2u}) {
    v1::Command command;
    command.mutable_read_port()->set_onic_serial(onic->serial());
    command.mutable_read_port()->set_port(port);
    absl::StatusOr<v1::LinkState> link = LinkCommand(context, request->onic(), std::move(command));
    if (!link.ok()) return ToGrpcStatus(link.status());
    *response->add_ports() = std::move(*link);
  }
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::Drain(grpc::ServerContext* context, const v1::DrainRequest* request,
                                     v1::DrainResponse* response) {
  if (engine_ == nullptr) return NoEngine();
  return Durable(store_, Assign(engine_->Drain(*request, CallerOf(*context)), response));
}

grpc::Status AdminServiceImpl::ReplaceMember(grpc::ServerContext* context,
                                             const v1::ReplaceMemberRequest* request,
                                             v1::ReplaceMemberResponse* response) {
  if (engine_ == nullptr) return NoEngine();
  return Durable(store_, Assign(engine_->ReplaceMember(*request, CallerOf(*context)), response),
                 request->dry_run());
}

grpc::Status AdminServiceImpl::Undrain(grpc::ServerContext* context,
                                       const v1::UndrainRequest* request, v1::UndrainResponse*) {
  if (engine_ == nullptr) return NoEngine();
  return Durable(store_, ToGrpcStatus(engine_->Undrain(*request, CallerOf(*context))));
}

grpc::Status AdminServiceImpl::Reconcile(grpc::ServerContext* context,
                                         const v1::ReconcileRequest* request,
                                         v1::ReconcileResponse* response) {
  if (engine_ == nullptr) return NoEngine();
  return Durable(store_, Assign(engine_->Reconcile(*request, CallerOf(*context)), response),
                 request->dry_run());
}

grpc::Status AdminServiceImpl::WatchEvents(grpc::ServerContext* context,
                                           const v1::WatchEventsRequest* request,
                                           grpc::ServerWriter<v1::Event>* writer) {
  FollowEvents(store_, engine_, context, request->after_sequence(), request->object_kind(),
               request->object_id(), [&](const v1::Event& e) { return writer->Write(e); });
  if (context->IsCancelled()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fleetd is stopping");
}

}  // namespace fleet::service
