// fleet.v1.AgentService: the agents' stream, served by the agent registry.
#ifndef FLEET_CONTROLLER_SERVICE_AGENT_SERVICE_H_
#define FLEET_CONTROLLER_SERVICE_AGENT_SERVICE_H_

#include "controller/agent_registry/agent_registry.h"
#include "controller/service/caller.h"
#include "fleet/v1/agent.grpc.pb.h"

namespace fleet::service {

class AgentServiceImpl final : public v1::AgentService::CallbackService {
 public:
  // Neither is owned. `grants` is the policy in force (null on a plaintext server).
  AgentServiceImpl(agent_registry::AgentRegistry* agents, auth::GrantSource* grants)
      : agents_(agents), grants_(grants) {}
  agent_registry::AgentRegistry::Reactor* Connect(grpc::CallbackServerContext* context) override {
    return agents_->Connect(context, AgentPeerOf(*context, grants_));
  }

 private:
  agent_registry::AgentRegistry* agents_;
  auth::GrantSource* grants_;
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_AGENT_SERVICE_H_
