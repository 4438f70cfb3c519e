// fleet.v1.TopologyService: jobs' requests, served by the reconfiguration engine; watches
// follow the store's commits (AllocationWatch) on the watch hub. Every change is answered once
// durable, except a phase switch that changes no circuit (ActivatePhase in the .cc says why).
#ifndef FLEET_CONTROLLER_SERVICE_TOPOLOGY_SERVICE_H_
#define FLEET_CONTROLLER_SERVICE_TOPOLOGY_SERVICE_H_

#include "absl/strings/str_cat.h"
#include "controller/engine/engine.h"
#include "controller/service/caller.h"
#include "controller/service/rpc_executor.h"
#include "controller/service/watch_hub.h"
#include "controller/store/store.h"
#include "fleet/v1/topology.grpc.pb.h"

namespace fleet::service {

class TopologyServiceImpl final : public v1::TopologyService::CallbackService {
 public:
  // None is owned; all must outlive the service. `grants` is the policy in force (null on a
  // plaintext server: callers name themselves); `watches` serves WatchAllocation, `rpcs`
  // runs the other calls.
  TopologyServiceImpl(store::Store* store, engine::Engine* engine, auth::GrantSource* grants,
                      WatchHub* watches, RpcExecutor* rpcs)
      : store_(store), engine_(engine), grants_(grants), watches_(watches), rpcs_(rpcs) {}

  grpc::ServerUnaryReactor* RequestTopology(grpc::CallbackServerContext*,
                                            const v1::RequestTopologyRequest*,
                                            v1::RequestTopologyResponse*) override;
  grpc::ServerUnaryReactor* GetAllocation(grpc::CallbackServerContext*,
                                          const v1::GetAllocationRequest*,
                                          v1::Allocation*) override;
  grpc::ServerUnaryReactor* ListAllocations(grpc::CallbackServerContext*,
                                            const v1::ListAllocationsRequest*,
                                            v1::ListAllocationsResponse*) override;
  // An AllocationWatch on the hub, after the engine's tenancy check (its first step);
  // UNAVAILABLE when fleetd stops.
  grpc::ServerWriteReactor<v1::WatchAllocationResponse>* WatchAllocation(
      grpc::CallbackServerContext*, const v1::WatchAllocationRequest*) override;
  grpc::ServerUnaryReactor* ReleaseTopology(grpc::CallbackServerContext*,
                                            const v1::ReleaseTopologyRequest*,
                                            v1::ReleaseTopologyResponse*) override;
  grpc::ServerUnaryReactor* KeepAlive(grpc::CallbackServerContext*, const v1::KeepAliveRequest*,
                                      v1::KeepAliveResponse*) override;
  grpc::ServerUnaryReactor* ActivatePhase(grpc::CallbackServerContext*,
                                          const v1::ActivatePhaseRequest*,
                                          v1::ActivatePhaseResponse*) override;
  grpc::ServerUnaryReactor* DetachDevices(grpc::CallbackServerContext*,
                                          const v1::DetachDevicesRequest*,
                                          v1::DetachDevicesResponse*) override;
  grpc::ServerUnaryReactor* GetRanks(grpc::CallbackServerContext*, const v1::GetRanksRequest*,
                                     v1::GetRanksResponse*) override;
  grpc::ServerUnaryReactor* GetFabric(grpc::CallbackServerContext*, const v1::GetFabricRequest*,
                                      v1::GetFabricResponse*) override;

 private:
  // The caller of `method` (e.g. "ReleaseTopology"), decided for it on the policy in force.
  engine::Caller Caller(const grpc::ServerContextBase& context, const char* method) const {
    return CallerOf(context, grants_, absl::StrCat("/fleet.v1.TopologyService/", method));
  }

  store::Store* store_;
  engine::Engine* engine_;
  auth::GrantSource* grants_;
  WatchHub* watches_;
  RpcExecutor* rpcs_;
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_TOPOLOGY_SERVICE_H_
