// fleet.v1.AdminService: health, the event log (listed and followed), drain, reconcile,
// member replacement and link operations.
#ifndef FLEET_CONTROLLER_SERVICE_ADMIN_SERVICE_H_
#define FLEET_CONTROLLER_SERVICE_ADMIN_SERVICE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "controller/agent_registry/agent_registry.h"
#include "controller/auth/policy.h"
#include "controller/engine/engine.h"
#include "controller/service/caller.h"
#include "controller/service/rpc_executor.h"
#include "controller/service/watch_hub.h"
#include "controller/store/store.h"
#include "controller/switch_registry/switch_registry.h"
#include "fleet/v1/admin.grpc.pb.h"

namespace fleet::service {

class AdminServiceImpl final : public v1::AdminService::CallbackService {
 public:
  // None is owned; all must outlive the service. Only `agents` may be null (no agent registry:
  // the link RPCs are UNAVAILABLE), and `grants`, the policy in force, on a plaintext server.
  // `watches` serves WatchEvents, `rpcs` runs the other calls. `components`, when set, adds
  // fleetd's own components to Health (how callers are authenticated, the replica's role).
  AdminServiceImpl(store::Store* store, engine::Engine* engine,
                   switch_registry::SwitchRegistry* switches, agent_registry::AgentRegistry* agents,
                   auth::GrantSource* grants, WatchHub* watches, RpcExecutor* rpcs,
                   std::string version,
                   std::function<std::vector<v1::ComponentHealth>()> components = nullptr)
      : store_(store),
        engine_(engine),
        switches_(switches),
        agents_(agents),
        grants_(grants),
        watches_(watches),
        rpcs_(rpcs),
        version_(std::move(version)),
        components_(std::move(components)) {}

  // The store, and each inventory switch probed live.
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext*, const v1::HealthRequest*,
                                   v1::HealthResponse*) override;
  grpc::ServerUnaryReactor* ListEvents(grpc::CallbackServerContext*, const v1::ListEventsRequest*,
                                       v1::ListEventsResponse*) override;
  // Asks the agent owning the O-NIC to retrain a port, expecting the peer of the desired
  // circuit that ends on that port (any peer when none does).
  grpc::ServerUnaryReactor* RetrainLink(grpc::CallbackServerContext*, const v1::RetrainLinkRequest*,
                                        v1::LinkState*) override;
  grpc::ServerUnaryReactor* GetLinkStatus(grpc::CallbackServerContext*,
                                          const v1::GetLinkStatusRequest*,
                                          v1::GetLinkStatusResponse*) override;
  grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext*, const v1::DrainRequest*,
                                  v1::DrainResponse*) override;
  grpc::ServerUnaryReactor* Undrain(grpc::CallbackServerContext*, const v1::UndrainRequest*,
                                    v1::UndrainResponse*) override;
  grpc::ServerUnaryReactor* Reconcile(grpc::CallbackServerContext*, const v1::ReconcileRequest*,
                                      v1::ReconcileResponse*) override;
  grpc::ServerUnaryReactor* ReplaceMember(grpc::CallbackServerContext*,
                                          const v1::ReplaceMemberRequest*,
                                          v1::ReplaceMemberResponse*) override;
  grpc::ServerUnaryReactor* SetDeviceHealth(grpc::CallbackServerContext*,
                                            const v1::SetDeviceHealthRequest*,
                                            v1::Device*) override;
  grpc::ServerUnaryReactor* WhatIfFail(grpc::CallbackServerContext*, const v1::WhatIfFailRequest*,
                                       v1::WhatIfFailResponse*) override;
  // Replays the stored events after `after_sequence`, then sends each new one as it commits.
  // Follows the event log on the watch hub; UNAVAILABLE when fleetd stops.
  grpc::ServerWriteReactor<v1::Event>* WatchEvents(grpc::CallbackServerContext*,
                                                   const v1::WatchEventsRequest*) override;

 private:
  // Sends one command about O-NIC `onic` (an inventory id) and returns the link state; a
  // non-OK answer from the agent becomes that status with the agent's message.
  absl::StatusOr<v1::LinkState> LinkCommand(grpc::ServerContextBase* context,
                                            const std::string& onic, v1::Command command);

  store::Store* store_;
  engine::Engine* engine_;
  switch_registry::SwitchRegistry* switches_;
  agent_registry::AgentRegistry* agents_;
  // The caller of `method` (e.g. "Drain"), decided for it on the policy in force.
  engine::Caller Caller(const grpc::ServerContextBase& context, const char* method) const {
    return CallerOf(context, grants_, absl::StrCat("/fleet.v1.AdminService/", method));
  }

  auth::GrantSource* grants_;
  WatchHub* watches_;
  RpcExecutor* rpcs_;
  std::string version_;
  std::function<std::vector<v1::ComponentHealth>()> components_;
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_ADMIN_SERVICE_H_
