// fleetd's configuration: a YAML file (deploy/config/fleetd.yaml is the annotated example),
// with command-line flags overriding it in main().
#ifndef FLEET_CONTROLLER_FLEETD_CONFIG_H_
#define FLEET_CONTROLLER_FLEETD_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "controller/store/retention.h"

namespace fleet::fleetd {

struct FleetdConfig {
  std::string listen_address = "127.0.0.1";  // For the gRPC port.
  // For the Prometheus port, which serves without authentication (docs/security.md).
  std::string metrics_listen_address = "127.0.0.1";
  int grpc_port = 50051;                     // 0 picks a free port.
  int metrics_port = 9464;                   // 0 picks a free port.
  std::string state_dir = "/var/lib/fleet";  // Holds fleet.db (SQLite, WAL).
  std::string inventory;                     // Applied at start when set.
  std::string switch_credentials;            // File with switch credentials; mode 0600.
  absl::Duration shutdown_grace = absl::Seconds(10);
  absl::Duration agent_heartbeat = absl::Seconds(1);  // Agents missing 3 in a row are dropped.
  // Above this many heartbeats a second from all agents, the interval lengthens
  // (agent_registry::AgentRegistryOptions); 0: fixed at agent_heartbeat.
  int64_t agent_heartbeats_per_second = 500;
  std::string log_level = "info";                         // debug, info, warning, error.
  absl::Duration default_lease = absl::Hours(1);          // For requests that name none.
  absl::Duration reconcile_interval = absl::Seconds(60);  // 0 turns periodic passes off.
  std::string unknown_cross_connects = "report";          // report, adopt or remove.
  // The switch monitor (engine::EngineOptions): how often port status and power are read
  // (0: never), the power below which a lit egress is DEGRADED, and how many failed
  // retrains in a row make a device SUSPECT (0: never).
  absl::Duration monitor_interval = absl::Seconds(2);
  double low_power_dbm = -20.0;
  int suspect_after_failed_retrains = 3;
  // How long an armed retrain waits for its light (engine::EngineOptions); 0: not armed.
  absl::Duration armed_light_wait = absl::Seconds(5);
  // Mutual TLS (docs/security.md): the CA bundle client certificates must chain to, fleetd's
  // certificate and key, and the access policy. The certificate and key are re-read when
  // they change (checked every `tls_reload_interval`); the bundle and the policy then too,
  // and at once on SIGHUP.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string policy_file;
  absl::Duration tls_reload_interval = absl::Seconds(60);
  // Plaintext gRPC, callers named by metadata: anyone who reaches the port may do anything.
  // Flag only (--insecure), never in a config file; exclusive with the tls_* settings.
  bool insecure = false;
  // What the state database keeps of its history, and how pruning runs (the config's
  // events_*, ended_allocations_* and retention_* keys).
  store::RetentionPolicy retention;
  // Replication (docs/ha.md): with etcd members set, this fleetd is one replica of several
  // sharing them; the leader acts, the others follow and serve reads. Empty: a single fleetd.
  // `etcd` is a comma-separated list of the members' client URLs; the three files are the
  // etcd CA and this replica's client certificate and key (etcd's --client-cert-auth), all or
  // none; `advertise` is the HOST:PORT clients and agents dial this replica at.
  std::string etcd;
  std::string etcd_ca_file;
  std::string etcd_cert_file;
  std::string etcd_key_file;
  std::string advertise;
  std::string etcd_prefix = "fleet/";  // Every key of this site in etcd starts with it.
  // The leader's lease: a replica takes over at most this long after a leader is lost
  // (etcd 3.4 grants at least about 2 s); the leader stops acting `leader_margin` before it
  // could run out.
  absl::Duration leader_lease = absl::Seconds(5);
  absl::Duration leader_margin = absl::Seconds(1);
  // The leader snapshots its store into the log every this many entries and trims the log to
  // the last `log_keep_entries` before the snapshot, so etcd's space stays bounded.
  int64_t log_snapshot_every = 10000;
  int64_t log_keep_entries = 1000;
  // Testing only: fleetd kills itself with SIGKILL at this engine fault point (see
  // engine::kFaultPoints), to prove crash consistency. Flag only, never in a config file.
  std::string crash_at;
};

// Every unknown key, wrong type and out-of-range value is reported, "FILE:LINE: ...".
absl::StatusOr<FleetdConfig> ParseFleetdConfig(absl::string_view text, absl::string_view file_name);
absl::StatusOr<FleetdConfig> ReadFleetdConfigFile(const std::string& path);

// Checks values that flags may also have set: ports in 0..65535, a state directory, a level,
// the retention policy's limits, either all four TLS files or --insecure, and replication's
// settings (an advertised address and all or none of the etcd TLS files once etcd is set).
absl::Status ValidateFleetdConfig(const FleetdConfig& config);

}  // namespace fleet::fleetd

#endif  // FLEET_CONTROLLER_FLEETD_CONFIG_H_
