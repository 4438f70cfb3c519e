#include "controller/auth/policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fleet::auth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kPolicy[] = R"(grants:
  - identity: spiffe://site/operator/*
    role: operator
  - identity: spiffe://site/job/ml-platform
    role: job
    tenants: [team-a, team-b]
  - identity: spiffe://site/job/*
    role: job
  - identity: spiffe://site/agent/*
    role: agent
  - identity: cn:grafana
    role: viewer
)";

TEST(PolicyTest, TheFirstMatchingGrantApplies) {
  absl::StatusOr<Policy> policy = Policy::Parse(kPolicy, "p.yaml");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->Resolve("spiffe://site/operator/alice")->role, Role::kOperator);
  std::optional<Grant> ml = policy->Resolve("spiffe://site/job/ml-platform");
  ASSERT_TRUE(ml.has_value());
  EXPECT_THAT(ml->tenants, ElementsAre("team-a", "team-b"));
  EXPECT_THAT(policy->Resolve("spiffe://site/job/team-c")->tenants, ElementsAre("team-c"));
  EXPECT_EQ(policy->Resolve("spiffe://site/agent/server1")->host, "server1");
  EXPECT_EQ(policy->Resolve("cn:grafana")->role, Role::kViewer);
  // Exact means exact; other sites and unknown identities hold nothing.
  EXPECT_FALSE(policy->Resolve("cn:grafana2").has_value());
  EXPECT_FALSE(policy->Resolve("spiffe://other/operator/alice").has_value());
  EXPECT_FALSE(policy->Resolve("").has_value());
  // A prefix grant needs a name after it to take a tenant or a host from.
  EXPECT_FALSE(policy->Resolve("spiffe://site/job/").has_value());
  EXPECT_FALSE(policy->Resolve("spiffe://site/agent/").has_value());
}

TEST(PolicyTest, EveryProblemIsNamedWithItsLine) {
  absl::StatusOr<Policy> policy = Policy::Parse(R"(grants:
  - identity: spiffe://site/*/alice
    role: operator
  - identity: spiffe://site/x
    role: admin
  - identity: spiffe://site/y
    role: viewer
    tenants: [a]
  - role: job
  - identity: z
    role: job
    tenants: []
    color: red
owner: me
)",
                                                "p.yaml");
  ASSERT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(policy.status().message());
  EXPECT_THAT(message, HasSubstr("p.yaml:2: grants[0].identity 'spiffe://site/*/alice': '*' may "
                                 "only end the identity"));
  EXPECT_THAT(message, HasSubstr("p.yaml:5: grants[1].role 'admin' is not one of viewer, job, "
                                 "operator, agent"));
  EXPECT_THAT(message, HasSubstr("p.yaml:8: grants[2].tenants: only a job acts for tenants, not "
                                 "role viewer"));
  EXPECT_THAT(message, HasSubstr("grants[3].identity must be a non-empty string"));
  EXPECT_THAT(message, HasSubstr("grants[4].tenants must be a non-empty list"));
  EXPECT_THAT(message, HasSubstr("grants[4]: unknown key 'color'"));
  EXPECT_THAT(message, HasSubstr("p.yaml:14: unknown key 'owner' (known: grants)"));
}

TEST(PolicyTest, AnEmptyPolicyGrantsNothing) {
  absl::StatusOr<Policy> policy = Policy::Parse("", "p.yaml");
  ASSERT_TRUE(policy.ok());
  EXPECT_FALSE(policy->Resolve("spiffe://site/operator/alice").has_value());
  EXPECT_EQ(Policy::ReadFile("/nonexistent/p.yaml").status().code(), absl::StatusCode::kNotFound);
}

TEST(PolicyTest, TheIdentityIsTheOneUriElseTheCommonName) {
  EXPECT_EQ(IdentityOf({"spiffe://site/job/a"}, "ignored"), "spiffe://site/job/a");
  EXPECT_EQ(IdentityOf({}, "grafana"), "cn:grafana");
  EXPECT_EQ(IdentityOf({"spiffe://site/job/a", "spiffe://site/operator/b"}, "x"), "");
  EXPECT_EQ(IdentityOf({}, ""), "");
}

}  // namespace
}  // namespace fleet::auth
