// fleetd assembled: the store, the services, the gRPC server and the metrics endpoint.
// main() builds one from a config; integration tests can run one in-process.
#ifndef FLEET_CONTROLLER_FLEETD_DAEMON_H_
#define FLEET_CONTROLLER_FLEETD_DAEMON_H_

#include <grpcpp/server.h>
#include <prometheus/registry.h>

#include "controller/metrics/controller_metrics.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "controller/commit_point/commit_point.h"
#include "controller/engine/engine.h"
#include "controller/fleetd/config.h"
#include "controller/fleetd/server_security.h"
#include "controller/fleetd/state_lock.h"
#include "controller/inventory/inventory.h"
#include "controller/replication/replica.h"
#include "controller/service/admin_service.h"
#include "controller/service/agent_service.h"
#include "controller/service/inventory_service.h"
#include "controller/service/topology_service.h"
#include "controller/store/retention.h"
#include "controller/store/store.h"
#include "controller/switch_registry/switch_registry.h"

namespace fleet::fleetd {

class Fleetd {
 public:
  // Opens (and migrates) the store under config.state_dir, applies config.inventory if set,
  // and starts serving. Any failure stops the start with a status naming the cause; a
  // rejected inventory leaves the store as it was. A replica (config.etcd set) that must
  // start again (it lost the leadership, or fetched the log's snapshot to load) calls
  // `on_restart` once, from a thread of its own, and acts no more (main raises SIGTERM to exit
  // kExitRestart); without it, it stays up serving reads.
  static absl::StatusOr<std::unique_ptr<Fleetd>> Start(const FleetdConfig& config,
                                                       const Clock* clock,
                                                       std::function<void()> on_restart = nullptr);
  ~Fleetd();

  // "HOST:PORT" actually bound (port 0 in the config resolved).
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }

  // Whether this replica must start again (docs/ha.md); main then exits kExitRestart so that
  // its supervisor starts it again.
  bool restart_requested() const { return restart_requested_.load(); }

  // Re-reads the CA bundle and the access policy (SIGHUP); what is in force stays when they
  // cannot be used, and the error says why.
  absl::Status ReloadSecurity();

  // Reports NOT_SERVING, stops the engine, the watches and the agents' streams, refuses calls
  // still waiting for a thread and waits for those running (they end once the engine and the
  // agents have stopped), then gives what is left `grace` before it is cancelled. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  Fleetd() = default;

  // Applies config.inventory (at start; a replica when it takes over).
  absl::Status ApplyInventoryFile(const FleetdConfig& config);
  // What the leader starts once it acts: the engine's start-up reconciliation and passes, and
  // retention.
  absl::Status StartActing();
  // What the health check's kLeaderHealthService says.
  void SetLeading(bool leading);

  std::unique_ptr<StateDirLock> state_lock_;  // Declared first: let go last.
  // Every store write, switch command and agent command passes it; outlives them all.
  CommitPoint commit_point_;
  // Before everything that updates them, so they are destroyed after it.
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<metrics::ControllerMetrics> metrics_;
  // A replica of a replicated site (config.etcd set), else null. Its fence is commit_point_'s;
  // the store appends to its log. Stopped first in Shutdown.
  std::unique_ptr<replication::Replica> replica_;
  std::atomic<bool> restart_requested_{false};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::Retention> retention_;  // Prunes store_; reports to metrics_.
  std::unique_ptr<inventory::InventoryApplier> applier_;
  std::unique_ptr<switch_registry::SwitchRegistry> switches_;
  std::unique_ptr<agent_registry::AgentRegistry> agents_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<service::WatchHub> watches_;  // Outlives server_, which waits for its streams.
  std::unique_ptr<service::RpcExecutor> rpcs_;  // Outlives server_, which waits for its calls.
  // Outlives server_, whose calls it decides, and the services, which ask its policy.
  std::unique_ptr<ServerSecurity> security_;
  std::unique_ptr<service::AgentServiceImpl> agent_service_;
  std::unique_ptr<service::InventoryServiceImpl> inventory_service_;
  std::unique_ptr<service::TopologyServiceImpl> topology_service_;
  std::unique_ptr<service::AdminServiceImpl> admin_service_;
  std::unique_ptr<metrics::MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<grpc::Server> server_;
  std::string grpc_address_;
  std::string metrics_address_;
  bool shut_down_ = false;
};

// fleetd's exit code when a replica must start again (EX_TEMPFAIL): it lost the leadership,
// or fetched the log's snapshot to load; its supervisor starts it again.
inline constexpr int kExitRestart = 75;

// The product's version, from the build.
const char* FleetVersion();

}  // namespace fleet::fleetd

#endif  // FLEET_CONTROLLER_FLEETD_DAEMON_H_
