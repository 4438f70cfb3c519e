// The fleet.v1 gRPC services as fleetd serves them. Each converts absl::Status to
// grpc::Status in one place (ToGrpcStatus) and records the caller's principal (metadata
// `x-fleet-principal`) with every change. Every RPC of fleet.v1 is served; a fleetd built
// without an agent registry (some tests) answers the agent RPCs UNIMPLEMENTED.
#ifndef FLEET_CONTROLLER_SERVICE_SERVICES_H_
#define FLEET_CONTROLLER_SERVICE_SERVICES_H_

#include <string>

#include "controller/agents/agent_registry.h"
#include "controller/engine/engine.h"
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
// The engine's view of the caller: its principal, and its RPC's deadline.
engine::Caller CallerOf(const grpc::ServerContext& context);

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

// Jobs' requests, served by the reconfiguration engine. Watches follow the event log: the
// stream starts with the current state and sends the allocation again whenever its state,
// reason or a circuit's state changed; a watch of one allocation ends after it is FAILED or
// RELEASED.
class TopologyServiceImpl final : public v1::TopologyService::Service {
 public:
  // Neither is owned.
  TopologyServiceImpl(store::Store* store, engine::Engine* engine)
      : store_(store), engine_(engine) {}

  grpc::Status RequestTopology(grpc::ServerContext*, const v1::RequestTopologyRequest*,
                               v1::RequestTopologyResponse*) override;
  grpc::Status GetAllocation(grpc::ServerContext*, const v1::GetAllocationRequest*,
                             v1::Allocation*) override;
  grpc::Status ListAllocations(grpc::ServerContext*, const v1::ListAllocationsRequest*,
                               v1::ListAllocationsResponse*) override;
  grpc::Status WatchAllocation(grpc::ServerContext*, const v1::WatchAllocationRequest*,
                               grpc::ServerWriter<v1::WatchAllocationResponse>*) override;
  grpc::Status ReleaseTopology(grpc::ServerContext*, const v1::ReleaseTopologyRequest*,
                               v1::ReleaseTopologyResponse*) override;
  grpc::Status KeepAlive(grpc::ServerContext*, const v1::KeepAliveRequest*,
                         v1::KeepAliveResponse*) override;
  grpc::Status ActivatePhase(grpc::ServerContext*, const v1::ActivatePhaseRequest*,
                             v1::ActivatePhaseResponse*) override;
  grpc::Status DetachDevices(grpc::ServerContext*, const v1::DetachDevicesRequest*,
                             v1::DetachDevicesResponse*) override;

 private:
  store::Store* store_;
  engine::Engine* engine_;
};

// Health, the event log (listed and followed), drain, reconcile, member replacement and link
// operations.
class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  // `switches`, `agents` and `engine` may be null (no switch is probed, link RPCs are
  // UNAVAILABLE, drain and reconcile are UNAVAILABLE); none is owned.
  AdminServiceImpl(store::Store* store, fabric::SwitchRegistry* switches, std::string version,
                   agents::AgentRegistry* agents = nullptr, engine::Engine* engine = nullptr)
      : store_(store),
        switches_(switches),
        agents_(agents),
        engine_(engine),
        version_(std::move(version)) {}

  grpc::Status Health(grpc::ServerContext*, const v1::HealthRequest*, v1::HealthResponse*) override;
  grpc::Status ListEvents(grpc::ServerContext*, const v1::ListEventsRequest*,
                          v1::ListEventsResponse*) override;
  // Asks the agent owning the O-NIC to retrain a port, expecting the peer of the desired
  // circuit that ends on that port (any peer when none does).
  grpc::Status RetrainLink(grpc::ServerContext*, const v1::RetrainLinkRequest*,
                           v1::LinkState*) override;
  grpc::Status GetLinkStatus(grpc::ServerContext*, const v1::GetLinkStatusRequest*,
                             v1::GetLinkStatusResponse*) override;
  grpc::Status Drain(grpc::ServerContext*, const v1::DrainRequest*, v1::DrainResponse*) override;
  grpc::Status Undrain(grpc::ServerContext*, const v1::UndrainRequest*,
                       v1::UndrainResponse*) override;
  grpc::Status Reconcile(grpc::ServerContext*, const v1::ReconcileRequest*,
                         v1::ReconcileResponse*) override;
  // Engine::ReplaceMember; UNAVAILABLE without an engine.
  grpc::Status ReplaceMember(grpc::ServerContext*, const v1::ReplaceMemberRequest*,
                             v1::ReplaceMemberResponse*) override;
  // Replays the stored events after `after_sequence`, then sends each new one as it commits.
  grpc::Status WatchEvents(grpc::ServerContext*, const v1::WatchEventsRequest*,
                           grpc::ServerWriter<v1::Event>*) override;

 private:
  // Sends one command about O-NIC `onic` (an inventory id) and returns the link state; a
  // non-OK answer from the agent becomes that status with the agent's message.
  absl::StatusOr<v1::LinkState> LinkCommand(grpc::ServerContext* context, const std::string& onic,
                                            v1::Command command);

  store::Store* store_;
  fabric::SwitchRegistry* switches_;
  agents::AgentRegistry* agents_;
  engine::Engine* engine_;
  std::string version_;
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_SERVICES_H_
