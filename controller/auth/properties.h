// The AuthContext property the gatekeeper (authenticator.h) puts on a connection whose call
// it accepted under mutual TLS, and service/caller reads. gRPC shares one AuthContext among
// every call of a connection, so only what cannot change on it is stored there: the identity,
// which its certificate fixes. The role, tenants and host are asked of the policy in force at
// each call (policy.h, GrantSource).
#ifndef FLEET_CONTROLLER_AUTH_PROPERTIES_H_
#define FLEET_CONTROLLER_AUTH_PROPERTIES_H_

namespace fleet::auth {

inline constexpr char kIdentityProperty[] = "fleet.identity";  // e.g. spiffe://site/job/a

}  // namespace fleet::auth

#endif  // FLEET_CONTROLLER_AUTH_PROPERTIES_H_
