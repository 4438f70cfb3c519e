// The SQLite implementation of InventoryStore (controller/store/inventory_store.h).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "controller/store/inventory_rows.h"
#include "controller/store/queries.h"
#include "controller/store/sqlite_aggregates.h"
#include "fleet/v1/names.h"

namespace fleet::store {
namespace {

using v1::Name;

class SqliteInventoryStore final : public InventoryStore {
 public:
  explicit SqliteInventoryStore(StoreConnection& connection) : connection_(connection) {}

  absl::StatusOr<std::vector<v1::Switch>> ListSwitches() override {
    absl::MutexLock lock(&connection_.mu());
    return SelectSwitches(db(), "");
  }

  absl::StatusOr<v1::Switch> GetSwitch(const std::string& id) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(std::vector<v1::Switch> found, SelectSwitches(db(), id));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("switch ", id, " not found"));
    return found.front();
  }

  absl::StatusOr<std::vector<v1::SwitchPort>> ListPorts(const std::string& switch_id) override {
    absl::MutexLock lock(&connection_.mu());
    if (!switch_id.empty()) {
      ASSIGN_OR_RETURN(std::vector<v1::Switch> found, SelectSwitches(db(), switch_id));
      if (found.empty())
        return absl::NotFoundError(absl::StrCat("switch ", switch_id, " not found"));
    }
    return SelectPorts(db(), switch_id);
  }

  absl::StatusOr<std::vector<v1::Host>> ListHosts() override {
    absl::MutexLock lock(&connection_.mu());
    return SelectHosts(db(), "");
  }

  absl::StatusOr<v1::Host> GetHost(const std::string& name) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(std::vector<v1::Host> found, SelectHosts(db(), name));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("host ", name, " not found"));
    return found.front();
  }

  absl::StatusOr<std::vector<v1::Device>> ListDevices(const DeviceFilter& filter) override {
    absl::MutexLock lock(&connection_.mu());
    return SelectDevices(db(), "", filter);
  }

  absl::StatusOr<v1::Device> GetDevice(const std::string& id) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(std::vector<v1::Device> found, SelectDevices(db(), id, {}));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("device ", id, " not found"));
    return found.front();
  }

  absl::StatusOr<std::vector<v1::Onic>> ListOnics(const OnicFilter& filter) override {
    absl::MutexLock lock(&connection_.mu());
    return SelectOnics(db(), "", filter);
  }

  absl::StatusOr<v1::Onic> GetOnic(const std::string& id) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(std::vector<v1::Onic> found, SelectOnics(db(), id, {}));
    if (found.empty()) return absl::NotFoundError(absl::StrCat("onic ", id, " not found"));
    return found.front();
  }

  absl::StatusOr<std::vector<v1::Trunk>> ListTrunks() override {
    absl::MutexLock lock(&connection_.mu());
    return SelectTrunks(db());
  }

  absl::StatusOr<v1::Inventory> LoadInventory() override {
    absl::MutexLock lock(&connection_.mu());
    v1::Inventory inventory;
    ASSIGN_OR_RETURN(std::vector<v1::Switch> switches, SelectSwitches(db(), ""));
    for (auto& s : switches) *inventory.add_switches() = std::move(s);
    ASSIGN_OR_RETURN(std::vector<v1::Host> hosts, SelectHosts(db(), ""));
    for (auto& h : hosts) *inventory.add_hosts() = std::move(h);
    ASSIGN_OR_RETURN(std::vector<v1::Device> devices, SelectDevices(db(), "", {}));
    for (auto& d : devices) *inventory.add_devices() = std::move(d);
    ASSIGN_OR_RETURN(std::vector<v1::Onic> onics, SelectOnics(db(), "", {}));
    for (auto& o : onics) *inventory.add_onics() = std::move(o);
    ASSIGN_OR_RETURN(std::vector<v1::Trunk> trunks, SelectTrunks(db()));
    for (auto& t : trunks) *inventory.add_trunks() = std::move(t);
    return inventory;
  }

  absl::Status WriteInventory(const InventoryWrite& write, const std::string& principal) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    const v1::Inventory& objects = write.objects;
    std::map<std::string, std::string> forced;  // Switch id → what it held when repointed.
    for (const auto& [switch_id, changes] : write.repointed_switches) {
      ASSIGN_OR_RETURN(std::string held, CircuitsOnSwitch(db(), switch_id));
      if (held.empty()) continue;
      if (!write.force) {
        return absl::FailedPreconditionError(absl::StrCat(
            "switch ", switch_id, " holds ", held, "; changing how fleetd reaches it (", changes,
            ") would cut fleetd from them: release them first, or apply with --force"));
      }
      forced[switch_id] = held;
    }
    for (const v1::Switch& s : objects.switches()) RETURN_IF_ERROR(UpsertSwitch(db(), s));
    for (const v1::Host& h : objects.hosts()) RETURN_IF_ERROR(UpsertHost(db(), h));
    for (const v1::Device& d : objects.devices()) RETURN_IF_ERROR(UpsertDevice(db(), d));
    // Fibers and trunks being rewritten are removed first, so that a fiber may move from one
    // O-NIC port (or trunk) to another within one apply.
    for (const v1::Onic& o : objects.onics()) RETURN_IF_ERROR(CheckOnicRewire(db(), o));
    for (const v1::Trunk& t : objects.trunks()) RETURN_IF_ERROR(CheckTrunkRewire(db(), t));
    for (const v1::Onic& o : objects.onics()) {
      ASSIGN_OR_RETURN(Statement del, db().Prepare("DELETE FROM fibers WHERE onic_id = ?1"));
      RETURN_IF_ERROR(del.Bind(1, o.id()).Run());
    }
    for (const v1::Trunk& t : objects.trunks()) {
      ASSIGN_OR_RETURN(Statement del, db().Prepare("DELETE FROM trunks WHERE id = ?1"));
      RETURN_IF_ERROR(del.Bind(1, t.id()).Run());
    }
    for (const v1::Onic& o : objects.onics()) RETURN_IF_ERROR(UpsertOnic(db(), o));
    for (const v1::Trunk& t : objects.trunks()) RETURN_IF_ERROR(InsertTrunk(db(), t));
    // A dry run ends here, rolled back, having met every check a write meets.
    if (write.dry_run) return absl::OkStatus();
    for (const std::string& what : write.created) {
      RETURN_IF_ERROR(InventoryEvent("inventory.created", what, principal, "created"));
    }
    for (const std::string& what : write.updated) {
      std::string fields;
      if (auto it = write.changed_fields.find(what); it != write.changed_fields.end()) {
        fields = absl::StrCat(": ", it->second);
      }
      std::pair<std::string, std::string> kind_id = absl::StrSplit(what, absl::MaxSplits(' ', 1));
      if (auto it = forced.find(kind_id.second); kind_id.first == "switch" && it != forced.end()) {
        absl::StrAppend(&fields, " (forced while it held ", it->second, ")");
      }
      RETURN_IF_ERROR(InventoryEvent("inventory.updated", what, principal, "updated", fields));
    }
    RETURN_IF_ERROR(connection_.Commit(txn));
    connection_.InventoryChanged();
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> DeleteObject(const std::string& kind,
                                                        const std::string& name,
                                                        const std::string& principal) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    std::vector<std::string> deleted;
    if (kind == "switch") {
      RETURN_IF_ERROR(RequireExists(db(), "SELECT 1 FROM switches WHERE id = ?1", kind, name));
      RETURN_IF_ERROR(RefuseIfAny(
          db(), "SELECT onic_id || ' port ' || onic_port FROM fibers WHERE switch_id = ?1 LIMIT 1",
          name, absl::StrCat("switch ", name, " has O-NIC fibers plugged in (first: onic "),
          "); delete or rewire those O-NICs first"));
      RETURN_IF_ERROR(RefuseIfAny(
          db(), "SELECT id FROM trunks WHERE from_switch = ?1 OR to_switch = ?1 LIMIT 1", name,
          absl::StrCat("switch ", name, " has trunk "), " plugged in; delete the trunk first"));
      RETURN_IF_ERROR(RunWith(db(), "DELETE FROM switches WHERE id = ?1", name));
    } else if (kind == "host") {
      RETURN_IF_ERROR(RequireExists(db(), "SELECT 1 FROM hosts WHERE name = ?1", kind, name));
      RETURN_IF_ERROR(RefuseIfAny(
          db(), "SELECT group_concat(id, ', ') FROM devices WHERE host = ?1 HAVING count(*) > 0",
          name, absl::StrCat("host ", name, " still has devices "), "; delete them first"));
      RETURN_IF_ERROR(RunWith(db(), "DELETE FROM hosts WHERE name = ?1", name));
    } else if (kind == "device") {
      RETURN_IF_ERROR(RequireExists(db(), "SELECT 1 FROM devices WHERE id = ?1", kind, name));
      RETURN_IF_ERROR(RefuseIfAny(
          db(),
          "SELECT a.id FROM allocation_members m JOIN allocations a ON a.id = m.allocation_id "
          "WHERE m.device_id = ?1 AND a.state NOT IN ('released', 'failed') LIMIT 1",
          name, absl::StrCat("device ", name, " is a member of allocation "),
          "; release it first"));
      RETURN_IF_ERROR(RefuseIfAny(
          db(),
          "SELECT c.id FROM circuits c JOIN onics o ON o.id IN (c.src_onic, c.dst_onic) "
          "WHERE o.device_id = ?1 LIMIT 1",
          name, absl::StrCat("device ", name, " has an O-NIC in circuit "), "; release it first"));
      ASSIGN_OR_RETURN(Statement onics,
                       db().Prepare("SELECT id FROM onics WHERE device_id = ?1 ORDER BY id"));
      onics.Bind(1, name);
      while (true) {
        ASSIGN_OR_RETURN(bool row, onics.Step());
        if (!row) break;
        deleted.push_back(absl::StrCat("onic ", onics.Text(0)));
      }
      RETURN_IF_ERROR(RunWith(db(), "DELETE FROM onics WHERE device_id = ?1", name));
      RETURN_IF_ERROR(RunWith(db(), "DELETE FROM devices WHERE id = ?1", name));
    } else if (kind == "onic") {
      RETURN_IF_ERROR(RequireExists(db(), "SELECT 1 FROM onics WHERE id = ?1", kind, name));
      RETURN_IF_ERROR(
          RefuseIfAny(db(), "SELECT id FROM circuits WHERE src_onic = ?1 OR dst_onic = ?1 LIMIT 1",
                      name, absl::StrCat("onic ", name, " is in circuit "), "; release it first"));
      RETURN_IF_ERROR(RunWith(db(), "DELETE FROM onics WHERE id = ?1", name));
    } else if (kind == "trunk") {
      RETURN_IF_ERROR(RequireExists(db(), "SELECT 1 FROM trunks WHERE id = ?1", kind, name));
      RETURN_IF_ERROR(RefuseTrunkInUse(db(), name, "; release it first"));
      RETURN_IF_ERROR(RunWith(db(), "DELETE FROM trunks WHERE id = ?1", name));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot delete kind '", kind, "'; deletable kinds: switch, host, device, onic, trunk"));
    }
    deleted.insert(deleted.begin(), absl::StrCat(kind, " ", name));
    for (const std::string& what : deleted) {
      RETURN_IF_ERROR(InventoryEvent("inventory.deleted", what, principal, "deleted"));
    }
    RETURN_IF_ERROR(connection_.Commit(txn));
    connection_.InventoryChanged();
    return deleted;
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
      object_id = v1::PortName(target.switch_id, target.port);
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
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    ASSIGN_OR_RETURN(Statement stmt, db().Prepare(absl::StrCat(
                                         "UPDATE ", table,
                                         " SET admin_state = ?1, admin_reason = ?4 WHERE ", key)));
    stmt.Bind(1, Name(drained ? v1::ADMIN_STATE_DRAINED : v1::ADMIN_STATE_ENABLED))
        .Bind(2, names_port ? target.switch_id : object_id)
        .Bind(4, drained ? reason : std::string());
    if (names_port) stmt.Bind(3, static_cast<int64_t>(target.port));
    RETURN_IF_ERROR(stmt.Run());
    // SQLite counts a matched row even when its value does not change, so a repeat is not
    // mistaken for an unknown target.
    if (db().Changes() == 0) return absl::NotFoundError(absl::StrCat(what, " not found"));
    RETURN_IF_ERROR(connection_.AppendEvent(
        drained ? "drain" : "undrain", object_kind, object_id, v1::EVENT_SEVERITY_INFO,
        absl::StrCat(drained ? "drained " : "undrained ", what,
                     reason.empty() ? "" : absl::StrCat(": ", reason)),
        principal));
    RETURN_IF_ERROR(connection_.Commit(txn));
    connection_.InventoryChanged();
    return absl::OkStatus();
  }

  absl::Status SetPortHealth(const std::vector<PortHealth>& changes) override {
    for (const PortHealth& c : changes) {
      if (c.state != v1::OPER_STATE_UP && c.state != v1::OPER_STATE_DEGRADED &&
          c.state != v1::OPER_STATE_FAILED) {
        return absl::InvalidArgumentError(absl::StrCat("switch port ", v1::PortName(c.ref),
                                                       ": health ", Name(c.state),
                                                       " is not one of up, degraded, failed"));
      }
    }
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    const int64_t now = absl::ToUnixMicros(connection_.Now());
    for (const PortHealth& c : changes) {
      const std::string name = v1::PortName(c.ref);
      ASSIGN_OR_RETURN(Statement known,
                       db().Prepare("SELECT h.oper_state FROM switch_ports p LEFT JOIN "
                                    "port_health h ON h.switch_id = p.switch_id AND h.port = "
                                    "p.port WHERE p.switch_id = ?1 AND p.port = ?2"));
      known.Bind(1, c.ref.switch_id()).Bind(2, static_cast<int64_t>(c.ref.port()));
      ASSIGN_OR_RETURN(bool exists, known.Step());
      if (!exists) return absl::NotFoundError(absl::StrCat("switch port ", name, " not found"));
      const bool first_reading = known.IsNull(0);
      ASSIGN_OR_RETURN(Statement write,
                       db().Prepare("INSERT OR REPLACE INTO port_health (switch_id, port, "
                                    "oper_state, reason, changed_us) VALUES (?1, ?2, ?3, ?4, ?5)"));
      write.Bind(1, c.ref.switch_id())
          .Bind(2, static_cast<int64_t>(c.ref.port()))
          .Bind(3, Name(c.state))
          .Bind(4, c.reason)
          .Bind(5, now);
      RETURN_IF_ERROR(write.Run());
      if (first_reading && c.state == v1::OPER_STATE_UP) continue;  // Found well: no news.
      RETURN_IF_ERROR(connection_.AppendEvent(
          "port.health", "port", name,
          c.state == v1::OPER_STATE_UP ? v1::EVENT_SEVERITY_INFO : v1::EVENT_SEVERITY_WARNING,
          absl::StrCat("switch port ", name, " ", Name(c.state),
                       c.reason.empty() ? "" : absl::StrCat(": ", c.reason)),
          "fleetd"));
    }
    RETURN_IF_ERROR(connection_.Commit(txn));
    connection_.InventoryChanged();
    return absl::OkStatus();
  }

  absl::Status SetDeviceHealth(const std::string& device, v1::DeviceHealth health,
                               const std::string& reason, const std::string& principal) override {
    if (health == v1::DEVICE_HEALTH_UNSPECIFIED) {
      return absl::InvalidArgumentError("health: unspecified; give healthy, suspect or failed");
    }
    if (health != v1::DEVICE_HEALTH_HEALTHY && reason.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("reason: empty; marking device ", device, " ",
                                                     Name(health), " needs a reason"));
    }
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    RETURN_IF_ERROR(RequireExists(db(), "SELECT 1 FROM devices WHERE id = ?1", "device", device));
    ASSIGN_OR_RETURN(Statement write,
                     db().Prepare(health == v1::DEVICE_HEALTH_HEALTHY
                                      ? "DELETE FROM device_health WHERE device_id = ?1"
                                      // fleetd's SUSPECT never overrides an operator's FAILED.
                                      : "INSERT INTO device_health (device_id, health, reason, "
                                        "changed_us) VALUES (?1, ?2, ?3, ?4) ON CONFLICT "
                                        "(device_id) DO UPDATE SET health = excluded.health, "
                                        "reason = excluded.reason, changed_us = "
                                        "excluded.changed_us WHERE device_health.health != "
                                        "'failed' OR excluded.health = 'failed'"));
    write.Bind(1, device);
    if (health != v1::DEVICE_HEALTH_HEALTHY) {
      write.Bind(2, Name(health)).Bind(3, reason).Bind(4, absl::ToUnixMicros(connection_.Now()));
    }
    RETURN_IF_ERROR(write.Run());
    RETURN_IF_ERROR(connection_.AppendEvent(
        "device.health", "device", device,
        health == v1::DEVICE_HEALTH_HEALTHY ? v1::EVENT_SEVERITY_INFO : v1::EVENT_SEVERITY_WARNING,
        absl::StrCat("device ", device, " ", Name(health),
                     reason.empty() ? "" : absl::StrCat(": ", reason)),
        principal));
    RETURN_IF_ERROR(connection_.Commit(txn));
    connection_.InventoryChanged();
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> AppliedInventoryFile() override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Statement stmt,
                     db().Prepare("SELECT record FROM inventory_file WHERE id = 1"));
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    return row ? stmt.Text(0) : std::string();
  }

  absl::Status RecordAppliedInventoryFile(const std::string& record) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    RETURN_IF_ERROR(RunWith(db(), R"sql(
        INSERT INTO inventory_file (id, record) VALUES (1, ?1)
        ON CONFLICT (id) DO UPDATE SET record = excluded.record)sql",
                            record));
    return connection_.Commit(txn);
  }

  uint64_t InventoryVersion() override { return connection_.inventory_version(); }

 private:
  Database& db() ABSL_EXCLUSIVE_LOCKS_REQUIRED(connection_.mu()) { return connection_.db(); }

  // `what` is "kind id".
  // "VERB KIND ID" and `detail` after it, e.g. ": address a -> b".
  absl::Status InventoryEvent(const std::string& kind, const std::string& what,
                              const std::string& principal, const std::string& verb,
                              const std::string& detail = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(connection_.mu()) {
    std::pair<std::string, std::string> parts = absl::StrSplit(what, absl::MaxSplits(' ', 1));
    return connection_.AppendEvent(kind, parts.first, parts.second, v1::EVENT_SEVERITY_INFO,
                                   absl::StrCat(verb, " ", what, detail), principal);
  }

  StoreConnection& connection_;
};

}  // namespace

std::unique_ptr<InventoryStore> NewSqliteInventoryStore(StoreConnection& connection) {
  return std::make_unique<SqliteInventoryStore>(connection);
}

}  // namespace fleet::store
