#include "controller/store/allocation_rows.h"

#include <cstdint>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "controller/store/queries.h"
#include "fleet/v1/names.h"

namespace fleet::store {
namespace {

using v1::Name;

// Why circuit `c` cannot be stored, when the reason is another circuit already holding its
// id (unless `stored`: its own row is in) or, for a desired circuit, one of its switch
// ports; OK when neither.
absl::Status ExplainRefusedCircuit(Database& db, const v1::Circuit& c, bool stored) {
  if (!stored) {
    RETURN_IF_ERROR(RefuseIfAny(
        db,
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
      ASSIGN_OR_RETURN(Statement holder, db.Prepare(sql));
      ASSIGN_OR_RETURN(
          bool row,
          holder.Bind(1, x.switch_id()).Bind(2, static_cast<int64_t>(port)).Bind(3, c.id()).Step());
      if (row) {
        return absl::FailedPreconditionError(absl::StrCat(
            "switch port ", x.switch_id(), "/", port, " is already in circuit ", holder.Text(0)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> StoredState(Database& db, const std::string& id) {
  ASSIGN_OR_RETURN(Statement current, db.Prepare("SELECT state FROM allocations WHERE id = ?1"));
  ASSIGN_OR_RETURN(bool found, current.Bind(1, id).Step());
  if (!found) return absl::NotFoundError(absl::StrCat("allocation ", id, " not found"));
  return current.Text(0);
}

absl::Status InsertMembers(Database& db, const std::string& allocation_id,
                           const std::vector<std::string>& members) {
  ASSIGN_OR_RETURN(Statement member,
                   db.Prepare("INSERT INTO allocation_members (allocation_id, position, "
                              "device_id) VALUES (?1, ?2, ?3)"));
  for (size_t i = 0; i < members.size(); ++i) {
    RETURN_IF_ERROR(
        member.Bind(1, allocation_id).Bind(2, static_cast<int64_t>(i)).Bind(3, members[i]).Run());
    member.Reset();
  }
  return absl::OkStatus();
}

// Stores circuit `c` and its cross-connects. The constraints (the primary key, one desired
// circuit per O-NIC port and per switch port, the foreign keys) refuse what may not be;
// only then is the store asked who holds what, so the common case costs two inserts.
absl::Status InsertCircuit(Database& db, const v1::Circuit& c, const std::string& allocation_id,
                           int position) {
  const bool desired = c.state() != v1::CIRCUIT_STATE_INACTIVE;
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(R"sql(
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
  // Only a circuit stored without an allocation is unowned: one stored with an allocation is
  // its, whatever `manual` says, so that the allocation's image (and the circuit index fed
  // from it) holds every circuit the allocation owns.
  if (allocation_id.empty()) {
    stmt.BindNull(2);
  } else {
    stmt.Bind(2, allocation_id);
  }
  if (absl::Status s = stmt.Run(); !s.ok()) {
    RETURN_IF_ERROR(ExplainRefusedCircuit(db, c, /*stored=*/false));
    return absl::Status(
        s.code(), absl::StrCat("circuit ", c.id(), " from onic ", c.source().onic(), " port ",
                               c.source().port(), " to onic ", c.destination().onic(), " port ",
                               c.destination().port(), ": ", s.message()));
  }
  ASSIGN_OR_RETURN(
      Statement hop,
      db.Prepare(
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
      RETURN_IF_ERROR(ExplainRefusedCircuit(db, c, /*stored=*/true));
      return inserted;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Circuit>> SelectCircuits(Database& db, const CircuitFilter& filter) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(R"sql(
    SELECT c.id, COALESCE(c.allocation_id, ''), c.manual, c.src_onic, c.src_port, c.dst_onic,
           c.dst_port, c.phase, c.state, c.reason, c.trunks
    FROM circuits c
    WHERE (?1 = '' OR c.allocation_id = ?1)
      AND (?2 = '' OR EXISTS (SELECT 1 FROM cross_connects x
                              WHERE x.circuit_id = c.id AND x.switch_id = ?2))
      AND (?3 = '' OR c.src_onic = ?3 OR c.dst_onic = ?3)
    ORDER BY c.allocation_id, c.position, c.id)sql"));
  stmt.Bind(1, filter.allocation_id).Bind(2, filter.switch_id).Bind(3, filter.onic);
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
                   db.Prepare("SELECT switch_id, ingress, egress FROM cross_connects WHERE "
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

absl::Status FillRequestIds(Database& db) {
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db));
  std::vector<std::pair<std::string, std::string>> found;  // Allocation id, request id.
  {
    ASSIGN_OR_RETURN(Statement select,
                     db.Prepare("SELECT id, request FROM allocations WHERE request_id IS NULL"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      v1::RequestTopologyRequest request;
      // A corrupt request is reported where the allocation is read; here it has no id.
      if (!request.ParseFromString(select.Text(1))) request.Clear();
      found.emplace_back(select.Text(0), request.request_id());
    }
  }
  if (found.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(Statement update,
                   db.Prepare("UPDATE allocations SET request_id = ?2 WHERE id = ?1"));
  for (const auto& [id, request_id] : found) {
    RETURN_IF_ERROR(update.Bind(1, id).Bind(2, request_id).Run());
    update.Reset();
  }
  return txn.Commit();
}

absl::StatusOr<std::vector<v1::Allocation>> SelectAllocations(Database& db, const std::string& id,
                                                              const AllocationFilter& filter) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(R"sql(
    SELECT id, tenant, name, state, reason, request, phases, active_phase, stage_timings,
           direct_traffic_share, created_us, updated_us, lease_expires_us, replacements,
           degraded_since_us
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
    *a.mutable_created() = ToProtoTime(absl::FromUnixMicros(stmt.Int(10)));
    *a.mutable_updated() = ToProtoTime(absl::FromUnixMicros(stmt.Int(11)));
    *a.mutable_lease_expires() = ToProtoTime(absl::FromUnixMicros(stmt.Int(12)));
    v1::Allocation replacements;
    if (!replacements.ParseFromString(stmt.Text(13))) {
      return absl::DataLossError(
          absl::StrCat("allocation ", a.id(), ": stored replacements are corrupt"));
    }
    *a.mutable_replacements() = replacements.replacements();
    if (stmt.Int(14) != 0)
      *a.mutable_degraded_since() = ToProtoTime(absl::FromUnixMicros(stmt.Int(14)));
  }
  ASSIGN_OR_RETURN(
      Statement members,
      db.Prepare(
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
    ASSIGN_OR_RETURN(std::vector<v1::Circuit> found, SelectCircuits(db, circuits));
    for (auto& c : found) *a.add_circuits() = std::move(c);
  }
  return out;
}

absl::Status SetCircuitState(Database& db, const std::string& circuit_id,
                             const AllocationUpdate::CircuitChange& change, bool was_desired) {
  const int64_t desired = change.state != v1::CIRCUIT_STATE_INACTIVE ? 1 : 0;
  if (desired == was_desired) {
    // A state change in place (PLANNED → PROGRAMMED → ACTIVE): one row.
    ASSIGN_OR_RETURN(Statement circuit,
                     db.Prepare("UPDATE circuits SET state = ?2, reason = ?3 WHERE id = ?1"));
    if (absl::Status s =
            circuit.Bind(1, circuit_id).Bind(2, Name(change.state)).Bind(3, change.reason).Run();
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("circuit ", circuit_id, ": ", s.message()));
    }
    return absl::OkStatus();
  }
  if (desired) {  // Joining the desired set.
    // Name the holder; the unique indexes are the backstop.
    RETURN_IF_ERROR(RefuseIfAny(
        db,
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
    RETURN_IF_ERROR(RefuseIfAny(
        db,
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
      db.Prepare("UPDATE circuits SET state = ?2, reason = ?3, desired = ?4 WHERE id = ?1"));
  if (absl::Status s = circuit.Bind(1, circuit_id)
                           .Bind(2, Name(change.state))
                           .Bind(3, change.reason)
                           .Bind(4, desired)
                           .Run();
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("circuit ", circuit_id, ": ", s.message()));
  }
  ASSIGN_OR_RETURN(Statement hops,
                   db.Prepare("UPDATE cross_connects SET desired = ?2 WHERE circuit_id = ?1"));
  if (absl::Status s = hops.Bind(1, circuit_id).Bind(2, desired).Run(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("circuit ", circuit_id, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace fleet::store
