// OpenSqliteStore: the SQLite aggregates over one connection, composed into a Store.
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "controller/store/allocation_rows.h"
#include "controller/store/changesets.h"
#include "controller/store/migrations.h"
#include "controller/store/queries.h"
#include "controller/store/sqlite.h"
#include "controller/store/sqlite_aggregates.h"
#include "controller/store/store.h"
#include "controller/store/store_connection.h"

namespace fleet::store {
namespace {

// The migration that gave a database its replicated log position (the table `replica`):
// an older one never was a replica's.
constexpr int kFirstReplicaSchema = 11;

// An older database as a replica before its migration (SqliteStoreOptions::before_migrating):
// entries apply to its tables as they are, and nothing reads it meanwhile.
class OlderSchemaReplica final : public LogReplica {
 public:
  explicit OlderSchemaReplica(Database& db) : db_(db) {}

  absl::Status ApplyReplicated(uint64_t entry, const std::string& bytes) override {
    ASSIGN_OR_RETURN(uint64_t applied, AppliedEntry(db_));
    if (entry <= applied) return absl::OkStatus();
    RETURN_IF_ERROR(CheckNextEntry(entry, applied));
    return ApplyLogEntry(db_, bytes, [&] { return SetAppliedEntry(db_, entry); });
  }
  absl::StatusOr<uint64_t> ReplicaPosition() override { return AppliedEntry(db_); }
  void EndReplicaPositionWaits() override {}

 private:
  Database& db_;
};

// Each call goes to the aggregate that answers it.
class SqliteStore final : public Store {
 public:
  // `last_sequence` is the newest event already in `db`; `allocations` and `manual` its
  // desired state (StoreConnection's constructor).
  SqliteStore(std::unique_ptr<Database> db, const SqliteStoreOptions& options,
              uint64_t last_sequence, uint64_t position,
              const std::vector<v1::Allocation>& allocations,
              const std::vector<v1::Circuit>& manual)
      : connection_(std::move(db), options.clock, options.commit_point, options.commit_log,
                    last_sequence, position, allocations, manual),
        inventory_(NewSqliteInventoryStore(connection_)),
        allocations_(NewSqliteAllocationStore(connection_)),
        events_(NewSqliteEventLog(connection_)),
        feed_(NewSqliteCommitFeed(connection_)),
        storage_(NewSqliteStorageControl(connection_)) {}

  absl::StatusOr<std::vector<v1::Switch>> ListSwitches() override {
    return inventory_->ListSwitches();
  }
  absl::StatusOr<v1::Switch> GetSwitch(const std::string& id) override {
    return inventory_->GetSwitch(id);
  }
  absl::StatusOr<std::vector<v1::SwitchPort>> ListPorts(const std::string& switch_id) override {
    return inventory_->ListPorts(switch_id);
  }
  absl::StatusOr<std::vector<v1::Host>> ListHosts() override { return inventory_->ListHosts(); }
  absl::StatusOr<v1::Host> GetHost(const std::string& name) override {
    return inventory_->GetHost(name);
  }
  absl::StatusOr<std::vector<v1::Device>> ListDevices(const DeviceFilter& filter) override {
    return inventory_->ListDevices(filter);
  }
  absl::StatusOr<v1::Device> GetDevice(const std::string& id) override {
    return inventory_->GetDevice(id);
  }
  absl::StatusOr<std::vector<v1::Onic>> ListOnics(const OnicFilter& filter) override {
    return inventory_->ListOnics(filter);
  }
  absl::StatusOr<v1::Onic> GetOnic(const std::string& id) override {
    return inventory_->GetOnic(id);
  }
  absl::StatusOr<std::vector<v1::Trunk>> ListTrunks() override { return inventory_->ListTrunks(); }
  absl::StatusOr<v1::Inventory> LoadInventory() override { return inventory_->LoadInventory(); }
  absl::Status WriteInventory(const InventoryWrite& write, const std::string& principal) override {
    return inventory_->WriteInventory(write, principal);
  }
  absl::StatusOr<std::vector<std::string>> DeleteObject(const std::string& kind,
                                                        const std::string& name,
                                                        const std::string& principal) override {
    return inventory_->DeleteObject(kind, name, principal);
  }
  absl::Status SetDrained(const DrainTargetRef& target, bool drained, const std::string& reason,
                          const std::string& principal) override {
    return inventory_->SetDrained(target, drained, reason, principal);
  }
  absl::Status SetPortHealth(const std::vector<PortHealth>& changes) override {
    return inventory_->SetPortHealth(changes);
  }
  absl::Status SetDeviceHealth(const std::string& device, v1::DeviceHealth health,
                               const std::string& reason, const std::string& principal) override {
    return inventory_->SetDeviceHealth(device, health, reason, principal);
  }
  absl::StatusOr<std::string> AppliedInventoryFile() override {
    return inventory_->AppliedInventoryFile();
  }
  absl::Status RecordAppliedInventoryFile(const std::string& record) override {
    return inventory_->RecordAppliedInventoryFile(record);
  }
  uint64_t InventoryVersion() override { return inventory_->InventoryVersion(); }

  using AllocationStore::CreateAllocation;
  absl::Status CreateAllocation(const v1::Allocation& allocation, const std::string& principal,
                                uint64_t planned_at_inventory) override {
    return allocations_->CreateAllocation(allocation, principal, planned_at_inventory);
  }
  absl::StatusOr<v1::Allocation> GetAllocation(const std::string& id) override {
    return allocations_->GetAllocation(id);
  }
  absl::StatusOr<std::vector<v1::Allocation>> ListAllocations(
      const AllocationFilter& filter) override {
    return allocations_->ListAllocations(filter);
  }
  absl::StatusOr<std::vector<v1::Circuit>> ListCircuits(const CircuitFilter& filter) override {
    return allocations_->ListCircuits(filter);
  }
  absl::StatusOr<std::optional<v1::Allocation>> FindRequest(
      const std::string& tenant, const std::string& request_id) override {
    return allocations_->FindRequest(tenant, request_id);
  }
  absl::StatusOr<std::vector<std::string>> LeasesPassed(absl::Time now) override {
    return allocations_->LeasesPassed(now);
  }
  absl::StatusOr<std::optional<AllocationUpdate::ReleaseIntent>> ReleaseIntentOf(
      const std::string& id) override {
    return allocations_->ReleaseIntentOf(id);
  }
  absl::StatusOr<v1::Allocation> UpdateAllocation(const AllocationUpdate& update,
                                                  const std::string& principal) override {
    return allocations_->UpdateAllocation(update, principal);
  }
  absl::StatusOr<v1::Allocation> ReplaceCircuits(const CircuitReplacement& replacement,
                                                 const std::string& principal) override {
    return allocations_->ReplaceCircuits(replacement, principal);
  }
  absl::StatusOr<std::vector<v1::CrossConnect>> PendingRemovals(const std::string& id) override {
    return allocations_->PendingRemovals(id);
  }
  absl::Status ClearPendingRemovals(const std::string& id) override {
    return allocations_->ClearPendingRemovals(id);
  }
  absl::Status CreateManualCircuit(const v1::Circuit& circuit,
                                   const std::string& principal) override {
    return allocations_->CreateManualCircuit(circuit, principal);
  }
  absl::Status RecordObservedCrossConnects(const std::string& switch_id,
                                           const std::vector<v1::CrossConnect>& observed) override {
    return allocations_->RecordObservedCrossConnects(switch_id, observed);
  }
  absl::StatusOr<std::vector<v1::CrossConnect>> ListObservedCrossConnects(
      const std::string& switch_id) override {
    return allocations_->ListObservedCrossConnects(switch_id);
  }
  absl::StatusOr<StateCounts> CountByState() override { return allocations_->CountByState(); }

  absl::Status AppendEvent(const v1::Event& event) override { return events_->AppendEvent(event); }
  absl::StatusOr<std::vector<v1::Event>> ListEvents(const EventFilter& filter) override {
    return events_->ListEvents(filter);
  }

  uint64_t LastEventSequence() override { return feed_->LastEventSequence(); }
  bool WaitForEvent(uint64_t after_sequence, absl::Time deadline) override {
    return feed_->WaitForEvent(after_sequence, deadline);
  }
  void SetCommitListener(std::function<void()> listener) override {
    feed_->SetCommitListener(std::move(listener));
  }
  std::optional<std::vector<AllocationCommit>> AllocationCommitsAfter(uint64_t after) override {
    return feed_->AllocationCommitsAfter(after);
  }
  std::optional<AllocationCommit> LastCommitted(const std::string& id) override {
    return feed_->LastCommitted(id);
  }
  absl::StatusOr<AllocationCommit> ReadAllocation(const std::string& id) override {
    return feed_->ReadAllocation(id);
  }
  absl::StatusOr<std::vector<AllocationCommit>> ReadAllocations(
      const AllocationFilter& filter) override {
    return feed_->ReadAllocations(filter);
  }

  absl::StatusOr<int64_t> PruneEvents(const RetentionLimits& limits, int max_rows) override {
    return storage_->PruneEvents(limits, max_rows);
  }
  absl::StatusOr<int64_t> PruneEndedAllocations(const RetentionLimits& limits,
                                                int max_rows) override {
    return storage_->PruneEndedAllocations(limits, max_rows);
  }
  absl::StatusOr<int64_t> ReclaimFreePages(int max_pages) override {
    return storage_->ReclaimFreePages(max_pages);
  }
  absl::StatusOr<StorageSize> Storage() override { return storage_->Storage(); }
  absl::Status Sync() override { return storage_->Sync(); }
  absl::Status ApplyReplicated(uint64_t entry, const std::string& bytes) override {
    return storage_->ApplyReplicated(entry, bytes);
  }
  absl::StatusOr<uint64_t> ReplicaPosition() override { return storage_->ReplicaPosition(); }
  uint64_t AwaitReplicaPosition(uint64_t entry, absl::Duration timeout) override {
    return storage_->AwaitReplicaPosition(entry, timeout);
  }
  void EndReplicaPositionWaits() override { storage_->EndReplicaPositionWaits(); }
  absl::StatusOr<uint64_t> SnapshotTo(const std::string& path) override {
    return storage_->SnapshotTo(path);
  }

 private:
  StoreConnection connection_;  // Declared first: the aggregates use it until they end.
  const std::unique_ptr<InventoryStore> inventory_;
  const std::unique_ptr<AllocationStore> allocations_;
  const std::unique_ptr<EventLog> events_;
  const std::unique_ptr<CommitFeed> feed_;
  const std::unique_ptr<StorageControl> storage_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const SqliteStoreOptions& options) {
  if (options.clock == nullptr) return absl::InvalidArgumentError("store needs a clock");
  ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(options.path));
  // Refuse a newer database before anything rewrites its file, WAL's header change included.
  RETURN_IF_ERROR(CheckNotNewer(*db, Migrations()));
  // Before the switch to WAL, which fixes the mode of a new file; retention hands pruned
  // pages back to the file system with it.
  RETURN_IF_ERROR(db->EnableIncrementalVacuum().status());
  RETURN_IF_ERROR(db->EnableWriteAheadLog());
  if (options.before_migrating) {
    ASSIGN_OR_RETURN(const int version, SchemaVersion(*db));
    if (version >= kFirstReplicaSchema && version < Migrations().back().version) {
      OlderSchemaReplica older(*db);
      RETURN_IF_ERROR(options.before_migrating(older));
    }
  }
  RETURN_IF_ERROR(Migrate(*db, Migrations()));
  RETURN_IF_ERROR(FillRequestIds(*db));
  ASSIGN_OR_RETURN(uint64_t last_sequence, NewestEventSequence(*db));
  ASSIGN_OR_RETURN(uint64_t position, AppliedEntry(*db));
  // The desired state: every allocation not RELEASED (DesiredIndex leaves out the FAILED ones
  // retention keeps, unless they hold circuits), any RELEASED one that holds circuits, and the
  // manual circuits.
  ASSIGN_OR_RETURN(std::vector<v1::Allocation> allocations, SelectAllocations(*db, "", {}));
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, SelectCircuits(*db, {}));
  std::set<std::string> loaded;
  for (const v1::Allocation& a : allocations) loaded.insert(a.id());
  std::vector<v1::Circuit> manual;
  for (v1::Circuit& c : circuits) {
    if (c.allocation_id().empty()) {
      manual.push_back(std::move(c));
    } else if (loaded.insert(c.allocation_id()).second) {
      ASSIGN_OR_RETURN(std::vector<v1::Allocation> one,
                       SelectAllocations(*db, c.allocation_id(), {}));
      allocations.insert(allocations.end(), one.begin(), one.end());
    }
  }
  return std::make_unique<SqliteStore>(std::move(db), options, last_sequence, position, allocations,
                                       manual);
}

}  // namespace fleet::store
