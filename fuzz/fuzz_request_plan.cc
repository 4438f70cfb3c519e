// libFuzzer target: a RequestTopology as admission plans it. The input is a serialized
// fleet.v1.RequestTopologyRequest (inputs that do not parse are dropped); it goes through
// scheduler::PlanRequestPhases — the request's limits, then every phase planned — against
// the demo site (deploy/inventory/fleet-gen1.yaml, idle) loaded the way fleetd loads it:
// inventory applied to a store, the snapshot built from what the store reads back.
//
// Any request must be planned or refused with a status, quickly, never crash or hang; each
// phase planned must be legal on that site: no switch port, O-NIC tx or O-NIC rx used twice,
// only ports that were usable and free.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "common/clock.h"
#include "controller/inventory/inventory.h"
#include "controller/store/store.h"
#include "scheduler/fabric_snapshot.h"
#include "scheduler/request_plan.h"
#include "testing/fake_clock.h"

namespace {

using fleet::scheduler::FabricSnapshot;
using fleet::scheduler::PlannedPhase;

void Check(bool invariant) {
  if (!invariant) std::abort();
}

void Die(const absl::Status& status) {
  fprintf(stderr, "fuzz_request_plan: cannot load the demo site: %s\n",
          std::string(status.message()).c_str());
  std::exit(1);
}

// The demo site as the engine sees it: applied to a store, read back with its ports.
FabricSnapshot LoadDemoSite() {
  static fleet::testing::FakeClock clock;
  absl::StatusOr<std::unique_ptr<fleet::store::Store>> store =
      fleet::store::OpenSqliteStore({.path = ":memory:", .clock = &clock});
  if (!store.ok()) Die(store.status());
  absl::StatusOr<fleet::v1::Inventory> file =
      fleet::inventory::ReadInventoryFile(FLEET_DEMO_INVENTORY);
  if (!file.ok()) Die(file.status());
  fleet::inventory::InventoryApplier applier(store->get());
  if (auto applied = applier.Apply(*file, {}, "fuzz"); !applied.ok()) {
    Die(applied.status());
  }
  absl::StatusOr<fleet::v1::Inventory> site = (*store)->LoadInventory();
  if (!site.ok()) Die(site.status());
  absl::StatusOr<std::vector<fleet::v1::SwitchPort>> ports = (*store)->ListPorts("");
  if (!ports.ok()) Die(ports.status());
  return FabricSnapshot::Build(*site, *ports, {}, {});
}

// Built once, before the first input: libFuzzer's entry points take no state of their own.
const FabricSnapshot* snapshot = nullptr;

void CheckLegal(const PlannedPhase& phase) {
  std::set<std::tuple<std::string, uint32_t>> ingresses, egresses;
  for (const fleet::v1::CrossConnect& x : phase.plan.add()) {
    Check(ingresses.emplace(x.switch_id(), x.ingress()).second);
    Check(egresses.emplace(x.switch_id(), x.egress()).second);
  }
  std::set<std::pair<std::string, uint32_t>> tx, rx;
  for (const fleet::v1::Circuit& c : phase.plan.circuits()) {
    Check(c.phase() == phase.name);
    const fleet::scheduler::OnicPortState* source =
        snapshot->Port(c.source().onic(), c.source().port());
    const fleet::scheduler::OnicPortState* destination =
        snapshot->Port(c.destination().onic(), c.destination().port());
    Check(source != nullptr && source->Free() && destination != nullptr && destination->Free());
    Check(tx.emplace(c.source().onic(), c.source().port()).second);
    Check(rx.emplace(c.destination().onic(), c.destination().port()).second);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Most mutated inputs are not a valid proto (a string that is not UTF-8, say): dropped, as
  // gRPC drops them, without protobuf logging each.
  google::protobuf::SetLogHandler(nullptr);
  snapshot = new FabricSnapshot(LoadDemoSite());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fleet::v1::RequestTopologyRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return -1;  // Not kept.
  // The engine names the caller's tenant when the request names none.
  if (request.tenant().empty()) request.set_tenant("fuzz");
  absl::StatusOr<std::vector<PlannedPhase>> phases =
      fleet::scheduler::PlanRequestPhases(*snapshot, request);
  if (!phases.ok()) {
    Check(!phases.status().message().empty());
    return 0;
  }
  Check(!phases->empty());
  for (const PlannedPhase& phase : *phases) CheckLegal(phase);
  (void)fleet::scheduler::CombinePhases(*phases, request.initial_phase());
  return 0;
}
