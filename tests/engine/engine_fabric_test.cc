// GetFabric through the engine: an allocation's members and its own ports, candidates,
// tenancy, and the change costs measured by the transactions that ran. The engine over the
// real SQLite store, the FLEET Gen1 inventory, an in-memory switch and agents
// (engine_test_fixture.h).
#include "tests/engine/engine_test_fixture.h"

namespace fleet::engine {
namespace {

v1::GetFabricRequest FabricOf(const std::string& allocation,
                              const std::vector<std::string>& devices = {}) {
  v1::GetFabricRequest r;
  r.set_allocation(allocation);
  for (const std::string& d : devices) r.add_devices(d);
  return r;
}

const v1::StageCost* Cost(const v1::GetFabricResponse& r, const std::string& stage) {
  for (const v1::StageCost& c : r.change_costs()) {
    if (c.stage() == stage) return &c;
  }
  return nullptr;
}

TEST_F(EngineTest, GetFabricOfAnAllocationCountsItsPortsAsItsOwnAndItsMeasuredCosts) {
  const Caller job = Caller::Job("job:team-a", {"team-a"});
  // Before any change of circuits nothing is measured.
  absl::StatusOr<v1::GetFabricResponse> before =
      engine_->GetFabric(FabricOf("", {"gpu1", "gpu2"}), job);
  ASSERT_THAT(before.status(), IsOk());
  ASSERT_EQ(before->change_costs_size(), 4);
  for (const v1::StageCost& c : before->change_costs()) {
    EXPECT_EQ(c.samples(), 0u) << c.stage();
    EXPECT_FALSE(c.has_median()) << c.stage();
  }

  v1::Allocation a = Request(Phased("team-a"), job);  // A bidirectional ring: both ports each.
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  absl::StatusOr<v1::GetFabricResponse> r = engine_->GetFabric(FabricOf(a.id()), job);
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->devices_size(), 4);  // The members, in member order.
  for (int i = 0; i < 4; ++i) {
    const v1::FabricDevice& d = r->devices(i);
    EXPECT_EQ(d.device(), a.members(i));
    EXPECT_EQ(d.usable_ports(), 2u) << d.device();
    for (const v1::FabricPort& p : d.ports()) {
      EXPECT_EQ(p.use(), v1::PORT_USE_OWN) << d.device() << " " << p.onic() << "/" << p.port();
    }
  }
  EXPECT_EQ(r->pairs_size(), 12);
  for (const v1::FabricPair& p : r->pairs()) {
    EXPECT_TRUE(p.joinable()) << p.source() << " -> " << p.destination() << ": " << p.reason();
  }
  // The admission's transaction measured each stage once; the order is the contract's.
  ASSERT_EQ(r->change_costs_size(), 4);
  EXPECT_EQ(r->change_costs(0).stage(), "quiesce");
  EXPECT_EQ(r->change_costs(3).stage(), "retrain");
  for (const char* stage : {"quiesce", "program", "verify", "retrain"}) {
    const v1::StageCost* c = Cost(*r, stage);
    ASSERT_NE(c, nullptr) << stage;
    EXPECT_EQ(c->samples(), 1u) << stage;
    EXPECT_TRUE(c->has_median() && c->has_p90()) << stage;
  }

  // The same devices as candidates: the allocation holds them, so they are HELD, named.
  absl::StatusOr<v1::GetFabricResponse> candidates =
      engine_->GetFabric(FabricOf("", {"gpu1", "gpu5"}), job);
  ASSERT_THAT(candidates.status(), IsOk());
  EXPECT_EQ(candidates->devices(0).ports(0).use(), v1::PORT_USE_HELD);
  EXPECT_EQ(candidates->devices(0).ports(0).holder(), a.id());
  EXPECT_EQ(candidates->devices(0).usable_ports(), 0u);
  EXPECT_EQ(candidates->devices(1).usable_ports(), 2u);
  EXPECT_FALSE(candidates->pairs(0).joinable());  // gpu1 -> gpu5: gpu1 has no tx free.
  EXPECT_THAT(candidates->pairs(0).reason(), HasSubstr("no usable port of gpu1 has its tx free"));
}

TEST_F(EngineTest, GetFabricRefusesAnotherTenantsAllocationAndDevices) {
  v1::Allocation a = Request(Phased("team-a"), Caller::Job("job:team-a", {"team-a"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const Caller other = Caller::Job("job:team-b", {"team-b"});
  // Another tenant's allocation is answered as a missing one.
  EXPECT_THAT(engine_->GetFabric(FabricOf(a.id()), other).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("allocation " + a.id())));
  EXPECT_THAT(engine_->GetFabric(FabricOf("", {"gpu5", "gpu2"}), other).status(),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("devices[1]: device gpu2 is in another tenant's allocation")));
  // Free devices are anyone's to ask about; an operator may ask about any.
  EXPECT_THAT(engine_->GetFabric(FabricOf("", {"gpu5", "gpu6"}), other).status(), IsOk());
  absl::StatusOr<v1::GetFabricResponse> op =
      engine_->GetFabric(FabricOf("", {"gpu2"}), Caller::Operator("operator:test"));
  ASSERT_THAT(op.status(), IsOk());
  EXPECT_EQ(op->devices(0).ports(0).holder(), a.id());
}

TEST_F(EngineTest, GetFabricRefusesAnEmptyQueryAndAnEndedAllocation) {
  const Caller job = Caller::Job("job:team-a", {"team-a"});
  EXPECT_THAT(engine_->GetFabric(FabricOf(""), job).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("allocation and devices are both empty")));
  v1::Allocation a = Request(Phased("team-a"), job);
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_THAT(engine_->ReleaseTopology(a.id(), job).status(), IsOk());
  engine_->WaitIdleForTest();
  EXPECT_THAT(
      engine_->GetFabric(FabricOf(a.id()), job).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is released: it holds no port")));
}

}  // namespace
}  // namespace fleet::engine
