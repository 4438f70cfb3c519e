// The SQLite implementation of AllocationStore (controller/store/allocation_store.h).
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "common/wording.h"
#include "controller/store/allocation_lifecycle.h"
#include "controller/store/allocation_rows.h"
#include "controller/store/queries.h"
#include "controller/store/sqlite_aggregates.h"
#include "fleet/v1/names.h"

namespace fleet::store {
namespace {

using v1::Name;

// INVALID_ARGUMENT for a new state, of the allocation or of a circuit, left unspecified.
absl::Status CheckStatesSpecified(const AllocationUpdate& update) {
  if (update.state.has_value() && *update.state == v1::ALLOCATION_STATE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation ", update.id, ": the new state must be specified"));
  }
  for (const auto& [circuit_id, change] : update.circuits) {
    if (change.state == v1::CIRCUIT_STATE_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat(
          "allocation ", update.id, " circuit ", circuit_id, ": the new state must be specified"));
    }
  }
  return absl::OkStatus();
}

// The event message of `update` when it gives none; `circuits`: how many the allocation had.
std::string UpdateMessage(const AllocationUpdate& update, size_t circuits) {
  if (!update.event_message.empty()) return update.event_message;
  const std::string& id = update.id;
  std::string message = update.state.has_value()
                            ? absl::StrCat("allocation ", id, " is now ", Name(*update.state))
                            : absl::StrCat("allocation ", id, " updated");
  if (update.reason.has_value() && !update.reason->empty()) {
    absl::StrAppend(&message, ": ", *update.reason);
  }
  if (update.remove_circuits && circuits > 0) {
    absl::StrAppend(&message, "; its ", circuits, " circuits are removed");
  }
  return message;
}

class SqliteAllocationStore final : public AllocationStore {
 public:
  explicit SqliteAllocationStore(StoreConnection& connection) : connection_(connection) {}

  using AllocationStore::CreateAllocation;
  absl::Status CreateAllocation(const v1::Allocation& a, const std::string& principal,
                                uint64_t planned_at_inventory) override {
    if (Ended(a.state()) && a.circuits_size() > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "allocation ", a.id(), " cannot be created ", Name(a.state()), " holding circuit ",
          a.circuits(0).id(), ": circuits belong to a live allocation"));
    }
    absl::MutexLock lock(&connection_.mu());
    RETURN_IF_ERROR(InventoryUnchanged(a.id(), planned_at_inventory));
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    RETURN_IF_ERROR(RefuseIfAny(db(), "SELECT id FROM allocations WHERE id = ?1", a.id(),
                                "allocation ", " already exists",
                                absl::StatusCode::kAlreadyExists));
    ASSIGN_OR_RETURN(Statement insert, db().Prepare(R"sql(
      INSERT INTO allocations (id, tenant, name, state, reason, request, phases, active_phase,
                               stage_timings, direct_traffic_share, created_us, updated_us,
                               lease_expires_us, request_id)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14))sql"));
    v1::Allocation timings;
    *timings.mutable_stage_timings() = a.stage_timings();
    const int64_t now = absl::ToUnixMicros(connection_.Now());
    insert.Bind(1, a.id())
        .Bind(2, a.tenant())
        .Bind(3, a.name())
        .Bind(4, Name(a.state()))
        .Bind(5, a.reason())
        .BindBlob(6, a.request().SerializeAsString())
        .Bind(7, absl::StrJoin(a.phases(), "\n"))
        .Bind(8, a.active_phase())
        .BindBlob(9, timings.SerializeAsString())
        .Bind(10, a.direct_traffic_share())
        .Bind(11, a.has_created() ? absl::ToUnixMicros(FromProtoTime(a.created())) : now)
        .Bind(12, now)
        .Bind(13, absl::ToUnixMicros(FromProtoTime(a.lease_expires())))
        .Bind(14, a.request().request_id());
    RETURN_IF_ERROR(insert.Run());
    RETURN_IF_ERROR(InsertMembers(db(), a.id(), {a.members().begin(), a.members().end()}));
    for (int i = 0; i < a.circuits_size(); ++i) {
      RETURN_IF_ERROR(InsertCircuit(db(), a.circuits(i), a.id(), i));
    }
    RETURN_IF_ERROR(connection_.AppendEvent(
        "allocation.created", "allocation", a.id(), v1::EVENT_SEVERITY_INFO,
        absl::StrCat("allocation ", a.id(), " of tenant ", a.tenant(), " created in state ",
                     Name(a.state()), " with ", Counted(a.circuits_size(), "circuit")),
        principal));
    RETURN_IF_ERROR(connection_.Image(a.id()).status());
    return connection_.Commit(txn);
  }

  absl::StatusOr<v1::Allocation> GetAllocation(const std::string& id) override {
    if (std::shared_ptr<const v1::Allocation> held = connection_.desired().Find(id)) return *held;
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(std::vector<v1::Allocation> found, SelectAllocations(db(), id, {}));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("allocation ", id, " not found"));
    return found.front();
  }

  absl::StatusOr<std::vector<v1::Allocation>> ListAllocations(
      const AllocationFilter& filter) override {
    if (DesiredIndex::Answers(filter)) return connection_.desired().List(filter);
    absl::MutexLock lock(&connection_.mu());
    return SelectAllocations(db(), "", filter);
  }

  absl::StatusOr<std::optional<v1::Allocation>> FindRequest(
      const std::string& tenant, const std::string& request_id) override {
    if (request_id.empty()) return std::nullopt;
    absl::MutexLock lock(&connection_.mu());
    // `request_id != ''` lets SQLite use allocations_by_request, whose rows those are.
    ASSIGN_OR_RETURN(Statement stmt, db().Prepare(R"sql(
      SELECT id FROM allocations
      WHERE tenant = ?1 AND request_id = ?2 AND request_id != ''
      ORDER BY created_us, id LIMIT 1)sql"));
    ASSIGN_OR_RETURN(bool row, stmt.Bind(1, tenant).Bind(2, request_id).Step());
    if (!row) return std::nullopt;
    ASSIGN_OR_RETURN(std::vector<v1::Allocation> found, SelectAllocations(db(), stmt.Text(0), {}));
    if (found.empty()) return std::nullopt;
    return std::move(found.front());
  }

  absl::StatusOr<std::vector<v1::Circuit>> ListCircuits(const CircuitFilter& filter) override {
    return connection_.desired().ListCircuits(filter);
  }

  absl::StatusOr<std::vector<v1::CrossConnect>> PendingRemovals(const std::string& id) override {
    absl::MutexLock lock(&connection_.mu());
    return SelectCrossConnects(db(),
                               "SELECT switch_id, ingress, egress FROM pending_removals "
                               "WHERE allocation_id = ?1 ORDER BY switch_id, ingress",
                               id);
  }

  absl::Status ClearPendingRemovals(const std::string& id) override {
    absl::MutexLock lock(&connection_.mu());
    // A transaction, as every write is, so that Sync counts it.
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    RETURN_IF_ERROR(RunWith(db(), "DELETE FROM pending_removals WHERE allocation_id = ?1", id));
    return connection_.Commit(txn);
  }

  absl::StatusOr<std::optional<AllocationUpdate::ReleaseIntent>> ReleaseIntentOf(
      const std::string& id) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Statement stmt,
                     db().Prepare("SELECT release_state, release_reason FROM allocations "
                                  "WHERE id = ?1"));
    ASSIGN_OR_RETURN(bool row, stmt.Bind(1, id).Step());
    if (!row) return absl::NotFoundError(absl::StrCat("allocation ", id, " not found"));
    if (stmt.Text(0).empty()) return std::nullopt;
    AllocationUpdate::ReleaseIntent intent;
    intent.state = stmt.Text(0) == Name(v1::ALLOCATION_STATE_FAILED)
                       ? v1::ALLOCATION_STATE_FAILED
                       : v1::ALLOCATION_STATE_RELEASED;
    intent.reason = stmt.Text(1);
    return intent;
  }

  absl::StatusOr<std::vector<std::string>> LeasesPassed(absl::Time now) override {
    absl::MutexLock lock(&connection_.mu());
    // The WHERE clause is allocations_by_lease's, so the query reads that index.
    ASSIGN_OR_RETURN(Statement stmt, db().Prepare(R"sql(
      SELECT id FROM allocations
      WHERE lease_expires_us <= ?1 AND state NOT IN ('releasing', 'failed', 'released')
      ORDER BY lease_expires_us)sql"));
    stmt.Bind(1, absl::ToUnixMicros(now));
    std::vector<std::string> ids;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      ids.push_back(stmt.Text(0));
    }
    return ids;
  }

  absl::StatusOr<StateCounts> CountByState() override {
    absl::MutexLock lock(&connection_.mu());
    StateCounts counts;
    // Each query is ours, never input.
    for (auto [sql, out] :
         {std::pair{"SELECT state, COUNT(*) FROM allocations GROUP BY state", &counts.allocations},
          std::pair{"SELECT state, COUNT(*) FROM circuits GROUP BY state", &counts.circuits},
          std::pair{"SELECT COALESCE(h.oper_state, 'up'), COUNT(*) FROM switch_ports p "
                    "LEFT JOIN port_health h ON h.switch_id = p.switch_id AND h.port = p.port "
                    "GROUP BY 1",
                    &counts.switch_ports},
          std::pair{"SELECT COALESCE(h.health, 'healthy'), COUNT(*) FROM devices d "
                    "LEFT JOIN device_health h ON h.device_id = d.id GROUP BY 1",
                    &counts.devices}}) {
      ASSIGN_OR_RETURN(Statement stmt, db().Prepare(sql));
      while (true) {
        ASSIGN_OR_RETURN(bool row, stmt.Step());
        if (!row) break;
        (*out)[stmt.Text(0)] = stmt.Int(1);
      }
    }
    return counts;
  }

  absl::StatusOr<v1::Allocation> UpdateAllocation(const AllocationUpdate& update,
                                                  const std::string& principal) override {
    const std::string& id = update.id;
    RETURN_IF_ERROR(CheckStatesSpecified(update));
    absl::MutexLock lock(&connection_.mu());
    RETURN_IF_ERROR(InventoryUnchanged(id, update.planned_at_inventory));
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    ASSIGN_OR_RETURN(const std::string stored_state, StoredState(db(), id));
    RETURN_IF_ERROR(CheckNotReleased(id, ParseColumn<v1::AllocationState>(stored_state)));
    ASSIGN_OR_RETURN(const Desired desired, DesiredLocked(id));
    for (const auto& [circuit_id, change] : update.circuits) {
      if (desired.count(circuit_id) == 0) {
        return absl::NotFoundError(
            absl::StrCat("circuit ", circuit_id, " not found in allocation ", id));
      }
    }
    RETURN_IF_ERROR(WriteAllocationLocked(update));
    RETURN_IF_ERROR(WriteCircuitChangesLocked(update, desired));
    RETURN_IF_ERROR(connection_.AppendEvent(
        update.event_kind.empty() ? std::string("allocation.state") : update.event_kind,
        "allocation", id, update.severity, UpdateMessage(update, desired.size()), principal));
    // Read inside the transaction: with the one connection under its mutex, this is exactly
    // what the commit makes durable, and a failed read leaves nothing half-reported.
    ASSIGN_OR_RETURN(v1::Allocation after, connection_.Image(id));
    RETURN_IF_ERROR(connection_.Commit(txn));
    return after;
  }

  absl::StatusOr<v1::Allocation> ReplaceCircuits(const CircuitReplacement& r,
                                                 const std::string& principal) override {
    const std::string& id = r.allocation_id;
    if (r.state.has_value() && *r.state == v1::ALLOCATION_STATE_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("allocation ", id, ": the new state must be specified"));
    }
    if (r.state.has_value() && Ended(*r.state)) {
      return absl::FailedPreconditionError(
          absl::StrCat("allocation ", id, " cannot become ", Name(*r.state),
                       " by a replacement of its circuits; an update that removes them ends it"));
    }
    absl::MutexLock lock(&connection_.mu());
    RETURN_IF_ERROR(InventoryUnchanged(id, r.planned_at_inventory));
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    ASSIGN_OR_RETURN(const std::string stored_state, StoredState(db(), id));
    if (stored_state == Name(v1::ALLOCATION_STATE_RELEASED) ||
        stored_state == Name(v1::ALLOCATION_STATE_FAILED)) {
      return absl::FailedPreconditionError(
          absl::StrCat("allocation ", id, " is ", stored_state, "; its circuits cannot change"));
    }
    std::set<std::string> mine;
    int64_t position = 0;
    ASSIGN_OR_RETURN(Statement circuits,
                     db().Prepare("SELECT id, position FROM circuits WHERE allocation_id = ?1"));
    circuits.Bind(1, id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, circuits.Step());
      if (!row) break;
      mine.insert(circuits.Text(0));
      position = std::max(position, circuits.Int(1) + 1);
    }
    for (const std::string& circuit_id : r.remove) {
      if (!mine.contains(circuit_id)) {
        return absl::NotFoundError(
            absl::StrCat("circuit ", circuit_id, " not found in allocation ", id));
      }
      RETURN_IF_ERROR(RunWith(
          db(),
          "INSERT OR REPLACE INTO pending_removals (allocation_id, switch_id, ingress, egress) "
          "SELECT c.allocation_id, x.switch_id, x.ingress, x.egress FROM cross_connects x "
          "JOIN circuits c ON c.id = x.circuit_id WHERE x.circuit_id = ?1 AND x.desired = 1",
          circuit_id));
      RETURN_IF_ERROR(RunWith(db(), "DELETE FROM circuits WHERE id = ?1", circuit_id));
    }
    for (const v1::Circuit& c : r.add) {
      RETURN_IF_ERROR(InsertCircuit(db(), c, id, static_cast<int>(position++)));
    }
    RETURN_IF_ERROR(RunWith(db(), "DELETE FROM allocation_members WHERE allocation_id = ?1", id));
    RETURN_IF_ERROR(InsertMembers(db(), id, r.members));
    const absl::Time now = connection_.Now();
    ASSIGN_OR_RETURN(Statement write, db().Prepare(R"sql(
      UPDATE allocations SET
        state = CASE WHEN ?2 THEN ?3 ELSE state END,
        reason = CASE WHEN ?2 THEN '' ELSE reason END,
        updated_us = ?4,
        replacements = CASE WHEN ?5 THEN ?6 ELSE replacements END,
        degraded_since_us = CASE WHEN ?2 THEN 0 ELSE degraded_since_us END
      WHERE id = ?1)sql"));
    std::string replacements;
    if (r.record.has_value()) {
      ASSIGN_OR_RETURN(replacements, AppendReplacement(id, *r.record, now));
    }
    RETURN_IF_ERROR(write.Bind(1, id)
                        .Bind(2, int64_t{r.state.has_value()})
                        .Bind(3, Name(r.state.value_or(v1::ALLOCATION_STATE_UNSPECIFIED)))
                        .Bind(4, absl::ToUnixMicros(now))
                        .Bind(5, int64_t{r.record.has_value()})
                        .BindBlob(6, replacements)
                        .Run());
    RETURN_IF_ERROR(connection_.AppendEvent(
        r.event_kind, "allocation", id, v1::EVENT_SEVERITY_INFO,
        r.event_message.empty() ? absl::StrCat("allocation ", id, ": ", r.remove.size(),
                                               " circuits replaced by ", r.add.size())
                                : r.event_message,
        principal));
    ASSIGN_OR_RETURN(v1::Allocation after, connection_.Image(id));
    RETURN_IF_ERROR(connection_.Commit(txn));
    return after;
  }

  absl::Status CreateManualCircuit(const v1::Circuit& circuit,
                                   const std::string& principal) override {
    if (circuit.id().empty()) {
      return absl::InvalidArgumentError("a manual circuit needs an id");
    }
    if (!circuit.manual()) {
      return absl::InvalidArgumentError(
          absl::StrCat("circuit ", circuit.id(), ": manual must be set for a manual circuit"));
    }
    if (!circuit.allocation_id().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("circuit ", circuit.id(),
                                                     ": a manual circuit belongs to no allocation "
                                                     "(allocation_id is ",
                                                     circuit.allocation_id(), ")"));
    }
    if (circuit.state() == v1::CIRCUIT_STATE_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("circuit ", circuit.id(), ": the state must be specified"));
    }
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    RETURN_IF_ERROR(InsertCircuit(db(), circuit, "", 0));
    // The circuit index is fed what the database holds, read back.
    CircuitFilter mine;
    mine.onic = circuit.source().onic();
    ASSIGN_OR_RETURN(std::vector<v1::Circuit> stored, SelectCircuits(db(), mine));
    auto found = std::find_if(stored.begin(), stored.end(),
                              [&](const v1::Circuit& c) { return c.id() == circuit.id(); });
    if (found == stored.end()) {
      return absl::InternalError(
          absl::StrCat("manual circuit ", circuit.id(), " vanished while recorded"));
    }
    connection_.KeepManualCircuit(*found);
    std::vector<std::string> hops;
    for (const v1::CrossConnect& x : circuit.cross_connects()) {
      hops.push_back(absl::StrCat(x.switch_id(), " ", x.ingress(), "->", x.egress()));
    }
    RETURN_IF_ERROR(connection_.AppendEvent(
        "circuit.created", "circuit", circuit.id(), v1::EVENT_SEVERITY_INFO,
        absl::StrCat("manual circuit ", circuit.id(), " from onic ", circuit.source().onic(),
                     " port ", circuit.source().port(), " to onic ", circuit.destination().onic(),
                     " port ", circuit.destination().port(), " recorded in state ",
                     Name(circuit.state()),
                     hops.empty() ? "" : absl::StrCat(" via ", absl::StrJoin(hops, ", "))),
        principal));
    return connection_.Commit(txn);
  }

  // Appends no event: what a switch reports is not a change the fleet made, and
  // reconciliation reads every switch often enough to flood the log. Drift it finds is
  // logged by reconciliation, where it is judged.
  absl::Status RecordObservedCrossConnects(const std::string& switch_id,
                                           const std::vector<v1::CrossConnect>& observed) override {
    std::set<uint32_t> ingresses;
    for (const v1::CrossConnect& x : observed) {
      if (!x.switch_id().empty() && x.switch_id() != switch_id) {
        return absl::InvalidArgumentError(absl::StrCat("observed cross-connect ", x.switch_id(),
                                                       " ", x.ingress(), "->", x.egress(),
                                                       " is not on switch ", switch_id));
      }
      if (!ingresses.insert(x.ingress()).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("switch ", switch_id, " ingress ", x.ingress(), " is observed twice"));
      }
    }
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    RETURN_IF_ERROR(
        RequireExists(db(), "SELECT 1 FROM switches WHERE id = ?1", "switch", switch_id));
    RETURN_IF_ERROR(
        RunWith(db(), "DELETE FROM observed_cross_connects WHERE switch_id = ?1", switch_id));
    ASSIGN_OR_RETURN(Statement insert, db().Prepare(R"sql(
      INSERT INTO observed_cross_connects (switch_id, ingress, egress, observed_us)
      VALUES (?1, ?2, ?3, ?4))sql"));
    const int64_t now = absl::ToUnixMicros(connection_.Now());
    for (const v1::CrossConnect& x : observed) {
      // Ports are not checked against the inventory: a switch reporting a port we do not
      // know of is drift to be shown, not input to refuse.
      RETURN_IF_ERROR(insert.Bind(1, switch_id)
                          .Bind(2, static_cast<int64_t>(x.ingress()))
                          .Bind(3, static_cast<int64_t>(x.egress()))
                          .Bind(4, now)
                          .Run());
      insert.Reset();
    }
    return connection_.Commit(txn);
  }

  absl::StatusOr<std::vector<v1::CrossConnect>> ListObservedCrossConnects(
      const std::string& switch_id) override {
    absl::MutexLock lock(&connection_.mu());
    if (!switch_id.empty()) {
      RETURN_IF_ERROR(
          RequireExists(db(), "SELECT 1 FROM switches WHERE id = ?1", "switch", switch_id));
    }
    return SelectCrossConnects(db(), R"sql(
      SELECT switch_id, ingress, egress FROM observed_cross_connects
      WHERE ?1 = '' OR switch_id = ?1
      ORDER BY switch_id, ingress)sql",
                               switch_id);
  }

 private:
  // ABORTED unless `planned_at` is kAnyInventory or the inventory version now.
  absl::Status InventoryUnchanged(const std::string& id, uint64_t planned_at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(connection_.mu()) {
    const uint64_t now = connection_.inventory_version();
    if (planned_at == kAnyInventory || planned_at == now) return absl::OkStatus();
    return absl::AbortedError(absl::StrCat("allocation ", id, " was planned on inventory version ",
                                           planned_at,
                                           " and an inventory, drain or health change has "
                                           "committed since (version ",
                                           now, ")"));
  }
  Database& db() ABSL_EXCLUSIVE_LOCKS_REQUIRED(connection_.mu()) { return connection_.db(); }

  // Whether each circuit of an allocation is desired now, by id: which changes move it in or
  // out of invariant 1.
  using Desired = std::map<std::string, bool>;
  absl::StatusOr<Desired> DesiredLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(connection_.mu()) {
    Desired desired;
    ASSIGN_OR_RETURN(Statement circuits,
                     db().Prepare("SELECT id, desired FROM circuits WHERE allocation_id = ?1"));
    circuits.Bind(1, id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, circuits.Step());
      if (!row) break;
      desired[circuits.Text(0)] = circuits.Int(1) != 0;
    }
    return desired;
  }

  // The allocation's stored replacements with `record` (its time `now`) appended, serialized.
  absl::StatusOr<std::string> AppendReplacement(const std::string& id, v1::MemberReplacement record,
                                                absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(connection_.mu()) {
    ASSIGN_OR_RETURN(Statement read,
                     db().Prepare("SELECT replacements FROM allocations WHERE id = ?1"));
    read.Bind(1, id);
    ASSIGN_OR_RETURN(bool row, read.Step());
    if (!row) return absl::NotFoundError(absl::StrCat("allocation ", id, " not found"));
    v1::Allocation replacements;
    if (!replacements.ParseFromString(read.Text(0))) {
      return absl::DataLossError(
          absl::StrCat("allocation ", id, ": stored replacements are corrupt"));
    }
    *record.mutable_time() = ToProtoTime(now);
    *replacements.add_replacements() = std::move(record);
    return replacements.SerializeAsString();
  }

  // The allocation's own columns of `update`, and its release intent.
  absl::Status WriteAllocationLocked(const AllocationUpdate& update)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(connection_.mu()) {
    const std::string& id = update.id;
    v1::Allocation timings;
    if (update.stage_timings.has_value()) {
      for (const v1::StageTiming& t : *update.stage_timings) *timings.add_stage_timings() = t;
    }
    // A flag per optional column: NULL cannot mean "unchanged", an empty BLOB is a value.
    ASSIGN_OR_RETURN(Statement write, db().Prepare(R"sql(
      UPDATE allocations SET
        state = CASE WHEN ?2 THEN ?3 ELSE state END,
        reason = CASE WHEN ?4 THEN ?5 ELSE reason END,
        stage_timings = CASE WHEN ?6 THEN ?7 ELSE stage_timings END,
        lease_expires_us = CASE WHEN ?8 THEN ?9 ELSE lease_expires_us END,
        updated_us = ?10,
        active_phase = CASE WHEN ?11 THEN ?12 ELSE active_phase END,
        degraded_since_us = CASE WHEN NOT ?2 THEN degraded_since_us
                                 WHEN ?3 != 'degraded' THEN 0
                                 WHEN state = 'degraded' THEN degraded_since_us
                                 ELSE ?10 END
      WHERE id = ?1)sql"));
    write.Bind(1, id)
        .Bind(2, int64_t{update.state.has_value()})
        .Bind(3, Name(update.state.value_or(v1::ALLOCATION_STATE_UNSPECIFIED)))
        .Bind(4, int64_t{update.reason.has_value()})
        .Bind(5, update.reason.value_or(""))
        .Bind(6, int64_t{update.stage_timings.has_value()})
        .BindBlob(7, timings.SerializeAsString())
        .Bind(8, int64_t{update.lease_expires.has_value()})
        .Bind(9, absl::ToUnixMicros(update.lease_expires.value_or(absl::UnixEpoch())))
        .Bind(10, absl::ToUnixMicros(connection_.Now()))
        .Bind(11, int64_t{update.active_phase.has_value()})
        .Bind(12, update.active_phase.value_or(""));
    RETURN_IF_ERROR(write.Run());
    if (!update.release) return absl::OkStatus();
    RETURN_IF_ERROR(CheckReleaseEnd(id, update.release->state));
    ASSIGN_OR_RETURN(Statement intent, db().Prepare("UPDATE allocations SET release_state = ?2, "
                                                    "release_reason = ?3 WHERE id = ?1"));
    return intent.Bind(1, id)
        .Bind(2, Name(update.release->state))
        .Bind(3, update.release->reason)
        .Run();
  }

  // The circuits' side of `update`: their removal, or their changes of state.
  absl::Status WriteCircuitChangesLocked(const AllocationUpdate& update, const Desired& desired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(connection_.mu()) {
    const std::string& id = update.id;
    if (update.remove_circuits) {
      // The changes named in `circuits` would be deleted with the rows; they were checked
      // before so that a wrong id is still reported.
      return RunWith(db(), "DELETE FROM circuits WHERE allocation_id = ?1", id);
    }
    // Circuits leaving the desired set go first, so that a phase switch may hand their
    // ports to circuits joining it in the same update.
    for (bool joining : {false, true}) {
      for (const auto& [circuit_id, change] : update.circuits) {
        const bool want = change.state != v1::CIRCUIT_STATE_INACTIVE;
        if (want != joining) continue;
        RETURN_IF_ERROR(
            SetCircuitState(db(), circuit_id, change, /*was_desired=*/desired.at(circuit_id)));
      }
    }
    if (update.state.has_value() && Ended(*update.state)) {
      // Invariant 2: circuits belong to a live allocation. Deleting them silently would
      // hide a caller that forgot to take them off the switches.
      RETURN_IF_ERROR(RefuseIfAny(
          db(), "SELECT id FROM circuits WHERE allocation_id = ?1 ORDER BY position, id LIMIT 1",
          id,
          absl::StrCat("allocation ", id, " cannot become ", Name(*update.state),
                       " while it holds circuit "),
          "; remove its circuits in the same update"));
    }
    return absl::OkStatus();
  }

  StoreConnection& connection_;
};

}  // namespace

std::unique_ptr<AllocationStore> NewSqliteAllocationStore(StoreConnection& connection) {
  return std::make_unique<SqliteAllocationStore>(connection);
}

}  // namespace fleet::store
