// fleet.v1.TopologyService: jobs' requests, served by the reconfiguration engine; watches
// follow the store's commits (AllocationWatch). Every change is answered once durable.
#ifndef FLEET_CONTROLLER_SERVICE_TOPOLOGY_SERVICE_H_
#define FLEET_CONTROLLER_SERVICE_TOPOLOGY_SERVICE_H_

#include "absl/strings/str_cat.h"
#include "controller/engine/engine.h"
#include "controller/service/caller.h"
#include "controller/store/store.h"
#include "fleet/v1/topology.grpc.pb.h"

namespace fleet::service {

class TopologyServiceImpl final : public v1::TopologyService::Service {
 public:
  // None is owned; all must outlive the service. `grants` is the policy in force (null on a
  // plaintext server: callers name themselves).
  TopologyServiceImpl(store::Store* store, engine::Engine* engine, auth::GrantSource* grants)
      : store_(store), engine_(engine), grants_(grants) {}

  grpc::Status RequestTopology(grpc::ServerContext*, const v1::RequestTopologyRequest*,
                               v1::RequestTopologyResponse*) override;
  grpc::Status GetAllocation(grpc::ServerContext*, const v1::GetAllocationRequest*,
                             v1::Allocation*) override;
  grpc::Status ListAllocations(grpc::ServerContext*, const v1::ListAllocationsRequest*,
                               v1::ListAllocationsResponse*) override;
  // After the engine's tenancy check, an AllocationWatch; UNAVAILABLE when fleetd stops.
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
  grpc::Status GetRanks(grpc::ServerContext*, const v1::GetRanksRequest*,
                        v1::GetRanksResponse*) override;

 private:
  // The caller of `method` (e.g. "ReleaseTopology"), decided for it on the policy in force.
  engine::Caller Caller(const grpc::ServerContext& context, const char* method) const {
    return CallerOf(context, grants_, absl::StrCat("/fleet.v1.TopologyService/", method));
  }

  store::Store* store_;
  engine::Engine* engine_;
  auth::GrantSource* grants_;
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_TOPOLOGY_SERVICE_H_
