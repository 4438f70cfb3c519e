// The AuthContext properties the gatekeeper (authenticator.h) puts on a call it accepted
// under mutual TLS, and service/caller reads.
#ifndef FLEET_CONTROLLER_AUTH_PROPERTIES_H_
#define FLEET_CONTROLLER_AUTH_PROPERTIES_H_

namespace fleet::auth {

inline constexpr char kIdentityProperty[] = "fleet.identity";  // e.g. spiffe://site/job/a
inline constexpr char kRoleProperty[] = "fleet.role";          // RoleName()
inline constexpr char kTenantProperty[] = "fleet.tenant";      // One per tenant, role job.
inline constexpr char kHostProperty[] = "fleet.host";          // Role agent.

}  // namespace fleet::auth

#endif  // FLEET_CONTROLLER_AUTH_PROPERTIES_H_
