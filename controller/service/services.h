// The fleet.v1 gRPC services as fleetd serves them. Each converts absl::Status to
// grpc::Status in one place (ToGrpcStatus) and records the caller's principal (metadata
// `x-fleet-principal`) with every change. RPCs whose behaviour arrives with later parts of
// the product (the reconfiguration engine, the agent registry) are not overridden, so gRPC
// answers them UNIMPLEMENTED.
#ifndef FLEET_CONTROLLER_SERVICE_SERVICES_H_
#define FLEET_CONTROLLER_SERVICE_SERVICES_H_

#include <string>

#include "controller/agents/agent_registry.h"
#include "controller/fabric/switch_registry.h"
#include "controller/inventory/inventory.h"
#include "controller/store/store.h"
#include "fleet/v1/admin.grpc.pb.h"
#include "fleet/v1/agent.grpc.pb.h"
#include "fleet/v1/inventory.grpc.pb.h"
#include "fleet/v1/topology.grpc.pb.h"

namespace fleet::service {

// The caller's principal from request metadata, or "anonymous".
std::string PrincipalOf(const grpc::ServerContext& context);

class InventoryServiceImpl final : public v1::InventoryService::Service {
 public:
  // None is owned; all must outlive the service. `agents` may be null (no agent registry:
  // ListAgents answers UNIMPLEMENTED).
  InventoryServiceImpl(store::Store* store, inventory::InventoryApplier* applier,
                       agents::AgentRegistry* agents = nullptr)
      : store_(store), applier_(applier), agents_(agents) {}

  grpc::Status ListSwitches(grpc::ServerContext*, const v1::ListSwitchesRequest*,
                            v1::ListSwitchesResponse*) override;
  grpc::Status GetSwitch(grpc::ServerContext*, const v1::GetSwitchRequest*, v1::Switch*) override;
  grpc::Status ListPorts(grpc::ServerContext*, const v1::ListPortsRequest*,
                         v1::ListPortsResponse*) override;
  grpc::Status ListHosts(grpc::ServerContext*, const v1::ListHostsRequest*,
                         v1::ListHostsResponse*) override;
  grpc::Status GetHost(grpc::ServerContext*, const v1::GetHostRequest*, v1::Host*) override;
  grpc::Status ListDevices(grpc::ServerContext*, const v1::ListDevicesRequest*,
                           v1::ListDevicesResponse*) override;
  grpc::Status GetDevice(grpc::ServerContext*, const v1::GetDeviceRequest*, v1::Device*) override;
  grpc::Status ListOnics(grpc::ServerContext*, const v1::ListOnicsRequest*,
                         v1::ListOnicsResponse*) override;
  grpc::Status GetOnic(grpc::ServerContext*, const v1::GetOnicRequest*, v1::Onic*) override;
  grpc::Status ListTrunks(grpc::ServerContext*, const v1::ListTrunksRequest*,
                          v1::ListTrunksResponse*) override;
  grpc::Status ListCircuits(grpc::ServerContext*, const v1::ListCircuitsRequest*,
                            v1::ListCircuitsResponse*) override;
  grpc::Status ApplyInventory(grpc::ServerContext*, const v1::ApplyInventoryRequest*,
                              v1::ApplyInventoryResponse*) override;
  grpc::Status DeleteObject(grpc::ServerContext*, const v1::DeleteObjectRequest*,
                            v1::DeleteObjectResponse*) override;
  grpc::Status ListAgents(grpc::ServerContext*, const v1::ListAgentsRequest*,
                          v1::ListAgentsResponse*) override;

 private:
  store::Store* store_;
  inventory::InventoryApplier* applier_;
  agents::AgentRegistry* agents_;
};

// The agents' stream, served by the registry.
class AgentServiceImpl final : public v1::AgentService::Service {
 public:
  explicit AgentServiceImpl(agents::AgentRegistry* agents) : agents_(agents) {}
  grpc::Status Connect(grpc::ServerContext* context,
                       agents::AgentRegistry::Stream* stream) override {
    return agents_->Serve(context, stream);
  }

 private:
  agents::AgentRegistry* agents_;
};

// The read side (GetAllocation, ListAllocations) and planning: RequestTopology with dry_run
// returns the plan for links and rings without touching anything. Programming a request
// (dry_run false), phases, watch, release and keep-alive answer UNIMPLEMENTED here.
class TopologyServiceImpl final : public v1::TopologyService::Service {
 public:
  explicit TopologyServiceImpl(store::Store* store) : store_(store) {}

  grpc::Status RequestTopology(grpc::ServerContext*, const v1::RequestTopologyRequest*,
                               v1::RequestTopologyResponse*) override;
  grpc::Status GetAllocation(grpc::ServerContext*, const v1::GetAllocationRequest*,
                             v1::Allocation*) override;
  grpc::Status ListAllocations(grpc::ServerContext*, const v1::ListAllocationsRequest*,
                               v1::ListAllocationsResponse*) override;

 private:
  store::Store* store_;
};

// Health and the event log; drain, reconcile and links arrive with the engine and agent.
class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  // `switches` and `agents` may be null (no switch is probed, link RPCs are UNAVAILABLE);
  // none is owned.
  AdminServiceImpl(store::Store* store, fabric::SwitchRegistry* switches, std::string version,
                   agents::AgentRegistry* agents = nullptr)
      : store_(store), switches_(switches), agents_(agents), version_(std::move(version)) {}

  grpc::Status Health(grpc::ServerContext*, const v1::HealthRequest*, v1::HealthResponse*) override;
  grpc::Status ListEvents(grpc::ServerContext*, const v1::ListEventsRequest*,
                          v1::ListEventsResponse*) override;
  // Asks the agent owning the O-NIC to retrain a port, expecting the peer of the desired
  // circuit that ends on that port (any peer when none does).
  grpc::Status RetrainLink(grpc::ServerContext*, const v1::RetrainLinkRequest*,
                           v1::LinkState*) override;
  grpc::Status GetLinkStatus(grpc::ServerContext*, const v1::GetLinkStatusRequest*,
                             v1::GetLinkStatusResponse*) override;

 private:
  // Sends one command about O-NIC `onic` (an inventory id) and returns the link state; a
  // non-OK answer from the agent becomes that status with the agent's message.
  absl::StatusOr<v1::LinkState> LinkCommand(grpc::ServerContext* context, const std::string& onic,
                                            v1::Command command);

  store::Store* store_;
  fabric::SwitchRegistry* switches_;
  agents::AgentRegistry* agents_;
  std::string version_;
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_SERVICES_H_
