#include "controller/service/services.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "controller/base/grpc_status.h"
#include "scheduler/planner.h"

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

}  // namespace

std::string PrincipalOf(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("x-fleet-principal");
  if (it == metadata.end() || it->second.empty()) return "anonymous";
  return std::string(it->second.data(), it->second.size());
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
  return Assign(applier_->Apply(request->inventory(), request->dry_run(), PrincipalOf(*context)),
                response);
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
  return grpc::Status::OK;
}

grpc::Status InventoryServiceImpl::ListAgents(grpc::ServerContext*, const v1::ListAgentsRequest*,
                                              v1::ListAgentsResponse* response) {
  if (agents_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this fleetd has no agent registry");
  }
  for (v1::Agent& agent : agents_->ListAgents()) *response->add_agents() = std::move(agent);
  return grpc::Status::OK;
}

// --- TopologyService (read side) ---

grpc::Status TopologyServiceImpl::RequestTopology(grpc::ServerContext*,
                                                  const v1::RequestTopologyRequest* request,
                                                  v1::RequestTopologyResponse* response) {
  if (!request->phases().empty()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "phases: phased allocations are not supported by this fleetd yet");
  }
  if (!request->dry_run()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "this fleetd plans requests (dry_run) but does not program them yet");
  }
  // A consistent enough picture: each read is a snapshot, and a dry run writes nothing.
  absl::StatusOr<v1::Inventory> site = store_->LoadInventory();
  if (!site.ok()) return ToGrpcStatus(site.status());
  absl::StatusOr<std::vector<v1::SwitchPort>> ports = store_->ListPorts("");
  if (!ports.ok()) return ToGrpcStatus(ports.status());
  absl::StatusOr<std::vector<v1::Circuit>> circuits = store_->ListCircuits({});
  if (!circuits.ok()) return ToGrpcStatus(circuits.status());
  absl::StatusOr<std::vector<v1::Allocation>> allocations = store_->ListAllocations({});
  if (!allocations.ok()) return ToGrpcStatus(allocations.status());
  const scheduler::FabricSnapshot snapshot =
      scheduler::FabricSnapshot::Build(*site, *ports, *circuits, *allocations);
  return Assign(scheduler::PlanTopology(snapshot, {request->tenant(), request->topology()}),
                response->mutable_plan());
}

grpc::Status TopologyServiceImpl::GetAllocation(grpc::ServerContext*,
                                                const v1::GetAllocationRequest* request,
                                                v1::Allocation* response) {
  if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
  return Assign(store_->GetAllocation(request->id()), response);
}

grpc::Status TopologyServiceImpl::ListAllocations(grpc::ServerContext*,
                                                  const v1::ListAllocationsRequest* request,
                                                  v1::ListAllocationsResponse* response) {
  store::AllocationFilter filter{request->tenant(), request->state(), request->include_released()};
  return Fill(store_->ListAllocations(filter), response->mutable_allocations());
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

}  // namespace fleet::service
