// An in-process InventoryService with a small canned site (one switch, host, CPU, GPU, O-NIC,
// circuit, two ports and two agents), for tests that drive a client over a real channel.
#ifndef FLEET_TESTING_FAKE_INVENTORY_SERVICE_H_
#define FLEET_TESTING_FAKE_INVENTORY_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fleet/v1/inventory.grpc.pb.h"

namespace fleet::testing {

// A small stateful inventory: lists and gets read `site_`, deletes remove from it. `now` is
// the test clock's time, for the agents' timestamps.
class FakeInventoryService final : public v1::InventoryService::Service {
 public:
  explicit FakeInventoryService(absl::Time now);

  grpc::Status ListSwitches(grpc::ServerContext* context, const v1::ListSwitchesRequest*,
                            v1::ListSwitchesResponse* response) override;

  grpc::Status GetSwitch(grpc::ServerContext*, const v1::GetSwitchRequest* request,
                         v1::Switch* response) override;

  grpc::Status ListPorts(grpc::ServerContext*, const v1::ListPortsRequest* request,
                         v1::ListPortsResponse* response) override;

  grpc::Status ListHosts(grpc::ServerContext*, const v1::ListHostsRequest*,
                         v1::ListHostsResponse* response) override;

  grpc::Status GetHost(grpc::ServerContext*, const v1::GetHostRequest* request,
                       v1::Host* response) override;

  grpc::Status ListDevices(grpc::ServerContext*, const v1::ListDevicesRequest* request,
                           v1::ListDevicesResponse* response) override;

  grpc::Status GetDevice(grpc::ServerContext*, const v1::GetDeviceRequest* request,
                         v1::Device* response) override;

  grpc::Status GetOnic(grpc::ServerContext*, const v1::GetOnicRequest* request,
                       v1::Onic* response) override;

  grpc::Status ListOnics(grpc::ServerContext*, const v1::ListOnicsRequest*,
                         v1::ListOnicsResponse* response) override;

  grpc::Status ListCircuits(grpc::ServerContext*, const v1::ListCircuitsRequest*,
                            v1::ListCircuitsResponse* response) override;

  grpc::Status ApplyInventory(grpc::ServerContext*, const v1::ApplyInventoryRequest* request,
                              v1::ApplyInventoryResponse* response) override;

  grpc::Status ListAgents(grpc::ServerContext*, const v1::ListAgentsRequest*,
                          v1::ListAgentsResponse* response) override;

  grpc::Status DeleteObject(grpc::ServerContext*, const v1::DeleteObjectRequest* request,
                            v1::DeleteObjectResponse* response) override;

  std::string principal();
  std::string last_port_filter();
  v1::ApplyInventoryRequest applied();
  // As a fleetd without an agent registry answers.
  void set_agents_unimplemented();

 private:
  absl::Mutex mu_;
  v1::Inventory site_ ABSL_GUARDED_BY(mu_);
  v1::ListPortsResponse ports_ ABSL_GUARDED_BY(mu_);
  v1::ListCircuitsResponse circuits_ ABSL_GUARDED_BY(mu_);
  std::string principal_ ABSL_GUARDED_BY(mu_);
  std::string last_port_filter_ ABSL_GUARDED_BY(mu_);
  v1::ApplyInventoryRequest applied_ ABSL_GUARDED_BY(mu_);
  v1::ListAgentsResponse agents_ ABSL_GUARDED_BY(mu_);
  bool agents_unimplemented_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fleet::testing

#endif  // FLEET_TESTING_FAKE_INVENTORY_SERVICE_H_
