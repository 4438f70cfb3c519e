// The controller's durable state: inventory, allocations, desired circuits and the event log.
//
// Contract for every implementation:
// - Every write is one transaction: it commits whole or leaves nothing behind.
// - Invariants 1 and 2 of docs/architecture.md §3 (no port in two desired circuits; every
//   circuit belongs to one allocation or is manual) hold at every commit, and fibers or
//   trunks under a circuit cannot be rewired; a write that would break one fails with
//   FAILED_PRECONDITION (or ALREADY_EXISTS) naming what is in the way. Invariant 3 (no new
//   circuit on a drained, failed or reserved port) is checked at admission, above the store.
// - Each change appends at least one Event, in the same transaction, naming who asked.
// - Reads return NOT_FOUND naming the kind and id of a missing object.
// - Thread-safe: calls may come from any thread.
#ifndef FLEET_CONTROLLER_STORE_STORE_H_
#define FLEET_CONTROLLER_STORE_STORE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "fleet/v1/admin.pb.h"
#include "fleet/v1/common.pb.h"
#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::store {

struct DeviceFilter {
  std::string host;                                   // Empty: any.
  v1::DeviceKind kind = v1::DEVICE_KIND_UNSPECIFIED;  // Unspecified: any.
};

struct OnicFilter {
  std::string host;       // Empty: any.
  std::string switch_id;  // Empty: any; else O-NICs with a fiber on that switch.
};

struct AllocationFilter {
  std::string tenant;                                            // Empty: any.
  v1::AllocationState state = v1::ALLOCATION_STATE_UNSPECIFIED;  // Unspecified: any live state.
  bool include_released = false;
};

struct CircuitFilter {
  std::string switch_id;      // Empty: any.
  std::string allocation_id;  // Empty: any.
};

struct EventFilter {
  uint64_t after_sequence = 0;
  uint32_t limit = 1000;
  std::string object_kind;  // Empty: any.
  std::string object_id;    // Empty: any.
};

// What retention keeps of one kind of history (the event log, or ended allocations): the
// rest may be pruned. Zero in a field means no limit of that kind.
struct RetentionLimits {
  // Older than this by the store's clock goes: an event by its time, an ended allocation by
  // its last update, which is when it ended.
  absl::Duration max_age = absl::ZeroDuration();
  // Beyond the newest `max_count` goes.
  int64_t max_count = 0;
};

// The database's size, for metrics and retention.
struct StorageSize {
  int64_t page_size = 0;
  int64_t pages = 0;       // Free ones included.
  int64_t free_pages = 0;  // Not yet handed back to the file system.
  int64_t wal_bytes = 0;   // The write-ahead log file; 0 without one.
  int64_t bytes() const { return page_size * pages; }
};

// Objects to create or replace, each keyed by its id. Produced by the inventory planner
// (controller/inventory) after validating the whole merged site.
struct InventoryWrite {
  v1::Inventory objects;
  std::vector<std::string> created;  // "kind id" of each object that is new, for the log.
  std::vector<std::string> updated;  // "kind id" of each object that changed.
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
};

// What a drain or undrain names: exactly one of these.
struct DrainTargetRef {
  std::string switch_id;  // With port: a switch port.
  uint32_t port = 0;
  std::string onic;
  std::string host;
};

class Store {
 public:
  virtual ~Store() = default;

  // --- Inventory reads. Lists are ordered by id (ports by number). ---
  virtual absl::StatusOr<std::vector<v1::Switch>> ListSwitches() = 0;
  virtual absl::StatusOr<v1::Switch> GetSwitch(const std::string& id) = 0;
  // Every port of `switch_id` (all switches when empty) with reservation, wiring and the
  // desired circuit using it.
  virtual absl::StatusOr<std::vector<v1::SwitchPort>> ListPorts(const std::string& switch_id) = 0;
  virtual absl::StatusOr<std::vector<v1::Host>> ListHosts() = 0;
  virtual absl::StatusOr<v1::Host> GetHost(const std::string& name) = 0;
  virtual absl::StatusOr<std::vector<v1::Device>> ListDevices(const DeviceFilter& filter) = 0;
  virtual absl::StatusOr<v1::Device> GetDevice(const std::string& id) = 0;
  virtual absl::StatusOr<std::vector<v1::Onic>> ListOnics(const OnicFilter& filter) = 0;
  virtual absl::StatusOr<v1::Onic> GetOnic(const std::string& id) = 0;
  virtual absl::StatusOr<std::vector<v1::Trunk>> ListTrunks() = 0;
  // The whole site as an Inventory, the form an inventory file takes.
  virtual absl::StatusOr<v1::Inventory> LoadInventory() = 0;

  // --- Inventory writes. ---
  // Creates or replaces every object in `write.objects` in one transaction. Refuses with
  // FAILED_PRECONDITION, writing nothing, a change that would rewire an O-NIC port or
  // shrink a switch under a circuit. Administrative state (drain) is kept across updates.
  virtual absl::Status WriteInventory(const InventoryWrite& write,
                                      const std::string& principal) = 0;
  // Deletes one object (`switch`, `host`, `device`, `onic`, `trunk`) and what belongs only to
  // it. FAILED_PRECONDITION, deleting nothing, while anything uses it. Returns "kind id" of
  // everything deleted.
  virtual absl::StatusOr<std::vector<std::string>> DeleteObject(const std::string& kind,
                                                                const std::string& name,
                                                                const std::string& principal) = 0;

  // --- Allocations and circuits. ---
  // Persists a new allocation with its members and circuits (the engine's "persist intent").
  // ALREADY_EXISTS for a known id; FAILED_PRECONDITION when a circuit's port or
  // cross-connect is already in a desired circuit (invariant 1).
  virtual absl::Status CreateAllocation(const v1::Allocation& allocation,
                                        const std::string& principal) = 0;
  virtual absl::StatusOr<v1::Allocation> GetAllocation(const std::string& id) = 0;
  virtual absl::StatusOr<std::vector<v1::Allocation>> ListAllocations(
      const AllocationFilter& filter) = 0;
  virtual absl::StatusOr<std::vector<v1::Circuit>> ListCircuits(const CircuitFilter& filter) = 0;
  // The release intent stored with AllocationUpdate::release; nullopt when no release of
  // the allocation has started. NOT_FOUND for an unknown allocation.
  virtual absl::StatusOr<std::optional<AllocationUpdate::ReleaseIntent>> ReleaseIntentOf(
      const std::string& id) = 0;
  // Applies `update` and appends its event in one transaction; returns the allocation as it
  // is after the commit. NOT_FOUND for an unknown allocation or a circuit id that is not
  // the allocation's; FAILED_PRECONDITION for a RELEASED allocation (history is not
  // rewritten).
  virtual absl::StatusOr<v1::Allocation> UpdateAllocation(const AllocationUpdate& update,
                                                          const std::string& principal) = 0;
  // Applies `replacement` in one transaction (removes before adds, so a new circuit may take
  // a cross-connect port a removed one held) and returns the allocation after the commit.
  // NOT_FOUND for an unknown allocation or a circuit that is not its; FAILED_PRECONDITION
  // for an allocation that is not live, or a new circuit on a port in another desired
  // circuit (nothing is written); ALREADY_EXISTS for a known new circuit id.
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
  // Replaces the observed cross-connects of `switch_id` with `observed`.
  virtual absl::Status RecordObservedCrossConnects(
      const std::string& switch_id, const std::vector<v1::CrossConnect>& observed) = 0;
  virtual absl::StatusOr<std::vector<v1::CrossConnect>> ListObservedCrossConnects(
      const std::string& switch_id) = 0;

  // --- Administrative state. ---
  // Drains (or undrains) a switch port, an O-NIC or a host by setting its own admin state,
  // appending an event with `reason`; planning treats an O-NIC's ports and a host's devices
  // as drained with it. NOT_FOUND for an unknown
  // target, INVALID_ARGUMENT unless exactly one target is named. Idempotent.
  virtual absl::Status SetDrained(const DrainTargetRef& target, bool drained,
                                  const std::string& reason, const std::string& principal) = 0;

  // --- Counts, for metrics. ---
  // Allocations and circuits by state, in the store's text form (`ready`, `active`, ...);
  // states with none are absent. Circuits of RELEASED and FAILED allocations are gone.
  struct StateCounts {
    std::map<std::string, int64_t> allocations;
    std::map<std::string, int64_t> circuits;
  };
  virtual absl::StatusOr<StateCounts> CountByState() = 0;

  // --- Allocation commits, kept in memory for watchers. ---
  // A committed transaction that appended events about allocation `id`: the sequence of its
  // newest event, and the allocation as the transaction left it, read back inside it (null
  // only for an event about an allocation that does not exist). Shared: watchers copy the
  // commits, not the allocations.
  struct AllocationCommit {
    uint64_t sequence = 0;
    std::string id;
    std::shared_ptr<const v1::Allocation> allocation;
  };
  // Every allocation commit after event `after`, oldest first, one per allocation and
  // transaction, so a watcher follows each committed state without reading the database.
  // nullopt when the store no longer holds all of them (it keeps the most recent 1024): then
  // read the events and the allocations.
  virtual std::optional<std::vector<AllocationCommit>> AllocationCommitsAfter(uint64_t after) = 0;
  // The newest commit about allocation `id` the store holds; nullopt when it holds none.
  virtual std::optional<AllocationCommit> LastCommitted(const std::string& id) = 0;
  // Allocation `id` as the database holds it now, with the sequence of the newest committed
  // event: the state every commit up to that sequence left, and none after it. NOT_FOUND for
  // an unknown allocation.
  virtual absl::StatusOr<AllocationCommit> ReadAllocation(const std::string& id) = 0;
  // The allocations `filter` selects as the database holds them now, each with the sequence
  // of the newest committed event, in ListAllocations' order: one read for a watch of many.
  virtual absl::StatusOr<std::vector<AllocationCommit>> ReadAllocations(
      const AllocationFilter& filter) = 0;

  // --- Events. ---
  // Appends `event` with the next sequence number and the store's clock time.
  virtual absl::Status AppendEvent(const v1::Event& event) = 0;
  // Events after `filter.after_sequence`, oldest first. Retention prunes the log from its
  // oldest end only, so a reader whose next events were pruned gets the oldest kept ones:
  // sequences still only grow, and the newest event is never pruned.
  virtual absl::StatusOr<std::vector<v1::Event>> ListEvents(const EventFilter& filter) = 0;
  // Changes whenever inventory or administrative state (drain) is committed, so readers can
  // cache what LoadInventory and ListPorts return; circuits and allocations do not change it.
  virtual uint64_t InventoryVersion() = 0;
  // The sequence number of the newest event, 0 when there is none.
  virtual uint64_t LastEventSequence() = 0;
  // Blocks until an event newer than `after_sequence` has been committed (true) or
  // `deadline` passes (false). Lets watchers follow the log without polling.
  virtual bool WaitForEvent(uint64_t after_sequence, absl::Time deadline) = 0;

  // --- Retention: history past its keeping (controller/store/retention.h runs these in the
  // background). Each call is one short transaction, so that a request's commit waits for one
  // batch at most; a call that prunes fewer than `max_rows` found nothing more to prune. ---
  // Deletes up to `max_rows` of the oldest events `limits` no longer keeps (by count: those
  // below the newest `max_count` sequence numbers), oldest first and only while every older
  // one goes too, never the newest event. Raises the log's retention cut-off first: the
  // database refuses the deletion of any event at or above it.
  virtual absl::StatusOr<int64_t> PruneEvents(const RetentionLimits& limits, int max_rows) = 0;
  // Deletes up to `max_rows` of the oldest ended (RELEASED or FAILED) allocations `limits` no
  // longer keeps, oldest end first, with their rows in other tables (members, stage timings
  // and release intent are theirs). The count is over every ended allocation. Never one that
  // is live, nor an ended one still holding circuits or pending removals (the switch may hold
  // those cross-connects): those stay until the engine has cleared them.
  virtual absl::StatusOr<int64_t> PruneEndedAllocations(const RetentionLimits& limits,
                                                        int max_rows) = 0;
  // Hands up to `max_pages` free pages back to the file system, in a transaction of its own;
  // returns how many went.
  virtual absl::StatusOr<int64_t> ReclaimFreePages(int max_pages) = 0;
  // The database's size now.
  virtual absl::StatusOr<StorageSize> Storage() = 0;

  // --- Durability. Commits survive a crash of fleetd as soon as they return, but a power
  // loss of the host may take the last ones (synchronous=NORMAL). Sync makes every commit so
  // far survive that too; the services call it before they answer a change, so what a client
  // was told is done stays done (docs/engine.md, "Durability"). Cheap when nothing was
  // committed since the last sync; concurrent calls share one sync. ---
  virtual absl::Status Sync() = 0;
};

struct SqliteStoreOptions {
  std::string path;              // A file path, or ":memory:" for tests.
  const Clock* clock = nullptr;  // Not owned; must outlive the store.
};

// Opens the database, applies pending schema migrations and returns the store.
absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const SqliteStoreOptions& options);

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_STORE_H_
