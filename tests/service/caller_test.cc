// The caller's identity and deadline as the services read them from a request.
#include "controller/service/caller.h"

#include <grpcpp/test/server_context_test_spouse.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace fleet::service {
namespace {

TEST(CallerTest, ThePrincipalComesFromMetadataAndIsAnonymousWithout) {
  grpc::ServerContext none;
  EXPECT_EQ(PrincipalOf(none, nullptr, "/fleet.v1.TopologyService/GetAllocation"), "anonymous");
  grpc::ServerContext empty;
  grpc::testing::ServerContextTestSpouse empty_spouse(&empty);
  empty_spouse.AddClientMetadata(kPrincipalMetadata, "");
  EXPECT_EQ(PrincipalOf(empty, nullptr, "/fleet.v1.TopologyService/GetAllocation"), "anonymous");
  grpc::ServerContext alice;
  grpc::testing::ServerContextTestSpouse spouse(&alice);
  spouse.AddClientMetadata("x-fleet-principal", "operator:alice");
  EXPECT_EQ(PrincipalOf(alice, nullptr, "/fleet.v1.TopologyService/GetAllocation"),
            "operator:alice");
  const engine::Caller caller = CallerOf(alice, nullptr, "/fleet.v1.TopologyService/GetAllocation");
  EXPECT_EQ(caller.principal, "operator:alice");
  EXPECT_TRUE(caller.operator_role());
  // The client set none: centuries away.
  EXPECT_GT(caller.deadline, absl::Now() + absl::Hours(24 * 365 * 100));
}

TEST(CallerTest, AJobIsLimitedToItsTenant) {
  grpc::ServerContext context;
  grpc::testing::ServerContextTestSpouse spouse(&context);
  spouse.AddClientMetadata(kPrincipalMetadata, "job:team-a");
  const engine::Caller caller =
      CallerOf(context, nullptr, "/fleet.v1.TopologyService/GetAllocation");
  EXPECT_EQ(caller.principal, "job:team-a");
  EXPECT_EQ(caller.tenants, std::vector<std::string>{"team-a"});
  EXPECT_FALSE(caller.operator_role());
}

TEST(CallerTest, ACommandWithoutARequestDeadlineWaitsAtMostItsBound) {
  grpc::ServerContext context;
  const absl::Time before = absl::Now();
  const absl::Time deadline = CommandDeadline(context, absl::Seconds(30));
  EXPECT_GE(deadline, before + absl::Seconds(30));
  EXPECT_LE(deadline, absl::Now() + absl::Seconds(30));
}

}  // namespace
}  // namespace fleet::service
