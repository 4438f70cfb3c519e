// The in-memory desired state (controller/store/desired_index.h) against the database: after
// every one of many random writes (allocations created for two tenants, moved through every
// live state, ended, circuits changed, joined and left the
// desired set, replaced and removed, manual circuits, events, refused writes, retention's
// pruning), and across a reopen, GetAllocation, ListAllocations and ListCircuits answer what
// a query of the committed database answers, for every allocation and filter.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/store/allocation_rows.h"
#include "tests/store/store_test_util.h"

namespace fleet::store {
namespace {

using namespace testing_util;  // NOLINT(build/namespaces): the store tests' shared helpers.

constexpr int kOnicsPerSwitch = 8;
constexpr int kOnics = 2 * kOnicsPerSwitch;
constexpr uint32_t kIngress = 32;  // Each switch has ingress 1-32 and egress 33-64.
constexpr int kTrunks = 4;         // Each way.

std::string SwitchOf(int onic) { return onic < kOnicsPerSwitch ? "s1" : "s2"; }
// O-NIC i's port p sends on its switch's ingress 2j+p and receives on egress 32+2j+p, j being
// its place on the switch. Trunk k leaves s1 on egress 49+k for s2's ingress 17+k, and s2 on
// egress 49+k for s1's ingress 17+k.
uint32_t Tx(int onic, uint32_t p) { return 2 * (onic % kOnicsPerSwitch) + p; }
uint32_t Rx(int onic, uint32_t p) { return kIngress + 2 * (onic % kOnicsPerSwitch) + p; }

// Two switches of kOnicsPerSwitch O-NICs each, joined by kTrunks trunks each way.
InventoryWrite RandomSite() {
  InventoryWrite write;
  v1::Inventory& inv = write.objects;
  inv.set_site("index");
  std::vector<uint32_t> reserved;
  for (uint32_t k = 0; k < kTrunks; ++k) {
    reserved.push_back(17 + k);
    reserved.push_back(49 + k);
  }
  *inv.add_switches() = MakeSwitch("s1", kIngress, kIngress, reserved);
  *inv.add_switches() = MakeSwitch("s2", kIngress, kIngress, reserved);
  for (int i = 0; i < kOnics; ++i) {
    const std::string device = absl::StrCat("gpu", i);
    *inv.add_devices() = MakeDevice(device, v1::DEVICE_KIND_GPU, "");
    std::vector<v1::SwitchPortRef> wiring;
    for (uint32_t p = 1; p <= 2; ++p) {
      wiring.push_back(PortRef(SwitchOf(i), Tx(i, p)));
      wiring.push_back(PortRef(SwitchOf(i), Rx(i, p)));
    }
    *inv.add_onics() = MakeOnic(absl::StrCat("n", i), device, absl::StrCat("SN", i), wiring);
  }
  for (uint32_t k = 0; k < kTrunks; ++k) {
    *inv.add_trunks() =
        MakeTrunk(absl::StrCat("up", k), PortRef("s1", 49 + k), PortRef("s2", 17 + k));
    *inv.add_trunks() =
        MakeTrunk(absl::StrCat("down", k), PortRef("s2", 49 + k), PortRef("s1", 17 + k));
  }
  return write;
}

class DesiredIndexTest : public StoreTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    path_ = dir_.File("fleet.db");
    OpenStore(path_);
    ASSERT_OK(store_->WriteInventory(RandomSite(), kOperator));
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    reader_ = std::move(db).value();
  }

  // A circuit from a random O-NIC port to another's, in `state`: over a random trunk when
  // they are on different switches.
  v1::Circuit RandomCircuit(v1::CircuitState state) {
    const int src = Pick(kOnics), dst = Pick(kOnics);
    const uint32_t src_port = 1 + Pick(2), dst_port = 1 + Pick(2);
    std::vector<v1::CrossConnect> hops;
    std::string trunk;
    if (SwitchOf(src) == SwitchOf(dst)) {
      hops.push_back(Xc(SwitchOf(src), Tx(src, src_port), Rx(dst, dst_port)));
    } else {
      const uint32_t k = Pick(kTrunks);
      hops.push_back(Xc(SwitchOf(src), Tx(src, src_port), 49 + k));
      hops.push_back(Xc(SwitchOf(dst), 17 + k, Rx(dst, dst_port)));
      trunk = absl::StrCat(SwitchOf(src) == "s1" ? "up" : "down", k);
    }
    v1::Circuit c = MakeCircuit(absl::StrCat("c", next_circuit_++), absl::StrCat("n", src),
                                src_port, absl::StrCat("n", dst), dst_port, hops, state,
                                state == v1::CIRCUIT_STATE_INACTIVE ? "b" : "a");
    if (!trunk.empty()) c.add_trunks(trunk);
    return c;
  }

  v1::CircuitState RandomState() {
    static constexpr v1::CircuitState kStates[] = {
        v1::CIRCUIT_STATE_PLANNED, v1::CIRCUIT_STATE_PROGRAMMED, v1::CIRCUIT_STATE_ACTIVE,
        v1::CIRCUIT_STATE_DEGRADED, v1::CIRCUIT_STATE_INACTIVE};
    return kStates[Pick(5)];
  }

  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(random_); }

  v1::AllocationState RandomLiveState() {
    static constexpr v1::AllocationState kStates[] = {
        v1::ALLOCATION_STATE_PENDING,  v1::ALLOCATION_STATE_PROGRAMMING,
        v1::ALLOCATION_STATE_TRAINING, v1::ALLOCATION_STATE_READY,
        v1::ALLOCATION_STATE_DEGRADED, v1::ALLOCATION_STATE_RELEASING};
    return kStates[Pick(6)];
  }

  // One random write; refusals (a port already held, a RELEASED allocation) are part of it.
  void RandomWrite() {
    const std::vector<v1::Allocation> live = Live();
    const int kind = Pick(live.empty() ? 2 : 9);
    if (kind == 0) {
      // Some created in the same microsecond, so the order is by creation, then id ("a10"
      // before "a9").
      clock_.Advance(absl::Microseconds(Pick(3)));
      std::vector<v1::Circuit> circuits;
      for (int n = 1 + Pick(3); n > 0; --n) circuits.push_back(RandomCircuit(RandomState()));
      Count(0, store_->CreateAllocation(
                   MakeAllocation(absl::StrCat("a", next_allocation_++), Pick(2) == 0 ? "t" : "u",
                                  RandomLiveState(), {"gpu0"}, circuits),
                   kOperator));
      return;
    }
    if (kind == 1) {
      v1::Circuit c = RandomCircuit(v1::CIRCUIT_STATE_ACTIVE);
      c.set_manual(true);
      c.set_phase("");
      Count(1, store_->CreateManualCircuit(c, kOperator));
      return;
    }
    const v1::Allocation& a = live[Pick(static_cast<int>(live.size()))];
    AllocationUpdate update;
    update.id = a.id();
    switch (kind) {
      case 2:
      case 3:  // Circuits change state, joining or leaving the desired set among others.
        for (const v1::Circuit& c : a.circuits()) {
          if (Pick(2) == 0) update.circuits[c.id()] = {RandomState(), absl::StrCat("r", Pick(9))};
        }
        update.state = RandomLiveState();
        Count(2, store_->UpdateAllocation(update, kOperator).status());
        return;
      case 4: {  // A member replaced: one circuit out, one in.
        CircuitReplacement r;
        r.allocation_id = a.id();
        if (a.circuits_size() > 0) r.remove.push_back(a.circuits(Pick(a.circuits_size())).id());
        r.add.push_back(RandomCircuit(v1::CIRCUIT_STATE_PLANNED));
        r.members = {"gpu1"};
        Count(4, store_->ReplaceCircuits(r, kOperator).status());
        return;
      }
      case 5:  // Released: its circuits go.
        update.state = Pick(2) == 0 ? v1::ALLOCATION_STATE_RELEASED : v1::ALLOCATION_STATE_FAILED;
        update.remove_circuits = true;
        Count(5, store_->UpdateAllocation(update, kOperator).status());
        return;
      case 7:  // Failed: refused while it holds circuits (invariant 2).
        update.state = v1::ALLOCATION_STATE_FAILED;
        Count(7, store_->UpdateAllocation(update, kOperator).status());
        return;
      case 8: {  // Retention prunes ended allocations that hold nothing.
        RetentionLimits limits;
        limits.max_count = Pick(3);
        absl::StatusOr<int64_t> pruned = store_->PruneEndedAllocations(limits, 100);
        Count(8, pruned.status());
        pruned_ += pruned.ok() ? *pruned : 0;
        return;
      }
      default: {  // An event about it, which reads its image back.
        v1::Event e;
        e.set_kind("allocation.note");
        e.set_object_kind("allocation");
        e.set_object_id(a.id());
        e.set_message("note");
        Count(6, store_->AppendEvent(e));
        return;
      }
    }
  }

  // Writes of each kind that committed, and that were refused.
  void Count(int kind, const absl::Status& s) { ++(s.ok() ? committed_ : refused_)[kind]; }

  std::vector<v1::Allocation> Live() {
    absl::StatusOr<std::vector<v1::Allocation>> live = store_->ListAllocations({});
    EXPECT_TRUE(live.ok()) << live.status();
    return live.ok() ? *live : std::vector<v1::Allocation>{};
  }

  // Every filter: none, each allocation, the switch, each O-NIC, and some combined.
  std::vector<CircuitFilter> Filters() {
    const auto filter = [](std::string switch_id, std::string allocation, std::string onic) {
      return CircuitFilter{std::move(switch_id), std::move(allocation), std::move(onic)};
    };
    std::vector<CircuitFilter> filters = {filter("", "", ""), filter("s1", "", ""),
                                          filter("s2", "", "")};
    for (int i = 0; i < next_allocation_; ++i) {
      filters.push_back(filter("", absl::StrCat("a", i), ""));
      filters.push_back(filter("s1", absl::StrCat("a", i), "n1"));
    }
    for (int i = 0; i < kOnics; ++i) {
      filters.push_back(filter("", "", absl::StrCat("n", i)));
      filters.push_back(filter("s1", "", absl::StrCat("n", i)));
    }
    return filters;
  }

  // The index answers as the committed database does.
  void ExpectIndexMatchesDatabase(int step) {
    for (int i = 0; i < next_allocation_; ++i) {
      const std::string id = absl::StrCat("a", i);
      absl::StatusOr<v1::Allocation> got = store_->GetAllocation(id);
      absl::StatusOr<std::vector<v1::Allocation>> stored = SelectAllocations(*reader_, id, {});
      ASSERT_TRUE(stored.ok()) << stored.status();
      if (stored->empty()) {
        ASSERT_EQ(got.status().code(), absl::StatusCode::kNotFound)
            << "step " << step << ", " << id;
        continue;
      }
      ASSERT_TRUE(got.ok()) << "step " << step << ", " << id << ": " << got.status();
      ASSERT_THAT(*got, EqualsProto(stored->front())) << "step " << step << ", " << id;
    }
    for (const std::string tenant : {"", "t", "u"}) {
      for (int state = v1::ALLOCATION_STATE_UNSPECIFIED; state <= v1::ALLOCATION_STATE_RELEASED;
           ++state) {
        for (bool released : {false, true}) {
          const AllocationFilter f{tenant, static_cast<v1::AllocationState>(state), released};
          absl::StatusOr<std::vector<v1::Allocation>> got = store_->ListAllocations(f);
          absl::StatusOr<std::vector<v1::Allocation>> stored = SelectAllocations(*reader_, "", f);
          ASSERT_TRUE(got.ok() && stored.ok());
          ASSERT_EQ(got->size(), stored->size())
              << "step " << step << ", tenant '" << tenant << "', state " << state;
          for (size_t i = 0; i < stored->size(); ++i) {
            ASSERT_THAT((*got)[i], EqualsProto((*stored)[i]))
                << "step " << step << ", tenant '" << tenant << "', state " << state << ", " << i;
          }
        }
      }
    }
    for (const CircuitFilter& f : Filters()) {
      absl::StatusOr<std::vector<v1::Circuit>> indexed = store_->ListCircuits(f);
      absl::StatusOr<std::vector<v1::Circuit>> stored = SelectCircuits(*reader_, f);
      ASSERT_TRUE(indexed.ok() && stored.ok());
      ASSERT_EQ(indexed->size(), stored->size())
          << "step " << step << ", filter {" << f.switch_id << ", " << f.allocation_id << ", "
          << f.onic << "}";
      for (size_t i = 0; i < stored->size(); ++i) {
        ASSERT_THAT((*indexed)[i], EqualsProto((*stored)[i]))
            << "step " << step << ", circuit " << i << " of filter {" << f.switch_id << ", "
            << f.allocation_id << ", " << f.onic << "}";
      }
    }
  }

  ScratchDir dir_;
  std::string path_;
  std::unique_ptr<Database> reader_;  // A second connection: what is committed.
  std::mt19937 random_{20261128};
  int next_allocation_ = 0;
  int next_circuit_ = 0;
  std::map<int, int> committed_, refused_;
  int crossing_ = 0;    // Circuits seen over a trunk, summed over the steps.
  int64_t pruned_ = 0;  // Allocations retention pruned.
};

TEST_F(DesiredIndexTest, AnswersAsTheDatabaseAfterEveryRandomWriteAndAcrossAReopen) {
  size_t most = 0;
  for (int step = 0; step < 400; ++step) {
    RandomWrite();
    ASSERT_NO_FATAL_FAILURE(ExpectIndexMatchesDatabase(step));
    absl::StatusOr<std::vector<v1::Circuit>> all = store_->ListCircuits({});
    most = std::max(most, all.ok() ? all->size() : 0);
    for (const v1::Circuit& c : all.ok() ? *all : std::vector<v1::Circuit>{}) {
      crossing_ += c.cross_connects_size() > 1;
    }
    if (step % 100 == 99) {  // What is loaded at open answers the same.
      ASSERT_NO_FATAL_FAILURE(OpenStore(path_));
      ASSERT_NO_FATAL_FAILURE(ExpectIndexMatchesDatabase(step));
    }
  }
  // The walk reached a busy fabric, over both switches and the trunks, committed every kind
  // of write and was refused some.
  EXPECT_GE(most, 10u);
  EXPECT_GT(crossing_, 0);
  for (int kind : {0, 1, 2, 4, 5, 6, 7, 8}) EXPECT_GT(committed_[kind], 0) << "kind " << kind;
  EXPECT_GT(refused_[0] + refused_[4], 0);
  EXPECT_GT(pruned_, 0);
}

// Readers by each kind of filter while a writer commits (under the sanitizers in CI too): each
// answer holds only what its filter selects, in the database's order, and once the writer
// stops the index answers as the database does.
TEST_F(DesiredIndexTest, ReadersDuringWritesGetWhatTheirFilterSelectsInOrder) {
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      const std::vector<CircuitFilter> filters = {
          {"", "", ""}, {"s2", "", ""}, {"", "", absl::StrCat("n", r)}};
      do {  // At least once, however soon the writer is done.
        for (const CircuitFilter& f : filters) {
          absl::StatusOr<std::vector<v1::Circuit>> got = store_->ListCircuits(f);
          ASSERT_TRUE(got.ok());
          for (size_t i = 0; i < got->size(); ++i) {
            const v1::Circuit& c = (*got)[i];
            if (i > 0) {
              ASSERT_LE((*got)[i - 1].allocation_id(), c.allocation_id());
            }
            if (!f.onic.empty()) {
              ASSERT_TRUE(c.source().onic() == f.onic || c.destination().onic() == f.onic);
            }
            if (!f.switch_id.empty()) {
              ASSERT_TRUE(std::any_of(
                  c.cross_connects().begin(), c.cross_connects().end(),
                  [&](const v1::CrossConnect& x) { return x.switch_id() == f.switch_id; }));
            }
          }
          ++reads;
        }
      } while (!done.load());
    });
  }
  for (int step = 0; step < 200; ++step) RandomWrite();
  done = true;
  for (std::thread& t : readers) t.join();
  ASSERT_NO_FATAL_FAILURE(ExpectIndexMatchesDatabase(200));
  EXPECT_GT(reads.load(), 0);
}

}  // namespace
}  // namespace fleet::store
