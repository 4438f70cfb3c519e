// Admission: requests planned, persisted and made; refusals; tenancy; idempotent retries.
// The engine over the real SQLite store, the FLEET Gen1 inventory, an in-memory switch and
// agents that check the light (engine_test_fixture.h).
#include <prometheus/registry.h>

#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "controller/metrics/controller_metrics.h"
#include "tests/engine/engine_test_fixture.h"

namespace fleet::engine {
namespace {

TEST_F(EngineTest, RingBecomesReadyWithTheSwitchHoldingExactlyItsCircuits) {
  v1::Allocation a = Request(Ring("team-a", kGpus));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_THAT(a.circuits(), SizeIs(8));
  for (const v1::Circuit& c : a.circuits()) EXPECT_EQ(c.state(), v1::CIRCUIT_STATE_ACTIVE);
  EXPECT_EQ(OnSwitch(), Wanted(a));
  std::vector<std::string> stages;
  for (const v1::StageTiming& t : a.stage_timings()) stages.push_back(t.stage());
  EXPECT_THAT(stages, ElementsAre("plan", "persist", "quiesce", "program", "verify", "retrain"));
  // 16 O-NIC ports quiesced (each GPU's port sends and receives), 8 rx ends retrained.
  EXPECT_EQ(agents_->Count(v1::Command::kQuiesce), 8);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), 8);
  std::string story;
  for (const std::string& k : EventKinds(a.id())) story += k.substr(0, k.find(':')) + " ";
  EXPECT_EQ(story, "allocation.created allocation.state allocation.state allocation.state ");
  EXPECT_THAT(EventKinds(a.id()).back(), HasSubstr("READY"));
}

TEST_F(EngineTest, AllocationIdsComeFromTheInjectedSourceAndATakenOneIsAskedAgain) {
  std::vector<std::string> ids = {"a-first", "a-first", "a-second"};
  size_t next = 0;
  EngineOptions options;
  options.new_allocation_id = [&] { return ids.at(std::min(next++, ids.size() - 1)); };
  engine_.reset();
  StartEngine(options);
  EXPECT_EQ(Request(Ring("team-a", {"gpu1", "gpu2"})).id(), "a-first");
  // "a-first" is taken: the source is asked again.
  EXPECT_EQ(Request(Ring("team-a", {"gpu3", "gpu4"})).id(), "a-second");
  EXPECT_EQ(Get("a-second").circuits(0).id(), "a-second-c1");
  // A source that keeps giving a taken id is asked a few times, then the request is refused,
  // naming the id, with nothing stored.
  const size_t stored = store_->ListAllocations({}).value().size();
  absl::StatusOr<v1::RequestTopologyResponse> refused =
      engine_->RequestTopology(Ring("team-a", {"gpu5", "gpu6"}), Caller::Operator("operator:t"));
  EXPECT_THAT(refused.status(), StatusIs(absl::StatusCode::kAlreadyExists,
                                         HasSubstr("allocation id a-second is taken")));
  EXPECT_EQ(store_->ListAllocations({}).value().size(), stored);
}

TEST_F(EngineTest, PastTheTransactionQueuesBoundARequestIsRefusedNamingItWithNothingStored) {
  // One worker; one request may wait for it.
  EngineOptions options;
  options.workers = 1;
  options.max_queued_transactions = 1;
  absl::StatusOr<v1::RequestTopologyResponse> queued, refused;
  size_t stored_then = 0;
  auto armed = std::make_shared<std::atomic<bool>>(true);
  options.fault_point = [&, armed](const std::string& point) {
    if (point != "ready" || !armed->exchange(false)) return;
    // The first transaction holds the only worker: the next request waits for it, and the
    // one after that finds the queue full.
    const Caller op = Caller::Operator("operator:t");
    queued = engine_->RequestTopology(Ring("team-a", {"gpu3", "gpu4"}), op);
    stored_then = store_->ListAllocations({}).value().size();
    refused = engine_->RequestTopology(Ring("team-a", {"gpu5", "gpu6"}), op);
  };
  engine_.reset();
  StartEngine(options);
  EXPECT_EQ(Request(Ring("team-a", {"gpu1", "gpu2"})).state(), v1::ALLOCATION_STATE_READY);
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_THAT(
      refused.status(),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("the transaction queue is full (1 request waiting for a worker)")));
  EXPECT_EQ(store_->ListAllocations({}).value().size(), stored_then);
  // The one that waited runs once the worker is free.
  EXPECT_EQ(Get(queued->allocation().id()).state(), v1::ALLOCATION_STATE_READY);
}

// Optimistic admission: a request plans with no lock held and commits only if what it used is
// unchanged. Each test below lets a request plan, then changes the fabric under it (the
// "planned" fault point runs on the request's thread between its plan and its commit).
class OptimisticAdmissionTest : public EngineTest {
 protected:
  // The engine goes before the metrics it records in.
  ~OptimisticAdmissionTest() override { engine_.reset(); }
  // Restarts the engine so that `between` runs after the `n`th plan (from 1) and each one
  // after it, between the plan and its commit.
  void BetweenPlanAndCommit(int n, std::function<void()> between) {
    auto plans = std::make_shared<std::atomic<int>>(0);
    EngineOptions options;
    options.metrics = &metrics_;
    options.fault_point = [plans, n, between](const std::string& point) {
      if (point == "planned" && ++*plans >= n) between();
    };
    engine_.reset();
    StartEngine(options);
  }
  // Restarts the engine so that O-NIC `onic` is drained after the first plan, before its
  // commit.
  void DrainOnceAfterThePlan(const std::string& onic) {
    auto once = std::make_shared<std::atomic<bool>>(true);
    BetweenPlanAndCommit(1, [this, once, onic] {
      if (!once->exchange(false)) return;
      ASSERT_THAT(store_->SetDrained({.switch_id = "", .port = 0, .onic = onic, .host = ""}, true,
                                     "bad optics", "operator:test"),
                  IsOk());
    });
  }
  double Conflicts(const std::string& conflict, const std::string& outcome) {
    for (const prometheus::MetricFamily& f : metrics_registry_.Collect()) {
      if (f.name != "fleet_admission_conflicts_total") continue;
      for (const prometheus::ClientMetric& m : f.metric) {
        std::map<std::string, std::string> labels;
        for (const prometheus::ClientMetric::Label& l : m.label) labels[l.name] = l.value;
        if (labels["conflict"] == conflict && labels["outcome"] == outcome) return m.counter.value;
      }
    }
    return -1;
  }
  // Every O-NIC port a circuit of `a` holds, as "onic/port".
  static std::set<std::string> Ports(const v1::Allocation& a) {
    std::set<std::string> ports;
    for (const v1::Circuit& c : a.circuits()) {
      for (const v1::OnicPortRef& end : {c.source(), c.destination()}) {
        ports.insert(absl::StrCat(end.onic(), "/", end.port()));
      }
    }
    return ports;
  }

  const Caller op_ = Caller::Operator("operator:test");
  prometheus::Registry metrics_registry_;
  metrics::ControllerMetrics metrics_{metrics_registry_};
};

TEST_F(OptimisticAdmissionTest, TwoRequestsRacingForOnePortOneCommitsTheOtherPlansAroundIt) {
  absl::StatusOr<v1::RequestTopologyResponse> rival = absl::UnknownError("not run");
  auto once = std::make_shared<std::atomic<bool>>(true);
  BetweenPlanAndCommit(1, [&, once] {
    if (once->exchange(false))
      rival = engine_->RequestTopology(Link("team-b", "gpu1", "gpu2"), op_);
  });
  const v1::Allocation first = Request(Link("team-a", "gpu1", "gpu2"));
  ASSERT_THAT(rival.status(), IsOk());
  const v1::Allocation second = Get(rival->allocation().id());
  EXPECT_EQ(first.state(), v1::ALLOCATION_STATE_READY) << first.reason();
  EXPECT_EQ(second.state(), v1::ALLOCATION_STATE_READY) << second.reason();
  // The rival took the ports the first plan chose; the second plan took the others.
  const std::set<std::string> a = Ports(first), b = Ports(second);
  ASSERT_THAT(a, SizeIs(2));
  ASSERT_THAT(b, SizeIs(2));
  for (const std::string& port : a) EXPECT_FALSE(b.contains(port)) << port;
  std::set<CrossConnect> both = Wanted(first);
  both.merge(Wanted(second));
  EXPECT_EQ(OnSwitch(), both);
  EXPECT_EQ(Conflicts("port", "replanned"), 1);
  EXPECT_EQ(Conflicts("port", "aborted"), 0);
  EXPECT_EQ(first.stage_timings(0).stage(), "plan");  // One plan stage for both plans.
  EXPECT_EQ(first.stage_timings(1).stage(), "persist");
}

TEST_F(OptimisticAdmissionTest, ARequestWhosePortWasTakenMeanwhileIsRefusedAndNeverBothCommit) {
  v1::RequestTopologyRequest pinned;
  v1::Link* link = pinned.mutable_topology()->mutable_links()->add_links();
  link->mutable_a()->mutable_onic_port()->set_onic("gpu1-n0");
  link->mutable_a()->mutable_onic_port()->set_port(1);
  link->mutable_b()->set_device("gpu3");
  v1::RequestTopologyRequest mine = pinned, theirs = pinned;
  mine.set_tenant("team-a");
  theirs.set_tenant("team-b");
  absl::StatusOr<v1::RequestTopologyResponse> rival = absl::UnknownError("not run");
  auto once = std::make_shared<std::atomic<bool>>(true);
  BetweenPlanAndCommit(1, [&, once] {
    if (once->exchange(false)) rival = engine_->RequestTopology(theirs, op_);
  });
  const size_t events_before = EventCount();
  const absl::Status refused = engine_->RequestTopology(mine, op_).status();
  engine_->WaitIdleForTest();
  ASSERT_THAT(rival.status(), IsOk());
  // Planned again on what is stored now, the port is another tenant's.
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("gpu1-n0")));
  EXPECT_THAT(std::string(refused.message()), Not(HasSubstr(rival->allocation().id())));
  const std::vector<v1::Allocation> stored = store_->ListAllocations({}).value();
  ASSERT_THAT(stored, SizeIs(1));
  EXPECT_EQ(stored[0].id(), rival->allocation().id());
  EXPECT_EQ(stored[0].state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(OnSwitch(), Wanted(stored[0]));
  // The events are the rival's: the refused request wrote none.
  EXPECT_EQ(EventCount() - events_before, EventKinds(stored[0].id()).size());
  EXPECT_EQ(Conflicts("port", "replanned"), 1);
}

// The store refuses a port twice only among desired circuits; an inactive phase's circuits
// hold their ports too, and admission checks a plan against them.
TEST_F(OptimisticAdmissionTest, APortAnInactivePhaseTookMeanwhileIsPlannedAround) {
  v1::RequestTopologyRequest phased;
  phased.set_tenant("team-b");
  for (auto [name, a, b] : {std::tuple{"x", "gpu6", "gpu7"}, std::tuple{"y", "gpu1", "gpu2"}}) {
    v1::Phase* phase = phased.add_phases();
    phase->set_name(name);
    v1::Link* link = phase->mutable_topology()->mutable_links()->add_links();
    link->mutable_a()->set_device(a);
    link->mutable_b()->set_device(b);
    link->set_duplex(true);
  }
  absl::StatusOr<v1::RequestTopologyResponse> rival = absl::UnknownError("not run");
  auto once = std::make_shared<std::atomic<bool>>(true);
  BetweenPlanAndCommit(1, [&, once] {
    if (once->exchange(false)) rival = engine_->RequestTopology(phased, op_);
  });
  const v1::Allocation first = Request(Link("team-a", "gpu1", "gpu2"));
  ASSERT_THAT(rival.status(), IsOk());
  const v1::Allocation second = Get(rival->allocation().id());
  EXPECT_EQ(first.state(), v1::ALLOCATION_STATE_READY) << first.reason();
  EXPECT_EQ(second.active_phase(), "x");
  for (const std::string& port : Ports(first)) EXPECT_FALSE(Ports(second).contains(port)) << port;
  EXPECT_EQ(Conflicts("port", "replanned"), 1);
}

// A request sent again (same request_id) while the first is still being admitted gets the
// first's allocation; one is stored.
TEST_F(OptimisticAdmissionTest, TheSameRequestSentTwiceAtOnceIsAdmittedOnce) {
  v1::RequestTopologyRequest r = Ring("team-a", {"gpu1", "gpu2"});
  r.set_request_id("job-7");
  absl::StatusOr<v1::RequestTopologyResponse> again = absl::UnknownError("not run");
  auto once = std::make_shared<std::atomic<bool>>(true);
  BetweenPlanAndCommit(1, [&, once] {
    if (once->exchange(false)) again = engine_->RequestTopology(r, op_);
  });
  absl::StatusOr<v1::RequestTopologyResponse> first = engine_->RequestTopology(r, op_);
  engine_->WaitIdleForTest();
  ASSERT_THAT(first.status(), IsOk());
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_FALSE(first->allocation().id().empty());
  EXPECT_EQ(first->allocation().id(), again->allocation().id());
  const std::vector<v1::Allocation> stored = store_->ListAllocations({}).value();
  ASSERT_THAT(stored, SizeIs(1));
  EXPECT_EQ(stored[0].state(), v1::ALLOCATION_STATE_READY) << stored[0].reason();
  EXPECT_EQ(Conflicts("port", "replanned"), 0);
}

TEST_F(OptimisticAdmissionTest, ADrainBetweenPlanAndCommitIsSeenByThePlanMadeAgain) {
  DrainOnceAfterThePlan("gpu5-n0");
  const size_t events_before = EventCount();
  EXPECT_THAT(engine_->RequestTopology(Ring("team-a", {"gpu3", "gpu5"}), op_).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("drained")));
  EXPECT_THAT(store_->ListAllocations({}).value(), IsEmpty());
  EXPECT_EQ(EventCount(), events_before + 1);  // The drain's.
  EXPECT_EQ(sw_->changes(), 0);
  EXPECT_EQ(Conflicts("inventory", "replanned"), 1);
}

// A replacement is planned under admission's lock but drains and health changes do not take
// it: one committed between its plan and its commit makes it plan again on what is stored now.
TEST_F(OptimisticAdmissionTest, AReplacementPlannedBeforeADrainIsPlannedAgainAfterIt) {
  const v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  // The first plan picks a spare (the first free GPU, gpu5); before it commits, gpu5's O-NIC
  // is drained.
  DrainOnceAfterThePlan("gpu5-n0");
  absl::StatusOr<v1::ReplaceMemberResponse> replaced =
      engine_->ReplaceMember(Replace(a.id(), "gpu3"), op_);
  engine_->WaitIdleForTest();
  ASSERT_THAT(replaced.status(), IsOk());
  const v1::Allocation after = Get(a.id());
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
  EXPECT_THAT(after.members(), Not(Contains("gpu3")));
  EXPECT_THAT(after.members(), Not(Contains("gpu5")));
  ASSERT_THAT(after.replacements(), SizeIs(1));
  EXPECT_EQ(after.replacements(0).failed(), "gpu3");
  EXPECT_NE(after.replacements(0).spare(), "gpu5");
  EXPECT_THAT(replaced->plan().members(), Not(Contains("gpu5")));
  for (const std::string& port : Ports(after)) EXPECT_FALSE(absl::StartsWith(port, "gpu5-n0"));
}

TEST_F(OptimisticAdmissionTest, AfterFourPlansThatEachLostTheRequestIsRefusedAbortedNamingWhy) {
  // Every plan finds a drain or an undrain of a port it does not use committed before its
  // own commit.
  auto drained = std::make_shared<bool>(false);
  BetweenPlanAndCommit(1, [&, drained] {
    *drained = !*drained;
    ASSERT_THAT(store_->SetDrained({.switch_id = "", .port = 0, .onic = "gpu8-n0", .host = ""},
                                   *drained, "flapping", "operator:test"),
                IsOk());
  });
  EXPECT_THAT(engine_->RequestTopology(Ring("team-a", {"gpu1", "gpu2"}), op_).status(),
              StatusIs(absl::StatusCode::kAborted,
                       AllOf(HasSubstr("4 plans"),
                             HasSubstr("an inventory, drain or health change committed"))));
  EXPECT_THAT(store_->ListAllocations({}).value(), IsEmpty());
  EXPECT_EQ(Conflicts("inventory", "replanned"), 3);
  EXPECT_EQ(Conflicts("inventory", "aborted"), 1);
  // The next request, with nothing in its way, is admitted.
  BetweenPlanAndCommit(1, [] {});
  EXPECT_EQ(Request(Ring("team-a", {"gpu1", "gpu2"})).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, DryRunReturnsThePlanAndTouchesNothing) {
  const size_t events = EventCount();
  v1::RequestTopologyRequest r = Ring("team-a", kGpus);
  r.set_dry_run(true);
  absl::StatusOr<v1::RequestTopologyResponse> plan =
      engine_->RequestTopology(r, Caller::Operator("operator:test"));
  ASSERT_THAT(plan.status(), IsOk());
  EXPECT_THAT(plan->plan().add(), SizeIs(8));
  EXPECT_FALSE(plan->has_allocation());
  EXPECT_EQ(sw_->changes(), 0);
  EXPECT_EQ(EventCount(), events);
  EXPECT_THAT(store_->ListAllocations({}).value(), IsEmpty());
}

TEST_F(EngineTest, AdmissionErrorsNameTheMemberAndWriteNothing) {
  v1::Allocation held = Request(Link("team-a", "gpu1", "gpu2"));
  ASSERT_EQ(held.state(), v1::ALLOCATION_STATE_READY);
  ASSERT_THAT(store_->SetDrained({.switch_id = "", .port = 0, .onic = "gpu5-n0", .host = ""}, true,
                                 "bad optics", "operator:test"),
              IsOk());
  const size_t events = EventCount();
  const int changes = sw_->changes();
  const Caller op = Caller::Operator("operator:test");

  EXPECT_THAT(engine_->RequestTopology(Ring("team-a", {"gpu3", "gpu99"}), op).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("gpu99")));
  v1::RequestTopologyRequest busy;
  busy.set_tenant("team-a");
  v1::Link* link = busy.mutable_topology()->mutable_links()->add_links();
  link->mutable_a()->mutable_onic_port()->set_onic("gpu1-n0");
  link->mutable_a()->mutable_onic_port()->set_port(1);
  link->mutable_b()->set_device("gpu3");
  EXPECT_THAT(engine_->RequestTopology(busy, op).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("gpu1-n0")));
  EXPECT_THAT(engine_->RequestTopology(Ring("team-a", {"gpu3", "gpu5"}), op).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("drained")));
  // Another tenant's port: refused without naming whose allocation holds it.
  v1::RequestTopologyRequest theirs = busy;
  theirs.set_tenant("team-b");
  absl::Status other = engine_->RequestTopology(theirs, op).status();
  EXPECT_THAT(other, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("gpu1-n0")));
  EXPECT_THAT(std::string(other.message()), Not(HasSubstr(held.id())));
  EXPECT_THAT(engine_->RequestTopology(Ring("", kGpus), op).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tenant")));

  EXPECT_EQ(EventCount(), events);
  EXPECT_EQ(sw_->changes(), changes);
  EXPECT_THAT(store_->ListAllocations({}).value(), SizeIs(1));
}

// Numbers no site could hold are refused before planning, naming the field, the value and
// the limit: as a request and as a dry run, nothing is written, and the next request is
// answered as usual. (A ring of width 1,000,000 once kept the planner busy for minutes, and
// 4,000,000,000 GPUs read as -294,967,296.)
TEST_F(EngineTest, RequestsBeyondWhatTheSiteHoldsAreRefusedBeforePlanning) {
  const Caller op = Caller::Operator("operator:test");
  const size_t events = EventCount();
  const auto ring = [](const std::function<void(v1::RequestTopologyRequest&)>& change) {
    v1::RequestTopologyRequest r = Ring("team-a", {"gpu1", "gpu2"});
    change(r);
    return r;
  };
  const auto counted = [](v1::MemberSet* members, std::vector<uint32_t> counts) {
    members->clear_devices();
    for (uint32_t n : counts) {
      v1::DeviceCount* c = members->add_counts();
      c->set_kind(v1::DEVICE_KIND_GPU);
      c->set_count(n);
    }
  };
  const uint32_t devices = static_cast<uint32_t>(site_.devices_size());
  struct Bad {
    v1::RequestTopologyRequest request;
    absl::StatusCode code;
    std::vector<std::string> said;
  };
  using absl::StatusCode::kInvalidArgument;
  using absl::StatusCode::kResourceExhausted;
  std::vector<Bad> bad = {
      {ring([](auto& r) { r.mutable_topology()->mutable_template_()->set_width(1000000); }),
       kResourceExhausted,
       {"topology.template.width: 1000000", "no device of the site has more than"}},
      {ring([&](auto& r) {
         counted(r.mutable_topology()->mutable_template_()->mutable_members(), {4000000000u});
       }),
       kResourceExhausted,
       {"topology.template.members.counts[0].count: 4000000000 is more than the",
        absl::StrCat(devices, " devices of the site")}},
      {ring([&](auto& r) {
         counted(r.mutable_topology()->mutable_template_()->mutable_members(), {devices, devices});
       }),
       kResourceExhausted,
       {absl::StrCat("topology.template.members: ", 2 * devices, " members")}},
      {ring([](auto& r) {
         r.mutable_topology()->mutable_template_()->set_kind(v1::TEMPLATE_KIND_TREE);
         r.mutable_topology()->mutable_template_()->set_fanout(4000000000u);
       }),
       kInvalidArgument,
       {"topology.template.fanout: 4000000000"}},
      {ring([](auto& r) {
         v1::TemplateSpec* t = r.mutable_topology()->mutable_template_();
         t->set_kind(v1::TEMPLATE_KIND_TORUS_2D);
         t->add_dimensions(4000000000u);
         t->add_dimensions(1);
       }),
       kResourceExhausted,
       {"topology.template.dimensions[0]: 4000000000"}},
      {ring([](auto& r) {
         for (int i = 0; i < 5; ++i) r.mutable_topology()->mutable_template_()->add_dimensions(1);
       }),
       kInvalidArgument,
       {"topology.template.dimensions: 5 given; a torus has 2 or 3"}},
      {ring([](auto& r) { r.mutable_topology()->set_max_switch_hops(1000000); }),
       kInvalidArgument,
       {"topology.max_switch_hops: 1000000 is more than 64"}},
      {[] {
         v1::RequestTopologyRequest r = Link("team-a", "gpu1", "gpu2");
         for (int i = 0; i < 5000; ++i) {
           *r.mutable_topology()->mutable_links()->add_links() = r.topology().links().links(0);
         }
         return r;
       }(),
       kResourceExhausted,
       {"topology.links:", "circuits or more, and the site has"}},
      {[] {
         v1::RequestTopologyRequest r;
         r.set_tenant("team-a");
         v1::TrafficSpec* t = r.mutable_topology()->mutable_traffic();
         t->mutable_members()->add_devices("gpu1");
         t->mutable_members()->add_devices("gpu2");
         for (int i = 0; i < 1000; ++i) t->add_matrix()->set_destination(1);
         return r;
       }(),
       kInvalidArgument,
       {"topology.traffic.matrix: 1000 entries for 2 members; at most 2"}},
      {[&] {
         v1::RequestTopologyRequest r;
         r.set_tenant("team-a");
         counted(r.mutable_topology()->mutable_all_to_all()->mutable_members(), {4000000000u});
         return r;
       }(),
       kResourceExhausted,
       {"topology.all_to_all.members.counts[0].count: 4000000000"}},
      {[&] {
         v1::RequestTopologyRequest r;
         r.set_tenant("team-a");
         r.mutable_topology()->mutable_attach()->set_host("server1");
         r.mutable_topology()->mutable_attach()->mutable_devices()->add_devices("gpu1");
         r.mutable_topology()->mutable_attach()->set_width(1000000);
         return r;
       }(),
       kResourceExhausted,
       {"topology.attach.width: 1000000"}},
      {[] {
         v1::RequestTopologyRequest r = Phased("team-a");
         for (int i = 0; i < 63; ++i) *r.add_phases() = r.phases(0);
         return r;
       }(),
       kInvalidArgument,
       {"phases: 65 given; a request has at most 64"}},
      {[] {
         v1::RequestTopologyRequest r = Phased("team-a");
         r.mutable_phases(1)->mutable_topology()->mutable_links()->mutable_links(0)->set_width(
             1000000);
         return r;
       }(),
       kResourceExhausted,
       {"phases[1].topology.links[0].width: 1000000"}},
      {ring([](auto& r) { r.set_name(std::string(1000, 'x')); }),
       kInvalidArgument,
       {"name: 1000 bytes long; at most 128"}},
      // The largest lease a proto Duration holds, and past it: refused, never wrapped negative.
      {ring([](auto& r) { r.mutable_lease()->set_seconds(315576000000); }),
       kInvalidArgument,
       {"lease:", "is longer than the maximum"}},
      {ring([](auto& r) { r.mutable_lease()->set_seconds(std::numeric_limits<int64_t>::max()); }),
       kInvalidArgument,
       {"lease:", "is longer than the maximum"}},
  };
  for (Bad& b : bad) {
    for (bool dry_run : {false, true}) {
      b.request.set_dry_run(dry_run);
      const absl::Status refused = engine_->RequestTopology(b.request, op).status();
      EXPECT_EQ(refused.code(), b.code) << refused;
      for (const std::string& said : b.said) {
        EXPECT_THAT(std::string(refused.message()), HasSubstr(said));
      }
      // The next request is answered as usual.
      v1::RequestTopologyRequest fine = Ring("team-a", {"gpu1", "gpu2"});
      fine.set_dry_run(true);
      EXPECT_THAT(engine_->RequestTopology(fine, op).status(), IsOk());
    }
  }
  EXPECT_EQ(EventCount(), events);
  EXPECT_EQ(sw_->changes(), 0);
  EXPECT_THAT(store_->ListAllocations({}).value(), IsEmpty());
  // The same site still admits a real request.
  EXPECT_EQ(Request(Ring("team-a", {"gpu1", "gpu2"})).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, TenantsCannotTouchEachOthersAllocations) {
  v1::RequestTopologyRequest r = Ring("", {"gpu1", "gpu2"});
  v1::Allocation a = Request(r, Caller::Job("job:team-a", {"team-a"}));
  ASSERT_EQ(a.tenant(), "team-a");
  const Caller b = Caller::Job("job:team-b", {"team-b"});
  // Another tenant's allocation is answered word for word as one that does not exist.
  const absl::Status missing = engine_->GetAllocation("a-none", b).status();
  EXPECT_THAT(missing, StatusIs(absl::StatusCode::kNotFound, "allocation a-none not found"));
  const auto as_missing =
      StatusIs(absl::StatusCode::kNotFound, "allocation " + a.id() + " not found");
  EXPECT_THAT(engine_->GetAllocation(a.id(), b).status(), as_missing);
  EXPECT_THAT(engine_->ReleaseTopology(a.id(), b).status(), as_missing);
  EXPECT_THAT(engine_->KeepAlive(a.id(), b).status(), as_missing);
  EXPECT_THAT(engine_->CheckWatch(a.id(), "", b), as_missing);
  EXPECT_THAT(engine_->CheckWatch("", "team-a", b),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "role job (job:team-b), acting for [team-b] may not watch tenant team-a"));
  EXPECT_THAT(engine_->RequestTopology(Ring("team-a", {"gpu3", "gpu4"}), b).status(),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("acting for [team-b] may not request for tenant team-a")));
  // A job acting for several tenants names the one it requests for, and lists all of its own.
  const Caller ab = Caller::Job("job:ml", {"team-a", "team-b"});
  EXPECT_THAT(engine_->RequestTopology(Ring("", {"gpu3", "gpu4"}), ab).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tenant is empty")));
  EXPECT_THAT(engine_->ListAllocations({}, ab).value(), SizeIs(1));
  EXPECT_THAT(
      engine_->RequestTopology(Ring("team-a", {"gpu1"}), Caller::Viewer("viewer:v")).status(),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("role viewer")));
  EXPECT_THAT(engine_->ListAllocations({}, b).value(), IsEmpty());
  EXPECT_THAT(engine_->ListAllocations({}, Caller::Job("job:team-a", {"team-a"})).value(),
              SizeIs(1));
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(OnSwitch(), Wanted(a));
}

TEST_F(EngineTest, RetryWithTheSameRequestIdReturnsTheSameAllocation) {
  v1::RequestTopologyRequest r = Ring("team-a", kGpus);
  r.set_request_id("job-42-attempt");
  v1::Allocation first = Request(r);
  v1::Allocation again = Request(r);
  EXPECT_EQ(first.id(), again.id());
  EXPECT_THAT(store_->ListAllocations({}).value(), SizeIs(1));
}

TEST_F(EngineTest, ConcurrentDisjointRequestsAllBecomeReady) {
  std::vector<std::thread> jobs;
  std::vector<std::string> ids(4);
  for (int i = 0; i < 4; ++i) {
    jobs.emplace_back([&, i] {
      absl::StatusOr<v1::RequestTopologyResponse> r = engine_->RequestTopology(
          Link("team-" + std::to_string(i), kGpus[2 * i], kGpus[2 * i + 1]),
          Caller::Operator("operator:test"));
      if (r.ok()) ids[i] = r->allocation().id();
    });
  }
  for (std::thread& t : jobs) t.join();
  engine_->WaitIdleForTest();
  std::set<CrossConnect> wanted;
  for (const std::string& id : ids) {
    v1::Allocation a = Get(id);
    EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << id << " " << a.reason();
    for (const CrossConnect& x : Wanted(a)) wanted.insert(x);
  }
  EXPECT_EQ(OnSwitch(), wanted);
}

}  // namespace
}  // namespace fleet::engine
