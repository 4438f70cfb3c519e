// The permission table covers every RPC fleetd serves, and the roles hold what
// docs/security.md says they hold.
#include "controller/auth/permissions.h"

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "fleet/v1/admin.pb.h"
#include "fleet/v1/agent.pb.h"
#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::auth {
namespace {

// Every method of every service in fleet.v1, from the descriptors the server is built from.
std::set<std::string> ServedMethods() {
  std::set<std::string> methods;
  for (const google::protobuf::FileDescriptor* file :
       {v1::Allocation::descriptor()->file(), v1::HealthRequest::descriptor()->file(),
        v1::Switch::descriptor()->file(), v1::AgentMessage::descriptor()->file()}) {
    for (int s = 0; s < file->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = file->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        methods.insert(absl::StrCat("/", service->full_name(), "/", service->method(m)->name()));
      }
    }
  }
  return methods;
}

TEST(PermissionsTest, EveryMethodOfEveryServiceHasAnEntry) {
  const std::set<std::string> served = ServedMethods();
  ASSERT_GE(served.size(), 30u);  // The four services are all there.
  for (const std::string& method : served) {
    EXPECT_TRUE(PermissionOf(method).has_value()) << method << " has no entry in MethodTable()";
  }
}

TEST(PermissionsTest, EveryEntryIsAMethodServedOrGrpcsOwn) {
  std::set<std::string> seen;
  const std::set<std::string> served = ServedMethods();
  for (const MethodPermission& m : MethodTable()) {
    EXPECT_TRUE(seen.insert(m.method).second) << m.method << " is in the table twice";
    const std::string method = m.method;
    if (method.rfind("/fleet.v1.", 0) == 0) {
      EXPECT_TRUE(served.contains(method)) << method << " is no longer served";
    }
  }
  EXPECT_FALSE(PermissionOf("/fleet.v1.AdminService/NoSuchMethod").has_value());
}

TEST(PermissionsTest, RolesHoldWhatTheDocsSay) {
  using P = Permission;
  for (P p : {P::kReadHealth, P::kReadInventory, P::kReadCircuits, P::kReadAllocations,
              P::kReadEvents, P::kReadLinks}) {
    EXPECT_TRUE(RoleHas(Role::kViewer, p)) << PermissionName(p);
  }
  for (P p : {P::kWriteInventory, P::kWriteAllocations, P::kOperateFabric, P::kAgentStream}) {
    EXPECT_FALSE(RoleHas(Role::kViewer, p)) << PermissionName(p);
  }
  EXPECT_TRUE(RoleHas(Role::kJob, P::kWriteAllocations));
  EXPECT_TRUE(RoleHas(Role::kJob, P::kReadEvents));
  EXPECT_FALSE(RoleHas(Role::kJob, P::kReadInventory));
  EXPECT_FALSE(RoleHas(Role::kJob, P::kReadCircuits));
  EXPECT_FALSE(RoleHas(Role::kJob, P::kOperateFabric));
  EXPECT_TRUE(RoleHas(Role::kOperator, P::kWriteInventory));
  EXPECT_TRUE(RoleHas(Role::kOperator, P::kOperateFabric));
  EXPECT_FALSE(RoleHas(Role::kOperator, P::kAgentStream));  // Only as the host it names.
  for (const MethodPermission& m : MethodTable()) {
    EXPECT_EQ(RoleHas(Role::kAgent, m.permission),
              m.permission == P::kAgentStream || m.permission == P::kPublic)
        << m.method;
  }
}

TEST(PermissionsTest, TheDocsTableIsTheCodesTable) {
  std::ifstream file(std::string(FLEET_SOURCE_DIR) + "/docs/security.md");
  std::stringstream text;
  text << file.rdbuf();
  for (const MethodPermission& m : MethodTable()) {
    const std::string row = absl::StrCat("| `", std::string(m.method).substr(1), "` | `",
                                         PermissionName(m.permission), "` |");
    EXPECT_THAT(text.str(), ::testing::HasSubstr(row)) << "docs/security.md lacks " << row;
  }
}

TEST(PermissionsTest, NamesRoundTrip) {
  for (Role role : AllRoles()) EXPECT_EQ(ParseRole(RoleName(role)), role);
  EXPECT_FALSE(ParseRole("admin").has_value());
  EXPECT_STREQ(PermissionName(Permission::kWriteAllocations), "allocations.write");
}

}  // namespace
}  // namespace fleet::auth
