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
#include "controller/service/rpc_executor.h"
#include "controller/store/store.h"
#include "controller/switch_registry/switch_registry.h"
#include "fleet/v1/inventory.grpc.pb.h"

namespace fleet::service {

class InventoryServiceImpl final : public v1::InventoryService::CallbackService {
 public:
  // None is owned; all must outlive the service. `agents` may be null (no agent registry:
  // ListAgents answers UNIMPLEMENTED); so may `switches` (no switch drivers: switches carry no
  // credentials_file), and `grants`, the policy in force, on a plaintext server (callers name
  // themselves). Calls run on `rpcs`.
  InventoryServiceImpl(store::Store* store, inventory::InventoryApplier* applier, RpcExecutor* rpcs,
                       agent_registry::AgentRegistry* agents = nullptr,
                       const switch_registry::SwitchRegistry* switches = nullptr,
                       auth::GrantSource* grants = nullptr)
      : store_(store),
        applier_(applier),
        rpcs_(rpcs),
        agents_(agents),
        switches_(switches),
        grants_(grants) {}

  grpc::ServerUnaryReactor* ListSwitches(grpc::CallbackServerContext*,
                                         const v1::ListSwitchesRequest*,
                                         v1::ListSwitchesResponse*) override;
  grpc::ServerUnaryReactor* GetSwitch(grpc::CallbackServerContext*, const v1::GetSwitchRequest*,
                                      v1::Switch*) override;
  grpc::ServerUnaryReactor* ListPorts(grpc::CallbackServerContext*, const v1::ListPortsRequest*,
                                      v1::ListPortsResponse*) override;
  grpc::ServerUnaryReactor* ListHosts(grpc::CallbackServerContext*, const v1::ListHostsRequest*,
                                      v1::ListHostsResponse*) override;
  grpc::ServerUnaryReactor* GetHost(grpc::CallbackServerContext*, const v1::GetHostRequest*,
                                    v1::Host*) override;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext*, const v1::ListDevicesRequest*,
                                        v1::ListDevicesResponse*) override;
  grpc::ServerUnaryReactor* GetDevice(grpc::CallbackServerContext*, const v1::GetDeviceRequest*,
                                      v1::Device*) override;
  grpc::ServerUnaryReactor* ListOnics(grpc::CallbackServerContext*, const v1::ListOnicsRequest*,
                                      v1::ListOnicsResponse*) override;
  grpc::ServerUnaryReactor* GetOnic(grpc::CallbackServerContext*, const v1::GetOnicRequest*,
                                    v1::Onic*) override;
  grpc::ServerUnaryReactor* ListTrunks(grpc::CallbackServerContext*, const v1::ListTrunksRequest*,
                                       v1::ListTrunksResponse*) override;
  grpc::ServerUnaryReactor* ListCircuits(grpc::CallbackServerContext*,
                                         const v1::ListCircuitsRequest*,
                                         v1::ListCircuitsResponse*) override;
  grpc::ServerUnaryReactor* ApplyInventory(grpc::CallbackServerContext*,
                                           const v1::ApplyInventoryRequest*,
                                           v1::ApplyInventoryResponse*) override;
  grpc::ServerUnaryReactor* DeleteObject(grpc::CallbackServerContext*,
                                         const v1::DeleteObjectRequest*,
                                         v1::DeleteObjectResponse*) override;
  grpc::ServerUnaryReactor* ListAgents(grpc::CallbackServerContext*, const v1::ListAgentsRequest*,
                                       v1::ListAgentsResponse*) override;

 private:
  void AddCredentialsFile(v1::Switch& sw) const;

  store::Store* store_;
  inventory::InventoryApplier* applier_;
  RpcExecutor* rpcs_;
  // Who calls `method` (e.g. "ApplyInventory"), as recorded with the change.
  std::string Principal(const grpc::ServerContextBase& context, const char* method) const {
    return PrincipalOf(context, grants_, absl::StrCat("/fleet.v1.InventoryService/", method));
  }

  agent_registry::AgentRegistry* agents_;
  const switch_registry::SwitchRegistry* switches_;
  auth::GrantSource* grants_;
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_INVENTORY_SERVICE_H_
