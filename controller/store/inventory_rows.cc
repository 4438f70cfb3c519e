#include "controller/store/inventory_rows.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "controller/store/queries.h"
#include "fleet/v1/names.h"

namespace fleet::store {
namespace {

using v1::Name;

// The first circuit, of any phase (an inactive phase's circuit will use the trunk when its
// phase is activated), whose cross-connects use trunk ?1's ports.
constexpr absl::string_view kTrunkCircuitSql =
    "SELECT c.circuit_id FROM trunks t JOIN cross_connects c ON "
    "((c.switch_id = t.from_switch AND c.egress = t.from_port) OR "
    "(c.switch_id = t.to_switch AND c.ingress = t.to_port)) WHERE t.id = ?1 LIMIT 1";

// The conditions of a filtered list, only for the fields given, each value a numbered
// parameter: SQLite then looks a given field up in its index. (A condition written for every
// field, `?1 = '' OR col = ?1`, can use no index: a filtered list scanned the whole table, and
// an agent's registration, which lists its O-NICs by place and then each by serial, cost the
// site's size several times over.)
class Where {
 public:
  // `condition` names the value `?` (once or more); an empty value adds nothing.
  Where& Add(absl::string_view condition, const std::string& value) {
    if (value.empty()) return *this;
    values_.push_back(value);
    conditions_.push_back(
        absl::StrReplaceAll(condition, {{"?", absl::StrCat("?", values_.size())}}));
    return *this;
  }
  std::string Sql() const {
    return conditions_.empty() ? "1" : absl::StrJoin(conditions_, " AND ");
  }
  void Bind(Statement& statement) const {
    for (size_t i = 0; i < values_.size(); ++i) statement.Bind(static_cast<int>(i + 1), values_[i]);
  }

 private:
  std::vector<std::string> conditions_;
  std::vector<std::string> values_;
};

}  // namespace

absl::StatusOr<std::string> CircuitsOnSwitch(Database& db, const std::string& switch_id) {
  // Circuits with a cross-connect on the switch, in any phase, and cross-connects a changed
  // allocation still has to take off it.
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(R"sql(
    SELECT (SELECT COUNT(DISTINCT circuit_id) FROM cross_connects WHERE switch_id = ?1),
           (SELECT COUNT(*) FROM pending_removals WHERE switch_id = ?1))sql"));
  ASSIGN_OR_RETURN(bool row, stmt.Bind(1, switch_id).Step());
  if (!row) return std::string();
  const int64_t circuits = stmt.Int(0);
  const int64_t removals = stmt.Int(1);
  if (circuits == 0 && removals == 0) return std::string();
  std::vector<std::string> held;
  if (circuits > 0)
    held.push_back(absl::StrCat(circuits, circuits == 1 ? " circuit" : " circuits"));
  if (removals > 0) {
    held.push_back(absl::StrCat(removals, removals == 1 ? " cross-connect" : " cross-connects",
                                " still to be removed"));
  }
  ASSIGN_OR_RETURN(Statement owners, db.Prepare(R"sql(
    SELECT c.allocation_id FROM cross_connects x JOIN circuits c ON c.id = x.circuit_id
      WHERE x.switch_id = ?1 AND c.allocation_id IS NOT NULL
    UNION SELECT allocation_id FROM pending_removals WHERE switch_id = ?1
    ORDER BY 1)sql"));
  owners.Bind(1, switch_id);
  std::vector<std::string> allocations;
  while (true) {
    ASSIGN_OR_RETURN(bool more, owners.Step());
    if (!more) break;
    allocations.push_back(owners.Text(0));
  }
  std::string text = absl::StrJoin(held, " and ");
  if (!allocations.empty()) {
    const size_t shown = std::min<size_t>(allocations.size(), 3);
    absl::StrAppend(&text, " (allocation", allocations.size() == 1 ? " " : "s ",
                    absl::StrJoin(allocations.begin(), allocations.begin() + shown, ", "),
                    allocations.size() > shown ? ", …" : "", ")");
  }
  return text;
}

absl::Status RefuseTrunkInUse(Database& db, const std::string& trunk_id, const std::string& after) {
  return RefuseIfAny(db, kTrunkCircuitSql, trunk_id,
                     absl::StrCat("trunk ", trunk_id, " carries circuit "), after);
}

absl::StatusOr<std::vector<v1::Switch>> SelectSwitches(Database& db, const std::string& id) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(R"sql(
    SELECT id, model, ingress_ports, egress_ports, address, protocol, management_port,
           credentials_ref, cluster, ca_bundle, insecure_http
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
    s.set_ca_bundle(stmt.Text(9));
    s.set_insecure_http(stmt.Int(10) != 0);
  }
  ASSIGN_OR_RETURN(
      Statement reserved,
      db.Prepare("SELECT port FROM switch_ports WHERE switch_id = ?1 AND reservation = 'trunk' "
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

absl::StatusOr<std::vector<v1::Host>> SelectHosts(Database& db, const std::string& name) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db.Prepare("SELECT name, address, cluster, admin_state, admin_reason FROM hosts "
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
    h.set_admin_reason(stmt.Text(4));
  }
  return out;
}

absl::StatusOr<std::vector<v1::Device>> SelectDevices(Database& db, const std::string& id,
                                                      const DeviceFilter& filter) {
  Where where;
  where.Add("d.id = ?", id)
      .Add("d.host = ?", filter.host)
      .Add("d.kind = ?", filter.kind == v1::DEVICE_KIND_UNSPECIFIED ? "" : Name(filter.kind))
      .Add("d.chassis = ? AND COALESCE(d.host, '') = ''", filter.chassis);
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(absl::StrCat(R"sql(
    SELECT d.id, d.kind, COALESCE(d.host, ''), d.chassis, d.model, d.admin_state,
           (SELECT group_concat(o.id, char(10)) FROM
              (SELECT id FROM onics WHERE device_id = d.id ORDER BY id) o),
           d.spare, COALESCE(h.health, 'healthy'), COALESCE(h.reason, ''), h.changed_us,
           d.pcie_vendor, d.pcie_device, d.pcie_dsn
    FROM devices d LEFT JOIN device_health h ON h.device_id = d.id
    WHERE )sql",
                                                           where.Sql(), R"sql(
    ORDER BY d.id)sql")));
  where.Bind(stmt);
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
    d.set_spare(stmt.Int(7) != 0);
    d.set_health(ParseColumn<v1::DeviceHealth>(stmt.Text(8)));
    d.set_health_reason(stmt.Text(9));
    if (!stmt.IsNull(10))
      *d.mutable_health_changed() = ToProtoTime(absl::FromUnixMicros(stmt.Int(10)));
    if (stmt.Int(11) != 0 || stmt.Int(12) != 0 || stmt.Int(13) != 0) {
      d.mutable_pcie()->set_vendor(static_cast<uint32_t>(stmt.Int(11)));
      d.mutable_pcie()->set_device(static_cast<uint32_t>(stmt.Int(12)));
      d.mutable_pcie()->set_dsn(static_cast<uint64_t>(stmt.Int(13)));
    }
  }
  return out;
}

absl::StatusOr<std::vector<v1::Onic>> SelectOnics(Database& db, const std::string& id,
                                                  const OnicFilter& filter) {
  // The O-NICs `id` and `filter` select, for both statements below (bound alike). A place
  // is a host or, for pooled devices, a chassis: two lookups, one index each.
  Where where;
  where.Add("o.id = ?", id)
      .Add("d.host = ?", filter.host)
      .Add("EXISTS (SELECT 1 FROM fibers f WHERE f.onic_id = o.id AND f.switch_id = ?)",
           filter.switch_id)
      .Add(
          "d.id IN (SELECT id FROM devices WHERE host = ? UNION "
          "SELECT id FROM devices WHERE chassis = ? AND COALESCE(host, '') = '')",
          filter.place)
      .Add("o.serial = ?", filter.serial);
  const std::string selected = where.Sql();
  auto bind = [&](Statement& statement) { where.Bind(statement); };
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(absl::StrCat(R"sql(
    SELECT o.id, o.device_id, o.serial, o.pcie_address, o.admin_state, COALESCE(d.host, ''),
           o.admin_reason
    FROM onics o JOIN devices d ON d.id = o.device_id
    WHERE )sql",
                                                           selected, R"sql(
    ORDER BY o.id)sql")));
  bind(stmt);
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
    o.set_admin_reason(stmt.Text(6));
    index[o.id()] = out.size() - 1;
  }
  // The port's oper state is its link's, as the circuit arriving on it was last left by a
  // retrain (onic_ports.oper_state itself is never written).
  ASSIGN_OR_RETURN(Statement ports, db.Prepare(absl::StrCat(R"sql(
    SELECT p.onic_id, p.port, p.admin_state,
           CASE (SELECT c.state FROM circuits c
                 WHERE c.dst_onic = p.onic_id AND c.dst_port = p.port AND c.desired = 1)
             WHEN 'active' THEN 'up' WHEN 'degraded' THEN 'degraded' ELSE p.oper_state END,
           tx.switch_id, tx.switch_port, rx.switch_id, rx.switch_port
    FROM onic_ports p
    LEFT JOIN fibers tx ON tx.onic_id = p.onic_id AND tx.onic_port = p.port AND tx.strand = 'tx'
    LEFT JOIN fibers rx ON rx.onic_id = p.onic_id AND rx.onic_port = p.port AND rx.strand = 'rx'
    WHERE p.onic_id IN (SELECT o.id FROM onics o JOIN devices d ON d.id = o.device_id
                        WHERE )sql",
                                                            selected, R"sql()
    ORDER BY p.onic_id, p.port)sql")));
  bind(ports);
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

absl::StatusOr<std::vector<v1::Trunk>> SelectTrunks(Database& db) {
  ASSIGN_OR_RETURN(
      Statement stmt,
      db.Prepare("SELECT id, from_switch, from_port, to_switch, to_port FROM trunks ORDER BY id"));
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

absl::StatusOr<std::vector<v1::SwitchPort>> SelectPorts(Database& db,
                                                        const std::string& switch_id) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(R"sql(
    SELECT p.switch_id, p.port, p.direction, p.reservation, p.admin_state,
           COALESCE(h.oper_state, 'unknown'),
           f.onic_id, f.onic_port, COALESCE(tf.id, tt.id),
           COALESCE(ci.circuit_id, ce.circuit_id), COALESCE(h.reason, ''), h.changed_us,
           p.admin_reason
    FROM switch_ports p
    LEFT JOIN port_health h ON h.switch_id = p.switch_id AND h.port = p.port
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
    port.set_oper_reason(stmt.Text(10));
    if (!stmt.IsNull(11))
      *port.mutable_oper_changed() = ToProtoTime(absl::FromUnixMicros(stmt.Int(11)));
    port.set_admin_reason(stmt.Text(12));
  }
  return ports;
}

absl::Status UpsertSwitch(Database& db, const v1::Switch& s) {
  const int64_t ingress = s.ingress_ports();
  const int64_t total = ingress + s.egress_ports();
  // A resize or re-split must not strand a cross-connect of a desired circuit.
  RETURN_IF_ERROR(RefuseIfAny(
      db,
      absl::StrCat("SELECT circuit_id || ' (' || switch_id || ' ' || ingress || '->' || egress "
                   "|| ')' FROM cross_connects WHERE switch_id = ?1 AND (ingress > ",
                   ingress, " OR egress <= ", ingress, " OR egress > ", total, ") LIMIT 1"),
      s.id(),
      absl::StrCat("switch ", s.id(), " cannot be resized to ", s.ingress_ports(), "x",
                   s.egress_ports(), ": circuit "),
      " uses a port that would move or vanish"));
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(R"sql(
    INSERT INTO switches (id, model, ingress_ports, egress_ports, address, protocol,
                          management_port, credentials_ref, cluster, ca_bundle, insecure_http)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
    ON CONFLICT (id) DO UPDATE SET
      model = excluded.model, ingress_ports = excluded.ingress_ports,
      egress_ports = excluded.egress_ports, address = excluded.address,
      protocol = excluded.protocol, management_port = excluded.management_port,
      credentials_ref = excluded.credentials_ref, cluster = excluded.cluster,
      ca_bundle = excluded.ca_bundle, insecure_http = excluded.insecure_http)sql"));
  RETURN_IF_ERROR(stmt.Bind(1, s.id())
                      .Bind(2, s.model())
                      .Bind(3, ingress)
                      .Bind(4, static_cast<int64_t>(s.egress_ports()))
                      .Bind(5, s.address())
                      .Bind(6, Name(s.protocol()))
                      .Bind(7, static_cast<int64_t>(s.management_port()))
                      .Bind(8, s.credentials_ref())
                      .Bind(9, s.cluster())
                      .Bind(10, s.ca_bundle())
                      .Bind(11, static_cast<int64_t>(s.insecure_http() ? 1 : 0))
                      .Run());
  ASSIGN_OR_RETURN(Statement shrink,
                   db.Prepare("DELETE FROM switch_ports WHERE switch_id = ?1 AND port > ?2"));
  RETURN_IF_ERROR(shrink.Bind(1, s.id()).Bind(2, total).Run());
  ASSIGN_OR_RETURN(
      Statement relabel,
      db.Prepare("UPDATE switch_ports SET reservation = 'none', direction = "
                 "CASE WHEN port <= ?2 THEN 'ingress' ELSE 'egress' END WHERE switch_id = ?1"));
  RETURN_IF_ERROR(relabel.Bind(1, s.id()).Bind(2, ingress).Run());
  ASSIGN_OR_RETURN(
      Statement add,
      db.Prepare(
          "INSERT OR IGNORE INTO switch_ports (switch_id, port, direction) VALUES (?1, ?2, ?3)"));
  for (int64_t port = 1; port <= total; ++port) {
    RETURN_IF_ERROR(
        add.Bind(1, s.id()).Bind(2, port).Bind(3, port <= ingress ? "ingress" : "egress").Run());
    add.Reset();
  }
  ASSIGN_OR_RETURN(
      Statement reserve,
      db.Prepare(
          "UPDATE switch_ports SET reservation = 'trunk' WHERE switch_id = ?1 AND port = ?2"));
  for (uint32_t port : s.trunk_reserved_ports()) {
    RETURN_IF_ERROR(reserve.Bind(1, s.id()).Bind(2, static_cast<int64_t>(port)).Run());
    reserve.Reset();
  }
  return absl::OkStatus();
}

absl::Status UpsertHost(Database& db, const v1::Host& h) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(R"sql(
    INSERT INTO hosts (name, address, cluster) VALUES (?1, ?2, ?3)
    ON CONFLICT (name) DO UPDATE SET address = excluded.address, cluster = excluded.cluster)sql"));
  return stmt.Bind(1, h.name()).Bind(2, h.address()).Bind(3, h.cluster()).Run();
}

absl::Status UpsertDevice(Database& db, const v1::Device& d) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(R"sql(
    INSERT INTO devices (id, kind, host, chassis, model, spare, pcie_vendor, pcie_device, pcie_dsn)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
    ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, host = excluded.host,
      chassis = excluded.chassis, model = excluded.model, spare = excluded.spare,
      pcie_vendor = excluded.pcie_vendor, pcie_device = excluded.pcie_device,
      pcie_dsn = excluded.pcie_dsn)sql"));
  stmt.Bind(1, d.id())
      .Bind(2, Name(d.kind()))
      .Bind(4, d.chassis())
      .Bind(5, d.model())
      .Bind(6, int64_t{d.spare()})
      .Bind(7, int64_t{d.pcie().vendor()})
      .Bind(8, int64_t{d.pcie().device()})
      .Bind(9, static_cast<int64_t>(d.pcie().dsn()));
  if (d.host().empty()) {
    stmt.BindNull(3);
  } else {
    stmt.Bind(3, d.host());
  }
  return stmt.Run();
}

// An O-NIC port in a circuit keeps its fibers: rewiring it, or dropping it from the O-NIC,
// would silently break the circuit.
absl::Status CheckOnicRewire(Database& db, const v1::Onic& o) {
  ASSIGN_OR_RETURN(std::vector<v1::Onic> stored, SelectOnics(db, o.id(), {}));
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
        db.Prepare("SELECT id FROM circuits WHERE (src_onic = ?1 AND src_port = ?2) OR "
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
absl::Status CheckTrunkRewire(Database& db, const v1::Trunk& t) {
  ASSIGN_OR_RETURN(
      Statement stmt,
      db.Prepare("SELECT from_switch, from_port, to_switch, to_port FROM trunks WHERE id = ?1"));
  ASSIGN_OR_RETURN(bool row, stmt.Bind(1, t.id()).Step());
  if (!row) return absl::OkStatus();
  if (stmt.Text(0) == t.from().switch_id() && stmt.Int(1) == t.from().port() &&
      stmt.Text(2) == t.to().switch_id() && stmt.Int(3) == t.to().port()) {
    return absl::OkStatus();
  }
  return RefuseTrunkInUse(db, t.id(), "; release it before rewiring the trunk");
}

absl::Status UpsertOnic(Database& db, const v1::Onic& o) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(R"sql(
    INSERT INTO onics (id, device_id, serial, pcie_address) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (id) DO UPDATE SET device_id = excluded.device_id, serial = excluded.serial,
      pcie_address = excluded.pcie_address)sql"));
  RETURN_IF_ERROR(
      stmt.Bind(1, o.id()).Bind(2, o.device()).Bind(3, o.serial()).Bind(4, o.pcie_address()).Run());
  ASSIGN_OR_RETURN(Statement port,
                   db.Prepare("INSERT OR IGNORE INTO onic_ports (onic_id, port) VALUES (?1, ?2)"));
  ASSIGN_OR_RETURN(
      Statement fiber,
      db.Prepare("INSERT INTO fibers (onic_id, onic_port, strand, switch_id, switch_port) "
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

absl::Status InsertTrunk(Database& db, const v1::Trunk& t) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db.Prepare("INSERT INTO trunks (id, from_switch, from_port, to_switch, to_port) "
                              "VALUES (?1, ?2, ?3, ?4, ?5)"));
  return stmt.Bind(1, t.id())
      .Bind(2, t.from().switch_id())
      .Bind(3, static_cast<int64_t>(t.from().port()))
      .Bind(4, t.to().switch_id())
      .Bind(5, static_cast<int64_t>(t.to().port()))
      .Run();
}

}  // namespace fleet::store
