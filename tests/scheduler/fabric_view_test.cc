// DescribeFabric (GetFabric's answer): port uses, joinable pairs and their paths, tenancy and
// the errors, on a two-switch synthetic site.
#include "scheduler/fabric_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/scheduler/synthetic_site.h"

namespace fleet::scheduler::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

v1::Circuit Circuit(const std::string& allocation, const std::string& source,
                    const std::string& destination, const std::vector<std::string>& trunks = {}) {
  v1::Circuit c;
  c.set_id(allocation + "-" + source + "-" + destination);
  c.set_allocation_id(allocation);
  c.mutable_source()->set_onic(source);
  c.mutable_source()->set_port(1);
  c.mutable_destination()->set_onic(destination);
  c.mutable_destination()->set_port(1);
  for (const std::string& t : trunks) c.add_trunks(t);
  c.set_state(v1::CIRCUIT_STATE_ACTIVE);
  return c;
}

v1::Allocation Holder(const std::string& id, const std::string& tenant) {
  v1::Allocation a;
  a.set_id(id);
  a.set_tenant(tenant);
  return a;
}

class FabricViewTest : public ::testing::Test {
 protected:
  FabricViewTest() {
    site_ = SyntheticSite({{.prefix = "a", .gpus = 4}, {.prefix = "b", .gpus = 2}});
    AddTrunks(site_, "aocs", "bocs", 1);  // One trunk a -> b, none back.
  }

  // The fabric with `circuits` held (allocation "mine" of tenant t1, "theirs" of t2) and
  // `drained` switch ports ("switch/port").
  absl::StatusOr<v1::GetFabricResponse> Describe(FabricQuery query,
                                                 const std::vector<v1::Circuit>& circuits = {},
                                                 const std::set<std::string>& drained = {}) {
    const FabricSnapshot snapshot = FabricSnapshot::Build(
        site_, AllPorts(site_, drained), circuits, {Holder("mine", "t1"), Holder("theirs", "t2")});
    return DescribeFabric(snapshot, query);
  }

  v1::Inventory site_;
};

const v1::FabricPair* FindPair(const v1::GetFabricResponse& r, const std::string& source,
                               const std::string& destination) {
  for (const v1::FabricPair& p : r.pairs()) {
    if (p.source() == source && p.destination() == destination) return &p;
  }
  return nullptr;
}

TEST_F(FabricViewTest, FreeDevicesOnOneSwitchAreJoinedDirectly) {
  absl::StatusOr<v1::GetFabricResponse> r =
      Describe({.tenants = {"t1"}, .devices = {"agpu1", "agpu2"}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->devices_size(), 2);
  const v1::FabricDevice& d = r->devices(0);
  EXPECT_EQ(d.device(), "agpu1");
  EXPECT_EQ(d.kind(), v1::DEVICE_KIND_GPU);
  EXPECT_EQ(d.usable_ports(), 2u);
  ASSERT_EQ(d.ports_size(), 2);
  EXPECT_EQ(d.ports(0).onic(), "agpu1-n0");
  EXPECT_EQ(d.ports(0).port(), 1u);
  EXPECT_EQ(d.ports(0).switch_id(), "aocs");
  EXPECT_EQ(d.ports(0).use(), v1::PORT_USE_FREE);
  ASSERT_EQ(r->pairs_size(), 2);  // Both ordered pairs.
  const v1::FabricPair* p = FindPair(*r, "agpu1", "agpu2");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->joinable());
  EXPECT_THAT(p->switches(), ElementsAre("aocs"));
  EXPECT_EQ(p->trunk_hops(), 0u);
  EXPECT_TRUE(p->reason().empty());
}

TEST_F(FabricViewTest, PairsAcrossSwitchesGoOverTrunksOneWayOnly) {
  absl::StatusOr<v1::GetFabricResponse> r =
      Describe({.tenants = {"t1"}, .devices = {"agpu1", "bgpu1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::FabricPair* there = FindPair(*r, "agpu1", "bgpu1");
  ASSERT_NE(there, nullptr);
  EXPECT_TRUE(there->joinable());
  EXPECT_THAT(there->switches(), ElementsAre("aocs", "bocs"));
  EXPECT_EQ(there->trunk_hops(), 1u);
  const v1::FabricPair* back = FindPair(*r, "bgpu1", "agpu1");
  ASSERT_NE(back, nullptr);
  EXPECT_FALSE(back->joinable());
  EXPECT_THAT(back->reason(), HasSubstr("no trunks join bocs to aocs"));
  EXPECT_EQ(back->switches_size(), 0);

  // Within one switch only: the trunk path is too long.
  r = Describe({.tenants = {"t1"}, .devices = {"agpu1", "bgpu1"}, .max_switch_hops = 1});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(FindPair(*r, "agpu1", "bgpu1")->joinable());
  EXPECT_THAT(FindPair(*r, "agpu1", "bgpu1")->reason(), HasSubstr("max_switch_hops is 1"));
}

TEST_F(FabricViewTest, TheAllocationsOwnPortsAreUsableOthersAreNot) {
  // "mine" holds agpu1's port 1 tx and agpu2's port 1 rx.
  const std::vector<v1::Circuit> circuits = {Circuit("mine", "agpu1-n0", "agpu2-n0")};
  absl::StatusOr<v1::GetFabricResponse> own = Describe(
      {.tenants = {"t1"}, .own_allocation = "mine", .devices = {"agpu1", "agpu2"}}, circuits);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->devices(0).ports(0).use(), v1::PORT_USE_OWN);
  EXPECT_EQ(own->devices(0).usable_ports(), 2u);
  EXPECT_TRUE(FindPair(*own, "agpu1", "agpu2")->joinable());

  // Asked about as candidates (no allocation): the same tenant's holder is named.
  absl::StatusOr<v1::GetFabricResponse> free =
      Describe({.tenants = {"t1"}, .devices = {"agpu1", "agpu2"}}, circuits);
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_EQ(free->devices(0).ports(0).use(), v1::PORT_USE_HELD);
  EXPECT_EQ(free->devices(0).ports(0).holder(), "mine");
  EXPECT_EQ(free->devices(0).usable_ports(), 1u);
  // Port 2 of each is still free both ways.
  EXPECT_TRUE(FindPair(*free, "agpu1", "agpu2")->joinable());
}

TEST_F(FabricViewTest, AnotherTenantsDeviceIsRefusedToAJobAndShownToAnOperator) {
  const std::vector<v1::Circuit> circuits = {Circuit("theirs", "agpu3-n0", "agpu4-n0")};
  absl::StatusOr<v1::GetFabricResponse> job =
      Describe({.tenants = {"t1"}, .devices = {"agpu1", "agpu3"}}, circuits);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(job.status().message(), HasSubstr("devices[1]: device agpu3 is in another tenant"));
  EXPECT_THAT(job.status().message(), Not(HasSubstr("theirs")));
  EXPECT_THAT(job.status().message(), Not(HasSubstr("t2")));

  absl::StatusOr<v1::GetFabricResponse> op =
      Describe({.devices = {"agpu1", "agpu3"}}, circuits);  // No tenants: every one's.
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->devices(1).ports(0).use(), v1::PORT_USE_HELD);
  EXPECT_EQ(op->devices(1).ports(0).holder(), "theirs");
}

TEST_F(FabricViewTest, AHolderWhoseTenantIsUnknownCountsAsAnotherTenants) {
  // A snapshot that knows no allocation's tenant: a job may not ask about the devices held.
  const std::vector<v1::Circuit> circuits = {Circuit("mine", "agpu1-n0", "agpu2-n0")};
  const FabricSnapshot snapshot = FabricSnapshot::Build(site_, AllPorts(site_), circuits, {});
  absl::StatusOr<v1::GetFabricResponse> r =
      DescribeFabric(snapshot, {.tenants = {"t1"}, .devices = {"agpu1"}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  // Its own allocation's ports are its own, known tenant or not.
  r = DescribeFabric(snapshot, {.tenants = {"t1"}, .own_allocation = "mine", .devices = {"agpu1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->devices(0).ports(0).use(), v1::PORT_USE_OWN);
}

TEST_F(FabricViewTest, AMemberSharedWithAnotherTenantIsShownNotRefused) {
  // agpu1 sends on port 1 for "mine" and receives on port 2 for "theirs" (a host's CPU two
  // tenants' attach allocations share, in the small).
  v1::Circuit theirs = Circuit("theirs", "agpu3-n0", "agpu1-n0");
  theirs.mutable_destination()->set_port(2);
  const std::vector<v1::Circuit> circuits = {Circuit("mine", "agpu1-n0", "agpu2-n0"), theirs};
  absl::StatusOr<v1::GetFabricResponse> r = Describe(
      {.tenants = {"t1"}, .own_allocation = "mine", .devices = {"agpu1", "agpu2"}}, circuits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->devices(0).ports(0).use(), v1::PORT_USE_OWN);
  EXPECT_EQ(r->devices(0).ports(1).use(), v1::PORT_USE_HELD);
  EXPECT_EQ(r->devices(0).ports(1).holder(), "another tenant");
  // Not its allocation's: refused as before.
  EXPECT_EQ(Describe({.tenants = {"t1"}, .devices = {"agpu1"}}, circuits).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(FabricViewTest, AManualCircuitIsNamedToOperatorsOnly) {
  v1::Circuit manual = Circuit("", "agpu1-n0", "agpu2-n0");
  manual.set_id("m1");
  manual.set_manual(true);
  absl::StatusOr<v1::GetFabricResponse> job =
      Describe({.tenants = {"t1"}, .devices = {"agpu1"}}, {manual});
  ASSERT_TRUE(job.ok()) << job.status();  // No tenant's: not refused.
  EXPECT_EQ(job->devices(0).ports(0).holder(), "a manual circuit");
  absl::StatusOr<v1::GetFabricResponse> op = Describe({.devices = {"agpu1"}}, {manual});
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->devices(0).ports(0).holder(), "manual circuit m1");
}

TEST_F(FabricViewTest, AFullTrunkGroupIsNamedWithoutItsHolder) {
  // Another tenant's circuit crosses the only trunk a -> b.
  const std::vector<v1::Circuit> circuits = {
      Circuit("theirs", "agpu3-n0", "bgpu2-n0", {site_.trunks(0).id()})};
  absl::StatusOr<v1::GetFabricResponse> r =
      Describe({.tenants = {"t1"}, .devices = {"agpu1", "bgpu1"}}, circuits);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::FabricPair* p = FindPair(*r, "agpu1", "bgpu1");
  EXPECT_FALSE(p->joinable());
  EXPECT_THAT(p->reason(), HasSubstr("another tenant"));
  EXPECT_THAT(p->reason(), Not(HasSubstr("theirs")));
  // An operator is told whose circuit it is, and so is a job acting for its tenant too.
  for (const std::vector<std::string>& tenants :
       {std::vector<std::string>{}, std::vector<std::string>{"t1", "t2"}}) {
    r = Describe({.tenants = tenants, .devices = {"agpu1", "bgpu1"}}, circuits);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(FindPair(*r, "agpu1", "bgpu1")->reason(), HasSubstr("1 in a circuit of theirs"));
  }
  // An operator's manual circuit on it is no tenant's, and named to operators only.
  v1::Circuit manual = Circuit("", "agpu3-n0", "bgpu2-n0", {site_.trunks(0).id()});
  manual.set_id("m1");
  manual.set_manual(true);
  r = Describe({.tenants = {"t1"}, .devices = {"agpu1", "bgpu1"}}, {manual});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(FindPair(*r, "agpu1", "bgpu1")->reason(), HasSubstr("1 in a manual circuit"));
  EXPECT_THAT(FindPair(*r, "agpu1", "bgpu1")->reason(), Not(HasSubstr("m1")));
}

TEST_F(FabricViewTest, ADrainedPortIsUnusableWithItsReason) {
  // Drain the ingress agpu1's port 1 tx enters.
  const FabricSnapshot plain = FabricSnapshot::Build(site_, AllPorts(site_), {}, {});
  const OnicPortState* port = plain.Port("agpu1-n0", 1);
  ASSERT_NE(port, nullptr);
  absl::StatusOr<v1::GetFabricResponse> r =
      Describe({.tenants = {"t1"}, .devices = {"agpu1", "agpu2"}}, {},
               {absl::StrCat(port->tx.switch_id(), "/", port->tx.port())});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->devices(0).ports(0).use(), v1::PORT_USE_UNUSABLE);
  EXPECT_THAT(r->devices(0).ports(0).reason(), HasSubstr("drained"));
  EXPECT_EQ(r->devices(0).usable_ports(), 1u);
  EXPECT_TRUE(FindPair(*r, "agpu1", "agpu2")->joinable());  // Over port 2.
}

TEST_F(FabricViewTest, AnAnswerTooBigForOneMessageIsRefused) {
  // 128 GPUs with names of 109 bytes on one switch: 16,256 joinable pairs of two names and a
  // switch id each, past kMaxFabricAnswerBytes.
  const std::string prefix(100, 'x');
  const v1::Inventory site = SyntheticSite({{.prefix = prefix, .gpus = 128}});
  const FabricSnapshot snapshot = FabricSnapshot::Build(site, AllPorts(site), {}, {});
  FabricQuery query{.tenants = {"t1"}};
  for (int i = 1; i <= 128; ++i) query.devices.push_back(absl::StrCat(prefix, "gpu", i));
  absl::StatusOr<v1::GetFabricResponse> r = DescribeFabric(snapshot, query);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_THAT(r.status().message(),
              HasSubstr("devices: the answer for 128 devices is past 3145728 bytes; ask about "
                        "fewer devices"));
  // Half of them fit.
  query.devices.resize(64);
  r = DescribeFabric(snapshot, query);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pairs_size(), 64 * 63);
}

TEST_F(FabricViewTest, BadQueriesNameTheFieldAndTheRule) {
  auto code = [&](FabricQuery q) { return Describe(std::move(q)).status(); };
  EXPECT_THAT(code({.devices = {}}).message(), HasSubstr("devices: no device named"));
  absl::Status twice = code({.devices = {"agpu1", "agpu1"}});
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.message(), HasSubstr("devices[1]: device agpu1 is named twice"));
  absl::Status unknown = code({.devices = {"agpu1", "gpu99"}});
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.message(), HasSubstr("devices[1]: device gpu99 not found"));
  std::vector<std::string> many;
  for (size_t i = 0; i <= kMaxFabricDevices; ++i) many.push_back(absl::StrCat("d", i));
  absl::Status big = code({.devices = many});
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.message(), HasSubstr("129 devices; at most 128"));
  absl::Status hops = code({.devices = {"agpu1"}, .max_switch_hops = 1000});
  EXPECT_EQ(hops.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(hops.message(), HasSubstr("max_switch_hops: 1000 is more than 64"));
  absl::Status field = code({.devices = {"x"}, .field = "allocation a-1 members"});
  EXPECT_THAT(field.message(), HasSubstr("allocation a-1 members[0]: device x not found"));
}

}  // namespace
}  // namespace fleet::scheduler::testing
