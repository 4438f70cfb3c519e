// Allocations and their circuits: the desired circuits (of an allocation, or manual), the
// cross-connects a replacement took out of the desired set until the switch lets go of them,
// and the cross-connects each switch was last observed to hold.
//
// Invariants 1 and 2 of docs/architecture.md §3 hold at every commit: no port (switch port or
// O-NIC port) is in two desired circuits, and every circuit belongs to one live allocation or
// is manual. A write that would break one fails with FAILED_PRECONDITION (or ALREADY_EXISTS
// for a known id) naming what is in the way, and writes nothing. Invariant 3 (no new circuit
// on a drained, failed or reserved port) is checked at admission, above the store. Each write
// is one transaction with its event (controller/store/store.h). Thread-safe.
#ifndef FLEET_CONTROLLER_STORE_ALLOCATION_STORE_H_
#define FLEET_CONTROLLER_STORE_ALLOCATION_STORE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fleet/v1/common.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::store {

struct AllocationFilter {
  std::string tenant;                                            // Empty: any.
  v1::AllocationState state = v1::ALLOCATION_STATE_UNSPECIFIED;  // Unspecified: any live state.
  bool include_released = false;
};

// An InventoryVersion (InventoryStore) a write was planned on. A write that carries one other
// than kAnyInventory fails ABORTED, naming both versions and writing nothing, when the version
// has moved since: a port it gives new light may have been removed, drained or failed
// meanwhile (invariant 3).
inline constexpr uint64_t kAnyInventory = 0;

struct CircuitFilter {
  std::string switch_id = {};      // Empty: any.
  std::string allocation_id = {};  // Empty: any.
  std::string onic = {};           // Empty: any; else those with an end on this O-NIC.
};

// One change of an allocation, written with its event in one transaction. Unset fields are
// left as they are.
struct AllocationUpdate {
  std::string id;
  std::optional<v1::AllocationState> state;
  std::optional<std::string> reason;
  // Replaces the stored timings when set.
  std::optional<std::vector<v1::StageTiming>> stage_timings;
  std::optional<absl::Time> lease_expires;
  // The phase whose circuits are desired now; its circuits' changes come in `circuits`.
  std::optional<std::string> active_phase;
  // New state and reason of some of the allocation's circuits, by circuit id.
  struct CircuitChange {
    v1::CircuitState state = v1::CIRCUIT_STATE_UNSPECIFIED;
    std::string reason;
  };
  std::map<std::string, CircuitChange> circuits;
  // Set when a release starts: how it is to end once the circuits are off the switches.
  struct ReleaseIntent {
    v1::AllocationState state = v1::ALLOCATION_STATE_RELEASED;  // RELEASED or FAILED.
    std::string reason;
  };
  std::optional<ReleaseIntent> release;
  // Deletes every circuit of the allocation (and its cross-connects): a FAILED or RELEASED
  // allocation holds none, and its ports are free for others from this commit on.
  bool remove_circuits = false;
  // The event appended with the change. Kind defaults to `allocation.state`.
  std::string event_kind;
  std::string event_message;
  v1::EventSeverity severity = v1::EVENT_SEVERITY_INFO;
  // Set when the update makes circuits desired (a phase switch): the version they were
  // checked usable at.
  uint64_t planned_at_inventory = kAnyInventory;
};

// A member replacement, written in one transaction: circuits of the allocation taken out of
// the desired set (deleted, with their cross-connects) and new ones stored, the members
// replaced, the allocation's state set and the event appended.
struct CircuitReplacement {
  std::string allocation_id;
  std::vector<std::string> remove;   // Ids of the allocation's circuits to delete.
  std::vector<v1::Circuit> add;      // New circuits with ids; ports checked as CreateAllocation's.
  std::vector<std::string> members;  // The allocation's members after, in order.
  std::optional<v1::AllocationState> state;
  std::string event_kind = "allocation.replace";
  std::string event_message;
  // Appended to the allocation's replacements, its `time` set to the commit's.
  std::optional<v1::MemberReplacement> record;
  // The version the new circuits were planned on.
  uint64_t planned_at_inventory = kAnyInventory;
};

class AllocationStore {
 public:
  virtual ~AllocationStore() = default;

  // --- Allocations and their circuits. ---
  // Persists a new allocation with its members and circuits (the engine's "persist intent").
  // ALREADY_EXISTS for a known id; FAILED_PRECONDITION when a circuit's port or
  // cross-connect is already in a desired circuit (invariant 1); ABORTED when planned on an
  // inventory version that has moved (kAnyInventory). Either refusal writes nothing.
  virtual absl::Status CreateAllocation(const v1::Allocation& allocation,
                                        const std::string& principal,
                                        uint64_t planned_at_inventory) = 0;
  absl::Status CreateAllocation(const v1::Allocation& allocation, const std::string& principal) {
    return CreateAllocation(allocation, principal, kAnyInventory);
  }
  // A live allocation (or one that holds circuits) is read from memory
  // (controller/store/desired_index.h), as is a list of one live state: they wait for no
  // write's SQLite work, and see every write that has returned. Others come from the database.
  virtual absl::StatusOr<v1::Allocation> GetAllocation(const std::string& id) = 0;
  virtual absl::StatusOr<std::vector<v1::Allocation>> ListAllocations(
      const AllocationFilter& filter) = 0;
  // The oldest allocation of `tenant` created for request `request_id` (its idempotency key,
  // RequestTopologyRequest.request_id), ended ones included; nullopt when there is none or
  // `request_id` is empty. Found through an index, not by reading the tenant's history.
  virtual absl::StatusOr<std::optional<v1::Allocation>> FindRequest(
      const std::string& tenant, const std::string& request_id) = 0;
  // Read from memory, as above.
  virtual absl::StatusOr<std::vector<v1::Circuit>> ListCircuits(const CircuitFilter& filter) = 0;
  // The ids of the allocations whose lease has passed by `now` and that are not RELEASING,
  // FAILED or RELEASED, the longest passed first: read through an index of the live leases,
  // not the whole table (the lease check runs every second).
  virtual absl::StatusOr<std::vector<std::string>> LeasesPassed(absl::Time now) = 0;
  // The release intent stored with AllocationUpdate::release; nullopt when no release of
  // the allocation has started. NOT_FOUND for an unknown allocation.
  virtual absl::StatusOr<std::optional<AllocationUpdate::ReleaseIntent>> ReleaseIntentOf(
      const std::string& id) = 0;
  // Applies `update` and appends its event in one transaction; returns the allocation as it
  // is after the commit. NOT_FOUND for an unknown allocation or a circuit id that is not
  // the allocation's; FAILED_PRECONDITION for a RELEASED allocation (history is not
  // rewritten); ABORTED as CreateAllocation's for `update.planned_at_inventory`.
  virtual absl::StatusOr<v1::Allocation> UpdateAllocation(const AllocationUpdate& update,
                                                          const std::string& principal) = 0;
  // Applies `replacement` in one transaction (removes before adds, so a new circuit may take
  // a cross-connect port a removed one held) and returns the allocation after the commit.
  // NOT_FOUND for an unknown allocation or a circuit that is not its; FAILED_PRECONDITION
  // for an allocation that is not live, or a new circuit on a port in another desired
  // circuit (nothing is written); ALREADY_EXISTS for a known new circuit id; ABORTED as
  // CreateAllocation's for `replacement.planned_at_inventory`.
  virtual absl::StatusOr<v1::Allocation> ReplaceCircuits(const CircuitReplacement& replacement,
                                                         const std::string& principal) = 0;
  // The cross-connects of the desired circuits ReplaceCircuits removed from allocation `id`,
  // recorded in the same transaction, until ClearPendingRemovals: what the switch may still
  // hold for it though no circuit wants it.
  virtual absl::StatusOr<std::vector<v1::CrossConnect>> PendingRemovals(const std::string& id) = 0;
  // The switch has let go of them.
  virtual absl::Status ClearPendingRemovals(const std::string& id) = 0;
  // Records an operator's manual circuit (`manual` set, no allocation), e.g. a cross-connect
  // adopted by reconciliation. Same checks as CreateAllocation's circuits.
  virtual absl::Status CreateManualCircuit(const v1::Circuit& circuit,
                                           const std::string& principal) = 0;

  // --- Observed switch state (what reconciliation last read). ---
  // Replaces the observed cross-connects of `switch_id` with `observed`. Appends no event:
  // what a switch reports is not a change the fleet made.
  virtual absl::Status RecordObservedCrossConnects(
      const std::string& switch_id, const std::vector<v1::CrossConnect>& observed) = 0;
  virtual absl::StatusOr<std::vector<v1::CrossConnect>> ListObservedCrossConnects(
      const std::string& switch_id) = 0;

  // --- Counts, for metrics. ---
  // Allocations and circuits by state, in the store's text form (`ready`, `active`, ...);
  // states with none are absent. Circuits of RELEASED and FAILED allocations are gone.
  // Switch ports by health (`up` counts every port without a degraded or failed record) and
  // devices by health (`healthy` likewise).
  struct StateCounts {
    std::map<std::string, int64_t> allocations;
    std::map<std::string, int64_t> circuits;
    std::map<std::string, int64_t> switch_ports;
    std::map<std::string, int64_t> devices;
  };
  virtual absl::StatusOr<StateCounts> CountByState() = 0;
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_ALLOCATION_STORE_H_
