#include "controller/auth/permissions.h"

#include <algorithm>

namespace fleet::auth {
namespace {

// Role × permission, by row. Kept beside the method table so both read as one page.
bool Holds(Role role, Permission p) {
  switch (role) {
    case Role::kOperator:
      return p != Permission::kAgentStream;
    case Role::kViewer:
      return p == Permission::kReadHealth || p == Permission::kReadInventory ||
             p == Permission::kReadCircuits || p == Permission::kReadAllocations ||
             p == Permission::kReadEvents || p == Permission::kReadLinks;
    case Role::kJob:
      return p == Permission::kReadHealth || p == Permission::kReadAllocations ||
             p == Permission::kWriteAllocations || p == Permission::kReadEvents;
    case Role::kAgent:
      return p == Permission::kAgentStream;
  }
  return false;
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kJob:
      return "job";
    case Role::kOperator:
      return "operator";
    case Role::kAgent:
      return "agent";
  }
  return "unknown";
}

std::optional<Role> ParseRole(absl::string_view name) {
  for (Role role : AllRoles()) {
    if (name == RoleName(role)) return role;
  }
  return std::nullopt;
}

const std::vector<Role>& AllRoles() {
  static const std::vector<Role> kRoles = {Role::kViewer, Role::kJob, Role::kOperator,
                                           Role::kAgent};
  return kRoles;
}

const char* PermissionName(Permission permission) {
  switch (permission) {
    case Permission::kPublic:
      return "public";
    case Permission::kReadHealth:
      return "health.read";
    case Permission::kReadInventory:
      return "inventory.read";
    case Permission::kWriteInventory:
      return "inventory.write";
    case Permission::kReadCircuits:
      return "circuits.read";
    case Permission::kReadAllocations:
      return "allocations.read";
    case Permission::kWriteAllocations:
      return "allocations.write";
    case Permission::kReadEvents:
      return "events.read";
    case Permission::kReadLinks:
      return "links.read";
    case Permission::kOperateFabric:
      return "fabric.operate";
    case Permission::kAgentStream:
      return "agent.stream";
  }
  return "unknown";
}

bool RoleHas(Role role, Permission permission) {
  return permission == Permission::kPublic || Holds(role, permission);
}

const std::vector<MethodPermission>& MethodTable() {
  using P = Permission;
  static const std::vector<MethodPermission> kTable = {
      {"/fleet.v1.TopologyService/RequestTopology", P::kWriteAllocations},
      {"/fleet.v1.TopologyService/GetAllocation", P::kReadAllocations},
      {"/fleet.v1.TopologyService/ListAllocations", P::kReadAllocations},
      {"/fleet.v1.TopologyService/WatchAllocation", P::kReadAllocations},
      {"/fleet.v1.TopologyService/ActivatePhase", P::kWriteAllocations},
      {"/fleet.v1.TopologyService/DetachDevices", P::kWriteAllocations},
      {"/fleet.v1.TopologyService/ReleaseTopology", P::kWriteAllocations},
      {"/fleet.v1.TopologyService/KeepAlive", P::kWriteAllocations},
      {"/fleet.v1.TopologyService/GetRanks", P::kReadAllocations},
      {"/fleet.v1.TopologyService/GetFabric", P::kReadAllocations},

      {"/fleet.v1.AdminService/Drain", P::kOperateFabric},
      {"/fleet.v1.AdminService/Undrain", P::kOperateFabric},
      {"/fleet.v1.AdminService/Reconcile", P::kOperateFabric},
      {"/fleet.v1.AdminService/Health", P::kReadHealth},
      {"/fleet.v1.AdminService/ListEvents", P::kReadEvents},
      {"/fleet.v1.AdminService/WatchEvents", P::kReadEvents},
      {"/fleet.v1.AdminService/ReplaceMember", P::kWriteAllocations},
      {"/fleet.v1.AdminService/SetDeviceHealth", P::kOperateFabric},
      {"/fleet.v1.AdminService/WhatIfFail", P::kReadCircuits},
      {"/fleet.v1.AdminService/RetrainLink", P::kOperateFabric},
      {"/fleet.v1.AdminService/GetLinkStatus", P::kReadLinks},

      {"/fleet.v1.InventoryService/ListSwitches", P::kReadInventory},
      {"/fleet.v1.InventoryService/GetSwitch", P::kReadInventory},
      {"/fleet.v1.InventoryService/ListPorts", P::kReadInventory},
      {"/fleet.v1.InventoryService/ListHosts", P::kReadInventory},
      {"/fleet.v1.InventoryService/GetHost", P::kReadInventory},
      {"/fleet.v1.InventoryService/ListDevices", P::kReadInventory},
      {"/fleet.v1.InventoryService/GetDevice", P::kReadInventory},
      {"/fleet.v1.InventoryService/ListOnics", P::kReadInventory},
      {"/fleet.v1.InventoryService/GetOnic", P::kReadInventory},
      {"/fleet.v1.InventoryService/ListTrunks", P::kReadInventory},
      {"/fleet.v1.InventoryService/ListCircuits", P::kReadCircuits},
      {"/fleet.v1.InventoryService/ListAgents", P::kReadInventory},
      {"/fleet.v1.InventoryService/ApplyInventory", P::kWriteInventory},
      {"/fleet.v1.InventoryService/DeleteObject", P::kWriteInventory},

      {"/fleet.v1.AgentService/Connect", P::kAgentStream},

      // gRPC's own services: load balancers and probes check health without a certificate.
      {"/grpc.health.v1.Health/Check", P::kPublic},
      {"/grpc.health.v1.Health/Watch", P::kPublic},
      {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", P::kReadHealth},
  };
  return kTable;
}

std::optional<Permission> PermissionOf(absl::string_view method) {
  const std::vector<MethodPermission>& table = MethodTable();
  auto it = std::find_if(table.begin(), table.end(),
                         [&](const MethodPermission& m) { return method == m.method; });
  if (it == table.end()) return std::nullopt;
  return it->permission;
}

}  // namespace fleet::auth
