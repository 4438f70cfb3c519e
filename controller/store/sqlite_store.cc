// SQLite implementation of Store. One connection, serialized by a mutex: SQLite in WAL mode
// is fast enough for the controller's write rate, and one writer keeps transactions simple.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "controller/store/migrations.h"
#include "controller/store/pruning.h"
#include "controller/store/sqlite.h"
#include "controller/store/store.h"
#include "fleet/v1/names.h"

namespace fleet::store {
namespace {

using v1::Name;
using v1::Parse;

void SetTime(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t us = absl::ToUnixMicros(t);
  out->set_seconds(us / 1'000'000);
  out->set_nanos(static_cast<int32_t>((us % 1'000'000) * 1000));
}

void SetMicros(int64_t us, google::protobuf::Timestamp* out) {
  SetTime(absl::FromUnixMicros(us), out);
}

int64_t Micros(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1'000'000 + t.nanos() / 1000;
}

// The first circuit, of any phase (an inactive phase's circuit will use the trunk when its
// phase is activated), whose cross-connects use trunk ?1's ports.
constexpr absl::string_view kTrunkCircuitSql =
    "SELECT c.circuit_id FROM trunks t JOIN cross_connects c ON "
    "((c.switch_id = t.from_switch AND c.egress = t.from_port) OR "
    "(c.switch_id = t.to_switch AND c.ingress = t.to_port)) WHERE t.id = ?1 LIMIT 1";

// The sequence of the newest event in `db`, 0 when the log is empty.
absl::StatusOr<uint64_t> NewestEventSequence(Database& db) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare("SELECT COALESCE(MAX(sequence), 0) FROM events"));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::InternalError("reading the newest event sequence returned no row");
  return static_cast<uint64_t>(stmt.Int(0));
}

template <typename E>
E ParseColumn(const std::string& text) {
  return Parse<E>(text).value_or(static_cast<E>(0));
}

class SqliteStore : public Store {
 public:
  // `last_sequence` is the newest event already in `db`.
  SqliteStore(std::unique_ptr<Database> db, const Clock* clock, uint64_t last_sequence)
      : db_(std::move(db)),
        clock_(clock),
        last_sequence_(last_sequence),
        commits_floor_(last_sequence) {}

  absl::StatusOr<std::vector<v1::Switch>> ListSwitches() override {
    absl::MutexLock lock(&mu_);
    return SwitchesLocked("");
  }

  absl::StatusOr<v1::Switch> GetSwitch(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(std::vector<v1::Switch> found, SwitchesLocked(id));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("switch ", id, " not found"));
    return found.front();
  }

  absl::StatusOr<std::vector<v1::SwitchPort>> ListPorts(const std::string& switch_id) override {
    absl::MutexLock lock(&mu_);
    if (!switch_id.empty()) {
      ASSIGN_OR_RETURN(std::vector<v1::Switch> found, SwitchesLocked(switch_id));
      if (found.empty())
        return absl::NotFoundError(absl::StrCat("switch ", switch_id, " not found"));
    }
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      SELECT p.switch_id, p.port, p.direction, p.reservation, p.admin_state, p.oper_state,
             f.onic_id, f.onic_port, COALESCE(tf.id, tt.id),
             COALESCE(ci.circuit_id, ce.circuit_id)
      FROM switch_ports p
      LEFT JOIN fibers f ON f.switch_id = p.switch_id AND f.switch_port = p.port
      LEFT JOIN trunks tf ON tf.from_switch = p.switch_id AND tf.from_port = p.port
      LEFT JOIN trunks tt ON tt.to_switch = p.switch_id AND tt.to_port = p.port
      LEFT JOIN cross_connects ci
        ON ci.switch_id = p.switch_id AND ci.ingress = p.port AND ci.desired = 1
      LEFT JOIN cross_connects ce
        ON ce.switch_id = p.switch_id AND ce.egress = p.port AND ce.desired = 1
      WHERE ?1 = '' OR p.switch_id = ?1
      ORDER BY p.switch_id, p.port)sql"));
    stmt.Bind(1, switch_id);
    std::vector<v1::SwitchPort> ports;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      v1::SwitchPort& port = ports.emplace_back();
      port.mutable_ref()->set_switch_id(stmt.Text(0));
      port.mutable_ref()->set_port(static_cast<uint32_t>(stmt.Int(1)));
      port.set_direction(ParseColumn<v1::PortDirection>(stmt.Text(2)));
      port.set_reservation(ParseColumn<v1::PortReservation>(stmt.Text(3)));
      port.set_admin_state(ParseColumn<v1::AdminState>(stmt.Text(4)));
      port.set_oper_state(ParseColumn<v1::OperState>(stmt.Text(5)));
      if (!stmt.IsNull(6)) {
        port.mutable_wiring()->mutable_onic_port()->set_onic(stmt.Text(6));
        port.mutable_wiring()->mutable_onic_port()->set_port(static_cast<uint32_t>(stmt.Int(7)));
      } else if (!stmt.IsNull(8)) {
        port.mutable_wiring()->set_trunk(stmt.Text(8));
      }
      if (!stmt.IsNull(9)) port.set_circuit_id(stmt.Text(9));
    }
    return ports;
  }

  absl::StatusOr<std::vector<v1::Host>> ListHosts() override {
    absl::MutexLock lock(&mu_);
    return HostsLocked("");
  }

  absl::StatusOr<v1::Host> GetHost(const std::string& name) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(std::vector<v1::Host> found, HostsLocked(name));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("host ", name, " not found"));
    return found.front();
  }

  absl::StatusOr<std::vector<v1::Device>> ListDevices(const DeviceFilter& filter) override {
    absl::MutexLock lock(&mu_);
    return DevicesLocked("", filter);
  }

  absl::StatusOr<v1::Device> GetDevice(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(std::vector<v1::Device> found, DevicesLocked(id, {}));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("device ", id, " not found"));
    return found.front();
  }

  absl::StatusOr<std::vector<v1::Onic>> ListOnics(const OnicFilter& filter) override {
    absl::MutexLock lock(&mu_);
    return OnicsLocked("", filter);
  }

  absl::StatusOr<v1::Onic> GetOnic(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(std::vector<v1::Onic> found, OnicsLocked(id, {}));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("onic ", id, " not found"));
    return found.front();
  }

  absl::StatusOr<std::vector<v1::Trunk>> ListTrunks() override {
    absl::MutexLock lock(&mu_);
    return TrunksLocked();
  }

  absl::StatusOr<v1::Inventory> LoadInventory() override {
    absl::MutexLock lock(&mu_);
    v1::Inventory inventory;
    ASSIGN_OR_RETURN(std::vector<v1::Switch> switches, SwitchesLocked(""));
    for (auto& s : switches) *inventory.add_switches() = std::move(s);
    ASSIGN_OR_RETURN(std::vector<v1::Host> hosts, HostsLocked(""));
    for (auto& h : hosts) *inventory.add_hosts() = std::move(h);
    ASSIGN_OR_RETURN(std::vector<v1::Device> devices, DevicesLocked("", {}));
    for (auto& d : devices) *inventory.add_devices() = std::move(d);
    ASSIGN_OR_RETURN(std::vector<v1::Onic> onics, OnicsLocked("", {}));
    for (auto& o : onics) *inventory.add_onics() = std::move(o);
    ASSIGN_OR_RETURN(std::vector<v1::Trunk> trunks, TrunksLocked());
    for (auto& t : trunks) *inventory.add_trunks() = std::move(t);
    return inventory;
  }

  absl::Status WriteInventory(const InventoryWrite& write, const std::string& principal) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    const v1::Inventory& objects = write.objects;
    for (const v1::Switch& s : objects.switches()) RETURN_IF_ERROR(UpsertSwitchLocked(s));
    for (const v1::Host& h : objects.hosts()) RETURN_IF_ERROR(UpsertHostLocked(h));
    for (const v1::Device& d : objects.devices()) RETURN_IF_ERROR(UpsertDeviceLocked(d));
    // Fibers and trunks being rewritten are removed first, so that a fiber may move from one
    // O-NIC port (or trunk) to another within one apply.
    for (const v1::Onic& o : objects.onics()) RETURN_IF_ERROR(CheckRewireLocked(o));
    for (const v1::Trunk& t : objects.trunks()) RETURN_IF_ERROR(CheckTrunkRewireLocked(t));
    for (const v1::Onic& o : objects.onics()) {
      ASSIGN_OR_RETURN(Statement del, db_->Prepare("DELETE FROM fibers WHERE onic_id = ?1"));
      RETURN_IF_ERROR(del.Bind(1, o.id()).Run());
    }
    for (const v1::Trunk& t : objects.trunks()) {
      ASSIGN_OR_RETURN(Statement del, db_->Prepare("DELETE FROM trunks WHERE id = ?1"));
      RETURN_IF_ERROR(del.Bind(1, t.id()).Run());
    }
    for (const v1::Onic& o : objects.onics()) RETURN_IF_ERROR(UpsertOnicLocked(o));
    for (const v1::Trunk& t : objects.trunks()) RETURN_IF_ERROR(InsertTrunkLocked(t));
    for (const std::string& what : write.created) {
      RETURN_IF_ERROR(InventoryEventLocked("inventory.created", what, principal, "created"));
    }
    for (const std::string& what : write.updated) {
      RETURN_IF_ERROR(InventoryEventLocked("inventory.updated", what, principal, "updated"));
    }
    RETURN_IF_ERROR(CommitLocked(txn));
    inventory_version_.fetch_add(1);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> DeleteObject(const std::string& kind,
                                                        const std::string& name,
                                                        const std::string& principal) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    std::vector<std::string> deleted;
    if (kind == "switch") {
      RETURN_IF_ERROR(RequireExistsLocked("SELECT 1 FROM switches WHERE id = ?1", kind, name));
      RETURN_IF_ERROR(RefuseIfAnyLocked(
          "SELECT onic_id || ' port ' || onic_port FROM fibers WHERE switch_id = ?1 LIMIT 1", name,
          absl::StrCat("switch ", name, " has O-NIC fibers plugged in (first: onic "),
          "); delete or rewire those O-NICs first"));
      RETURN_IF_ERROR(RefuseIfAnyLocked(
          "SELECT id FROM trunks WHERE from_switch = ?1 OR to_switch = ?1 LIMIT 1", name,
          absl::StrCat("switch ", name, " has trunk "), " plugged in; delete the trunk first"));
      RETURN_IF_ERROR(RunLocked("DELETE FROM switches WHERE id = ?1", name));
    } else if (kind == "host") {
      RETURN_IF_ERROR(RequireExistsLocked("SELECT 1 FROM hosts WHERE name = ?1", kind, name));
      RETURN_IF_ERROR(RefuseIfAnyLocked(
          "SELECT group_concat(id, ', ') FROM devices WHERE host = ?1 HAVING count(*) > 0", name,
          absl::StrCat("host ", name, " still has devices "), "; delete them first"));
      RETURN_IF_ERROR(RunLocked("DELETE FROM hosts WHERE name = ?1", name));
    } else if (kind == "device") {
      RETURN_IF_ERROR(RequireExistsLocked("SELECT 1 FROM devices WHERE id = ?1", kind, name));
      RETURN_IF_ERROR(RefuseIfAnyLocked(
          "SELECT a.id FROM allocation_members m JOIN allocations a ON a.id = m.allocation_id "
          "WHERE m.device_id = ?1 AND a.state NOT IN ('released', 'failed') LIMIT 1",
          name, absl::StrCat("device ", name, " is a member of allocation "),
          "; release it first"));
      RETURN_IF_ERROR(RefuseIfAnyLocked(
          "SELECT c.id FROM circuits c JOIN onics o ON o.id IN (c.src_onic, c.dst_onic) "
          "WHERE o.device_id = ?1 LIMIT 1",
          name, absl::StrCat("device ", name, " has an O-NIC in circuit "), "; release it first"));
      ASSIGN_OR_RETURN(Statement onics,
                       db_->Prepare("SELECT id FROM onics WHERE device_id = ?1 ORDER BY id"));
      onics.Bind(1, name);
      while (true) {
        ASSIGN_OR_RETURN(bool row, onics.Step());
        if (!row) break;
        deleted.push_back(absl::StrCat("onic ", onics.Text(0)));
      }
      RETURN_IF_ERROR(RunLocked("DELETE FROM onics WHERE device_id = ?1", name));
      RETURN_IF_ERROR(RunLocked("DELETE FROM devices WHERE id = ?1", name));
    } else if (kind == "onic") {
      RETURN_IF_ERROR(RequireExistsLocked("SELECT 1 FROM onics WHERE id = ?1", kind, name));
      RETURN_IF_ERROR(RefuseIfAnyLocked(
          "SELECT id FROM circuits WHERE src_onic = ?1 OR dst_onic = ?1 LIMIT 1", name,
          absl::StrCat("onic ", name, " is in circuit "), "; release it first"));
      RETURN_IF_ERROR(RunLocked("DELETE FROM onics WHERE id = ?1", name));
    } else if (kind == "trunk") {
      RETURN_IF_ERROR(RequireExistsLocked("SELECT 1 FROM trunks WHERE id = ?1", kind, name));
      RETURN_IF_ERROR(RefuseIfAnyLocked(kTrunkCircuitSql, name,
                                        absl::StrCat("trunk ", name, " carries circuit "),
                                        "; release it first"));
      RETURN_IF_ERROR(RunLocked("DELETE FROM trunks WHERE id = ?1", name));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot delete kind '", kind, "'; deletable kinds: switch, host, device, onic, trunk"));
    }
    deleted.insert(deleted.begin(), absl::StrCat(kind, " ", name));
    for (const std::string& what : deleted) {
      RETURN_IF_ERROR(InventoryEventLocked("inventory.deleted", what, principal, "deleted"));
    }
    RETURN_IF_ERROR(CommitLocked(txn));
    inventory_version_.fetch_add(1);
    return deleted;
  }

  absl::Status CreateAllocation(const v1::Allocation& a, const std::string& principal) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    RETURN_IF_ERROR(RefuseIfAnyLocked("SELECT id FROM allocations WHERE id = ?1", a.id(),
                                      "allocation ", " already exists",
                                      absl::StatusCode::kAlreadyExists));
    ASSIGN_OR_RETURN(Statement insert, db_->Prepare(R"sql(
      INSERT INTO allocations (id, tenant, name, state, reason, request, phases, active_phase,
                               stage_timings, direct_traffic_share, created_us, updated_us,
                               lease_expires_us)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13))sql"));
    v1::Allocation timings;
    *timings.mutable_stage_timings() = a.stage_timings();
    const int64_t now = absl::ToUnixMicros(clock_->Now());
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
        .Bind(11, a.has_created() ? Micros(a.created()) : now)
        .Bind(12, now)
        .Bind(13, Micros(a.lease_expires()));
    RETURN_IF_ERROR(insert.Run());
    RETURN_IF_ERROR(InsertMembersLocked(a.id(), {a.members().begin(), a.members().end()}));
    for (int i = 0; i < a.circuits_size(); ++i) {
      RETURN_IF_ERROR(InsertCircuitLocked(a.circuits(i), a.id(), i));
    }
    RETURN_IF_ERROR(AppendEventLocked(
        "allocation.created", "allocation", a.id(), v1::EVENT_SEVERITY_INFO,
        absl::StrCat("allocation ", a.id(), " of tenant ", a.tenant(), " created in state ",
                     Name(a.state()), " with ", a.circuits_size(), " circuits"),
        principal));
    RETURN_IF_ERROR(ImageLocked(a.id()).status());
    return CommitLocked(txn);
  }

  absl::StatusOr<v1::Allocation> GetAllocation(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(std::vector<v1::Allocation> found, AllocationsLocked(id, {}));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("allocation ", id, " not found"));
    return found.front();
  }

  absl::StatusOr<std::vector<v1::Allocation>> ListAllocations(
      const AllocationFilter& filter) override {
    absl::MutexLock lock(&mu_);
    return AllocationsLocked("", filter);
  }

  absl::StatusOr<std::vector<v1::Circuit>> ListCircuits(const CircuitFilter& filter) override {
    absl::MutexLock lock(&mu_);
    return CircuitsLocked(filter);
  }

  absl::StatusOr<std::vector<v1::CrossConnect>> PendingRemovals(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    return CrossConnectsLocked(
        "SELECT switch_id, ingress, egress FROM pending_removals "
        "WHERE allocation_id = ?1 ORDER BY switch_id, ingress",
        id);
  }

  absl::Status ClearPendingRemovals(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    // A transaction, as every write is, so that Sync counts it.
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    RETURN_IF_ERROR(RunLocked("DELETE FROM pending_removals WHERE allocation_id = ?1", id));
    return CommitLocked(txn);
  }

  absl::StatusOr<std::optional<AllocationUpdate::ReleaseIntent>> ReleaseIntentOf(
      const std::string& id) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Statement stmt,
                     db_->Prepare("SELECT release_state, release_reason FROM allocations "
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

  absl::StatusOr<StateCounts> CountByState() override {
    absl::MutexLock lock(&mu_);
    StateCounts counts;
    for (auto [table, out] :
         {std::pair{"allocations", &counts.allocations}, std::pair{"circuits", &counts.circuits}}) {
      ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(absl::StrCat("SELECT state, COUNT(*) FROM ",
                                                                 table, " GROUP BY state")));
      while (true) {
        ASSIGN_OR_RETURN(bool row, stmt.Step());
        if (!row) break;
        (*out)[stmt.Text(0)] = stmt.Int(1);
      }
    }
    return counts;
  }

  absl::Status AppendEvent(const v1::Event& event) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    RETURN_IF_ERROR(AppendEventLocked(event.kind(), event.object_kind(), event.object_id(),
                                      event.severity(), event.message(), event.principal()));
    if (event.object_kind() == "allocation" && !event.object_id().empty()) {
      // Its commit carries the allocation, as every allocation commit does, when it exists.
      RETURN_IF_ERROR(KeepImageLocked(event.object_id()).status());
    }
    return CommitLocked(txn);
  }

  absl::StatusOr<std::vector<v1::Event>> ListEvents(const EventFilter& filter) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      SELECT sequence, time_us, principal, kind, object_kind, object_id, severity, message
      FROM events
      WHERE sequence > ?1 AND (?2 = '' OR object_kind = ?2) AND (?3 = '' OR object_id = ?3)
      ORDER BY sequence LIMIT ?4)sql"));
    stmt.Bind(1, static_cast<int64_t>(filter.after_sequence))
        .Bind(2, filter.object_kind)
        .Bind(3, filter.object_id)
        .Bind(4, static_cast<int64_t>(filter.limit == 0 ? 1000 : filter.limit));
    std::vector<v1::Event> events;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      v1::Event& e = events.emplace_back();
      e.set_sequence(static_cast<uint64_t>(stmt.Int(0)));
      SetMicros(stmt.Int(1), e.mutable_time());
      e.set_principal(stmt.Text(2));
      e.set_kind(stmt.Text(3));
      e.set_object_kind(stmt.Text(4));
      e.set_object_id(stmt.Text(5));
      e.set_severity(ParseColumn<v1::EventSeverity>(stmt.Text(6)));
      e.set_message(stmt.Text(7));
    }
    return events;
  }

  uint64_t InventoryVersion() override { return inventory_version_.load(); }

  std::optional<std::vector<AllocationCommit>> AllocationCommitsAfter(uint64_t after) override {
    absl::MutexLock lock(&sequence_mu_);
    if (after < commits_floor_) return std::nullopt;
    auto first = std::upper_bound(
        commits_.begin(), commits_.end(), after,
        [](uint64_t sequence, const AllocationCommit& c) { return sequence < c.sequence; });
    return std::vector<AllocationCommit>(first, commits_.end());
  }

  std::optional<AllocationCommit> LastCommitted(const std::string& id) override {
    absl::MutexLock lock(&sequence_mu_);
    for (auto it = commits_.rbegin(); it != commits_.rend(); ++it) {
      if (it->id == id) return *it;
    }
    return std::nullopt;
  }

  absl::StatusOr<AllocationCommit> ReadAllocation(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(std::vector<AllocationCommit> found, ReadCommitsLocked(id, {}));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("allocation ", id, " not found"));
    return std::move(found.front());
  }

  absl::StatusOr<std::vector<AllocationCommit>> ReadAllocations(
      const AllocationFilter& filter) override {
    absl::MutexLock lock(&mu_);
    return ReadCommitsLocked("", filter);
  }

  uint64_t LastEventSequence() override {
    absl::MutexLock lock(&sequence_mu_);
    return last_sequence_;
  }

  // `deadline` is real time: Clock stamps events but cannot wait, so a FakeClock's time has
  // no meaning here.
  bool WaitForEvent(uint64_t after_sequence, absl::Time deadline) override {
    absl::MutexLock lock(&sequence_mu_);
    auto newer = [this, after_sequence]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sequence_mu_) {
      return last_sequence_ > after_sequence;
    };
    return sequence_mu_.AwaitWithDeadline(absl::Condition(&newer), deadline);
  }

  absl::StatusOr<int64_t> PruneEvents(const RetentionLimits& limits, int max_rows) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    ASSIGN_OR_RETURN(int64_t pruned, PruneEventBatch(*db_, limits, clock_->Now(), max_rows));
    RETURN_IF_ERROR(CommitLocked(txn));
    return pruned;
  }

  absl::StatusOr<int64_t> PruneEndedAllocations(const RetentionLimits& limits,
                                                int max_rows) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    ASSIGN_OR_RETURN(int64_t pruned, PruneAllocationBatch(*db_, limits, clock_->Now(), max_rows));
    RETURN_IF_ERROR(CommitLocked(txn));
    return pruned;
  }

  absl::StatusOr<int64_t> ReclaimFreePages(int max_pages) override {
    absl::MutexLock lock(&mu_);
    return db_->IncrementalVacuum(max_pages);
  }

  // Not under mu_: the sync needs no connection, and commits go on while it runs.
  absl::Status Sync() override ABSL_NO_THREAD_SAFETY_ANALYSIS { return db_->SyncLog(); }

  absl::StatusOr<StorageSize> Storage() override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Database::Pages pages, db_->PageCounts());
    return StorageSize{pages.page_size, pages.pages, pages.free_pages, pages.wal_bytes};
  }

  absl::StatusOr<v1::Allocation> UpdateAllocation(const AllocationUpdate& update,
                                                  const std::string& principal) override {
    const std::string& id = update.id;
    if (update.state.has_value() && *update.state == v1::ALLOCATION_STATE_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("allocation ", id, ": the new state must be specified"));
    }
    for (const auto& [circuit_id, change] : update.circuits) {
      if (change.state == v1::CIRCUIT_STATE_UNSPECIFIED) {
        return absl::InvalidArgumentError(absl::StrCat("allocation ", id, " circuit ", circuit_id,
                                                       ": the new state must be specified"));
      }
    }
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    ASSIGN_OR_RETURN(const std::string stored_state, StoredStateLocked(id));
    if (stored_state == Name(v1::ALLOCATION_STATE_RELEASED)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "allocation ", id, " is released; a released allocation's history is not rewritten"));
    }

    // Whether each circuit of the allocation is desired now, to know which changes move it
    // in or out of invariant 1.
    std::map<std::string, bool> desired;
    ASSIGN_OR_RETURN(Statement circuits,
                     db_->Prepare("SELECT id, desired FROM circuits WHERE allocation_id = ?1"));
    circuits.Bind(1, id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, circuits.Step());
      if (!row) break;
      desired[circuits.Text(0)] = circuits.Int(1) != 0;
    }
    for (const auto& [circuit_id, change] : update.circuits) {
      if (desired.count(circuit_id) == 0) {
        return absl::NotFoundError(
            absl::StrCat("circuit ", circuit_id, " not found in allocation ", id));
      }
    }

    v1::Allocation timings;
    if (update.stage_timings.has_value()) {
      for (const v1::StageTiming& t : *update.stage_timings) *timings.add_stage_timings() = t;
    }
    // A flag per optional column: NULL cannot mean "unchanged", an empty BLOB is a value.
    ASSIGN_OR_RETURN(Statement write, db_->Prepare(R"sql(
      UPDATE allocations SET
        state = CASE WHEN ?2 THEN ?3 ELSE state END,
        reason = CASE WHEN ?4 THEN ?5 ELSE reason END,
        stage_timings = CASE WHEN ?6 THEN ?7 ELSE stage_timings END,
        lease_expires_us = CASE WHEN ?8 THEN ?9 ELSE lease_expires_us END,
        updated_us = ?10,
        active_phase = CASE WHEN ?11 THEN ?12 ELSE active_phase END
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
        .Bind(10, absl::ToUnixMicros(clock_->Now()))
        .Bind(11, int64_t{update.active_phase.has_value()})
        .Bind(12, update.active_phase.value_or(""));
    RETURN_IF_ERROR(write.Run());
    if (update.release) {
      if (update.release->state != v1::ALLOCATION_STATE_RELEASED &&
          update.release->state != v1::ALLOCATION_STATE_FAILED) {
        return absl::InvalidArgumentError(absl::StrCat("allocation ", id,
                                                       ": a release ends RELEASED or FAILED, not ",
                                                       Name(update.release->state)));
      }
      ASSIGN_OR_RETURN(Statement intent, db_->Prepare("UPDATE allocations SET release_state = ?2, "
                                                      "release_reason = ?3 WHERE id = ?1"));
      RETURN_IF_ERROR(intent.Bind(1, id)
                          .Bind(2, Name(update.release->state))
                          .Bind(3, update.release->reason)
                          .Run());
    }

    if (update.remove_circuits) {
      // The changes named in `circuits` would be deleted with the rows; they were checked
      // above so that a wrong id is still reported.
      RETURN_IF_ERROR(RunLocked("DELETE FROM circuits WHERE allocation_id = ?1", id));
    } else {
      // Circuits leaving the desired set go first, so that a phase switch may hand their
      // ports to circuits joining it in the same update.
      for (bool joining : {false, true}) {
        for (const auto& [circuit_id, change] : update.circuits) {
          const bool want = change.state != v1::CIRCUIT_STATE_INACTIVE;
          if (want != joining) continue;
          RETURN_IF_ERROR(
              SetCircuitStateLocked(circuit_id, change, /*was_desired=*/desired[circuit_id]));
        }
      }
      if (update.state == v1::ALLOCATION_STATE_FAILED ||
          update.state == v1::ALLOCATION_STATE_RELEASED) {
        // Invariant 2: circuits belong to a live allocation. Deleting them silently would
        // hide a caller that forgot to take them off the switches.
        RETURN_IF_ERROR(RefuseIfAnyLocked(
            "SELECT id FROM circuits WHERE allocation_id = ?1 ORDER BY position, id LIMIT 1", id,
            absl::StrCat("allocation ", id, " cannot become ", Name(*update.state),
                         " while it holds circuit "),
            "; remove its circuits in the same update"));
      }
    }

    std::string message = update.event_message;
    if (message.empty()) {
      message = update.state.has_value()
                    ? absl::StrCat("allocation ", id, " is now ", Name(*update.state))
                    : absl::StrCat("allocation ", id, " updated");
      if (update.reason.has_value() && !update.reason->empty()) {
        absl::StrAppend(&message, ": ", *update.reason);
      }
      if (update.remove_circuits && !desired.empty()) {
        absl::StrAppend(&message, "; its ", desired.size(), " circuits are removed");
      }
    }
    RETURN_IF_ERROR(AppendEventLocked(
        update.event_kind.empty() ? std::string("allocation.state") : update.event_kind,
        "allocation", id, update.severity, message, principal));
    // Read inside the transaction: with the one connection under mu_, this is exactly what
    // the commit makes durable, and a failed read leaves nothing half-reported.
    ASSIGN_OR_RETURN(v1::Allocation after, ImageLocked(id));
    RETURN_IF_ERROR(CommitLocked(txn));
    return after;
  }

  absl::StatusOr<v1::Allocation> ReplaceCircuits(const CircuitReplacement& r,
                                                 const std::string& principal) override {
    const std::string& id = r.allocation_id;
    if (r.state.has_value() && *r.state == v1::ALLOCATION_STATE_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("allocation ", id, ": the new state must be specified"));
    }
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    ASSIGN_OR_RETURN(const std::string stored_state, StoredStateLocked(id));
    if (stored_state == Name(v1::ALLOCATION_STATE_RELEASED) ||
        stored_state == Name(v1::ALLOCATION_STATE_FAILED)) {
      return absl::FailedPreconditionError(
          absl::StrCat("allocation ", id, " is ", stored_state, "; its circuits cannot change"));
    }
    std::set<std::string> mine;
    int64_t position = 0;
    ASSIGN_OR_RETURN(Statement circuits,
                     db_->Prepare("SELECT id, position FROM circuits WHERE allocation_id = ?1"));
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
      RETURN_IF_ERROR(RunLocked(
          "INSERT OR REPLACE INTO pending_removals (allocation_id, switch_id, ingress, egress) "
          "SELECT c.allocation_id, x.switch_id, x.ingress, x.egress FROM cross_connects x "
          "JOIN circuits c ON c.id = x.circuit_id WHERE x.circuit_id = ?1 AND x.desired = 1",
          circuit_id));
      RETURN_IF_ERROR(RunLocked("DELETE FROM circuits WHERE id = ?1", circuit_id));
    }
    for (const v1::Circuit& c : r.add) {
      RETURN_IF_ERROR(InsertCircuitLocked(c, id, static_cast<int>(position++)));
    }
    RETURN_IF_ERROR(RunLocked("DELETE FROM allocation_members WHERE allocation_id = ?1", id));
    RETURN_IF_ERROR(InsertMembersLocked(id, r.members));
    ASSIGN_OR_RETURN(Statement write, db_->Prepare(R"sql(
      UPDATE allocations SET
        state = CASE WHEN ?2 THEN ?3 ELSE state END,
        reason = CASE WHEN ?2 THEN '' ELSE reason END,
        updated_us = ?4
      WHERE id = ?1)sql"));
    RETURN_IF_ERROR(write.Bind(1, id)
                        .Bind(2, int64_t{r.state.has_value()})
                        .Bind(3, Name(r.state.value_or(v1::ALLOCATION_STATE_UNSPECIFIED)))
                        .Bind(4, absl::ToUnixMicros(clock_->Now()))
                        .Run());
    RETURN_IF_ERROR(AppendEventLocked(r.event_kind, "allocation", id, v1::EVENT_SEVERITY_INFO,
                                      r.event_message.empty()
                                          ? absl::StrCat("allocation ", id, ": ", r.remove.size(),
                                                         " circuits replaced by ", r.add.size())
                                          : r.event_message,
                                      principal));
    ASSIGN_OR_RETURN(v1::Allocation after, ImageLocked(id));
    RETURN_IF_ERROR(CommitLocked(txn));
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
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    RETURN_IF_ERROR(InsertCircuitLocked(circuit, "", 0));
    std::vector<std::string> hops;
    for (const v1::CrossConnect& x : circuit.cross_connects()) {
      hops.push_back(absl::StrCat(x.switch_id(), " ", x.ingress(), "->", x.egress()));
    }
    RETURN_IF_ERROR(AppendEventLocked(
        "circuit.created", "circuit", circuit.id(), v1::EVENT_SEVERITY_INFO,
        absl::StrCat("manual circuit ", circuit.id(), " from onic ", circuit.source().onic(),
                     " port ", circuit.source().port(), " to onic ", circuit.destination().onic(),
                     " port ", circuit.destination().port(), " recorded in state ",
                     Name(circuit.state()),
                     hops.empty() ? "" : absl::StrCat(" via ", absl::StrJoin(hops, ", "))),
        principal));
    return CommitLocked(txn);
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
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    RETURN_IF_ERROR(
        RequireExistsLocked("SELECT 1 FROM switches WHERE id = ?1", "switch", switch_id));
    RETURN_IF_ERROR(
        RunLocked("DELETE FROM observed_cross_connects WHERE switch_id = ?1", switch_id));
    ASSIGN_OR_RETURN(Statement insert, db_->Prepare(R"sql(
      INSERT INTO observed_cross_connects (switch_id, ingress, egress, observed_us)
      VALUES (?1, ?2, ?3, ?4))sql"));
    const int64_t now = absl::ToUnixMicros(clock_->Now());
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
    return CommitLocked(txn);
  }

  absl::StatusOr<std::vector<v1::CrossConnect>> ListObservedCrossConnects(
      const std::string& switch_id) override {
    absl::MutexLock lock(&mu_);
    if (!switch_id.empty()) {
      RETURN_IF_ERROR(
          RequireExistsLocked("SELECT 1 FROM switches WHERE id = ?1", "switch", switch_id));
    }
    return CrossConnectsLocked(R"sql(
      SELECT switch_id, ingress, egress FROM observed_cross_connects
      WHERE ?1 = '' OR switch_id = ?1
      ORDER BY switch_id, ingress)sql",
                               switch_id);
  }

  absl::Status SetDrained(const DrainTargetRef& target, bool drained, const std::string& reason,
                          const std::string& principal) override {
    const bool names_port = !target.switch_id.empty() || target.port != 0;
    const int named = int{names_port} + int{!target.onic.empty()} + int{!target.host.empty()};
    if (named != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a drain names exactly one of a switch port, an O-NIC or a host; this one names ",
          named));
    }
    if (names_port && (target.switch_id.empty() || target.port == 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a switch port to drain needs both a switch and a port number (got '",
                       target.switch_id, "' port ", target.port, ")"));
    }
    // The table, the key columns and the event's object kind are ours, never input.
    std::string object_kind;
    std::string object_id;
    std::string what;
    absl::string_view table;
    absl::string_view key;
    if (names_port) {
      object_kind = "port";
      object_id = absl::StrCat(target.switch_id, "/", target.port);
      what = absl::StrCat("switch port ", object_id);
      table = "switch_ports";
      key = "switch_id = ?2 AND port = ?3";
    } else if (!target.onic.empty()) {
      object_kind = "onic";
      object_id = target.onic;
      what = absl::StrCat("onic ", object_id);
      table = "onics";
      key = "id = ?2";
    } else {
      object_kind = "host";
      object_id = target.host;
      what = absl::StrCat("host ", object_id);
      table = "hosts";
      key = "name = ?2";
    }
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Transaction txn, BeginLocked());
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(absl::StrCat(
                                         "UPDATE ", table, " SET admin_state = ?1 WHERE ", key)));
    stmt.Bind(1, Name(drained ? v1::ADMIN_STATE_DRAINED : v1::ADMIN_STATE_ENABLED))
        .Bind(2, names_port ? target.switch_id : object_id);
    if (names_port) stmt.Bind(3, static_cast<int64_t>(target.port));
    RETURN_IF_ERROR(stmt.Run());
    // SQLite counts a matched row even when its value does not change, so a repeat is not
    // mistaken for an unknown target.
    if (db_->Changes() == 0) return absl::NotFoundError(absl::StrCat(what, " not found"));
    RETURN_IF_ERROR(AppendEventLocked(
        drained ? "drain" : "undrain", object_kind, object_id, v1::EVENT_SEVERITY_INFO,
        absl::StrCat(drained ? "drained " : "undrained ", what,
                     reason.empty() ? "" : absl::StrCat(": ", reason)),
        principal));
    RETURN_IF_ERROR(CommitLocked(txn));
    inventory_version_.fetch_add(1);
    return absl::OkStatus();
  }

 private:
  // --- helpers; all require mu_ ---

  // Every write begins here, so that the sequence of an event left by a rolled-back write
  // is never published.
  absl::StatusOr<Transaction> BeginLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    uncommitted_sequence_ = 0;
    uncommitted_images_.clear();
    return Transaction::Begin(*db_);
  }

  // Commits and then wakes watchers of the event log, if the write appended events. Its
  // allocation commits are kept first, so a watcher that sees its events finds them.
  absl::Status CommitLocked(Transaction& txn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    RETURN_IF_ERROR(txn.Commit());
    if (uncommitted_sequence_ != 0) {
      absl::MutexLock lock(&sequence_mu_);
      for (auto& [id, image] : uncommitted_images_) {
        commits_.push_back({uncommitted_sequence_, id, std::move(image)});
      }
      while (commits_.size() > kKeptCommits) {
        commits_floor_ = commits_.front().sequence;
        commits_.pop_front();
      }
      last_sequence_ = std::max(last_sequence_, uncommitted_sequence_);
      uncommitted_sequence_ = 0;
    }
    uncommitted_images_.clear();
    return absl::OkStatus();
  }

  // The allocations AllocationsLocked(id, filter) reads, each with the newest committed
  // sequence: under mu_ no commit is under way, so that is exactly what the read saw.
  absl::StatusOr<std::vector<AllocationCommit>> ReadCommitsLocked(const std::string& id,
                                                                  const AllocationFilter& filter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(std::vector<v1::Allocation> found, AllocationsLocked(id, filter));
    absl::MutexLock sequence(&sequence_mu_);
    std::vector<AllocationCommit> out;
    out.reserve(found.size());
    for (v1::Allocation& a : found) {
      std::string read_id = a.id();
      out.push_back(AllocationCommit{last_sequence_, std::move(read_id),
                                     std::make_shared<const v1::Allocation>(std::move(a))});
    }
    return out;
  }

  // Allocation `id` as the open transaction leaves it, kept as its image for watchers; null
  // when there is no such allocation.
  absl::StatusOr<std::shared_ptr<const v1::Allocation>> KeepImageLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(std::vector<v1::Allocation> found, AllocationsLocked(id, {}));
    if (found.empty()) return nullptr;
    auto image = std::make_shared<const v1::Allocation>(std::move(found.front()));
    uncommitted_images_[id] = image;
    return image;
  }

  // As KeepImageLocked, for a write that changed the allocation: it must still be there.
  absl::StatusOr<v1::Allocation> ImageLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(std::shared_ptr<const v1::Allocation> image, KeepImageLocked(id));
    if (image == nullptr) {
      return absl::InternalError(absl::StrCat("allocation ", id, " vanished while updated"));
    }
    return *image;
  }

  // Sets one circuit's state and reason, and whether it is desired. A circuit that `joins`
  // the desired set takes its ports from this commit on, so they must be free.
  // Sets a circuit's state; `was_desired`: whether it is in the desired set now. Only a
  // circuit joining or leaving the desired set has its cross-connects rewritten.
  absl::Status SetCircuitStateLocked(const std::string& circuit_id,
                                     const AllocationUpdate::CircuitChange& change,
                                     bool was_desired) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t desired = change.state != v1::CIRCUIT_STATE_INACTIVE ? 1 : 0;
    if (desired == was_desired) {
      // A state change in place (PLANNED → PROGRAMMED → ACTIVE): one row.
      ASSIGN_OR_RETURN(Statement circuit,
                       db_->Prepare("UPDATE circuits SET state = ?2, reason = ?3 WHERE id = ?1"));
      if (absl::Status s =
              circuit.Bind(1, circuit_id).Bind(2, Name(change.state)).Bind(3, change.reason).Run();
          !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("circuit ", circuit_id, ": ", s.message()));
      }
      return absl::OkStatus();
    }
    if (desired) {  // Joining the desired set.
      // Name the holder; the unique indexes are the backstop.
      RETURN_IF_ERROR(RefuseIfAnyLocked(
          R"sql(
          SELECT 'switch port ' || mine.switch_id || '/' ||
                 CASE WHEN other.ingress = mine.ingress THEN mine.ingress ELSE mine.egress END ||
                 ' is already in circuit ' || other.circuit_id
          FROM cross_connects mine JOIN cross_connects other
            ON other.desired = 1 AND other.circuit_id != mine.circuit_id
               AND other.switch_id = mine.switch_id
               AND (other.ingress = mine.ingress OR other.egress = mine.egress)
          WHERE mine.circuit_id = ?1 ORDER BY mine.hop LIMIT 1)sql",
          circuit_id, absl::StrCat("circuit ", circuit_id, " cannot become desired: "), ""));
      RETURN_IF_ERROR(RefuseIfAnyLocked(
          R"sql(
          SELECT CASE WHEN other.src_onic = mine.src_onic AND other.src_port = mine.src_port
                      THEN 'onic ' || mine.src_onic || ' port ' || mine.src_port
                      ELSE 'onic ' || mine.dst_onic || ' port ' || mine.dst_port END ||
                 ' is already in circuit ' || other.id
          FROM circuits mine JOIN circuits other
            ON other.desired = 1 AND other.id != mine.id
               AND ((other.src_onic = mine.src_onic AND other.src_port = mine.src_port)
                    OR (other.dst_onic = mine.dst_onic AND other.dst_port = mine.dst_port))
          WHERE mine.id = ?1 LIMIT 1)sql",
          circuit_id, absl::StrCat("circuit ", circuit_id, " cannot become desired: "), ""));
    }
    ASSIGN_OR_RETURN(
        Statement circuit,
        db_->Prepare("UPDATE circuits SET state = ?2, reason = ?3, desired = ?4 WHERE id = ?1"));
    if (absl::Status s = circuit.Bind(1, circuit_id)
                             .Bind(2, Name(change.state))
                             .Bind(3, change.reason)
                             .Bind(4, desired)
                             .Run();
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("circuit ", circuit_id, ": ", s.message()));
    }
    ASSIGN_OR_RETURN(Statement hops,
                     db_->Prepare("UPDATE cross_connects SET desired = ?2 WHERE circuit_id = ?1"));
    if (absl::Status s = hops.Bind(1, circuit_id).Bind(2, desired).Run(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("circuit ", circuit_id, ": ", s.message()));
    }
    return absl::OkStatus();
  }

  // The (switch_id, ingress, egress) rows `sql` selects with `arg` bound to ?1.
  absl::StatusOr<std::vector<v1::CrossConnect>> CrossConnectsLocked(absl::string_view sql,
                                                                    const std::string& arg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(sql));
    stmt.Bind(1, arg);
    std::vector<v1::CrossConnect> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      v1::CrossConnect& x = out.emplace_back();
      x.set_switch_id(stmt.Text(0));
      x.set_ingress(static_cast<uint32_t>(stmt.Int(1)));
      x.set_egress(static_cast<uint32_t>(stmt.Int(2)));
    }
    return out;
  }

  absl::Status RunLocked(absl::string_view sql, const std::string& arg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(sql));
    return stmt.Bind(1, arg).Run();
  }

  absl::Status RequireExistsLocked(absl::string_view sql, const std::string& kind,
                                   const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(sql));
    ASSIGN_OR_RETURN(bool row, stmt.Bind(1, name).Step());
    if (!row) return absl::NotFoundError(absl::StrCat(kind, " ", name, " not found"));
    return absl::OkStatus();
  }

  // Runs `sql` with `arg`; if it returns a row, fails with `before` + first column + `after`.
  absl::Status RefuseIfAnyLocked(absl::string_view sql, const std::string& arg,
                                 const std::string& before, const std::string& after,
                                 absl::StatusCode code = absl::StatusCode::kFailedPrecondition)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(sql));
    ASSIGN_OR_RETURN(bool row, stmt.Bind(1, arg).Step());
    if (!row) return absl::OkStatus();
    return absl::Status(code, absl::StrCat(before, stmt.Text(0), after));
  }

  absl::Status AppendEventLocked(const std::string& kind, const std::string& object_kind,
                                 const std::string& object_id, v1::EventSeverity severity,
                                 const std::string& message, const std::string& principal)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      INSERT INTO events (time_us, principal, kind, object_kind, object_id, severity, message)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7))sql"));
    RETURN_IF_ERROR(
        stmt.Bind(1, absl::ToUnixMicros(clock_->Now()))
            .Bind(2, principal.empty() ? std::string("anonymous") : principal)
            .Bind(3, kind)
            .Bind(4, object_kind)
            .Bind(5, object_id)
            .Bind(6, Name(severity == v1::EVENT_SEVERITY_UNSPECIFIED ? v1::EVENT_SEVERITY_INFO
                                                                     : severity))
            .Bind(7, message)
            .Run());
    uncommitted_sequence_ = static_cast<uint64_t>(db_->LastInsertRowId());
    // Any image of it read before this event is out of date.
    if (object_kind == "allocation") uncommitted_images_[object_id] = nullptr;
    return absl::OkStatus();
  }

  // `what` is "kind id".
  absl::Status InventoryEventLocked(const std::string& kind, const std::string& what,
                                    const std::string& principal, const std::string& verb)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::pair<std::string, std::string> parts = absl::StrSplit(what, absl::MaxSplits(' ', 1));
    return AppendEventLocked(kind, parts.first, parts.second, v1::EVENT_SEVERITY_INFO,
                             absl::StrCat(verb, " ", what), principal);
  }

  absl::StatusOr<std::vector<v1::Switch>> SwitchesLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      SELECT id, model, ingress_ports, egress_ports, address, protocol, management_port,
             credentials_ref, cluster
      FROM switches WHERE ?1 = '' OR id = ?1 ORDER BY id)sql"));
    stmt.Bind(1, id);
    std::vector<v1::Switch> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      v1::Switch& s = out.emplace_back();
      s.set_id(stmt.Text(0));
      s.set_model(stmt.Text(1));
      s.set_ingress_ports(static_cast<uint32_t>(stmt.Int(2)));
      s.set_egress_ports(static_cast<uint32_t>(stmt.Int(3)));
      s.set_address(stmt.Text(4));
      s.set_protocol(ParseColumn<v1::SwitchProtocol>(stmt.Text(5)));
      s.set_management_port(static_cast<uint32_t>(stmt.Int(6)));
      s.set_credentials_ref(stmt.Text(7));
      s.set_cluster(stmt.Text(8));
    }
    ASSIGN_OR_RETURN(
        Statement reserved,
        db_->Prepare("SELECT port FROM switch_ports WHERE switch_id = ?1 AND reservation = 'trunk' "
                     "ORDER BY port"));
    for (v1::Switch& s : out) {
      reserved.Bind(1, s.id());
      while (true) {
        ASSIGN_OR_RETURN(bool row, reserved.Step());
        if (!row) break;
        s.add_trunk_reserved_ports(static_cast<uint32_t>(reserved.Int(0)));
      }
      reserved.Reset();
    }
    return out;
  }

  absl::StatusOr<std::vector<v1::Host>> HostsLocked(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt,
                     db_->Prepare("SELECT name, address, cluster, admin_state FROM hosts "
                                  "WHERE ?1 = '' OR name = ?1 ORDER BY name"));
    stmt.Bind(1, name);
    std::vector<v1::Host> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      v1::Host& h = out.emplace_back();
      h.set_name(stmt.Text(0));
      h.set_address(stmt.Text(1));
      h.set_cluster(stmt.Text(2));
      h.set_admin_state(ParseColumn<v1::AdminState>(stmt.Text(3)));
    }
    return out;
  }

  absl::StatusOr<std::vector<v1::Device>> DevicesLocked(const std::string& id,
                                                        const DeviceFilter& filter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      SELECT d.id, d.kind, COALESCE(d.host, ''), d.chassis, d.model, d.admin_state,
             (SELECT group_concat(o.id, char(10)) FROM
                (SELECT id FROM onics WHERE device_id = d.id ORDER BY id) o)
      FROM devices d
      WHERE (?1 = '' OR d.id = ?1) AND (?2 = '' OR d.host = ?2) AND (?3 = '' OR d.kind = ?3)
      ORDER BY d.id)sql"));
    stmt.Bind(1, id).Bind(2, filter.host).Bind(3, Name(filter.kind));
    std::vector<v1::Device> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      v1::Device& d = out.emplace_back();
      d.set_id(stmt.Text(0));
      d.set_kind(ParseColumn<v1::DeviceKind>(stmt.Text(1)));
      d.set_host(stmt.Text(2));
      d.set_chassis(stmt.Text(3));
      d.set_model(stmt.Text(4));
      d.set_admin_state(ParseColumn<v1::AdminState>(stmt.Text(5)));
      if (!stmt.IsNull(6)) {
        for (absl::string_view onic : absl::StrSplit(stmt.Text(6), '\n'))
          d.add_onics(std::string(onic));
      }
    }
    return out;
  }

  absl::StatusOr<std::vector<v1::Onic>> OnicsLocked(const std::string& id, const OnicFilter& filter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      SELECT o.id, o.device_id, o.serial, o.pcie_address, o.admin_state, COALESCE(d.host, '')
      FROM onics o JOIN devices d ON d.id = o.device_id
      WHERE (?1 = '' OR o.id = ?1) AND (?2 = '' OR d.host = ?2)
        AND (?3 = '' OR EXISTS (SELECT 1 FROM fibers f WHERE f.onic_id = o.id AND f.switch_id = ?3))
      ORDER BY o.id)sql"));
    stmt.Bind(1, id).Bind(2, filter.host).Bind(3, filter.switch_id);
    std::vector<v1::Onic> out;
    std::map<std::string, size_t> index;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      v1::Onic& o = out.emplace_back();
      o.set_id(stmt.Text(0));
      o.set_device(stmt.Text(1));
      o.set_serial(stmt.Text(2));
      o.set_pcie_address(stmt.Text(3));
      o.set_admin_state(ParseColumn<v1::AdminState>(stmt.Text(4)));
      o.set_host(stmt.Text(5));
      index[o.id()] = out.size() - 1;
    }
    ASSIGN_OR_RETURN(Statement ports, db_->Prepare(R"sql(
      SELECT p.onic_id, p.port, p.admin_state, p.oper_state,
             tx.switch_id, tx.switch_port, rx.switch_id, rx.switch_port
      FROM onic_ports p
      LEFT JOIN fibers tx ON tx.onic_id = p.onic_id AND tx.onic_port = p.port AND tx.strand = 'tx'
      LEFT JOIN fibers rx ON rx.onic_id = p.onic_id AND rx.onic_port = p.port AND rx.strand = 'rx'
      WHERE ?1 = '' OR p.onic_id = ?1
      ORDER BY p.onic_id, p.port)sql"));
    ports.Bind(1, id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, ports.Step());
      if (!row) break;
      auto it = index.find(ports.Text(0));
      if (it == index.end()) continue;  // Filtered out above.
      v1::OnicPort* p = out[it->second].add_ports();
      p->set_index(static_cast<uint32_t>(ports.Int(1)));
      p->set_admin_state(ParseColumn<v1::AdminState>(ports.Text(2)));
      p->set_oper_state(ParseColumn<v1::OperState>(ports.Text(3)));
      if (!ports.IsNull(4)) {
        p->mutable_tx()->set_switch_id(ports.Text(4));
        p->mutable_tx()->set_port(static_cast<uint32_t>(ports.Int(5)));
      }
      if (!ports.IsNull(6)) {
        p->mutable_rx()->set_switch_id(ports.Text(6));
        p->mutable_rx()->set_port(static_cast<uint32_t>(ports.Int(7)));
      }
    }
    return out;
  }

  absl::StatusOr<std::vector<v1::Trunk>> TrunksLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(
        Statement stmt,
        db_->Prepare(
            "SELECT id, from_switch, from_port, to_switch, to_port FROM trunks ORDER BY id"));
    std::vector<v1::Trunk> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      v1::Trunk& t = out.emplace_back();
      t.set_id(stmt.Text(0));
      t.mutable_from()->set_switch_id(stmt.Text(1));
      t.mutable_from()->set_port(static_cast<uint32_t>(stmt.Int(2)));
      t.mutable_to()->set_switch_id(stmt.Text(3));
      t.mutable_to()->set_port(static_cast<uint32_t>(stmt.Int(4)));
    }
    return out;
  }

  absl::Status UpsertSwitchLocked(const v1::Switch& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t ingress = s.ingress_ports();
    const int64_t total = ingress + s.egress_ports();
    // A resize or re-split must not strand a cross-connect of a desired circuit.
    RETURN_IF_ERROR(RefuseIfAnyLocked(
        absl::StrCat("SELECT circuit_id || ' (' || switch_id || ' ' || ingress || '->' || egress "
                     "|| ')' FROM cross_connects WHERE switch_id = ?1 AND (ingress > ",
                     ingress, " OR egress <= ", ingress, " OR egress > ", total, ") LIMIT 1"),
        s.id(),
        absl::StrCat("switch ", s.id(), " cannot be resized to ", s.ingress_ports(), "x",
                     s.egress_ports(), ": circuit "),
        " uses a port that would move or vanish"));
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      INSERT INTO switches (id, model, ingress_ports, egress_ports, address, protocol,
                            management_port, credentials_ref, cluster)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
      ON CONFLICT (id) DO UPDATE SET
        model = excluded.model, ingress_ports = excluded.ingress_ports,
        egress_ports = excluded.egress_ports, address = excluded.address,
        protocol = excluded.protocol, management_port = excluded.management_port,
        credentials_ref = excluded.credentials_ref, cluster = excluded.cluster)sql"));
    RETURN_IF_ERROR(stmt.Bind(1, s.id())
                        .Bind(2, s.model())
                        .Bind(3, ingress)
                        .Bind(4, static_cast<int64_t>(s.egress_ports()))
                        .Bind(5, s.address())
                        .Bind(6, Name(s.protocol()))
                        .Bind(7, static_cast<int64_t>(s.management_port()))
                        .Bind(8, s.credentials_ref())
                        .Bind(9, s.cluster())
                        .Run());
    ASSIGN_OR_RETURN(Statement shrink,
                     db_->Prepare("DELETE FROM switch_ports WHERE switch_id = ?1 AND port > ?2"));
    RETURN_IF_ERROR(shrink.Bind(1, s.id()).Bind(2, total).Run());
    ASSIGN_OR_RETURN(
        Statement relabel,
        db_->Prepare("UPDATE switch_ports SET reservation = 'none', direction = "
                     "CASE WHEN port <= ?2 THEN 'ingress' ELSE 'egress' END WHERE switch_id = ?1"));
    RETURN_IF_ERROR(relabel.Bind(1, s.id()).Bind(2, ingress).Run());
    ASSIGN_OR_RETURN(
        Statement add,
        db_->Prepare(
            "INSERT OR IGNORE INTO switch_ports (switch_id, port, direction) VALUES (?1, ?2, ?3)"));
    for (int64_t port = 1; port <= total; ++port) {
      RETURN_IF_ERROR(
          add.Bind(1, s.id()).Bind(2, port).Bind(3, port <= ingress ? "ingress" : "egress").Run());
      add.Reset();
    }
    ASSIGN_OR_RETURN(
        Statement reserve,
        db_->Prepare(
            "UPDATE switch_ports SET reservation = 'trunk' WHERE switch_id = ?1 AND port = ?2"));
    for (uint32_t port : s.trunk_reserved_ports()) {
      RETURN_IF_ERROR(reserve.Bind(1, s.id()).Bind(2, static_cast<int64_t>(port)).Run());
      reserve.Reset();
    }
    return absl::OkStatus();
  }

  absl::Status UpsertHostLocked(const v1::Host& h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      INSERT INTO hosts (name, address, cluster) VALUES (?1, ?2, ?3)
      ON CONFLICT (name) DO UPDATE SET address = excluded.address, cluster = excluded.cluster)sql"));
    return stmt.Bind(1, h.name()).Bind(2, h.address()).Bind(3, h.cluster()).Run();
  }

  absl::Status UpsertDeviceLocked(const v1::Device& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      INSERT INTO devices (id, kind, host, chassis, model) VALUES (?1, ?2, ?3, ?4, ?5)
      ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, host = excluded.host,
        chassis = excluded.chassis, model = excluded.model)sql"));
    stmt.Bind(1, d.id()).Bind(2, Name(d.kind())).Bind(4, d.chassis()).Bind(5, d.model());
    if (d.host().empty()) {
      stmt.BindNull(3);
    } else {
      stmt.Bind(3, d.host());
    }
    return stmt.Run();
  }

  // An O-NIC port in a circuit keeps its fibers: rewiring it, or dropping it from the O-NIC,
  // would silently break the circuit.
  absl::Status CheckRewireLocked(const v1::Onic& o) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(std::vector<v1::Onic> stored, OnicsLocked(o.id(), {}));
    if (stored.empty()) return absl::OkStatus();
    for (const v1::OnicPort& have : stored.front().ports()) {
      const v1::OnicPort* want = nullptr;
      for (const v1::OnicPort& p : o.ports()) {
        if (p.index() == have.index()) want = &p;
      }
      if (want != nullptr && have.tx().SerializeAsString() == want->tx().SerializeAsString() &&
          have.rx().SerializeAsString() == want->rx().SerializeAsString()) {
        continue;
      }
      ASSIGN_OR_RETURN(
          Statement stmt,
          db_->Prepare("SELECT id FROM circuits WHERE (src_onic = ?1 AND src_port = ?2) OR "
                       "(dst_onic = ?1 AND dst_port = ?2) LIMIT 1"));
      ASSIGN_OR_RETURN(bool row,
                       stmt.Bind(1, o.id()).Bind(2, static_cast<int64_t>(have.index())).Step());
      if (row) {
        return absl::FailedPreconditionError(absl::StrCat(
            "onic ", o.id(), " port ", have.index(), " is in circuit ", stmt.Text(0),
            "; release it before ", want == nullptr ? "removing the port" : "rewiring its fibers"));
      }
    }
    return absl::OkStatus();
  }

  // A trunk carrying a circuit keeps its ports.
  absl::Status CheckTrunkRewireLocked(const v1::Trunk& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(
        Statement stmt,
        db_->Prepare(
            "SELECT from_switch, from_port, to_switch, to_port FROM trunks WHERE id = ?1"));
    ASSIGN_OR_RETURN(bool row, stmt.Bind(1, t.id()).Step());
    if (!row) return absl::OkStatus();
    if (stmt.Text(0) == t.from().switch_id() && stmt.Int(1) == t.from().port() &&
        stmt.Text(2) == t.to().switch_id() && stmt.Int(3) == t.to().port()) {
      return absl::OkStatus();
    }
    return RefuseIfAnyLocked(kTrunkCircuitSql, t.id(),
                             absl::StrCat("trunk ", t.id(), " carries circuit "),
                             "; release it before rewiring the trunk");
  }

  absl::Status UpsertOnicLocked(const v1::Onic& o) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      INSERT INTO onics (id, device_id, serial, pcie_address) VALUES (?1, ?2, ?3, ?4)
      ON CONFLICT (id) DO UPDATE SET device_id = excluded.device_id, serial = excluded.serial,
        pcie_address = excluded.pcie_address)sql"));
    RETURN_IF_ERROR(stmt.Bind(1, o.id())
                        .Bind(2, o.device())
                        .Bind(3, o.serial())
                        .Bind(4, o.pcie_address())
                        .Run());
    ASSIGN_OR_RETURN(
        Statement port,
        db_->Prepare("INSERT OR IGNORE INTO onic_ports (onic_id, port) VALUES (?1, ?2)"));
    ASSIGN_OR_RETURN(
        Statement fiber,
        db_->Prepare("INSERT INTO fibers (onic_id, onic_port, strand, switch_id, switch_port) "
                     "VALUES (?1, ?2, ?3, ?4, ?5)"));
    for (const v1::OnicPort& p : o.ports()) {
      const int64_t index = p.index();
      RETURN_IF_ERROR(port.Bind(1, o.id()).Bind(2, index).Run());
      port.Reset();
      for (const auto& [strand, ref] :
           {std::pair<const char*, const v1::SwitchPortRef*>{"tx", &p.tx()}, {"rx", &p.rx()}}) {
        RETURN_IF_ERROR(fiber.Bind(1, o.id())
                            .Bind(2, index)
                            .Bind(3, strand)
                            .Bind(4, ref->switch_id())
                            .Bind(5, static_cast<int64_t>(ref->port()))
                            .Run());
        fiber.Reset();
      }
    }
    return absl::OkStatus();
  }

  absl::Status InsertTrunkLocked(const v1::Trunk& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(
        Statement stmt,
        db_->Prepare("INSERT INTO trunks (id, from_switch, from_port, to_switch, to_port) "
                     "VALUES (?1, ?2, ?3, ?4, ?5)"));
    return stmt.Bind(1, t.id())
        .Bind(2, t.from().switch_id())
        .Bind(3, static_cast<int64_t>(t.from().port()))
        .Bind(4, t.to().switch_id())
        .Bind(5, static_cast<int64_t>(t.to().port()))
        .Run();
  }

  // The stored state of allocation `id`, in the store's text form; NOT_FOUND naming it.
  absl::StatusOr<std::string> StoredStateLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement current,
                     db_->Prepare("SELECT state FROM allocations WHERE id = ?1"));
    ASSIGN_OR_RETURN(bool found, current.Bind(1, id).Step());
    if (!found) return absl::NotFoundError(absl::StrCat("allocation ", id, " not found"));
    return current.Text(0);
  }

  absl::Status InsertMembersLocked(const std::string& allocation_id,
                                   const std::vector<std::string>& members)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement member,
                     db_->Prepare("INSERT INTO allocation_members (allocation_id, position, "
                                  "device_id) VALUES (?1, ?2, ?3)"));
    for (size_t i = 0; i < members.size(); ++i) {
      RETURN_IF_ERROR(
          member.Bind(1, allocation_id).Bind(2, static_cast<int64_t>(i)).Bind(3, members[i]).Run());
      member.Reset();
    }
    return absl::OkStatus();
  }

  // Why circuit `c` cannot be stored, when the reason is another circuit already holding its
  // id (unless `stored`: its own row is in) or, for a desired circuit, one of its switch
  // ports; OK when neither.
  absl::Status ExplainRefusedCircuitLocked(const v1::Circuit& c, bool stored)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!stored) {
      RETURN_IF_ERROR(RefuseIfAnyLocked(
          "SELECT COALESCE('allocation ' || allocation_id, 'the manual circuits') FROM circuits "
          "WHERE id = ?1",
          c.id(), absl::StrCat("circuit ", c.id(), " already exists in "), "",
          absl::StatusCode::kAlreadyExists));
    }
    if (c.state() == v1::CIRCUIT_STATE_INACTIVE) return absl::OkStatus();
    for (const v1::CrossConnect& x : c.cross_connects()) {
      for (const auto& [sql, port] :
           {std::pair<const char*, uint32_t>{
                "SELECT circuit_id FROM cross_connects WHERE desired = 1 AND "
                "switch_id = ?1 AND ingress = ?2 AND circuit_id != ?3 LIMIT 1",
                x.ingress()},
            {"SELECT circuit_id FROM cross_connects WHERE desired = 1 AND "
             "switch_id = ?1 AND egress = ?2 AND circuit_id != ?3 LIMIT 1",
             x.egress()}}) {
        ASSIGN_OR_RETURN(Statement holder, db_->Prepare(sql));
        ASSIGN_OR_RETURN(bool row, holder.Bind(1, x.switch_id())
                                       .Bind(2, static_cast<int64_t>(port))
                                       .Bind(3, c.id())
                                       .Step());
        if (row) {
          return absl::FailedPreconditionError(absl::StrCat(
              "switch port ", x.switch_id(), "/", port, " is already in circuit ", holder.Text(0)));
        }
      }
    }
    return absl::OkStatus();
  }

  // Stores circuit `c` and its cross-connects. The constraints (the primary key, one desired
  // circuit per O-NIC port and per switch port, the foreign keys) refuse what may not be;
  // only then is the store asked who holds what, so the common case costs two inserts.
  absl::Status InsertCircuitLocked(const v1::Circuit& c, const std::string& allocation_id,
                                   int position) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const bool desired = c.state() != v1::CIRCUIT_STATE_INACTIVE;
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      INSERT INTO circuits (id, allocation_id, manual, src_onic, src_port, dst_onic, dst_port,
                            phase, state, reason, desired, position, trunks)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13))sql"));
    stmt.Bind(1, c.id())
        .Bind(3, int64_t{c.manual() ? 1 : 0})
        .Bind(4, c.source().onic())
        .Bind(5, static_cast<int64_t>(c.source().port()))
        .Bind(6, c.destination().onic())
        .Bind(7, static_cast<int64_t>(c.destination().port()))
        .Bind(8, c.phase())
        .Bind(9, Name(c.state()))
        .Bind(10, c.reason())
        .Bind(11, int64_t{desired ? 1 : 0})
        .Bind(12, int64_t{position})
        .Bind(13, absl::StrJoin(c.trunks(), "\n"));
    if (c.manual()) {
      stmt.BindNull(2);
    } else {
      stmt.Bind(2, allocation_id);
    }
    if (absl::Status s = stmt.Run(); !s.ok()) {
      RETURN_IF_ERROR(ExplainRefusedCircuitLocked(c, /*stored=*/false));
      return absl::Status(
          s.code(), absl::StrCat("circuit ", c.id(), " from onic ", c.source().onic(), " port ",
                                 c.source().port(), " to onic ", c.destination().onic(), " port ",
                                 c.destination().port(), ": ", s.message()));
    }
    ASSIGN_OR_RETURN(
        Statement hop,
        db_->Prepare(
            "INSERT INTO cross_connects (circuit_id, hop, switch_id, ingress, egress, desired) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
    for (int i = 0; i < c.cross_connects_size(); ++i) {
      const v1::CrossConnect& x = c.cross_connects(i);
      absl::Status inserted = hop.Bind(1, c.id())
                                  .Bind(2, int64_t{i})
                                  .Bind(3, x.switch_id())
                                  .Bind(4, static_cast<int64_t>(x.ingress()))
                                  .Bind(5, static_cast<int64_t>(x.egress()))
                                  .Bind(6, int64_t{desired ? 1 : 0})
                                  .Run();
      hop.Reset();
      if (!inserted.ok()) {
        RETURN_IF_ERROR(ExplainRefusedCircuitLocked(c, /*stored=*/true));
        return inserted;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<v1::Circuit>> CircuitsLocked(const CircuitFilter& filter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      SELECT c.id, COALESCE(c.allocation_id, ''), c.manual, c.src_onic, c.src_port, c.dst_onic,
             c.dst_port, c.phase, c.state, c.reason, c.trunks
      FROM circuits c
      WHERE (?1 = '' OR c.allocation_id = ?1)
        AND (?2 = '' OR EXISTS (SELECT 1 FROM cross_connects x
                                WHERE x.circuit_id = c.id AND x.switch_id = ?2))
      ORDER BY c.allocation_id, c.position, c.id)sql"));
    stmt.Bind(1, filter.allocation_id).Bind(2, filter.switch_id);
    std::vector<v1::Circuit> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      v1::Circuit& c = out.emplace_back();
      c.set_id(stmt.Text(0));
      c.set_allocation_id(stmt.Text(1));
      c.set_manual(stmt.Int(2) != 0);
      c.mutable_source()->set_onic(stmt.Text(3));
      c.mutable_source()->set_port(static_cast<uint32_t>(stmt.Int(4)));
      c.mutable_destination()->set_onic(stmt.Text(5));
      c.mutable_destination()->set_port(static_cast<uint32_t>(stmt.Int(6)));
      c.set_phase(stmt.Text(7));
      c.set_state(ParseColumn<v1::CircuitState>(stmt.Text(8)));
      c.set_reason(stmt.Text(9));
      for (absl::string_view trunk : absl::StrSplit(stmt.Text(10), '\n', absl::SkipEmpty())) {
        c.add_trunks(std::string(trunk));
      }
    }
    ASSIGN_OR_RETURN(Statement hops,
                     db_->Prepare("SELECT switch_id, ingress, egress FROM cross_connects WHERE "
                                  "circuit_id = ?1 ORDER BY hop"));
    for (v1::Circuit& c : out) {
      hops.Bind(1, c.id());
      while (true) {
        ASSIGN_OR_RETURN(bool row, hops.Step());
        if (!row) break;
        v1::CrossConnect* x = c.add_cross_connects();
        x->set_switch_id(hops.Text(0));
        x->set_ingress(static_cast<uint32_t>(hops.Int(1)));
        x->set_egress(static_cast<uint32_t>(hops.Int(2)));
      }
      hops.Reset();
    }
    return out;
  }

  absl::StatusOr<std::vector<v1::Allocation>> AllocationsLocked(const std::string& id,
                                                                const AllocationFilter& filter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Statement stmt, db_->Prepare(R"sql(
      SELECT id, tenant, name, state, reason, request, phases, active_phase, stage_timings,
             direct_traffic_share, created_us, updated_us, lease_expires_us
      FROM allocations
      WHERE (?1 = '' OR id = ?1) AND (?2 = '' OR tenant = ?2)
        AND (?3 = '' OR state = ?3)
        AND (?1 != '' OR ?3 != '' OR ?4 = 1 OR state != 'released')
      ORDER BY created_us, id)sql"));
    stmt.Bind(1, id)
        .Bind(2, filter.tenant)
        .Bind(3, Name(filter.state))
        .Bind(4, int64_t{filter.include_released ? 1 : 0});
    std::vector<v1::Allocation> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      v1::Allocation& a = out.emplace_back();
      a.set_id(stmt.Text(0));
      a.set_tenant(stmt.Text(1));
      a.set_name(stmt.Text(2));
      a.set_state(ParseColumn<v1::AllocationState>(stmt.Text(3)));
      a.set_reason(stmt.Text(4));
      if (!a.mutable_request()->ParseFromString(stmt.Text(5))) {
        return absl::DataLossError(
            absl::StrCat("allocation ", a.id(), ": stored request is corrupt"));
      }
      for (absl::string_view phase : absl::StrSplit(stmt.Text(6), '\n', absl::SkipEmpty())) {
        a.add_phases(std::string(phase));
      }
      a.set_active_phase(stmt.Text(7));
      v1::Allocation timings;
      if (!timings.ParseFromString(stmt.Text(8))) {
        return absl::DataLossError(
            absl::StrCat("allocation ", a.id(), ": stored timings are corrupt"));
      }
      *a.mutable_stage_timings() = timings.stage_timings();
      a.set_direct_traffic_share(stmt.Double(9));
      SetMicros(stmt.Int(10), a.mutable_created());
      SetMicros(stmt.Int(11), a.mutable_updated());
      SetMicros(stmt.Int(12), a.mutable_lease_expires());
    }
    ASSIGN_OR_RETURN(
        Statement members,
        db_->Prepare(
            "SELECT device_id FROM allocation_members WHERE allocation_id = ?1 ORDER BY position"));
    for (v1::Allocation& a : out) {
      members.Bind(1, a.id());
      while (true) {
        ASSIGN_OR_RETURN(bool row, members.Step());
        if (!row) break;
        a.add_members(members.Text(0));
      }
      members.Reset();
      CircuitFilter circuits;
      circuits.allocation_id = a.id();
      ASSIGN_OR_RETURN(std::vector<v1::Circuit> found, CircuitsLocked(circuits));
      for (auto& c : found) *a.add_circuits() = std::move(c);
    }
    return out;
  }

  absl::Mutex mu_;
  // Bumped after every commit that changes inventory or administrative state.
  std::atomic<uint64_t> inventory_version_{1};
  std::unique_ptr<Database> db_ ABSL_GUARDED_BY(mu_);
  const Clock* clock_;
  // The newest event appended by the open transaction: watchers learn of it only once it
  // has committed, since a rollback takes it back (and its sequence is reused).
  uint64_t uncommitted_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  // The allocations the open transaction appended events about, each with its image when
  // the write read it back after its last event (ImageLocked).
  std::map<std::string, std::shared_ptr<const v1::Allocation>> uncommitted_images_
      ABSL_GUARDED_BY(mu_);
  // A mutex of its own so that watchers wait without holding up writers; taken inside mu_.
  absl::Mutex sequence_mu_ ABSL_ACQUIRED_AFTER(mu_);
  uint64_t last_sequence_ ABSL_GUARDED_BY(sequence_mu_);
  // The most recent allocation commits, by sequence (AllocationCommitsAfter), and the newest
  // sequence of those no longer kept.
  static constexpr size_t kKeptCommits = 1024;
  std::deque<AllocationCommit> commits_ ABSL_GUARDED_BY(sequence_mu_);
  uint64_t commits_floor_ ABSL_GUARDED_BY(sequence_mu_);
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
  RETURN_IF_ERROR(Migrate(*db, Migrations()));
  ASSIGN_OR_RETURN(uint64_t last_sequence, NewestEventSequence(*db));
  return std::make_unique<SqliteStore>(std::move(db), options.clock, last_sequence);
}

}  // namespace fleet::store
