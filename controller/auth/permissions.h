// Who may call what: the roles fleetd knows, the permissions an RPC needs, and the one table
// that gives every RPC of every service its permission (docs/security.md shows it). An RPC
// missing from the table is refused for everyone; a test enumerates every method of every
// service from the descriptors and fails when one has no entry.
#ifndef FLEET_CONTROLLER_AUTH_PERMISSIONS_H_
#define FLEET_CONTROLLER_AUTH_PERMISSIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace fleet::auth {

enum class Role {
  kViewer,    // Reads everything: inventory, allocations, circuits, links, events, health.
  kJob,       // Its own tenants' allocations, and the events about them.
  kOperator,  // Everything but speaking as an agent.
  kAgent,     // Only the agent stream, and only as the host its identity names.
};
// "viewer", "job", "operator", "agent".
const char* RoleName(Role role);
std::optional<Role> ParseRole(absl::string_view name);
const std::vector<Role>& AllRoles();

enum class Permission {
  kPublic,            // Anyone, even without a certificate: gRPC's health check.
  kReadHealth,        // fleetd's health and version; server reflection.
  kReadInventory,     // Switches, ports, hosts, devices, O-NICs, trunks, agents.
  kWriteInventory,    // Apply an inventory, delete an object.
  kReadCircuits,      // Every circuit of the site, all tenants'.
  kReadAllocations,   // Get, list, watch; a job only its tenants'.
  kWriteAllocations,  // Request, phase, detach, replace a member, release, keep alive; a job
                      // only for its tenants.
  kReadEvents,        // The event log; a job only the events of its tenants' allocations.
  kReadLinks,         // An O-NIC's link status, read live from its agent.
  kOperateFabric,     // Retrain a link, drain and undrain, reconcile.
  kAgentStream,       // AgentService.Connect, as the host the identity names.
};
// "public", "health.read", "inventory.read", ... as in docs/security.md.
const char* PermissionName(Permission permission);

// Whether `role` holds `permission`. kPublic is held by every role (and by no role at all).
bool RoleHas(Role role, Permission permission);

struct MethodPermission {
  const char* method;  // Full gRPC method name, e.g. "/fleet.v1.TopologyService/GetAllocation".
  Permission permission;
};
// The table: every RPC fleetd serves, its services' and gRPC's own (health, reflection).
const std::vector<MethodPermission>& MethodTable();
// The permission `method` (a full name, as in the table) needs; nullopt for one not in it.
std::optional<Permission> PermissionOf(absl::string_view method);

}  // namespace fleet::auth

#endif  // FLEET_CONTROLLER_AUTH_PERMISSIONS_H_
