// fleet.v1.InventoryService: the site's switches, hosts, devices, O-NICs, trunks and circuits
// read from the store, with the allocations that use each part (inventory_usage.h) and the
// switch credentials file in force; inventory applied and deleted with the caller's principal
// recorded; the connected agents.
#ifndef FLEET_CONTROLLER_SERVICE_INVENTORY_SERVICE_H_
#define FLEET_CONTROLLER_SERVICE_INVENTORY_SERVICE_H_

#include "absl/strings/str_cat.h"
#include "controller/agent_registry/agent_registry.h"
#include "controller/auth/policy.h"
#include "controller/inventory/inventory.h"
#include "controller/service/caller.h"
#include "controller/store/store.h"
#include "controller/switch_registry/switch_registry.h"
#include "fleet/v1/inventory.grpc.pb.h"

namespace fleet::service {

class InventoryServiceImpl final : public v1::InventoryService::Service {
 public:
  // None is owned; all must outlive the service. `agents` may be null (no agent registry:
  // ListAgents answers UNIMPLEMENTED); so may `switches` (no switch drivers: switches carry no
  // credentials_file), and `grants`, the policy in force, on a plaintext server (callers name
  // themselves).
  InventoryServiceImpl(store::Store* store, inventory::InventoryApplier* applier,
                       agent_registry::AgentRegistry* agents = nullptr,
                       const switch_registry::SwitchRegistry* switches = nullptr,
                       auth::GrantSource* grants = nullptr)
      : store_(store), applier_(applier), agents_(agents), switches_(switches), grants_(grants) {}

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
  void AddCredentialsFile(v1::Switch& sw) const;

  store::Store* store_;
  inventory::InventoryApplier* applier_;
  // Who calls `method` (e.g. "ApplyInventory"), as recorded with the change.
  std::string Principal(const grpc::ServerContext& context, const char* method) const {
    return PrincipalOf(context, grants_, absl::StrCat("/fleet.v1.InventoryService/", method));
  }

  agent_registry::AgentRegistry* agents_;
  const switch_registry::SwitchRegistry* switches_;
  auth::GrantSource* grants_;
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_INVENTORY_SERVICE_H_
