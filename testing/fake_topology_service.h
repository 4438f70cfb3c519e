// An in-process TopologyService that keeps every version of each allocation, for tests of
// clients that request, watch and change topologies.
#ifndef FLEET_TESTING_FAKE_TOPOLOGY_SERVICE_H_
#define FLEET_TESTING_FAKE_TOPOLOGY_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fleet/v1/topology.grpc.pb.h"

namespace fleet::testing {

// A small stateful topology service. Each allocation keeps every version it has had;
// WatchAllocation sends the current one and then each later one, as fleetd's does. Tests move
// allocations through their states with SetState, as the engine would.
class FakeTopologyService final : public v1::TopologyService::Service {
 public:
  explicit FakeTopologyService(absl::Time now);

  // A ring over the template's members, one circuit per member on port 1 of its first O-NIC
  // (named MEMBER-n0). Members named gpu9 do not exist.
  grpc::Status RequestTopology(grpc::ServerContext*, const v1::RequestTopologyRequest* request,
                               v1::RequestTopologyResponse* response) override;

  grpc::Status GetAllocation(grpc::ServerContext*, const v1::GetAllocationRequest* request,
                             v1::Allocation* response) override;

  grpc::Status ListAllocations(grpc::ServerContext*, const v1::ListAllocationsRequest* request,
                               v1::ListAllocationsResponse* response) override;

  grpc::Status WatchAllocation(grpc::ServerContext* context,
                               const v1::WatchAllocationRequest* request,
                               grpc::ServerWriter<v1::WatchAllocationResponse>* writer) override;

  grpc::Status ReleaseTopology(grpc::ServerContext*, const v1::ReleaseTopologyRequest* request,
                               v1::ReleaseTopologyResponse* response) override;

  // Allocation a1 has phases dp (active) and tp; switching removes ocs1:1→401 and adds
  // ocs1:2→402, and leaves a1 PROGRAMMING on the new phase.
  grpc::Status ActivatePhase(grpc::ServerContext*, const v1::ActivatePhaseRequest* request,
                             v1::ActivatePhaseResponse* response) override;

  grpc::Status KeepAlive(grpc::ServerContext*, const v1::KeepAliveRequest* request,
                         v1::KeepAliveResponse* response) override;

  // A new version of allocation `id` in `state`, as the engine records a transition.
  void SetState(const std::string& id, v1::AllocationState state, const std::string& reason = "");
  // The state RequestTopology admits allocations in.
  void set_admit_state(v1::AllocationState state);
  // Open watches end (OK) once they have sent what they have.
  void EndWatches();
  // True once `n` watches have sent (or are sending) their first version.
  bool AwaitWatches(int n);
  // True once ListAllocations has answered `n` times (a `get --watch` asks on every event).
  bool AwaitLists(int n);
  int watches_started();
  std::vector<v1::RequestTopologyRequest> requests();
  size_t versions(const std::string& id);

 private:
  static grpc::Status NotFound(const std::string& id);

  const absl::Time now_;
  absl::Mutex mu_;
  std::map<std::string, std::vector<v1::Allocation>> history_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RequestTopologyRequest> requests_ ABSL_GUARDED_BY(mu_);
  v1::AllocationState admit_state_ ABSL_GUARDED_BY(mu_) = v1::ALLOCATION_STATE_PENDING;
  bool end_watches_ ABSL_GUARDED_BY(mu_) = false;
  int watches_started_ ABSL_GUARDED_BY(mu_) = 0;
  int lists_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fleet::testing

#endif  // FLEET_TESTING_FAKE_TOPOLOGY_SERVICE_H_
