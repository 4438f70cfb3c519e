#include "controller/service/inventory_service.h"

#include <string>
#include <vector>

#include "controller/service/caller.h"
#include "controller/service/inventory_usage.h"
#include "controller/service/rpc.h"

namespace fleet::service {
namespace {

// Adds who uses each of `parts` (inventory_usage.h).
template <typename Part>
using UsageFiller = absl::Status (*)(store::AllocationStore&,
                                     google::protobuf::RepeatedPtrField<Part>*);

// A List answer: `parts` as the store read them, with who uses each.
template <typename Part>
grpc::Status FillUsed(store::AllocationStore& store, UsageFiller<Part> usage,
                      absl::StatusOr<std::vector<Part>> parts,
                      google::protobuf::RepeatedPtrField<Part>* out) {
  grpc::Status status = Fill(std::move(parts), out);
  if (!status.ok()) return status;
  return ToGrpcStatus(usage(store, out));
}

// A Get answer: one part, as a list of one.
template <typename Part>
grpc::Status AssignUsed(store::AllocationStore& store, UsageFiller<Part> usage,
                        absl::StatusOr<Part> part, Part* out) {
  google::protobuf::RepeatedPtrField<Part> one;
  grpc::Status status = Assign(std::move(part), one.Add());
  if (status.ok()) status = ToGrpcStatus(usage(store, &one));
  if (status.ok()) *out = std::move(one[0]);
  return status;
}

}  // namespace

void InventoryServiceImpl::AddCredentialsFile(v1::Switch& sw) const {
  if (switches_ != nullptr) sw.set_credentials_file(switches_->CredentialsFile(sw.id()));
}

grpc::ServerUnaryReactor* InventoryServiceImpl::ListSwitches(grpc::CallbackServerContext* context,
                                                             const v1::ListSwitchesRequest*,
                                                             v1::ListSwitchesResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    grpc::Status status = Fill(store_->ListSwitches(), response->mutable_switches());
    for (v1::Switch& sw : *response->mutable_switches()) AddCredentialsFile(sw);
    return status;
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::GetSwitch(grpc::CallbackServerContext* context,
                                                          const v1::GetSwitchRequest* request,
                                                          v1::Switch* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
    grpc::Status status = Assign(store_->GetSwitch(request->id()), response);
    if (status.ok()) AddCredentialsFile(*response);
    return status;
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::ListPorts(grpc::CallbackServerContext* context,
                                                          const v1::ListPortsRequest* request,
                                                          v1::ListPortsResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return FillUsed<v1::SwitchPort>(*store_, FillPortAllocations,
                                    store_->ListPorts(request->switch_id()),
                                    response->mutable_ports());
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::ListHosts(grpc::CallbackServerContext* context,
                                                          const v1::ListHostsRequest*,
                                                          v1::ListHostsResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Fill(store_->ListHosts(), response->mutable_hosts());
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::GetHost(grpc::CallbackServerContext* context,
                                                        const v1::GetHostRequest* request,
                                                        v1::Host* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (grpc::Status s = RequireName(request->name(), "name"); !s.ok()) return s;
    return Assign(store_->GetHost(request->name()), response);
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::ListDevices(grpc::CallbackServerContext* context,
                                                            const v1::ListDevicesRequest* request,
                                                            v1::ListDevicesResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    store::DeviceFilter filter{request->host(), request->kind()};
    return FillUsed<v1::Device>(*store_, FillDeviceAllocations, store_->ListDevices(filter),
                                response->mutable_devices());
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::GetDevice(grpc::CallbackServerContext* context,
                                                          const v1::GetDeviceRequest* request,
                                                          v1::Device* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
    return AssignUsed<v1::Device>(*store_, FillDeviceAllocations, store_->GetDevice(request->id()),
                                  response);
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::ListOnics(grpc::CallbackServerContext* context,
                                                          const v1::ListOnicsRequest* request,
                                                          v1::ListOnicsResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    store::OnicFilter filter{request->host(), request->switch_id()};
    return FillUsed<v1::Onic>(*store_, FillOnicAllocations, store_->ListOnics(filter),
                              response->mutable_onics());
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::GetOnic(grpc::CallbackServerContext* context,
                                                        const v1::GetOnicRequest* request,
                                                        v1::Onic* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
    return AssignUsed<v1::Onic>(*store_, FillOnicAllocations, store_->GetOnic(request->id()),
                                response);
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::ListTrunks(grpc::CallbackServerContext* context,
                                                           const v1::ListTrunksRequest*,
                                                           v1::ListTrunksResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Fill(store_->ListTrunks(), response->mutable_trunks());
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::ListCircuits(grpc::CallbackServerContext* context,
                                                             const v1::ListCircuitsRequest* request,
                                                             v1::ListCircuitsResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    store::CircuitFilter filter{request->switch_id(), request->allocation_id(), ""};
    return Fill(store_->ListCircuits(filter), response->mutable_circuits());
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::ApplyInventory(
    grpc::CallbackServerContext* context, const v1::ApplyInventoryRequest* request,
    v1::ApplyInventoryResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Durable(
        *store_,
        Assign(applier_->Apply(request->inventory(),
                               {.dry_run = request->dry_run(), .force = request->force()},
                               Principal(*context, "ApplyInventory")),
               response),
        request->dry_run());
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::DeleteObject(grpc::CallbackServerContext* context,
                                                             const v1::DeleteObjectRequest* request,
                                                             v1::DeleteObjectResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (grpc::Status s = RequireName(request->kind(), "kind"); !s.ok()) return s;
    if (grpc::Status s = RequireName(request->name(), "name"); !s.ok()) return s;
    absl::StatusOr<std::vector<std::string>> deleted =
        store_->DeleteObject(request->kind(), request->name(), Principal(*context, "DeleteObject"));
    if (!deleted.ok()) return ToGrpcStatus(deleted.status());
    for (std::string& what : *deleted) response->add_deleted(std::move(what));
    return Durable(*store_, grpc::Status::OK);
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::ListAgents(grpc::CallbackServerContext* context,
                                                           const v1::ListAgentsRequest*,
                                                           v1::ListAgentsResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (agents_ == nullptr) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this fleetd has no agent registry");
    }
    for (v1::Agent& agent : agents_->ListAgents()) *response->add_agents() = std::move(agent);
    return grpc::Status::OK;
  });
}

}  // namespace fleet::service
