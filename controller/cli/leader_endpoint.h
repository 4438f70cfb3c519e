// Which of several fleetd endpoints fleetctl talks to (docs/ha.md): the replicas of a
// replicated site all serve reads, but only the leader takes changes.
//
// Contract: every endpoint is asked at once for gRPC's health check of kLeaderHealthService,
// each with `timeout`. The first in the list that answers SERVING is chosen (the leader; a
// single fleetd always answers so); failing that, the first that answered at all (a
// follower: reads work, and a change is refused naming the leader); failing that, the first
// endpoint, whose calls then fail with the reason. One endpoint is returned as it is, asking
// nothing. Never longer than `timeout` in all.
#ifndef FLEET_CONTROLLER_CLI_LEADER_ENDPOINT_H_
#define FLEET_CONTROLLER_CLI_LEADER_ENDPOINT_H_

#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace fleet::cli {

// The endpoints of a --server value: HOST:PORT, or several comma-separated.
std::vector<std::string> SplitEndpoints(const std::string& server);

std::string ChooseEndpoint(const std::vector<std::string>& endpoints,
                           const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                           absl::Duration timeout);

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_LEADER_ENDPOINT_H_
