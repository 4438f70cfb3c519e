#include "controller/store/migrations.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fleet::store {

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kMigrations = {
      {1, "initial schema", R"sql(
-- Switches and every one of their ports. Ingress ports are 1..N, egress N+1..N+M.
CREATE TABLE switches (
  id TEXT PRIMARY KEY,
  model TEXT NOT NULL,
  ingress_ports INTEGER NOT NULL CHECK (ingress_ports > 0),
  egress_ports INTEGER NOT NULL CHECK (egress_ports > 0),
  address TEXT NOT NULL,
  protocol TEXT NOT NULL CHECK (protocol IN ('tl1', 'rest')),
  management_port INTEGER NOT NULL DEFAULT 0,
  credentials_ref TEXT NOT NULL DEFAULT '',
  cluster TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE TABLE switch_ports (
  switch_id TEXT NOT NULL REFERENCES switches(id) ON DELETE CASCADE,
  port INTEGER NOT NULL CHECK (port > 0),
  direction TEXT NOT NULL CHECK (direction IN ('ingress', 'egress')),
  reservation TEXT NOT NULL DEFAULT 'none' CHECK (reservation IN ('none', 'trunk')),
  admin_state TEXT NOT NULL DEFAULT 'enabled' CHECK (admin_state IN ('enabled', 'drained')),
  oper_state TEXT NOT NULL DEFAULT 'unknown' CHECK (oper_state IN ('unknown', 'up', 'failed')),
  PRIMARY KEY (switch_id, port)
) STRICT, WITHOUT ROWID;

CREATE TABLE hosts (
  name TEXT PRIMARY KEY,
  address TEXT NOT NULL DEFAULT '',
  cluster TEXT NOT NULL DEFAULT '',
  admin_state TEXT NOT NULL DEFAULT 'enabled' CHECK (admin_state IN ('enabled', 'drained'))
) STRICT;

CREATE TABLE devices (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('cpu', 'gpu', 'nvme', 'fpga', 'other')),
  host TEXT REFERENCES hosts(name),
  chassis TEXT NOT NULL DEFAULT '',
  model TEXT NOT NULL DEFAULT '',
  admin_state TEXT NOT NULL DEFAULT 'enabled' CHECK (admin_state IN ('enabled', 'drained'))
) STRICT;

CREATE TABLE onics (
  id TEXT PRIMARY KEY,
  device_id TEXT NOT NULL REFERENCES devices(id),
  serial TEXT NOT NULL UNIQUE,
  pcie_address TEXT NOT NULL DEFAULT '',
  admin_state TEXT NOT NULL DEFAULT 'enabled' CHECK (admin_state IN ('enabled', 'drained'))
) STRICT;

CREATE TABLE onic_ports (
  onic_id TEXT NOT NULL REFERENCES onics(id) ON DELETE CASCADE,
  port INTEGER NOT NULL CHECK (port IN (1, 2)),
  admin_state TEXT NOT NULL DEFAULT 'enabled' CHECK (admin_state IN ('enabled', 'drained')),
  oper_state TEXT NOT NULL DEFAULT 'unknown' CHECK (oper_state IN ('unknown', 'up', 'failed')),
  PRIMARY KEY (onic_id, port)
) STRICT, WITHOUT ROWID;

-- The fiber plant: the switch port each O-NIC port's tx and rx fiber is plugged into.
-- A switch port holds one fiber.
CREATE TABLE fibers (
  onic_id TEXT NOT NULL,
  onic_port INTEGER NOT NULL,
  strand TEXT NOT NULL CHECK (strand IN ('tx', 'rx')),
  switch_id TEXT NOT NULL,
  switch_port INTEGER NOT NULL,
  PRIMARY KEY (onic_id, onic_port, strand),
  UNIQUE (switch_id, switch_port),
  FOREIGN KEY (onic_id, onic_port) REFERENCES onic_ports(onic_id, port) ON DELETE CASCADE,
  FOREIGN KEY (switch_id, switch_port) REFERENCES switch_ports(switch_id, port)
) STRICT;

-- Fibers from one switch's egress to another switch's ingress.
CREATE TABLE trunks (
  id TEXT PRIMARY KEY,
  from_switch TEXT NOT NULL,
  from_port INTEGER NOT NULL,
  to_switch TEXT NOT NULL,
  to_port INTEGER NOT NULL,
  UNIQUE (from_switch, from_port),
  UNIQUE (to_switch, to_port),
  FOREIGN KEY (from_switch, from_port) REFERENCES switch_ports(switch_id, port),
  FOREIGN KEY (to_switch, to_port) REFERENCES switch_ports(switch_id, port)
) STRICT;

CREATE TABLE allocations (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  request BLOB NOT NULL,          -- fleet.v1.RequestTopologyRequest as admitted
  phases TEXT NOT NULL DEFAULT '',  -- phase names, newline-separated, in request order
  active_phase TEXT NOT NULL DEFAULT '',
  stage_timings BLOB NOT NULL DEFAULT x'',  -- fleet.v1.Allocation holding only stage_timings
  direct_traffic_share REAL NOT NULL DEFAULT 0,
  created_us INTEGER NOT NULL,
  updated_us INTEGER NOT NULL,
  lease_expires_us INTEGER NOT NULL
) STRICT;
CREATE INDEX allocations_by_tenant ON allocations(tenant);

CREATE TABLE allocation_members (
  allocation_id TEXT NOT NULL REFERENCES allocations(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  device_id TEXT NOT NULL,  -- no foreign key: released allocations keep their history
  PRIMARY KEY (allocation_id, position)
) STRICT, WITHOUT ROWID;
CREATE INDEX allocation_members_by_device ON allocation_members(device_id);

-- Desired circuits. `desired` is 0 for circuits of an inactive phase: kept, not programmed.
-- Invariant 2: a circuit belongs to exactly one allocation, or is an operator's manual one.
CREATE TABLE circuits (
  id TEXT PRIMARY KEY,
  allocation_id TEXT REFERENCES allocations(id) ON DELETE CASCADE,
  manual INTEGER NOT NULL DEFAULT 0 CHECK (manual IN (0, 1)),
  src_onic TEXT NOT NULL,
  src_port INTEGER NOT NULL,
  dst_onic TEXT NOT NULL,
  dst_port INTEGER NOT NULL,
  phase TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  desired INTEGER NOT NULL DEFAULT 1 CHECK (desired IN (0, 1)),
  position INTEGER NOT NULL DEFAULT 0,
  trunks TEXT NOT NULL DEFAULT '',  -- trunk ids crossed, newline-separated, in path order
  CHECK ((allocation_id IS NULL) = (manual = 1)),
  FOREIGN KEY (src_onic, src_port) REFERENCES onic_ports(onic_id, port),
  FOREIGN KEY (dst_onic, dst_port) REFERENCES onic_ports(onic_id, port)
) STRICT;
CREATE INDEX circuits_by_allocation ON circuits(allocation_id);
CREATE UNIQUE INDEX circuits_one_per_tx ON circuits(src_onic, src_port) WHERE desired = 1;
CREATE UNIQUE INDEX circuits_one_per_rx ON circuits(dst_onic, dst_port) WHERE desired = 1;

-- The cross-connects realising each circuit, one per switch crossed.
-- Invariant 1: no switch port is in two desired circuits.
CREATE TABLE cross_connects (
  circuit_id TEXT NOT NULL REFERENCES circuits(id) ON DELETE CASCADE,
  hop INTEGER NOT NULL,
  switch_id TEXT NOT NULL,
  ingress INTEGER NOT NULL,
  egress INTEGER NOT NULL,
  desired INTEGER NOT NULL DEFAULT 1 CHECK (desired IN (0, 1)),
  PRIMARY KEY (circuit_id, hop),
  FOREIGN KEY (switch_id, ingress) REFERENCES switch_ports(switch_id, port),
  FOREIGN KEY (switch_id, egress) REFERENCES switch_ports(switch_id, port)
) STRICT;
CREATE UNIQUE INDEX cross_connects_one_per_ingress ON cross_connects(switch_id, ingress)
  WHERE desired = 1;
CREATE UNIQUE INDEX cross_connects_one_per_egress ON cross_connects(switch_id, egress)
  WHERE desired = 1;

-- What each switch last reported, for reconciliation and drift reports.
CREATE TABLE observed_cross_connects (
  switch_id TEXT NOT NULL REFERENCES switches(id) ON DELETE CASCADE,
  ingress INTEGER NOT NULL,
  egress INTEGER NOT NULL,
  observed_us INTEGER NOT NULL,
  PRIMARY KEY (switch_id, ingress)
) STRICT, WITHOUT ROWID;

-- The append-only event and audit log.
CREATE TABLE events (
  sequence INTEGER PRIMARY KEY AUTOINCREMENT,
  time_us INTEGER NOT NULL,
  principal TEXT NOT NULL,
  kind TEXT NOT NULL,
  object_kind TEXT NOT NULL DEFAULT '',
  object_id TEXT NOT NULL DEFAULT '',
  severity TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'alarm')),
  message TEXT NOT NULL
) STRICT;
CREATE INDEX events_by_object ON events(object_kind, object_id);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
  BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
  BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
)sql"},
      {2, "release intent", R"sql(
-- How a release ends once its circuits are off the switches (RELEASED, or FAILED for an
-- eviction) and with what reason: kept so a release a restart interrupts ends as intended.
-- Empty until a release starts.
ALTER TABLE allocations ADD COLUMN release_state TEXT NOT NULL DEFAULT '';
ALTER TABLE allocations ADD COLUMN release_reason TEXT NOT NULL DEFAULT '';
)sql"},
      {3, "pending removals", R"sql(
-- Cross-connects of circuits a member change (replace, detach) took out of an allocation,
-- until the switch has let go of them: a restart between the change and the switch removal
-- removes them then, instead of leaving them as drift.
CREATE TABLE pending_removals (
  allocation_id TEXT NOT NULL REFERENCES allocations(id) ON DELETE CASCADE,
  switch_id TEXT NOT NULL,
  ingress INTEGER NOT NULL,
  egress INTEGER NOT NULL,
  PRIMARY KEY (allocation_id, switch_id, ingress)
) STRICT;
)sql"},
      {4, "retention", R"sql(
-- The event log stays append-only above a cut-off: events below `prune_below` are past
-- retention and may be deleted, oldest first; every other event, the newest always, may not.
-- The cut-off is one row that only grows and never passes the newest event, so no DELETE,
-- whatever its WHERE, can take an event retention keeps, nor empty the log.
CREATE TABLE event_retention (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  prune_below INTEGER NOT NULL
) STRICT;
INSERT INTO event_retention (id, prune_below) VALUES (1, 0);
CREATE TRIGGER event_retention_one_row BEFORE INSERT ON event_retention
  BEGIN SELECT RAISE(ABORT, 'event_retention holds exactly one row'); END;
CREATE TRIGGER event_retention_kept BEFORE DELETE ON event_retention
  BEGIN SELECT RAISE(ABORT, 'event_retention holds exactly one row'); END;
CREATE TRIGGER event_retention_only_grows BEFORE UPDATE ON event_retention
  WHEN NEW.id IS NOT OLD.id OR NEW.prune_below < OLD.prune_below
    OR NEW.prune_below > (SELECT COALESCE(MAX(sequence), 0) FROM events)
  BEGIN
    SELECT RAISE(ABORT, 'the event retention cut-off only grows, and never past the newest event');
  END;
DROP TRIGGER events_no_delete;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
  WHEN OLD.sequence >= COALESCE((SELECT prune_below FROM event_retention WHERE id = 1), 0)
  BEGIN SELECT RAISE(ABORT, 'the event log is append-only above its retention cut-off'); END;
-- Ended allocations, oldest end first: what retention counts and prunes.
CREATE INDEX allocations_ended ON allocations(updated_us, id)
  WHERE state IN ('released', 'failed');
)sql"},
      {5, "switch tls", R"sql(
-- How fleetd reaches a REST switch: the CA bundle its HTTPS certificate must chain to (empty:
-- the system's CAs), or plain HTTP by the operator's explicit choice (1).
ALTER TABLE switches ADD COLUMN ca_bundle TEXT NOT NULL DEFAULT '';
ALTER TABLE switches ADD COLUMN insecure_http INTEGER NOT NULL DEFAULT 0 CHECK (insecure_http IN (0, 1));
)sql"},
      {6, "health and spares", R"sql(
-- What the switch monitor last saw of a port that is not simply up: its own table, so the
-- monitor's writes never touch the inventory's rows. A port without a row is up (or never
-- read). Replaces switch_ports.oper_state, which nothing ever wrote.
CREATE TABLE port_health (
  switch_id TEXT NOT NULL,
  port INTEGER NOT NULL,
  oper_state TEXT NOT NULL CHECK (oper_state IN ('up', 'degraded', 'failed')),
  reason TEXT NOT NULL DEFAULT '',
  changed_us INTEGER NOT NULL,
  PRIMARY KEY (switch_id, port),
  FOREIGN KEY (switch_id, port) REFERENCES switch_ports(switch_id, port) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;
ALTER TABLE switch_ports DROP COLUMN oper_state;

-- A device's health when it is not healthy: an operator's (failed) or fleetd's (suspect).
CREATE TABLE device_health (
  device_id TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
  health TEXT NOT NULL CHECK (health IN ('suspect', 'failed')),
  reason TEXT NOT NULL DEFAULT '',
  changed_us INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Devices held back for healing (the inventory file's `spare: true`).
ALTER TABLE devices ADD COLUMN spare INTEGER NOT NULL DEFAULT 0 CHECK (spare IN (0, 1));

-- Every member replacement of an allocation, oldest first: fleet.v1.Allocation holding only
-- `replacements`.
ALTER TABLE allocations ADD COLUMN replacements BLOB NOT NULL DEFAULT x'';
-- When the allocation last turned DEGRADED (0 unless it is DEGRADED): a failure policy's
-- `within` counts from it, across restarts.
ALTER TABLE allocations ADD COLUMN degraded_since_us INTEGER NOT NULL DEFAULT 0;
)sql"},
      {7, "drain reasons", R"sql(
-- Why a port, O-NIC or host is drained, as the operator said (empty when not drained or not
-- said): shown beside the admin state, which before only the drain's event held.
ALTER TABLE switch_ports ADD COLUMN admin_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE onics ADD COLUMN admin_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE hosts ADD COLUMN admin_reason TEXT NOT NULL DEFAULT '';
)sql"},
      {8, "lease index", R"sql(
-- The live allocations by when their lease passes: the lease check, every second, reads
-- only those whose lease has passed (AllocationStore::LeasesPassed).
CREATE INDEX allocations_by_lease ON allocations(lease_expires_us)
  WHERE state NOT IN ('releasing', 'failed', 'released');
)sql"},
      {9, "device pcie identity", R"sql(
-- What a device shows on PCIe (the inventory file's `pcie:`), checked by the host end's agent
-- after a retrain; 0 where not given. The DSN is a 64-bit pattern, stored as SQLite's signed
-- integer.
ALTER TABLE devices ADD COLUMN pcie_vendor INTEGER NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN pcie_device INTEGER NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN pcie_dsn INTEGER NOT NULL DEFAULT 0;
)sql"},
      {10, "request ids", R"sql(
-- The request's idempotency key (RequestTopologyRequest.request_id; '' for none), so that a
-- retried request finds its allocation through an index rather than by reading the tenant's
-- history (AllocationStore::FindRequest). NULL on rows written before it: the store fills it
-- in from `request` when it opens (FillRequestIds).
ALTER TABLE allocations ADD COLUMN request_id TEXT;
CREATE INDEX allocations_by_request ON allocations(tenant, request_id) WHERE request_id != '';
)sql"},
      {11, "replica position", R"sql(
-- The last entry of the replicated log (docs/ha.md) this database reflects, written in the
-- transaction that applied or appended it. Each replica's own: never replicated
-- (changesets.h, kLocalTables). No row: none yet.
CREATE TABLE replica (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  applied_entry INTEGER NOT NULL CHECK (applied_entry >= 0)
) STRICT;
)sql"},
      {12, "onics by device", R"sql(
-- Each device's O-NICs, which every read of a device lists (SelectDevices): without it the
-- inventory's read scanned every O-NIC once per device, quadratic in the site (at 64 switches,
-- 5,632 devices and 7,680 O-NICs: 12.9 s to re-apply an unchanged inventory file, and as long
-- for every reload of the engine's inventory cache, holding the store).
CREATE INDEX onics_by_device ON onics(device_id, id);
)sql"},
      {13, "devices by place", R"sql(
-- The devices at a place (a host, or a chassis of pooled devices), which an agent's
-- registration lists: without them every registration scanned every device and O-NIC, and
-- 2,048 agents registering at 64 switches took minutes, one after another.
CREATE INDEX devices_by_host ON devices(host);
CREATE INDEX devices_by_chassis ON devices(chassis);
)sql"},
      {14, "inventory file applied", R"sql(
-- What fleetd last applied with --inventory at start (InventoryStore::AppliedInventoryFile),
-- so that a start finding the same file and the same stored inventory skips reading it:
-- parsing a 64-switch site's file took longer than all the rest of a start. Each replica's own
-- (changesets.h, kLocalTables). No row: none yet.
CREATE TABLE inventory_file (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  record TEXT NOT NULL
) STRICT;
)sql"},
  };
  return kMigrations;
}

absl::StatusOr<int> SchemaVersion(Database& db) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare("PRAGMA user_version"));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::InternalError("PRAGMA user_version returned no row");
  return static_cast<int>(stmt.Int(0));
}

absl::Status CheckNotNewer(Database& db, const std::vector<Migration>& migrations) {
  ASSIGN_OR_RETURN(int current, SchemaVersion(db));
  const int latest = migrations.empty() ? 0 : migrations.back().version;
  if (current > latest) {
    return absl::FailedPreconditionError(
        absl::StrCat("state database ", db.path(), " has schema version ", current,
                     ", newer than the latest this fleetd knows (", latest,
                     "); it was written by a newer fleetd: run that version or restore a backup"));
  }
  return absl::OkStatus();
}

absl::Status Migrate(Database& db, const std::vector<Migration>& migrations) {
  RETURN_IF_ERROR(CheckNotNewer(db, migrations));
  ASSIGN_OR_RETURN(int current, SchemaVersion(db));
  for (const Migration& migration : migrations) {
    if (migration.version <= current) continue;
    ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db));
    if (absl::Status s = db.Exec(migration.sql); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("schema migration ", migration.version, " (",
                                                 migration.name, "): ", s.message()));
    }
    // PRAGMA takes no bound parameters; the version is our own integer, not input.
    RETURN_IF_ERROR(db.Exec(absl::StrCat("PRAGMA user_version = ", migration.version)));
    RETURN_IF_ERROR(txn.Commit());
  }
  return absl::OkStatus();
}

}  // namespace fleet::store
