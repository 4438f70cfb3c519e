#include "controller/service/services.h"

#include "absl/strings/str_cat.h"
#include "controller/base/grpc_status.h"

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

// --- TopologyService (read side) ---

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

}  // namespace fleet::service
