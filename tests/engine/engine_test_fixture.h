// The fixture of the engine's tests (engine_*_test.cc): the engine over the real SQLite
// store, the FLEET Gen1 inventory, an in-memory switch (fleet::testing::FakeOpticalSwitch) and
// agents that check the light: a retrain succeeds only when the switch really connects the expected
// peer's tx to the port's rx. And the requests the tests make.
#ifndef FLEET_TESTS_ENGINE_ENGINE_TEST_FIXTURE_H_
#define FLEET_TESTS_ENGINE_ENGINE_TEST_FIXTURE_H_

#include <gmock/gmock.h>
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <limits>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "controller/engine/engine.h"
#include "controller/inventory/inventory.h"
#include "scheduler/replacement.h"
#include "testing/fake_clock.h"
#include "testing/fake_optical_switch.h"
#include "tests/engine/gen1_store.h"
#include "tests/engine/light_checking_agents.h"
#include "tests/eventually.h"
#include "tests/store/store_test_util.h"

namespace fleet::engine {

using store::testing_util::IsOk;
using store::testing_util::StatusIs;
using switch_adapters::CrossConnect;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

inline v1::RequestTopologyRequest Ring(const std::string& tenant,
                                       std::vector<std::string> members) {
  v1::RequestTopologyRequest r;
  r.set_tenant(tenant);
  r.set_name("ring");
  r.mutable_topology()->mutable_template_()->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
  for (const std::string& m : members) {
    r.mutable_topology()->mutable_template_()->mutable_members()->add_devices(m);
  }
  return r;
}

inline v1::RequestTopologyRequest Link(const std::string& tenant, const std::string& a,
                                       const std::string& b) {
  v1::RequestTopologyRequest r;
  r.set_tenant(tenant);
  v1::Link* link = r.mutable_topology()->mutable_links()->add_links();
  link->mutable_a()->set_device(a);
  link->mutable_b()->set_device(b);
  link->set_duplex(true);
  return r;
}

inline const std::vector<std::string> kGpus = {"gpu1", "gpu2", "gpu3", "gpu4",
                                               "gpu5", "gpu6", "gpu7", "gpu8"};

// Holds a fake switch's applies until it goes, so that a test can keep a batch inside the
// switch, and its transactions can finish however the test ends.
class HeldApplies {
 public:
  explicit HeldApplies(fleet::testing::FakeOpticalSwitch* sw) : sw_(sw) { sw_->HoldApplies(true); }
  ~HeldApplies() { sw_->HoldApplies(false); }
  HeldApplies(const HeldApplies&) = delete;
  HeldApplies& operator=(const HeldApplies&) = delete;

 private:
  fleet::testing::FakeOpticalSwitch* const sw_;
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenGen1Store(&clock_, &store_, &site_, &commit_point_));
    registry_ = std::make_unique<switch_registry::SwitchRegistry>(
        std::map<std::string, switch_registry::SwitchCredentials>{{"ocs1", {"admin", "root"}}},
        "test", nullptr, &commit_point_);
    registry_->RegisterDriver(
        v1::SWITCH_PROTOCOL_TL1,
        [this](const v1::Switch&, const switch_registry::SwitchCredentials&,
               const switch_adapters::ChangeGate&)
            -> absl::StatusOr<std::unique_ptr<switch_adapters::OpticalSwitch>> {
          auto sw = std::make_unique<fleet::testing::FakeOpticalSwitch>(384, 384);
          sw_ = sw.get();
          return sw;
        });
    // The driver is built on first use; build it now so the agents can look at it.
    v1::Switch ocs1 = store_->GetSwitch("ocs1").value();
    ASSERT_TRUE(registry_->Driver(ocs1).ok());
    agents_ = std::make_unique<LightCheckingAgents>(site_, sw_);
    StartEngine();
  }

  // Restarts the engine so that the first transaction to store READY runs `while_held(id)`
  // on its own thread before it lets go of allocation `id`: the window of a change asked for
  // at once.
  void HoldFirstReady(std::function<void(const std::string& id)> while_held) {
    auto armed = std::make_shared<std::atomic<bool>>(true);
    EngineOptions options;
    options.fault_point = [this, armed, while_held](const std::string& point) {
      if (point != "ready" || !armed->exchange(false)) return;
      while_held(
          store_->ListAllocations({"", v1::ALLOCATION_STATE_READY, false}).value().at(0).id());
    };
    engine_.reset();
    StartEngine(options);
  }
  void StartEngine(EngineOptions options = {}) {
    options.reconcile_interval = absl::ZeroDuration();  // Tests reconcile by hand.
    options.tick = absl::Hours(1);                      // And drive leases and retries,
    options.wake_for_due_retries = false;
    options.monitor_interval = absl::ZeroDuration();  // and the switch monitor.
    engine_ =
        std::make_unique<Engine>(options, store_.get(), registry_.get(), agents_.get(), &clock_);
    ASSERT_THAT(engine_->Start(), IsOk());
  }

  v1::Allocation Request(const v1::RequestTopologyRequest& r,
                         const Caller& caller = Caller::Operator("operator:test")) {
    absl::StatusOr<v1::RequestTopologyResponse> response = engine_->RequestTopology(r, caller);
    EXPECT_TRUE(response.ok()) << response.status();
    engine_->WaitIdleForTest();
    return Get(response.ok() ? response->allocation().id() : "");
  }
  v1::Allocation Get(const std::string& id) {
    return store_->GetAllocation(id).value_or(v1::Allocation());
  }
  // Requests `r` with the switch's applies held (HeldApplies) and returns its id once its
  // batch is inside the switch.
  std::string RequestHeldAtTheSwitch(const v1::RequestTopologyRequest& r) {
    absl::StatusOr<v1::RequestTopologyResponse> response =
        engine_->RequestTopology(r, Caller::Operator("operator:test"));
    EXPECT_TRUE(response.ok()) << response.status();
    EXPECT_TRUE(fleet::testing::Eventually([&] { return sw_->held() == 1; }));
    return response.ok() ? response->allocation().id() : "";
  }

  // The switch's cross-connects, and those the allocation's circuits ask for.
  std::set<CrossConnect> OnSwitch() {
    std::vector<CrossConnect> xs = sw_->ReadCrossConnects().value();
    return {xs.begin(), xs.end()};
  }
  static std::set<CrossConnect> Wanted(const v1::Allocation& a) {
    std::set<CrossConnect> out;
    for (const v1::Circuit& c : a.circuits()) {
      for (const v1::CrossConnect& x : c.cross_connects()) out.insert({x.ingress(), x.egress()});
    }
    return out;
  }
  size_t EventCount() { return store_->ListEvents({0, 100000, "", ""}).value().size(); }
  // A ring over every GPU (so there is no spare to move it to) evicted by draining gpu2-n0
  // ("dirty connector") while the switch refuses the removal: RELEASING, the switch
  // unreachable.
  void StuckEviction(v1::Allocation* a) {
    *a = Request(Ring("team-a", kGpus));
    sw_->SetUnreachable(absl::UnavailableError("link down"));
    v1::DrainRequest drain;
    drain.mutable_target()->set_onic("gpu2-n0");
    drain.set_reason("dirty connector");
    drain.set_evict(true);
    ASSERT_THAT(engine_->Drain(drain, Caller::Operator("operator:t")).status(), IsOk());
    *a = Get(a->id());
    ASSERT_EQ(a->state(), v1::ALLOCATION_STATE_RELEASING);
  }
  // Stops the engine as a crash right after the handover of phased allocation `a` from dp
  // to tp leaves it: tp desired, dp inactive, and the switch still holding dp's
  // cross-connects.
  void CrashAfterHandoverToTp(const v1::Allocation& a) {
    engine_.reset();
    store::AllocationUpdate handover;
    handover.id = a.id();
    handover.state = v1::ALLOCATION_STATE_PROGRAMMING;
    handover.active_phase = "tp";
    for (const v1::Circuit& c : a.circuits()) {
      handover.circuits[c.id()] = {
          c.phase() == "tp" ? v1::CIRCUIT_STATE_PLANNED : v1::CIRCUIT_STATE_INACTIVE, ""};
    }
    ASSERT_THAT(store_->UpdateAllocation(handover, "test").status(), IsOk());
  }
  std::vector<std::string> EventKinds(const std::string& allocation) {
    std::vector<std::string> kinds;
    const std::vector<v1::Event> events =
        store_->ListEvents({0, 1000, "allocation", allocation}).value();
    for (const v1::Event& e : events) {
      kinds.push_back(e.kind() + ":" + e.message());
    }
    return kinds;
  }

  fleet::testing::FakeClock clock_;
  // The store's writes and the switch's commands pass it; no fence unless a test sets one.
  CommitPoint commit_point_;
  std::unique_ptr<store::Store> store_;
  v1::Inventory site_;
  fleet::testing::FakeOpticalSwitch* sw_ = nullptr;
  std::unique_ptr<switch_registry::SwitchRegistry> registry_;
  std::unique_ptr<LightCheckingAgents> agents_;
  std::unique_ptr<Engine> engine_;
};

// Phases `dp` (a bidirectional ring over gpu1..gpu4) and `tp` (gpu1↔gpu2 and gpu3↔gpu4,
// sharing two of the ring's links).
inline v1::RequestTopologyRequest Phased(const std::string& tenant) {
  v1::RequestTopologyRequest r;
  r.set_tenant(tenant);
  r.set_name("step");
  v1::Phase* dp = r.add_phases();
  dp->set_name("dp");
  v1::TemplateSpec* ring = dp->mutable_topology()->mutable_template_();
  ring->set_kind(v1::TEMPLATE_KIND_RING_BIDIRECTIONAL);
  for (const char* m : {"gpu1", "gpu2", "gpu3", "gpu4"}) ring->mutable_members()->add_devices(m);
  v1::Phase* tp = r.add_phases();
  tp->set_name("tp");
  for (auto [a, b] : {std::pair{"gpu1", "gpu2"}, std::pair{"gpu3", "gpu4"}}) {
    v1::Link* link = tp->mutable_topology()->mutable_links()->add_links();
    link->mutable_a()->set_device(a);
    link->mutable_b()->set_device(b);
    link->set_duplex(true);
  }
  return r;
}

// An agent's report that O-NIC `serial`'s port `port` is down, `detail` saying why.
inline v1::LinkState Down(const std::string& serial, uint32_t port, const std::string& detail) {
  v1::LinkState link;
  link.set_onic_serial(serial);
  link.set_port(port);
  link.set_status(v1::LINK_STATUS_DOWN);
  link.set_detail(detail);
  return link;
}

inline std::set<CrossConnect> PhaseWanted(const v1::Allocation& a, const std::string& phase) {
  std::set<CrossConnect> out;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.phase() != phase) continue;
    for (const v1::CrossConnect& x : c.cross_connects()) out.insert({x.ingress(), x.egress()});
  }
  return out;
}

inline v1::ReplaceMemberRequest Replace(const std::string& id, const std::string& member) {
  v1::ReplaceMemberRequest r;
  r.set_allocation_id(id);
  r.set_member(member);
  return r;
}

inline std::map<std::string, std::string> CircuitsById(const v1::Allocation& a) {
  std::map<std::string, std::string> out;
  for (const v1::Circuit& c : a.circuits()) {
    out[c.id()] =
        absl::StrCat(c.source().ShortDebugString(), " ", c.destination().ShortDebugString(), " ",
                     c.cross_connects(0).ShortDebugString());
  }
  return out;
}

inline v1::ActivatePhaseRequest PhaseRequest(const std::string& id, const std::string& phase) {
  v1::ActivatePhaseRequest r;
  r.set_id(id);
  r.set_phase(phase);
  return r;
}

// gpu1 and gpu2 attached to server1, one duplex link each.
inline v1::RequestTopologyRequest Attach(const std::string& tenant) {
  v1::RequestTopologyRequest r;
  r.set_tenant(tenant);
  r.set_name("virtual-server");
  r.mutable_topology()->mutable_attach()->set_host("server1");
  for (const char* gpu : {"gpu1", "gpu2"}) {
    r.mutable_topology()->mutable_attach()->mutable_devices()->add_devices(gpu);
  }
  return r;
}

}  // namespace fleet::engine

#endif  // FLEET_TESTS_ENGINE_ENGINE_TEST_FIXTURE_H_
