// Which fleetd replica leads, as gRPC's standard health check tells it (grpc.health.v1): the
// service name below is SERVING on the replica that leads and takes changes, NOT_SERVING on
// the others (and on a leader still taking over); a single fleetd serves it always. fleetctl
// and the clients find the leader among several endpoints by it, and so can a load balancer.
#ifndef FLEET_COMMON_LEADER_HEALTH_H_
#define FLEET_COMMON_LEADER_HEALTH_H_

namespace fleet {

inline constexpr char kLeaderHealthService[] = "fleet.v1.Leader";

}  // namespace fleet

#endif  // FLEET_COMMON_LEADER_HEALTH_H_
