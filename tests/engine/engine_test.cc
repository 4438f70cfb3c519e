// The reconfiguration engine over the real SQLite store, the FLEET Gen1 inventory, an
// in-memory switch (FakeOpticalSwitch) and agents that check the light: a retrain succeeds
// only when the switch really connects the expected peer's tx to the port's rx.
#include "controller/engine/engine.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <limits>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "controller/inventory/inventory.h"
#include "scheduler/replacement.h"
#include "switch_adapters/fake_optical_switch.h"
#include "tests/eventually.h"
#include "tests/store/store_test_util.h"

namespace fleet::engine {
namespace {

using store::testing_util::IsOk;
using store::testing_util::StatusIs;
using switches::CrossConnect;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

// Agents for every O-NIC of the site. Retrain answers OK only if the switch carries light
// from the expected peer's tx ingress to this port's rx egress.
class LightCheckingAgents : public agents::CommandSender {
 public:
  LightCheckingAgents(const v1::Inventory& site, switches::FakeOpticalSwitch* sw) : sw_(sw) {
    for (const v1::Onic& o : site.onics()) {
      for (int p = 0; p < o.ports_size(); ++p) {
        ports_[{o.serial(), p + 1}] = {o.ports(p).tx().port(), o.ports(p).rx().port()};
        sender_[o.ports(p).tx().port()] = absl::StrCat(o.serial(), "/", p + 1);
      }
    }
  }

  // Answers as the commands are handed over, except armed retrains (await_light): those
  // wait, as an agent waits for the light, and are answered when collected, from the switch
  // as it is then, or CANCELLED when their port was quiesced after they were armed.
  std::unique_ptr<agents::SentCommands> Send(std::vector<agents::AddressedCommand> commands,
                                             absl::Time) override {
    auto sent = std::make_unique<Sent>();
    std::vector<agents::AddressedCommand> now;
    for (agents::AddressedCommand& c : commands) {
      if (c.command.has_retrain() && c.command.retrain().has_await_light()) {
        absl::MutexLock lock(&mu_);
        sent_.push_back(c.command);
        ++armed_;
        sent->armed.push_back({sent->results.size(), sent_.size(), std::move(c)});
        sent->results.emplace_back(absl::InternalError("not answered"));
      } else {
        sent->results.push_back(Answer({c}).front());
      }
    }
    return sent;
  }
  std::vector<absl::StatusOr<v1::CommandResult>> Await(
      std::unique_ptr<agents::SentCommands> handed) override {
    Sent& sent = static_cast<Sent&>(*handed);
    for (Sent::Armed& armed : sent.armed) {
      const v1::RetrainPort& r = armed.command.command.retrain();
      bool quiesced_since = false;
      {
        absl::MutexLock lock(&mu_);
        for (size_t i = armed.sent_at; i < sent_.size(); ++i) {
          quiesced_since |= sent_[i].has_quiesce() &&
                            sent_[i].quiesce().onic_serial() == r.onic_serial() &&
                            sent_[i].quiesce().port() == r.port();
        }
        if (quiesced_since) ++cancelled_;
      }
      bool runs_out = false;
      {
        absl::MutexLock lock(&mu_);
        runs_out = armed_waits_run_out_;
      }
      if (runs_out) {
        v1::CommandResult untrained;
        untrained.set_code(static_cast<int>(absl::StatusCode::kUnavailable));
        untrained.set_message("no usable light by the end of the wait; not trained");
        sent.results[armed.index] = untrained;
      } else if (quiesced_since) {
        v1::CommandResult cancelled;
        cancelled.set_code(static_cast<int>(absl::StatusCode::kCancelled));
        cancelled.set_message("stopped waiting for light; the port was quiesced");
        sent.results[armed.index] = cancelled;
      } else {
        sent.results[armed.index] = Judge(armed.command);
      }
    }
    return std::move(sent.results);
  }
  bool ArmsRetrains(const std::string& serial) override {
    absl::MutexLock lock(&mu_);
    return !gone_.contains(serial) && (arm_all_ || arming_.contains(serial));
  }
  // Which agents arm retrains: every one, or those owning `serials`.
  void ArmRetrains(bool all, std::set<std::string> serials = {}) {
    absl::MutexLock lock(&mu_);
    arm_all_ = all;
    arming_ = std::move(serials);
  }
  // Armed retrains answer that their light did not come in time (a switch slower than the
  // wait), untrained.
  void ArmedWaitsRunOut(bool run_out) {
    absl::MutexLock lock(&mu_);
    armed_waits_run_out_ = run_out;
  }
  // Armed retrains handed over (with await_light), and armed retrains cancelled by a quiesce.
  int armed() {
    absl::MutexLock lock(&mu_);
    return armed_;
  }
  int cancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }
  std::vector<absl::StatusOr<v1::CommandResult>> Answer(
      const std::vector<agents::AddressedCommand>& commands) {
    absl::MutexLock lock(&mu_);
    std::vector<absl::StatusOr<v1::CommandResult>> out;
    for (const agents::AddressedCommand& c : commands) {
      sent_.push_back(c.command);
      if (gone_.contains(c.onic_serial)) {
        out.push_back(absl::UnavailableError("agent went away"));
        continue;
      }
      v1::CommandResult result;
      if (c.command.has_quiesce() && refuse_quiesce_) {
        result.set_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
        result.set_message("driver busy");
      } else if (c.command.has_quiesce()) {
        quiesced_.insert({c.command.quiesce().onic_serial(), c.command.quiesce().port()});
      } else if (c.command.has_read_port()) {
        // Up with whoever's light arrives, as a link that kept working reports.
        const uint32_t egress =
            ports_[{c.command.read_port().onic_serial(), c.command.read_port().port()}].second;
        result.mutable_link()->set_status(v1::LINK_STATUS_DOWN);
        for (const CrossConnect& x :
             sw_->ReadCrossConnects().value_or(std::vector<CrossConnect>{})) {
          if (x.egress != egress) continue;
          result.mutable_link()->set_status(v1::LINK_STATUS_UP);
          result.mutable_link()->set_peer_seen(sender_[x.ingress]);
        }
      } else if (c.command.has_retrain()) {
        const v1::RetrainPort& r = c.command.retrain();
        quiesced_.erase({r.onic_serial(), r.port()});
        if (!Lit(r)) {
          result.set_code(static_cast<int>(absl::StatusCode::kUnavailable));
          result.set_message("no light");
        }
      }
      out.push_back(result);
    }
    return out;
  }
  // An armed retrain's answer once the wait is over: as a retrain handed over now.
  absl::StatusOr<v1::CommandResult> Judge(const agents::AddressedCommand& armed) {
    absl::MutexLock lock(&mu_);
    if (gone_.contains(armed.onic_serial)) return absl::UnavailableError("agent went away");
    const v1::RetrainPort& r = armed.command.retrain();
    quiesced_.erase({r.onic_serial(), r.port()});
    v1::CommandResult result;
    if (!Lit(r)) {
      result.set_code(static_cast<int>(absl::StatusCode::kUnavailable));
      result.set_message("no light");
    }
    return result;
  }
  // Whether the switch carries the expected peer's light to the retrained port.
  bool Lit(const v1::RetrainPort& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const uint32_t egress = ports_[{r.onic_serial(), r.port()}].second;
    const uint32_t ingress =
        ports_[{r.expected_peer().onic_serial(), r.expected_peer().port()}].first;
    std::vector<CrossConnect> xs = sw_->ReadCrossConnects().value_or(std::vector<CrossConnect>{});
    return std::find(xs.begin(), xs.end(), CrossConnect{ingress, egress}) != xs.end();
  }

  bool HasOwner(const std::string& serial) override {
    std::function<void()> on_back;
    bool owned = false;
    {
      absl::MutexLock lock(&mu_);
      owned = !gone_.contains(serial);
      if (!owned && back_.serial == serial && --back_.asked == 0) {
        gone_.erase(serial);
        on_back.swap(back_.on_back);
        back_ = {};
      }
    }
    if (on_back) on_back();
    return owned;
  }

  // As the registry: what the agent last said of the port in its current connection.
  bool KnownQuiesced(const std::string& serial, uint32_t port) override {
    absl::MutexLock lock(&mu_);
    return !gone_.contains(serial) && quiesced_.contains({serial, port});
  }

  void SetGone(const std::string& serial, bool gone) {
    absl::MutexLock lock(&mu_);
    if (gone) {
      gone_.insert(serial);
      std::erase_if(quiesced_, [&](const auto& p) { return p.first == serial; });
    } else {
      gone_.erase(serial);
    }
  }
  // The gone agent of `serial` comes back just after the `asked`-th HasOwner(serial) has
  // answered no: `on_back` runs then, as the registry tells the engine of a connecting agent.
  void BackAfterAsked(const std::string& serial, int asked, std::function<void()> on_back) {
    absl::MutexLock lock(&mu_);
    back_ = {serial, asked, std::move(on_back)};
  }
  void RefuseQuiesce(bool refuse) {
    absl::MutexLock lock(&mu_);
    refuse_quiesce_ = refuse;
  }
  int Count(v1::Command::ActionCase action) {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(std::count_if(sent_.begin(), sent_.end(), [&](const v1::Command& c) {
      return c.action_case() == action;
    }));
  }
  // SERIAL/PORT of each quiesce command handed over, in order.
  std::vector<std::string> QuiescedPorts() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    for (const v1::Command& c : sent_) {
      if (c.has_quiesce())
        out.push_back(absl::StrCat(c.quiesce().onic_serial(), "/", c.quiesce().port()));
    }
    return out;
  }

 private:
  struct Sent : agents::SentCommands {
    struct Armed {
      size_t index;    // In `results`.
      size_t sent_at;  // Commands handed over before it, itself included.
      agents::AddressedCommand command;
    };
    std::vector<absl::StatusOr<v1::CommandResult>> results;
    std::vector<Armed> armed;
  };

  switches::FakeOpticalSwitch* const sw_;
  absl::Mutex mu_;
  std::map<std::pair<std::string, int>, std::pair<uint32_t, uint32_t>> ports_;
  std::map<uint32_t, std::string> sender_;  // Ingress → the O-NIC port whose tx enters it.
  std::set<std::string> gone_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<std::string, uint32_t>> quiesced_ ABSL_GUARDED_BY(mu_);
  bool refuse_quiesce_ ABSL_GUARDED_BY(mu_) = false;
  struct Back {
    std::string serial;
    int asked = 0;
    std::function<void()> on_back;
  } back_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Command> sent_ ABSL_GUARDED_BY(mu_);
  bool arm_all_ ABSL_GUARDED_BY(mu_) = false;
  std::set<std::string> arming_ ABSL_GUARDED_BY(mu_);
  int armed_ ABSL_GUARDED_BY(mu_) = 0;
  bool armed_waits_run_out_ ABSL_GUARDED_BY(mu_) = false;
  int cancelled_ ABSL_GUARDED_BY(mu_) = 0;
};

v1::RequestTopologyRequest Ring(const std::string& tenant, std::vector<std::string> members) {
  v1::RequestTopologyRequest r;
  r.set_tenant(tenant);
  r.set_name("ring");
  r.mutable_topology()->mutable_template_()->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
  for (const std::string& m : members) {
    r.mutable_topology()->mutable_template_()->mutable_members()->add_devices(m);
  }
  return r;
}

v1::RequestTopologyRequest Link(const std::string& tenant, const std::string& a,
                                const std::string& b) {
  v1::RequestTopologyRequest r;
  r.set_tenant(tenant);
  v1::Link* link = r.mutable_topology()->mutable_links()->add_links();
  link->mutable_a()->set_device(a);
  link->mutable_b()->set_device(b);
  link->set_duplex(true);
  return r;
}

const std::vector<std::string> kGpus = {"gpu1", "gpu2", "gpu3", "gpu4",
                                        "gpu5", "gpu6", "gpu7", "gpu8"};

// Phases dp (a bidirectional ring over gpu1..gpu4) and tp (duplex pairs); defined below.
v1::RequestTopologyRequest Phased(const std::string& tenant);

// Holds a fake switch's applies until it goes, so that a test can keep a batch inside the
// switch, and its transactions can finish however the test ends.
class HeldApplies {
 public:
  explicit HeldApplies(switches::FakeOpticalSwitch* sw) : sw_(sw) { sw_->HoldApplies(true); }
  ~HeldApplies() { sw_->HoldApplies(false); }
  HeldApplies(const HeldApplies&) = delete;
  HeldApplies& operator=(const HeldApplies&) = delete;

 private:
  switches::FakeOpticalSwitch* const sw_;
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::OpenSqliteStore({":memory:", &clock_}).value();
    absl::StatusOr<v1::Inventory> site = inventory::ReadInventoryFile(
        std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-gen1.yaml");
    ASSERT_TRUE(site.ok()) << site.status();
    site_ = *site;
    inventory::InventoryApplier applier(store_.get());
    ASSERT_THAT(applier.Apply(site_, false, "operator:test").status(), IsOk());
    registry_ = std::make_unique<fabric::SwitchRegistry>(
        [this](const polatis::PolatisSwitchOptions&) {
          auto sw = std::make_unique<switches::FakeOpticalSwitch>(384, 384);
          sw_ = sw.get();
          return sw;
        },
        std::map<std::string, polatis::Credentials>{{"ocs1", {"admin", "root"}}}, "test");
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
    options.tick = absl::Hours(1);                      // And drive leases and retries.
    engine_ =
        std::make_unique<Engine>(options, store_.get(), registry_.get(), agents_.get(), &clock_);
    ASSERT_THAT(engine_->Start(), IsOk());
  }

  v1::Allocation Request(const v1::RequestTopologyRequest& r,
                         const std::string& principal = "operator:test") {
    absl::StatusOr<v1::RequestTopologyResponse> response =
        engine_->RequestTopology(r, Caller::FromPrincipal(principal));
    EXPECT_TRUE(response.ok()) << response.status();
    engine_->WaitIdle();
    return Get(response.ok() ? response->allocation().id() : "");
  }
  v1::Allocation Get(const std::string& id) {
    return store_->GetAllocation(id).value_or(v1::Allocation());
  }
  // Requests `r` with the switch's applies held (HeldApplies) and returns its id once its
  // batch is inside the switch.
  std::string RequestHeldAtTheSwitch(const v1::RequestTopologyRequest& r) {
    absl::StatusOr<v1::RequestTopologyResponse> response =
        engine_->RequestTopology(r, Caller::FromPrincipal("operator:test"));
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
  // A ring over gpu1 and gpu2 evicted by draining gpu2-n0 ("dirty connector") while the
  // switch refuses the removal: RELEASING, the switch unreachable.
  void StuckEviction(v1::Allocation* a) {
    *a = Request(Ring("team-a", {"gpu1", "gpu2"}));
    sw_->SetUnreachable(absl::UnavailableError("link down"));
    v1::DrainRequest drain;
    drain.mutable_target()->set_onic("gpu2-n0");
    drain.set_reason("dirty connector");
    drain.set_evict(true);
    ASSERT_THAT(engine_->Drain(drain, Caller::FromPrincipal("operator:t")).status(), IsOk());
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

  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  v1::Inventory site_;
  switches::FakeOpticalSwitch* sw_ = nullptr;
  std::unique_ptr<fabric::SwitchRegistry> registry_;
  std::unique_ptr<LightCheckingAgents> agents_;
  std::unique_ptr<Engine> engine_;
};

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

TEST_F(EngineTest, DryRunReturnsThePlanAndTouchesNothing) {
  const size_t events = EventCount();
  v1::RequestTopologyRequest r = Ring("team-a", kGpus);
  r.set_dry_run(true);
  absl::StatusOr<v1::RequestTopologyResponse> plan =
      engine_->RequestTopology(r, Caller::FromPrincipal("operator:test"));
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
  const Caller op = Caller::FromPrincipal("operator:test");

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
  const Caller op = Caller::FromPrincipal("operator:test");
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

TEST_F(EngineTest, SwitchErrorRollsBackAndFailsWithTheSwitchMessage) {
  sw_->FailNextApplyAfter(3);  // Three of the eight cross-connects land, then the switch errs.
  v1::Allocation a = Request(Ring("team-a", kGpus));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(a.reason(), HasSubstr("switch ocs1"));
  EXPECT_THAT(a.reason(), HasSubstr("rolled back"));
  EXPECT_THAT(a.circuits(), IsEmpty());
  EXPECT_THAT(OnSwitch(), IsEmpty());
  // The ports are free again.
  EXPECT_EQ(Request(Ring("team-a", kGpus)).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, ArmedRetrainsGoOutWithTheBatchAndTheOthersAfterIt) {
  // Only gpu1's agent arms retrains: the circuit into gpu1 is retrained as the switch makes
  // it (its agent waits for the light); the other three once the switch is verified (the
  // fake answers a retrain sent before then "no light").
  agents_->ArmRetrains(false, {"FLT-GPU1-N0"});
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_EQ(OnSwitch(), Wanted(a));
  EXPECT_EQ(agents_->armed(), 1);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), 4);
  EXPECT_EQ(agents_->cancelled(), 0);
}

TEST_F(EngineTest, AnArmedLightWaitOfZeroRetrainsOnlyAfterTheSwitchIsVerified) {
  engine_.reset();
  EngineOptions options;
  options.armed_light_wait = absl::ZeroDuration();
  StartEngine(options);
  agents_->ArmRetrains(true);
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_EQ(agents_->armed(), 0);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), 4);
}

TEST_F(EngineTest, ArmedLinksWhoseLightCameTooLateAreRetrainedOnceTheSwitchIsVerified) {
  agents_->ArmRetrains(true);
  agents_->ArmedWaitsRunOut(true);
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_EQ(agents_->armed(), 4);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), 8);  // Four armed, four again after.
}

TEST_F(EngineTest, ArmedRetrainsAreCancelledWhenTheSwitchRefusesTheBatch) {
  agents_->ArmRetrains(true);
  sw_->FailNextApplyAfter(3);
  v1::Allocation a = Request(Ring("team-a", kGpus));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(a.reason(), HasSubstr("rolled back"));
  // Every armed port was quiesced again, which ended its wait for light.
  EXPECT_EQ(agents_->armed(), 8);
  EXPECT_EQ(agents_->cancelled(), 8);
  EXPECT_EQ(agents_->Count(v1::Command::kQuiesce), 16);
  EXPECT_THAT(OnSwitch(), IsEmpty());
  // The ports are free and quiesced: the same ring is made again, armed.
  EXPECT_EQ(Request(Ring("team-a", kGpus)).state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(agents_->armed(), 16);
  EXPECT_EQ(agents_->Count(v1::Command::kQuiesce), 16);
}

TEST_F(EngineTest, ArmedLinksOfAChangeSetTheSwitchTookTwiceAreRetrainedAgain) {
  agents_->ArmRetrains(true);
  HeldApplies held(sw_);
  const Caller op = Caller::FromPrincipal("operator:test");
  // The first request's batch holds the switch; the next two queue behind it and go out
  // together.
  const std::string first = RequestHeldAtTheSwitch(Link("team-c", "gpu5", "gpu6"));
  absl::StatusOr<v1::RequestTopologyResponse> a =
      engine_->RequestTopology(Link("team-a", "gpu1", "gpu2"), op);
  absl::StatusOr<v1::RequestTopologyResponse> b =
      engine_->RequestTopology(Link("team-b", "gpu3", "gpu4"), op);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(
      fleet::testing::Eventually([&] { return engine_->SwitchQueues()["ocs1"].queued == 2; }));
  // Armed as its batch went to the switch: the first link's two circuits. The queued change
  // sets are not armed until their batch goes.
  ASSERT_TRUE(fleet::testing::Eventually([&] { return agents_->armed() == 2; }));
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), 2);
  // Their batch fails part-way and is undone, then each change set is applied alone: the
  // light at their ports came and went before it came to stay, so an armed answer may have
  // judged light that went away.
  sw_->FailNextApplyAfter(1);
  sw_->HoldApplies(false);
  engine_->WaitIdle();
  std::set<CrossConnect> wanted;
  for (const std::string& id : {first, a->allocation().id(), b->allocation().id()}) {
    const v1::Allocation done = Get(id);
    EXPECT_EQ(done.state(), v1::ALLOCATION_STATE_READY) << done.id() << ": " << done.reason();
    for (const CrossConnect& x : Wanted(done)) wanted.insert(x);
  }
  EXPECT_EQ(OnSwitch(), wanted);
  // Three duplex links, two circuits each, all armed. The first link's circuits trained
  // once; the four the switch took twice, armed and again once it was verified.
  EXPECT_EQ(agents_->armed(), 6);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), 2 + 4 * 2);
  EXPECT_EQ(engine_->SwitchQueues()["ocs1"].batches, 4);  // First, together, then each alone.
}

// A switch whose address changes gets a new driver and a new programming queue; a
// transaction still inside the old queue finishes there (the old queue is kept, not freed
// under it: the sanitizer build would see the use after free).
TEST_F(EngineTest, ATransactionInsideASwitchsQueueFinishesWhenTheSwitchsAddressChanges) {
  switches::FakeOpticalSwitch* const old_switch = sw_;
  HeldApplies held(old_switch);
  const std::string first = RequestHeldAtTheSwitch(Link("team-a", "gpu1", "gpu2"));

  v1::Inventory moved = site_;
  for (v1::Switch& sw : *moved.mutable_switches()) {
    if (sw.id() == "ocs1") sw.set_address("192.0.2.44");
  }
  inventory::InventoryApplier applier(store_.get());
  ASSERT_THAT(applier.Apply(moved, false, "operator:test").status(), IsOk());
  // The next batch for ocs1 goes through a new driver, and so a new queue: it is not held.
  absl::StatusOr<v1::RequestTopologyResponse> second = engine_->RequestTopology(
      Link("team-b", "gpu3", "gpu4"), Caller::FromPrincipal("operator:test"));
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(fleet::testing::Eventually([&] {
    return Get(second->allocation().id()).state() != v1::ALLOCATION_STATE_PENDING &&
           Get(second->allocation().id()).state() != v1::ALLOCATION_STATE_PROGRAMMING;
  }));
  EXPECT_NE(sw_, old_switch);
  EXPECT_EQ(sw_->ReadCrossConnects()->size(), Wanted(Get(second->allocation().id())).size());

  old_switch->HoldApplies(false);
  engine_->WaitIdle();
  const v1::Allocation done = Get(first);
  EXPECT_EQ(done.state(), v1::ALLOCATION_STATE_READY) << done.reason();
  EXPECT_EQ(old_switch->ReadCrossConnects()->size(), Wanted(done).size());
}

TEST_F(EngineTest, UnreachableSwitchFailsTheRequest) {
  sw_->SetUnreachable(absl::UnavailableError("connection refused"));
  v1::Allocation a = Request(Ring("team-a", kGpus));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(a.reason(), HasSubstr("connection refused"));
  sw_->SetUnreachable(absl::OkStatus());
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

TEST_F(EngineTest, QuiesceRefusedFailsBeforeTheSwitchIsTouched) {
  agents_->RefuseQuiesce(true);
  v1::Allocation a = Request(Ring("team-a", kGpus));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(a.reason(), HasSubstr("driver busy"));
  EXPECT_EQ(sw_->changes(), 0);
}

TEST_F(EngineTest, GoneAgentDegradesNamingTheLinkAndRecoversWhenItReturns) {
  agents_->SetGone("FLT-GPU3-N0", true);
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(a.reason(), HasSubstr("gpu2-n0/1 -> gpu3-n0/1"));
  EXPECT_EQ(OnSwitch(), Wanted(a));  // Circuits kept.
  int degraded = 0;
  for (const v1::Circuit& c : a.circuits()) degraded += c.state() == v1::CIRCUIT_STATE_DEGRADED;
  EXPECT_EQ(degraded, 1);

  // Still gone at the first retry: still DEGRADED, retried later.
  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_DEGRADED);

  agents_->SetGone("FLT-GPU3-N0", false);
  engine_->AgentConnected("gpu-pool-1", {"FLT-GPU3-N0"});
  engine_->RunDueRetries();
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, AnAgentThatConnectsDuringARetryIsRetriedAtOnce) {
  agents_->SetGone("FLT-GPU3-N0", true);
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_DEGRADED);
  // The agent registers while the retry is running, just after it found no agent: that attempt
  // misses it, and the agent is there for every attempt after it.
  // (Asked twice per attempt: before reading the links, and before retraining those down.)
  agents_->BackAfterAsked("FLT-GPU3-N0", 2,
                          [this] { engine_->AgentConnected("gpu-pool-1", {"FLT-GPU3-N0"}); });
  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdle();
  // The next attempt is due at once, not after a doubled backoff: no time passes here. (The
  // engine's own loop may have run it already.)
  engine_->RunDueRetries();
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY) << Get(a.id()).reason();
}

TEST_F(EngineTest, AConnectingAgentsIdlePortsAreQuiescedSoARequestNeedNotWaitForThem) {
  // gpu1 → gpu2 → gpu1 uses port 1 of each O-NIC (the first free one).
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const size_t before = agents_->QuiescedPorts().size();
  engine_->AgentConnected("gpu-pool-1", {"FLT-GPU1-N0", "FLT-GPU3-N0", "FLT-GPU4-N0"});
  engine_->WaitIdle();
  std::vector<std::string> quiesced = agents_->QuiescedPorts();
  quiesced.erase(quiesced.begin(), quiesced.begin() + static_cast<long>(before));
  // Every port in no circuit of the O-NICs named, and nothing else: not gpu1's port in the
  // ring, nor any port of gpu2, whose agent did not connect.
  EXPECT_THAT(quiesced,
              ::testing::UnorderedElementsAre("FLT-GPU1-N0/2", "FLT-GPU3-N0/1", "FLT-GPU3-N0/2",
                                              "FLT-GPU4-N0/1", "FLT-GPU4-N0/2"));
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);

  // A ring over gpu3 and gpu4 finds its ports out of service already: no quiesce is sent.
  v1::Allocation b = Request(Ring("team-a", {"gpu3", "gpu4"}));
  ASSERT_EQ(b.state(), v1::ALLOCATION_STATE_READY) << b.reason();
  EXPECT_EQ(agents_->QuiescedPorts().size(), before + quiesced.size());

  // Connecting again sends nothing: its idle ports are known quiesced, the rest are in use.
  engine_->AgentConnected("gpu-pool-1", {"FLT-GPU1-N0", "FLT-GPU3-N0", "FLT-GPU4-N0"});
  engine_->WaitIdle();
  EXPECT_EQ(agents_->QuiescedPorts().size(), before + quiesced.size());
}

TEST_F(EngineTest, AgentGoneDegradesAndItsReturnHealsWithoutRetrainingWorkingLinks) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const int retrains = agents_->Count(v1::Command::kRetrain);
  agents_->SetGone("FLT-GPU2-N0", true);
  engine_->AgentGone("gpu-pool-1", {"FLT-GPU2-N0"}, "missed 3 heartbeats");
  v1::Allocation degraded = Get(a.id());
  EXPECT_EQ(degraded.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_THAT(degraded.reason(), HasSubstr("gpu-pool-1 is gone (missed 3 heartbeats)"));
  int affected = 0;
  for (const v1::Circuit& c : degraded.circuits()) {
    affected += c.state() == v1::CIRCUIT_STATE_DEGRADED;
  }
  EXPECT_EQ(affected, 2);  // gpu1 → gpu2 and gpu2 → gpu3.
  EXPECT_EQ(OnSwitch(), Wanted(a));

  agents_->SetGone("FLT-GPU2-N0", false);
  engine_->AgentConnected("gpu-pool-1", {"FLT-GPU2-N0"});
  clock_.Advance(absl::Seconds(1));
  engine_->RunDueRetries();
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
  // The light never stopped: the returned agent reported the links up, nothing retrained.
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), retrains);
}

TEST_F(EngineTest, ReleaseRemovesTheCrossConnectsAndFreesThePorts) {
  v1::Allocation a = Request(Ring("team-a", kGpus));
  absl::StatusOr<v1::Allocation> released =
      engine_->ReleaseTopology(a.id(), Caller::FromPrincipal("job:team-a"));
  ASSERT_THAT(released.status(), IsOk());
  EXPECT_EQ(released->state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_THAT(released->circuits(), IsEmpty());
  EXPECT_THAT(OnSwitch(), IsEmpty());
  EXPECT_THAT(store_->ListCircuits({}).value(), IsEmpty());
  // Releasing again is harmless.
  EXPECT_THAT(engine_->ReleaseTopology(a.id(), Caller::FromPrincipal("job:team-a")).status(),
              IsOk());
  EXPECT_EQ(Request(Ring("team-b", kGpus)).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, PortsAReleaseLeftQuiescedAreNotQuiescedAgain) {
  v1::Allocation a = Request(Ring("team-a", kGpus));
  const int first = agents_->Count(v1::Command::kQuiesce);
  EXPECT_EQ(first, 8);  // One port of each GPU.
  ASSERT_THAT(engine_->ReleaseTopology(a.id(), Caller::FromPrincipal("job:team-a")).status(),
              IsOk());
  const int released = agents_->Count(v1::Command::kQuiesce);
  EXPECT_EQ(released, 16);  // Out of service before their light goes.
  // The same ports, still out of service: the next ring goes straight to the switch.
  v1::Allocation b = Request(Ring("team-b", kGpus));
  EXPECT_EQ(b.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(agents_->Count(v1::Command::kQuiesce), released);
  // A port whose agent reconnected since is quiesced again: its state is unknown.
  ASSERT_THAT(engine_->ReleaseTopology(b.id(), Caller::FromPrincipal("job:team-b")).status(),
              IsOk());
  agents_->SetGone("FLT-GPU1-N0", true);
  agents_->SetGone("FLT-GPU1-N0", false);
  const int before = agents_->Count(v1::Command::kQuiesce);
  EXPECT_EQ(Request(Ring("team-b", kGpus)).state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(agents_->Count(v1::Command::kQuiesce), before + 1);
}

TEST_F(EngineTest, ReleaseThatTheSwitchRefusesKeepsThePortsAndRetries) {
  v1::Allocation a = Request(Ring("team-a", kGpus));
  sw_->SetUnreachable(absl::UnavailableError("link down"));
  v1::Allocation stuck =
      engine_->ReleaseTopology(a.id(), Caller::FromPrincipal("operator:test")).value();
  EXPECT_EQ(stuck.state(), v1::ALLOCATION_STATE_RELEASING);
  EXPECT_THAT(stuck.reason(), HasSubstr("link down"));
  // Its ports stay held until the light is really gone.
  v1::RequestTopologyRequest same_port;
  same_port.set_tenant("team-a");
  v1::Link* link = same_port.mutable_topology()->mutable_links()->add_links();
  link->mutable_a()->mutable_onic_port()->set_onic("gpu1-n0");
  link->mutable_a()->mutable_onic_port()->set_port(1);
  link->mutable_b()->set_device("gpu3");
  EXPECT_THAT(engine_->RequestTopology(same_port, Caller::FromPrincipal("operator:x")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("gpu1-n0")));
  sw_->SetUnreachable(absl::OkStatus());
  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

TEST_F(EngineTest, AnEvictionTheSwitchRefusesEndsFailedWithItsReasonOnRetry) {
  v1::Allocation a;
  ASSERT_NO_FATAL_FAILURE(StuckEviction(&a));
  sw_->SetUnreachable(absl::OkStatus());
  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdle();
  const v1::Allocation evicted = Get(a.id());
  EXPECT_EQ(evicted.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(evicted.reason(), HasSubstr("O-NIC gpu2-n0 was drained: dirty connector"));
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

TEST_F(EngineTest, AnEvictionARestartInterruptsStillEndsFailedWithItsReason) {
  v1::Allocation a;
  ASSERT_NO_FATAL_FAILURE(StuckEviction(&a));
  // The reason shown while it is stuck is the switch's; the intent is kept apart from it.
  EXPECT_THAT(Get(a.id()).reason(), HasSubstr("removal failed, retrying"));

  // fleetd restarts; the switch is back. The resumed release ends as the eviction meant.
  engine_.reset();
  sw_->SetUnreachable(absl::OkStatus());
  StartEngine();
  engine_->WaitIdle();
  const v1::Allocation evicted = Get(a.id());
  EXPECT_EQ(evicted.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(evicted.reason(), HasSubstr("O-NIC gpu2-n0 was drained: dirty connector"));
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

TEST_F(EngineTest, ASecondReleaseOfAStuckEvictionDoesNotChangeHowItEnds) {
  v1::Allocation a;
  ASSERT_NO_FATAL_FAILURE(StuckEviction(&a));
  sw_->SetUnreachable(absl::OkStatus());
  absl::StatusOr<v1::Allocation> released =
      engine_->ReleaseTopology(a.id(), Caller::FromPrincipal("job:team-a"));
  ASSERT_THAT(released.status(), IsOk());
  EXPECT_EQ(released->state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(released->reason(), HasSubstr("O-NIC gpu2-n0 was drained: dirty connector"));
  EXPECT_THAT(OnSwitch(), IsEmpty());
}

TEST_F(EngineTest, LeaseExpiryReleasesAndKeepAliveRenews) {
  v1::RequestTopologyRequest r = Ring("team-a", kGpus);
  *r.mutable_lease() = google::protobuf::util::TimeUtil::SecondsToDuration(10);
  v1::Allocation a = Request(r);
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const Caller job = Caller::FromPrincipal("job:team-a");

  clock_.Advance(absl::Seconds(8));
  ASSERT_THAT(engine_->KeepAlive(a.id(), job).status(), IsOk());
  clock_.Advance(absl::Seconds(8));
  engine_->ExpireLeases();
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);

  clock_.Advance(absl::Seconds(3));
  engine_->ExpireLeases();
  engine_->WaitIdle();
  v1::Allocation expired = Get(a.id());
  EXPECT_EQ(expired.state(), v1::ALLOCATION_STATE_RELEASED);
  EXPECT_THAT(expired.reason(), HasSubstr("lease expired"));
  EXPECT_THAT(OnSwitch(), IsEmpty());
  EXPECT_THAT(engine_->KeepAlive(a.id(), job).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("released")));
}

TEST_F(EngineTest, LeaseLongerThanTheMaximumIsRefused) {
  v1::RequestTopologyRequest r = Ring("team-a", kGpus);
  *r.mutable_lease() = google::protobuf::util::TimeUtil::SecondsToDuration(86400 * 30);
  EXPECT_THAT(engine_->RequestTopology(r, Caller::FromPrincipal("operator:test")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lease")));
}

TEST_F(EngineTest, TenantsCannotTouchEachOthersAllocations) {
  v1::RequestTopologyRequest r = Ring("", {"gpu1", "gpu2"});
  v1::Allocation a = Request(r, "job:team-a");
  ASSERT_EQ(a.tenant(), "team-a");
  const Caller b = Caller::FromPrincipal("job:team-b");
  EXPECT_THAT(engine_->GetAllocation(a.id(), b).status(),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(engine_->ReleaseTopology(a.id(), b).status(),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(engine_->KeepAlive(a.id(), b).status(),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(engine_->CheckWatch(a.id(), "", b),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(engine_->CheckWatch("", "team-a", b),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(engine_->RequestTopology(Ring("team-a", {"gpu3", "gpu4"}), b).status(),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(engine_->ListAllocations({}, b).value(), IsEmpty());
  EXPECT_THAT(engine_->ListAllocations({}, Caller::FromPrincipal("job:team-a")).value(), SizeIs(1));
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
          Caller::FromPrincipal("operator:test"));
      if (r.ok()) ids[i] = r->allocation().id();
    });
  }
  for (std::thread& t : jobs) t.join();
  engine_->WaitIdle();
  std::set<CrossConnect> wanted;
  for (const std::string& id : ids) {
    v1::Allocation a = Get(id);
    EXPECT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << id << " " << a.reason();
    for (const CrossConnect& x : Wanted(a)) wanted.insert(x);
  }
  EXPECT_EQ(OnSwitch(), wanted);
}

TEST_F(EngineTest, RestartLeavesReadyAllocationsUntouched) {
  v1::Allocation a = Request(Ring("team-a", kGpus));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  const int changes = sw_->changes();
  const int retrains = agents_->Count(v1::Command::kRetrain);
  engine_.reset();
  StartEngine();
  engine_->WaitIdle();
  EXPECT_EQ(sw_->changes(), changes);
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), retrains);
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

// What a crash leaves behind at each stage, then a restart.
class InterruptedTest : public EngineTest,
                        public ::testing::WithParamInterface<std::pair<v1::AllocationState, int>> {
};

TEST_P(InterruptedTest, RestartResumesTheTransaction) {
  const auto [state, landed] = GetParam();
  // Take an allocation through, then rewind the store and the switch to the crash point.
  v1::Allocation a = Request(Ring("team-a", kGpus));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  engine_.reset();
  store::AllocationUpdate rewind;
  rewind.id = a.id();
  rewind.state = state;
  for (const v1::Circuit& c : a.circuits()) {
    rewind.circuits[c.id()] = {state == v1::ALLOCATION_STATE_RELEASING ? v1::CIRCUIT_STATE_REMOVING
                                                                       : v1::CIRCUIT_STATE_PLANNED,
                               ""};
  }
  ASSERT_THAT(store_->UpdateAllocation(rewind, "test").status(), IsOk());
  const std::set<CrossConnect> wanted = Wanted(a);
  std::vector<CrossConnect> all(wanted.begin(), wanted.end());
  switches::CrossConnectBatch undo;
  undo.remove.assign(all.begin() + landed, all.end());
  ASSERT_THAT(sw_->Apply(undo).status, IsOk());

  StartEngine();
  engine_->WaitIdle();
  v1::Allocation after = Get(a.id());
  if (state == v1::ALLOCATION_STATE_RELEASING) {
    EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_RELEASED);
    EXPECT_THAT(OnSwitch(), IsEmpty());
  } else {
    EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
    EXPECT_EQ(OnSwitch(), Wanted(after));
  }
  EXPECT_THAT(EventKinds(a.id()), Contains(HasSubstr("resuming")));
}

INSTANTIATE_TEST_SUITE_P(Stages, InterruptedTest,
                         ::testing::Values(std::pair{v1::ALLOCATION_STATE_PENDING, 0},
                                           std::pair{v1::ALLOCATION_STATE_PROGRAMMING, 0},
                                           std::pair{v1::ALLOCATION_STATE_PROGRAMMING, 3},
                                           std::pair{v1::ALLOCATION_STATE_TRAINING, 8},
                                           std::pair{v1::ALLOCATION_STATE_RELEASING, 8},
                                           std::pair{v1::ALLOCATION_STATE_RELEASING, 5}));

TEST_F(EngineTest, ReconcileRepairsAMissingCrossConnectAndRetrains) {
  v1::Allocation a = Request(Ring("team-a", kGpus));
  const CrossConnect lost = *Wanted(a).begin();
  switches::CrossConnectBatch behind_our_back;
  behind_our_back.remove.push_back(lost);
  ASSERT_THAT(sw_->Apply(behind_our_back).status, IsOk());

  v1::ReconcileRequest dry;
  dry.set_dry_run(true);
  v1::ReconcileResponse seen = engine_->Reconcile(dry, Caller::FromPrincipal("operator:t")).value();
  ASSERT_THAT(seen.drift(), SizeIs(1));
  EXPECT_EQ(seen.drift(0).kind(), v1::Drift::KIND_MISSING);
  EXPECT_EQ(OnSwitch().size(), 7u);

  v1::ReconcileResponse fixed = engine_->Reconcile({}, Caller::FromPrincipal("operator:t")).value();
  EXPECT_EQ(fixed.repaired(), 1u);
  EXPECT_EQ(OnSwitch(), Wanted(a));
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_DEGRADED);
  engine_->RunDueRetries();
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, ReconcileReportsResumedTransactionsAndThoseRolledBack) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY);
  // As a crash would leave it: PROGRAMMING, nothing on the switch yet, and meanwhile someone
  // patched a foreign cross-connect onto the egress its first circuit needs.
  store::AllocationUpdate rewind;
  rewind.id = a.id();
  rewind.state = v1::ALLOCATION_STATE_PROGRAMMING;
  for (const v1::Circuit& c : a.circuits())
    rewind.circuits[c.id()] = {v1::CIRCUIT_STATE_PLANNED, ""};
  ASSERT_THAT(store_->UpdateAllocation(rewind, "test").status(), IsOk());
  switches::CrossConnectBatch clear;
  for (const CrossConnect& x : Wanted(a)) clear.remove.push_back(x);
  ASSERT_THAT(sw_->Apply(clear).status, IsOk());
  const uint32_t egress = a.circuits(0).cross_connects(0).egress();
  sw_->ForceCrossConnect({300, egress});

  v1::ReconcileResponse r = engine_->Reconcile({}, Caller::FromPrincipal("operator:t")).value();
  EXPECT_EQ(r.resumed_transactions(), 1u);
  EXPECT_EQ(r.rolled_back_transactions(), 1u);
  v1::Allocation failed = Get(a.id());
  EXPECT_EQ(failed.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(failed.reason(), HasSubstr(absl::StrCat(egress)));
  // Only the foreign cross-connect is left: the failed resume took nothing with it.
  EXPECT_EQ(OnSwitch(), (std::set<CrossConnect>{{300, egress}}));
}

TEST_F(EngineTest, ReconcileAppliesTheUnknownCrossConnectPolicy) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2"}));
  // s1c0-n0 port 1 tx (ingress 1) to s2c0-n0 port 1 rx (egress 397): wired O-NIC ports.
  sw_->ForceCrossConnect({1, 397});
  sw_->ForceCrossConnect({300, 700});  // Trunk-reserved ports: no O-NIC to adopt it for.
  const Caller op = Caller::FromPrincipal("operator:t");

  v1::ReconcileResponse reported = engine_->Reconcile({}, op).value();
  ASSERT_THAT(reported.drift(), SizeIs(2));
  for (const v1::Drift& d : reported.drift()) {
    EXPECT_EQ(d.kind(), v1::Drift::KIND_UNKNOWN);
    EXPECT_EQ(d.action(), "reported");
  }
  EXPECT_THAT(OnSwitch(), Contains(CrossConnect{1, 397}));

  v1::ReconcileRequest adopt;
  adopt.set_unknown(v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT);
  v1::ReconcileResponse adopted = engine_->Reconcile(adopt, op).value();
  std::map<uint32_t, std::string> actions;
  for (const v1::Drift& d : adopted.drift()) actions[d.cross_connect().ingress()] = d.action();
  EXPECT_EQ(actions[1], "adopted");
  EXPECT_THAT(actions[300], HasSubstr("cannot adopt"));
  std::vector<v1::Circuit> manual;
  const std::vector<v1::Circuit> circuits = store_->ListCircuits({}).value();
  for (const v1::Circuit& c : circuits) {
    if (c.manual()) manual.push_back(c);
  }
  ASSERT_THAT(manual, SizeIs(1));
  EXPECT_EQ(manual[0].source().onic(), "s1c0-n0");
  EXPECT_EQ(manual[0].destination().onic(), "s2c0-n0");

  v1::ReconcileRequest remove;
  remove.set_unknown(v1::UNKNOWN_CROSS_CONNECT_POLICY_REMOVE);
  v1::ReconcileResponse removed = engine_->Reconcile(remove, op).value();
  ASSERT_THAT(removed.drift(), SizeIs(1));
  EXPECT_EQ(removed.drift(0).cross_connect().ingress(), 300u);
  EXPECT_EQ(removed.drift(0).action(), "removed");
  std::set<CrossConnect> expected = Wanted(a);
  expected.insert({1, 397});  // Adopted: now desired.
  EXPECT_EQ(OnSwitch(), expected);
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, DrainRefusesNewCircuitsAndEvictFailsTheAllocationsOnIt) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2"}));
  const Caller op = Caller::FromPrincipal("operator:t");
  v1::DrainRequest drain;
  drain.mutable_target()->set_onic("gpu2-n0");
  drain.set_reason("dirty connector");
  v1::DrainResponse drained = engine_->Drain(drain, op).value();
  EXPECT_THAT(drained.affected_allocations(), ElementsAre(a.id()));
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);  // Without evict: kept.
  EXPECT_THAT(engine_->RequestTopology(Link("team-b", "gpu2", "gpu3"), op).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("drained")));
  EXPECT_THAT(engine_->Drain(drain, Caller::FromPrincipal("job:team-a")).status(),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));

  drain.set_evict(true);
  ASSERT_THAT(engine_->Drain(drain, op).status(), IsOk());
  v1::Allocation evicted = Get(a.id());
  EXPECT_EQ(evicted.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(evicted.reason(), HasSubstr("O-NIC gpu2-n0 was drained: dirty connector"));
  EXPECT_THAT(OnSwitch(), IsEmpty());

  v1::UndrainRequest undrain;
  undrain.mutable_target()->set_onic("gpu2-n0");
  ASSERT_THAT(engine_->Undrain(undrain, op), IsOk());
  EXPECT_EQ(Request(Link("team-b", "gpu2", "gpu3")).state(), v1::ALLOCATION_STATE_READY);
  v1::DrainRequest unknown;
  unknown.mutable_target()->set_host("server9");
  EXPECT_THAT(engine_->Drain(unknown, op).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("server9")));
}

// --- Phases ---

// Phases `dp` (a bidirectional ring over gpu1..gpu4) and `tp` (gpu1↔gpu2 and gpu3↔gpu4,
// sharing two of the ring's links).
v1::RequestTopologyRequest Phased(const std::string& tenant) {
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

std::set<CrossConnect> PhaseWanted(const v1::Allocation& a, const std::string& phase) {
  std::set<CrossConnect> out;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.phase() != phase) continue;
    for (const v1::CrossConnect& x : c.cross_connects()) out.insert({x.ingress(), x.egress()});
  }
  return out;
}

TEST_F(EngineTest, PhasedRequestProgramsOnlyTheInitialPhaseAndHoldsEveryPhasesPorts) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  EXPECT_THAT(a.phases(), ElementsAre("dp", "tp"));
  EXPECT_EQ(a.active_phase(), "dp");
  for (const v1::Circuit& c : a.circuits()) {
    EXPECT_EQ(c.state(), c.phase() == "dp" ? v1::CIRCUIT_STATE_ACTIVE : v1::CIRCUIT_STATE_INACTIVE)
        << c.id();
  }
  EXPECT_EQ(OnSwitch(), PhaseWanted(a, "dp"));
  // The inactive phase's ports are the job's: another tenant cannot take them.
  const Caller op = Caller::FromPrincipal("operator:test");
  EXPECT_THAT(engine_->RequestTopology(Link("team-b", "gpu1", "gpu5"), op).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("gpu1")));
}

TEST_F(EngineTest, ActivatePhaseReprogramsOnlyTheCircuitsThatDiffer) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const int changes = sw_->changes();
  const int retrains = agents_->Count(v1::Command::kRetrain);
  const Caller caller = Caller::FromPrincipal("job:team-a");

  absl::StatusOr<v1::ActivatePhaseResponse> switched = engine_->ActivatePhase(
      [&] {
        v1::ActivatePhaseRequest r;
        r.set_id(a.id());
        r.set_phase("tp");
        return r;
      }(),
      caller);
  ASSERT_THAT(switched.status(), IsOk());
  engine_->WaitIdle();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << now.reason();
  EXPECT_EQ(now.active_phase(), "tp");
  EXPECT_EQ(OnSwitch(), PhaseWanted(now, "tp"));
  // The ring's gpu2↔gpu3 and gpu4↔gpu1 go (4 cross-connects), tp's own links are new only
  // where the ring's ports differ; what both phases share stays on the switch untouched.
  std::set<CrossConnect> shared;
  const std::set<CrossConnect> dp = PhaseWanted(now, "dp"), tp = PhaseWanted(now, "tp");
  std::set_intersection(dp.begin(), dp.end(), tp.begin(), tp.end(),
                        std::inserter(shared, shared.begin()));
  const int differing = static_cast<int>(dp.size() + tp.size() - 2 * shared.size());
  EXPECT_EQ(sw_->changes() - changes, differing);
  EXPECT_EQ(switched->plan().remove_size() + switched->plan().add_size(), differing);
  // The new links retrain, and so do kept ones whose ports were quiesced with them.
  EXPECT_GE(agents_->Count(v1::Command::kRetrain) - retrains, switched->plan().add_size());
  for (const v1::Circuit& c : now.circuits()) {
    EXPECT_EQ(c.state(), c.phase() == "tp" ? v1::CIRCUIT_STATE_ACTIVE : v1::CIRCUIT_STATE_INACTIVE)
        << c.id();
  }

  // And back; activating the active phase changes nothing.
  v1::ActivatePhaseRequest back;
  back.set_id(a.id());
  back.set_phase("dp");
  ASSERT_THAT(engine_->ActivatePhase(back, caller).status(), IsOk());
  engine_->WaitIdle();
  EXPECT_EQ(OnSwitch(), PhaseWanted(Get(a.id()), "dp"));
  const int settled = sw_->changes();
  ASSERT_THAT(engine_->ActivatePhase(back, caller).status(), IsOk());
  engine_->WaitIdle();
  EXPECT_EQ(sw_->changes(), settled);
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, AnInactivePhasesPortsAreHeldAgainstOtherTenants) {
  v1::RequestTopologyRequest r;
  r.set_tenant("team-a");
  for (auto [name, a, b] : {std::tuple{"one", "gpu1", "gpu2"}, std::tuple{"two", "gpu3", "gpu4"}}) {
    v1::Phase* phase = r.add_phases();
    phase->set_name(name);
    v1::Link* link = phase->mutable_topology()->mutable_links()->add_links();
    link->mutable_a()->set_device(a);
    link->mutable_b()->set_device(b);
    link->set_duplex(true);
  }
  v1::Allocation a = Request(r);
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const Caller op = Caller::FromPrincipal("operator:test");
  // Phase `two` is not on the switch, but the port it uses at gpu3 is not anyone else's.
  v1::RequestTopologyRequest theirs = Link("team-b", "gpu3", "gpu5");
  v1::Endpoint* end = theirs.mutable_topology()->mutable_links()->mutable_links(0)->mutable_a();
  end->mutable_onic_port()->set_onic("gpu3-n0");
  end->mutable_onic_port()->set_port(1);
  EXPECT_THAT(engine_->RequestTopology(theirs, op).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("gpu3-n0/1 cannot be used: tx belongs to another tenant")));
  v1::ActivatePhaseRequest two;
  two.set_id(a.id());
  two.set_phase("two");
  ASSERT_THAT(engine_->ActivatePhase(two, Caller::FromPrincipal("job:team-a")).status(), IsOk());
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(OnSwitch(), PhaseWanted(Get(a.id()), "two"));
}

TEST_F(EngineTest, KeptCircuitsOnQuiescedPortsAreRetrainedAndTheRestLeftAlone) {
  // A one-way ring and the chain along it: switching keeps three circuits and removes 4→1,
  // whose ports are gpu4's (the receiving end of 3→4) and gpu1's (the sender of 1→2).
  v1::RequestTopologyRequest r;
  r.set_tenant("team-a");
  for (auto [name, kind] : {std::pair{"ring", v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL},
                            std::pair{"chain", v1::TEMPLATE_KIND_CHAIN}}) {
    v1::Phase* phase = r.add_phases();
    phase->set_name(name);
    v1::TemplateSpec* t = phase->mutable_topology()->mutable_template_();
    t->set_kind(kind);
    for (const char* m : {"gpu1", "gpu2", "gpu3", "gpu4"}) t->mutable_members()->add_devices(m);
  }
  v1::Allocation a = Request(r);
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const int changes = sw_->changes();
  const int retrains = agents_->Count(v1::Command::kRetrain);
  v1::ActivatePhaseRequest chain;
  chain.set_id(a.id());
  chain.set_phase("chain");
  absl::StatusOr<v1::ActivatePhaseResponse> switched =
      engine_->ActivatePhase(chain, Caller::FromPrincipal("job:team-a"));
  ASSERT_THAT(switched.status(), IsOk());
  EXPECT_EQ(switched->plan().remove_size(), 1);
  EXPECT_EQ(switched->plan().add_size(), 0);
  engine_->WaitIdle();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << now.reason();
  EXPECT_EQ(OnSwitch(), PhaseWanted(now, "chain"));
  EXPECT_EQ(sw_->changes() - changes, 1);
  // 1→2 and 3→4 retrained; 2→3, on ports nobody quiesced, left alone.
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain) - retrains, 2);
}

TEST_F(EngineTest, ActivatePhaseRefusalsNameTheProblem) {
  v1::Allocation a = Request(Phased("team-a"));
  v1::Allocation single = Request(Link("team-a", "gpu5", "gpu6"));
  v1::ActivatePhaseRequest r;
  r.set_id(a.id());
  r.set_phase("pp");
  EXPECT_THAT(engine_->ActivatePhase(r, Caller::FromPrincipal("job:team-a")).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("its phases are dp, tp")));
  r.set_phase("tp");
  EXPECT_THAT(engine_->ActivatePhase(r, Caller::FromPrincipal("job:team-b")).status(),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  r.set_id(single.id());
  EXPECT_THAT(engine_->ActivatePhase(r, Caller::FromPrincipal("job:team-a")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no phases")));
  EXPECT_EQ(Get(a.id()).active_phase(), "dp");

  v1::RequestTopologyRequest bad = Phased("team-a");
  bad.mutable_phases(1)->set_name("dp");
  const Caller op = Caller::FromPrincipal("operator:test");
  EXPECT_THAT(engine_->RequestTopology(bad, op).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'dp' is given twice")));
  bad = Phased("team-a");
  bad.set_initial_phase("pp");
  EXPECT_THAT(engine_->RequestTopology(bad, op).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("initial_phase")));
}

TEST_F(EngineTest, APhaseWhoseNewCircuitsUseADrainedPortIsRefusedUntilUndrained) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  // A tp circuit that dp does not have: switching to tp would light its ports anew.
  std::set<std::string> dp_links;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.phase() == "dp")
      dp_links.insert(c.source().ShortDebugString() + c.destination().ShortDebugString());
  }
  const v1::Circuit* fresh = nullptr;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.phase() == "tp" &&
        !dp_links.contains(c.source().ShortDebugString() + c.destination().ShortDebugString())) {
      fresh = &c;
      break;
    }
  }
  ASSERT_NE(fresh, nullptr);
  const Caller op = Caller::FromPrincipal("operator:t");
  v1::DrainRequest drain;
  drain.mutable_target()->set_onic(fresh->source().onic());
  drain.set_reason("dirty connector");
  ASSERT_THAT(engine_->Drain(drain, op).status(), IsOk());
  const int changes = sw_->changes();
  v1::ActivatePhaseRequest r;
  r.set_id(a.id());
  r.set_phase("tp");
  EXPECT_THAT(engine_->ActivatePhase(r, Caller::FromPrincipal("job:team-a")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("phase tp cannot be activated: circuit " + fresh->id()),
                             HasSubstr("onic " + fresh->source().onic() + " is drained"))));
  // Nothing changed: still on dp, READY, the switch untouched; and it can switch once undrained.
  EXPECT_EQ(sw_->changes(), changes);
  EXPECT_EQ(Get(a.id()).active_phase(), "dp");
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
  v1::UndrainRequest undrain;
  undrain.mutable_target()->set_onic(fresh->source().onic());
  ASSERT_THAT(engine_->Undrain(undrain, op), IsOk());
  ASSERT_THAT(engine_->ActivatePhase(r, Caller::FromPrincipal("job:team-a")).status(), IsOk());
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).active_phase(), "tp");
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, PhaseSwitchTheSwitchRefusesGoesBackToTheOldPhaseAndHeals) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  sw_->FailNextApplyAfter(1);
  v1::ActivatePhaseRequest r;
  r.set_id(a.id());
  r.set_phase("tp");
  ASSERT_THAT(engine_->ActivatePhase(r, Caller::FromPrincipal("job:team-a")).status(), IsOk());
  engine_->WaitIdle();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_DEGRADED);
  EXPECT_EQ(now.active_phase(), "dp");
  EXPECT_THAT(now.reason(), HasSubstr("back on phase dp"));
  EXPECT_EQ(OnSwitch(), PhaseWanted(now, "dp"));  // Rolled back.

  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY) << Get(a.id()).reason();
}

TEST_F(EngineTest, APhaseSwitchACrashInterruptedFinishesAtRestart) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_NO_FATAL_FAILURE(CrashAfterHandoverToTp(a));
  ASSERT_EQ(OnSwitch(), PhaseWanted(a, "dp"));

  StartEngine();
  engine_->WaitIdle();
  v1::Allocation after = Get(a.id());
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
  EXPECT_EQ(after.active_phase(), "tp");
  EXPECT_EQ(OnSwitch(), PhaseWanted(after, "tp"));
}

TEST_F(EngineTest, APhaseSwitchACrashInterruptedAndTheSwitchRefusesGoesBackToTheOldPhase) {
  v1::Allocation a = Request(Phased("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_NO_FATAL_FAILURE(CrashAfterHandoverToTp(a));
  sw_->FailNextApplyAfter(1);  // The switch refuses the batch the restarted fleetd sends.
  StartEngine();
  engine_->WaitIdle();
  v1::Allocation after = Get(a.id());
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_DEGRADED) << after.reason();
  EXPECT_EQ(after.active_phase(), "dp");
  EXPECT_THAT(after.reason(), HasSubstr("back on phase dp"));
  EXPECT_EQ(OnSwitch(), PhaseWanted(after, "dp"));  // Rolled back.

  clock_.Advance(absl::Seconds(2));
  engine_->RunDueRetries();
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY) << Get(a.id()).reason();
}

TEST_F(EngineTest, AllToAllBecomesRoundsAndEveryRoundCanBeActivated) {
  v1::RequestTopologyRequest r;
  r.set_tenant("team-a");
  for (const char* m : {"gpu1", "gpu2", "gpu3", "gpu4"}) {
    r.mutable_topology()->mutable_all_to_all()->mutable_members()->add_devices(m);
  }
  v1::Allocation a = Request(r);
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  // Two ports per GPU: each round sends to two others, so the three peers take two rounds.
  EXPECT_THAT(a.phases(), ElementsAre("round-1", "round-2"));
  std::set<std::pair<std::string, std::string>> pairs;
  for (const std::string& round : a.phases()) {
    v1::ActivatePhaseRequest activate;
    activate.set_id(a.id());
    activate.set_phase(round);
    ASSERT_THAT(engine_->ActivatePhase(activate, Caller::FromPrincipal("job:team-a")).status(),
                IsOk());
    engine_->WaitIdle();
    v1::Allocation now = Get(a.id());
    ASSERT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << round << ": " << now.reason();
    EXPECT_EQ(OnSwitch(), PhaseWanted(now, round));
    for (const v1::Circuit& c : now.circuits()) {
      if (c.phase() == round) pairs.insert({c.source().onic(), c.destination().onic()});
    }
  }
  EXPECT_THAT(pairs, SizeIs(12));  // Every ordered pair of the four.
}

// --- Member replacement ---

v1::ReplaceMemberRequest Replace(const std::string& id, const std::string& member) {
  v1::ReplaceMemberRequest r;
  r.set_allocation_id(id);
  r.set_member(member);
  return r;
}

std::map<std::string, std::string> CircuitsById(const v1::Allocation& a) {
  std::map<std::string, std::string> out;
  for (const v1::Circuit& c : a.circuits()) {
    out[c.id()] =
        absl::StrCat(c.source().ShortDebugString(), " ", c.destination().ShortDebugString(), " ",
                     c.cross_connects(0).ShortDebugString());
  }
  return out;
}

// fleetd dies after a member change is stored and before the switch hears of it: the old
// member's cross-connects are on the switch, no circuit wants them. A restart takes them off
// in the batch that makes the new ones.
TEST_F(EngineTest, AMemberChangeACrashInterruptsTakesTheOldCrossConnectsOffAtRestart) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  engine_.reset();

  // What ReplaceMember commits (the planner's replacement of gpu3), and nothing after it.
  const std::vector<v1::Circuit> circuits = store_->ListCircuits({}).value();
  const scheduler::FabricSnapshot snapshot =
      scheduler::FabricSnapshot::Build(site_, store_->ListPorts("").value(), circuits, {a});
  absl::StatusOr<scheduler::Replacement> plan = scheduler::PlanReplacement(snapshot, a, "gpu3", "");
  ASSERT_THAT(plan.status(), IsOk());
  store::CircuitReplacement r;
  r.allocation_id = a.id();
  r.state = v1::ALLOCATION_STATE_PROGRAMMING;
  r.members = plan->members;
  int next = a.circuits_size() + 1;
  for (const v1::Circuit& c : plan->phases.at(0).diff.remove) r.remove.push_back(c.id());
  for (v1::Circuit c : plan->phases.at(0).diff.add) {
    c.set_id(absl::StrCat(a.id(), "-c", next++));
    c.set_allocation_id(a.id());
    c.set_state(v1::CIRCUIT_STATE_PLANNED);
    r.add.push_back(std::move(c));
  }
  ASSERT_THAT(r.remove, SizeIs(2));
  ASSERT_THAT(store_->ReplaceCircuits(r, "operator:test").status(), IsOk());
  ASSERT_THAT(store_->PendingRemovals(a.id()).value_or(std::vector<v1::CrossConnect>{}), SizeIs(2));
  ASSERT_EQ(OnSwitch(), Wanted(a));  // The switch still has the old member's cross-connects.

  // Even a site that adopts unknown cross-connects leaves them to the resumed transaction:
  // they are not unknown, only not yet removed.
  EngineOptions adopting;
  adopting.unknown_policy = v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT;
  StartEngine(adopting);
  engine_->WaitIdle();
  EXPECT_THAT(store_->ListCircuits({}).value(),
              Not(Contains(::testing::Property(&v1::Circuit::manual, true))));
  const v1::Allocation after = Get(a.id());
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
  EXPECT_THAT(after.members(), ElementsAre("gpu1", "gpu2", "gpu5", "gpu4"));
  EXPECT_EQ(OnSwitch(), Wanted(after));
  EXPECT_THAT(store_->PendingRemovals(a.id()).value_or(std::vector<v1::CrossConnect>{1}),
              IsEmpty());
}

v1::ActivatePhaseRequest PhaseRequest(const std::string& id, const std::string& phase) {
  v1::ActivatePhaseRequest r;
  r.set_id(id);
  r.set_phase(phase);
  return r;
}

// A job that acts on READY at once may find the transaction still finishing (it holds the
// allocation for its last steps after storing READY): the change waits for it, it is not
// refused.
TEST_F(EngineTest, AChangeAskedForAsSoonAsReadyWaitsForTheTransactionToLetGo) {
  std::thread asker;
  absl::Status replaced = absl::UnknownError("not asked");
  HoldFirstReady([&](const std::string& id) {
    asker = std::thread([&, id] {
      replaced = engine_->ReplaceMember(Replace(id, "gpu3"), Caller::FromPrincipal("operator:test"))
                     .status();
    });
    // The transaction still holds the allocation while the change is asked for.
    absl::SleepFor(absl::Milliseconds(50));
  });
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_TRUE(asker.joinable());
  asker.join();
  EXPECT_THAT(replaced, IsOk());
  engine_->WaitIdle();
  EXPECT_THAT(Get(a.id()).members(), ElementsAre("gpu1", "gpu2", "gpu5", "gpu4"));
}

// A job told READY switches phase at once while the transaction that stored READY still
// holds the allocation, and holds it longer than a moment (2.5 s here, past the 2 s the
// engine once waited before refusing ABORTED): the switch waits for it and is accepted.
TEST_F(EngineTest, APhaseSwitchSentOnReadyIsAcceptedHoweverLongTheTransactionHoldsOn) {
  std::thread asker;
  absl::Status switched = absl::UnknownError("not asked");
  HoldFirstReady([&](const std::string& id) {
    asker = std::thread([&, id] {
      switched = engine_->ActivatePhase(PhaseRequest(id, "tp"), Caller::FromPrincipal("job:team-a"))
                     .status();
    });
    // Not a synchronization: how long the last step holds on is what the test is about.
    absl::SleepFor(absl::Milliseconds(2500));
  });
  v1::Allocation a = Request(Phased("team-a"), "job:team-a");
  ASSERT_TRUE(asker.joinable());
  asker.join();
  EXPECT_THAT(switched, IsOk());
  engine_->WaitIdle();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << now.reason();
  EXPECT_EQ(now.active_phase(), "tp");
}

// A change whose caller stops waiting (its RPC's deadline passes) while another holds the
// allocation is refused, not done after the caller was told it failed.
TEST_F(EngineTest, AChangeWaitingPastItsCallersDeadlineIsRefusedAndNotDone) {
  absl::Status switched = absl::UnknownError("not asked");
  HoldFirstReady([&](const std::string& id) {
    Caller caller = Caller::FromPrincipal("job:team-a");
    caller.deadline = absl::Now() + absl::Milliseconds(100);
    // It gives up while the transaction still holds the allocation.
    std::thread([&] {
      switched = engine_->ActivatePhase(PhaseRequest(id, "tp"), caller).status();
    }).join();
  });
  v1::Allocation a = Request(Phased("team-a"), "job:team-a");
  EXPECT_THAT(switched, StatusIs(absl::StatusCode::kAborted, HasSubstr("another change")));
  engine_->WaitIdle();
  EXPECT_EQ(Get(a.id()).active_phase(), "dp");
  EXPECT_EQ(Get(a.id()).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, ReplaceMemberSwapsInASpareAndReprogramsOnlyItsCircuits) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const int changes = sw_->changes();
  const int retrains = agents_->Count(v1::Command::kRetrain);
  const std::map<std::string, std::string> before = CircuitsById(a);
  const Caller op = Caller::FromPrincipal("operator:test");

  // A dry run plans and changes nothing.
  v1::ReplaceMemberRequest dry = Replace(a.id(), "gpu3");
  dry.set_dry_run(true);
  absl::StatusOr<v1::ReplaceMemberResponse> planned = engine_->ReplaceMember(dry, op);
  ASSERT_THAT(planned.status(), IsOk());
  EXPECT_THAT(planned->plan().members(), ElementsAre("gpu1", "gpu2", "gpu5", "gpu4"));
  EXPECT_EQ(sw_->changes(), changes);
  EXPECT_EQ(CircuitsById(Get(a.id())), before);

  absl::StatusOr<v1::ReplaceMemberResponse> replaced =
      engine_->ReplaceMember(Replace(a.id(), "gpu3"), op);
  ASSERT_THAT(replaced.status(), IsOk());
  EXPECT_EQ(replaced->allocation().state(), v1::ALLOCATION_STATE_PROGRAMMING);
  engine_->WaitIdle();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << now.reason();
  // The best free GPU (healthy, same fit and pool, then by id) stands in for gpu3.
  EXPECT_THAT(now.members(), ElementsAre("gpu1", "gpu2", "gpu5", "gpu4"));
  EXPECT_EQ(OnSwitch(), Wanted(now));
  for (const v1::Circuit& c : now.circuits()) {
    EXPECT_EQ(c.state(), v1::CIRCUIT_STATE_ACTIVE) << c.id();
    EXPECT_NE(c.source().onic(), "gpu3-n0");
    EXPECT_NE(c.destination().onic(), "gpu3-n0");
  }
  // The two circuits not touching gpu3 are the same rows; gpu2→gpu3 and gpu3→gpu4 are
  // replaced by two new ones.
  const std::map<std::string, std::string> after = CircuitsById(now);
  int kept = 0;
  for (const auto& [id, circuit] : before) {
    if (circuit.find("gpu3-n0") != std::string::npos) {
      EXPECT_FALSE(after.contains(id)) << id;
    } else {
      EXPECT_EQ(after.at(id), circuit);
      ++kept;
    }
  }
  EXPECT_EQ(kept, 2);
  EXPECT_EQ(after.size(), 4u);
  EXPECT_THAT(store_->PendingRemovals(a.id()).value_or(std::vector<v1::CrossConnect>{1}),
              IsEmpty());
  EXPECT_EQ(replaced->plan().remove_size(), 2);
  EXPECT_EQ(replaced->plan().add_size(), 2);
  // The switch changed exactly the differing cross-connects; only the new links retrained.
  EXPECT_EQ(sw_->changes() - changes, replaced->plan().remove_size() + replaced->plan().add_size());
  EXPECT_GE(agents_->Count(v1::Command::kRetrain) - retrains, 2);
  // gpu3 is free again: another tenant can use it.
  EXPECT_EQ(Request(Link("team-b", "gpu3", "gpu6")).state(), v1::ALLOCATION_STATE_READY);
  std::string story;
  for (const std::string& k : EventKinds(a.id())) story += k.substr(0, k.find(':')) + " ";
  EXPECT_THAT(story, HasSubstr("allocation.replace allocation.state allocation.state "
                               "allocation.state"));
}

// gpu1 and gpu2 attached to server1, one duplex link each.
v1::RequestTopologyRequest Attach(const std::string& tenant) {
  v1::RequestTopologyRequest r;
  r.set_tenant(tenant);
  r.set_name("virtual-server");
  r.mutable_topology()->mutable_attach()->set_host("server1");
  for (const char* gpu : {"gpu1", "gpu2"}) {
    r.mutable_topology()->mutable_attach()->mutable_devices()->add_devices(gpu);
  }
  return r;
}

// As for a replacement, but nothing new uses the detached device's ports: reconciliation at
// restart must leave its cross-connects to the resumed detach, even under `adopt`.
TEST_F(EngineTest, ADetachACrashInterruptsIsFinishedAtRestartNotAdopted) {
  v1::Allocation a = Request(Attach("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  engine_.reset();
  store::CircuitReplacement r;  // What DetachDevices commits for gpu1, and nothing after it.
  r.allocation_id = a.id();
  r.state = v1::ALLOCATION_STATE_PROGRAMMING;
  for (const std::string& m : a.members()) {
    if (m != "gpu1") r.members.push_back(m);
  }
  for (const v1::Circuit& c : a.circuits()) {
    if (c.source().onic() == "gpu1-n0" || c.destination().onic() == "gpu1-n0") {
      r.remove.push_back(c.id());
    }
  }
  ASSERT_THAT(r.remove, SizeIs(2));
  ASSERT_THAT(store_->ReplaceCircuits(r, "job:team-a").status(), IsOk());
  const int quiesces = agents_->Count(v1::Command::kQuiesce);

  EngineOptions adopting;
  adopting.unknown_policy = v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT;
  StartEngine(adopting);
  engine_->WaitIdle();
  const v1::Allocation after = Get(a.id());
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
  EXPECT_THAT(after.circuits(), SizeIs(2));
  EXPECT_EQ(OnSwitch(), Wanted(after));
  EXPECT_THAT(store_->ListCircuits({}).value(),
              Not(Contains(::testing::Property(&v1::Circuit::manual, true))));
  // gpu1's port and the host port it used lost their light quiesced first.
  EXPECT_GE(agents_->Count(v1::Command::kQuiesce) - quiesces, 2);
}

TEST_F(EngineTest, DetachTakesOneDeviceOffAVirtualServerAndLeavesTheRest) {
  v1::Allocation a = Request(Attach("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  ASSERT_THAT(a.circuits(), SizeIs(4));
  std::vector<v1::Circuit> kept;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.source().onic() != "gpu1-n0" && c.destination().onic() != "gpu1-n0") kept.push_back(c);
  }
  ASSERT_THAT(kept, SizeIs(2));
  const int retrains = agents_->Count(v1::Command::kRetrain);
  const Caller job = Caller::FromPrincipal("job:team-a");

  v1::DetachDevicesRequest detach;
  detach.set_id(a.id());
  detach.add_devices("gpu1");
  detach.set_dry_run(true);
  absl::StatusOr<v1::DetachDevicesResponse> dry = engine_->DetachDevices(detach, job);
  ASSERT_THAT(dry.status(), IsOk());
  EXPECT_THAT(dry->plan().remove(), SizeIs(2));
  EXPECT_THAT(dry->plan().ports_used(), SizeIs(2));  // gpu1's port and the host port it used.
  EXPECT_THAT(dry->plan().members(), Not(Contains("gpu1")));
  EXPECT_THAT(Get(a.id()).circuits(), SizeIs(4));  // The dry run changed nothing.

  detach.set_dry_run(false);
  ASSERT_THAT(engine_->DetachDevices(detach, job).status(), IsOk());
  engine_->WaitIdle();
  const v1::Allocation after = Get(a.id());
  EXPECT_EQ(after.state(), v1::ALLOCATION_STATE_READY) << after.reason();
  ASSERT_THAT(after.circuits(), SizeIs(2));
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(after.circuits(i).id(), kept[i].id());  // Kept as they were, not retrained.
    EXPECT_EQ(after.circuits(i).state(), v1::CIRCUIT_STATE_ACTIVE);
  }
  EXPECT_EQ(agents_->Count(v1::Command::kRetrain), retrains);
  EXPECT_THAT(after.members(), Not(Contains("gpu1")));
  EXPECT_THAT(after.members(), Contains("gpu2"));
  EXPECT_EQ(OnSwitch(), Wanted(after));
  EXPECT_THAT(EventKinds(a.id()), Contains(HasSubstr("allocation.detach:")));
  // gpu1 is free for another job.
  EXPECT_EQ(Request(Link("team-b", "gpu1", "gpu3")).state(), v1::ALLOCATION_STATE_READY);
}

TEST_F(EngineTest, DetachRefusalsNameTheProblemAndChangeNothing) {
  v1::Allocation a = Request(Attach("team-a"));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  v1::Allocation ring = Request(Ring("team-a", {"gpu5", "gpu6"}));
  const Caller job = Caller::FromPrincipal("job:team-a");
  auto detach = [&](const std::string& id, std::vector<std::string> devices, const Caller& caller) {
    v1::DetachDevicesRequest r;
    r.set_id(id);
    for (const std::string& d : devices) r.add_devices(d);
    return engine_->DetachDevices(r, caller).status();
  };
  EXPECT_THAT(detach(a.id(), {}, job),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("none given")));
  EXPECT_THAT(detach(a.id(), {"gpu1", "gpu1"}, job),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("named twice")));
  EXPECT_THAT(detach(a.id(), {"gpu7"}, job),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("devices[0]: gpu7 is not a member of allocation " + a.id())));
  EXPECT_THAT(detach(a.id(), {"server1-cpu0"}, job),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("server1-cpu0 is a device of host server1")));
  EXPECT_THAT(detach(a.id(), {"gpu1", "gpu2"}, job),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("release allocation " + a.id() + " instead")));
  EXPECT_THAT(detach(ring.id(), {"gpu5"}, job),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is not an attach")));
  EXPECT_THAT(detach(a.id(), {"gpu1"}, Caller::FromPrincipal("job:team-b")),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  const v1::Allocation same = Get(a.id());
  EXPECT_THAT(same.circuits(), SizeIs(4));
  EXPECT_EQ(same.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(OnSwitch().size(), Wanted(same).size() + Wanted(ring).size());
}

TEST_F(EngineTest, ReplaceMemberRefusalsNameTheProblem) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  const Caller op = Caller::FromPrincipal("operator:test");
  EXPECT_THAT(
      engine_->ReplaceMember(Replace(a.id(), "gpu3"), Caller::FromPrincipal("job:team-a")).status(),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("operators")));
  EXPECT_THAT(engine_->ReplaceMember(Replace(a.id(), "gpu7"), op).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("has no member gpu7")));
  // Every other GPU busy (gpu5..gpu7) or drained (gpu8): no spare.
  ASSERT_EQ(Request(Ring("team-b", {"gpu5", "gpu6", "gpu7"})).state(), v1::ALLOCATION_STATE_READY);
  v1::DrainRequest drain;
  drain.mutable_target()->set_onic("gpu8-n0");
  ASSERT_THAT(engine_->Drain(drain, op).status(), IsOk());
  const int changes = sw_->changes();
  EXPECT_THAT(engine_->ReplaceMember(Replace(a.id(), "gpu3"), op).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       ::testing::AllOf(HasSubstr("no free spare of kind gpu on switch ocs1"),
                                        HasSubstr("gpu3"))));
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY);
  EXPECT_THAT(now.members(), ElementsAre("gpu1", "gpu2", "gpu3", "gpu4"));
  EXPECT_EQ(sw_->changes(), changes);
  // Undrained, gpu8 is the spare.
  v1::UndrainRequest undrain;
  undrain.mutable_target()->set_onic("gpu8-n0");
  ASSERT_THAT(engine_->Undrain(undrain, op), IsOk());
  ASSERT_THAT(engine_->ReplaceMember(Replace(a.id(), "gpu3"), op).status(), IsOk());
  engine_->WaitIdle();
  now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_READY) << now.reason();
  EXPECT_THAT(now.members(), ElementsAre("gpu1", "gpu2", "gpu8", "gpu4"));
  EXPECT_EQ(OnSwitch(), [&] {
    std::set<CrossConnect> both = Wanted(now);
    const std::set<CrossConnect> theirs = Wanted(
        store_->ListAllocations({"team-b", v1::ALLOCATION_STATE_UNSPECIFIED, false}).value()[0]);
    both.insert(theirs.begin(), theirs.end());
    return both;
  }());
}

TEST_F(EngineTest, ReplacementTheSwitchRefusesFailsAndLeavesTheSwitchClean) {
  v1::Allocation a = Request(Ring("team-a", {"gpu1", "gpu2", "gpu3", "gpu4"}));
  ASSERT_EQ(a.state(), v1::ALLOCATION_STATE_READY) << a.reason();
  sw_->FailNextApplyAfter(1);
  ASSERT_THAT(
      engine_->ReplaceMember(Replace(a.id(), "gpu3"), Caller::FromPrincipal("operator:test"))
          .status(),
      IsOk());
  engine_->WaitIdle();
  v1::Allocation now = Get(a.id());
  EXPECT_EQ(now.state(), v1::ALLOCATION_STATE_FAILED);
  EXPECT_THAT(now.reason(), HasSubstr("program failed"));
  EXPECT_THAT(now.circuits(), IsEmpty());
  EXPECT_THAT(OnSwitch(), IsEmpty());
  // Every GPU is free again.
  EXPECT_EQ(Request(Ring("team-b", {"gpu1", "gpu2", "gpu3", "gpu4"})).state(),
            v1::ALLOCATION_STATE_READY);
}

}  // namespace
}  // namespace fleet::engine
