#include "controller/fleetd/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <prometheus/gauge.h>

#include <signal.h>
#include <unistd.h>
#include "controller/metrics/rpc_interceptor.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/leader_health.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "controller/fleetd/switch_drivers.h"

namespace fleet::fleetd {
namespace {

absl::StatusOr<engine::EngineOptions> EngineOptionsOf(const FleetdConfig& config) {
  engine::EngineOptions options;
  options.default_lease = config.default_lease;
  options.reconcile_interval = config.reconcile_interval;
  options.armed_light_wait = config.armed_light_wait;
  options.monitor_interval = config.monitor_interval;
  options.low_power_dbm = config.low_power_dbm;
  options.suspect_after_failed_retrains =
      static_cast<uint32_t>(std::max(config.suspect_after_failed_retrains, 0));
  options.unknown_policy =
      config.unknown_cross_connects == "adopt"    ? v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT
      : config.unknown_cross_connects == "remove" ? v1::UNKNOWN_CROSS_CONNECT_POLICY_REMOVE
                                                  : v1::UNKNOWN_CROSS_CONNECT_POLICY_REPORT;
  // Retries of allocations that failed together spread over ±20 % of their backoff.
  options.retry_jitter = [random = std::make_shared<std::mt19937_64>(std::random_device{}())] {
    return std::uniform_real_distribution<double>(0.8, 1.2)(*random);
  };
  if (!config.crash_at.empty()) {
    const std::string point = config.crash_at;
    bool known = false;
    for (const char* p : engine::kFaultPoints) known |= point == p;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("--crash-at: '", point, "' is not a reconfiguration point"));
    }
    options.fault_point = [point](const std::string& at) {
      if (at != point) return;
      FLEET_LOG(WARNING) << "--crash-at " << point << ": killing fleetd";
      ::kill(::getpid(), SIGKILL);
    };
  }
  return options;
}

// Where a replica behind the log's first entry puts the snapshot it fetched, for its next
// start to load.
std::string SnapshotFile(const FleetdConfig& config) {
  return (std::filesystem::path(config.state_dir) / "fleet.db.from-log").string();
}

replication::ReplicaOptions ReplicaOptionsOf(const FleetdConfig& config) {
  replication::ReplicaOptions options;
  for (absl::string_view url : absl::StrSplit(config.etcd, ',', absl::SkipWhitespace())) {
    options.etcd.endpoints.emplace_back(absl::StripAsciiWhitespace(url));
  }
  options.etcd.ca_file = config.etcd_ca_file;
  options.etcd.cert_file = config.etcd_cert_file;
  options.etcd.key_file = config.etcd_key_file;
  // Well under a campaign round (a third of the lease, two calls), as LeaderElection asks;
  // an append that times out is made again while the fence is open.
  options.etcd.request_timeout =
      std::clamp(config.leader_lease / 6, absl::Milliseconds(250), absl::Seconds(1));
  options.advertise = config.advertise;
  options.prefix = config.etcd_prefix;
  options.lease_ttl = config.leader_lease;
  options.margin = config.leader_margin;
  options.snapshot_every = static_cast<uint64_t>(config.log_snapshot_every);
  options.keep_entries = static_cast<uint64_t>(config.log_keep_entries);
  options.snapshot_file = SnapshotFile(config);
  return options;
}

// The replica's role and lag, read at scrape time (docs/ha.md, docs/metrics.md).
std::shared_ptr<prometheus::Collectable> ReplicaGauges(const replication::Replica* replica) {
  return metrics::NewScrapedGauges([replica] {
    const replication::Replica::Status status = replica->Current();
    return std::vector<metrics::ScrapedGauge>{
        {"fleet_ha_leader", "1 while this replica leads and acts, else 0",
         status.role == replication::Replica::Role::kLeader ? 1.0 : 0.0},
        {"fleet_ha_leader_changes", "Times this replica began or ceased to lead",
         static_cast<double>(status.leader_changes)},
        {"fleet_ha_log_position", "The last replicated-log entry this replica's store holds",
         static_cast<double>(status.log.position)},
        {"fleet_ha_log_lag_entries",
         "Replicated-log entries this replica has not applied yet, as last read",
         static_cast<double>(status.log.head - status.log.position)},
        {"fleet_ha_following", "1 while this replica follows the log, 0 once it had to stop",
         status.log.stopped.ok() ? 1.0 : 0.0}};
  });
}

}  // namespace

const char* FleetVersion() { return kVersion; }

absl::StatusOr<std::unique_ptr<Fleetd>> Fleetd::Start(const FleetdConfig& config,
                                                      const Clock* clock,
                                                      std::function<void()> on_restart) {
  RETURN_IF_ERROR(ValidateFleetdConfig(config));
  ASSIGN_OR_RETURN(auto credentials, ReadSwitchCredentials(config.switch_credentials));
  std::error_code error;
  std::filesystem::create_directories(config.state_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create state directory ", config.state_dir, ": ", error.message()));
  }

  std::unique_ptr<Fleetd> d(new Fleetd());
  // Before the database is opened: a second fleetd must not even migrate it.
  ASSIGN_OR_RETURN(d->state_lock_, StateDirLock::Acquire(config.state_dir));
  d->registry_ = std::make_shared<prometheus::Registry>();
  prometheus::BuildGauge()
      .Name("fleet_build_info")
      .Help("fleetd build; the value is always 1")
      .Register(*d->registry_)
      .Add({{"version", kVersion}})
      .Set(1);
  d->metrics_ = std::make_unique<metrics::ControllerMetrics>(*d->registry_);
  if (!config.etcd.empty()) {
    replication::ReplicaOptions options = ReplicaOptionsOf(config);
    options.etcd.observe = [metrics = d->metrics_.get()](bool write, absl::Duration took,
                                                         const absl::Status& status) {
      metrics->EtcdCall(write ? "write" : "read", took, status.ok());
    };
    ASSIGN_OR_RETURN(d->replica_, replication::Replica::Create(std::move(options)));
    // Before the store's first write: a replica acts only once it leads and has caught up.
    d->commit_point_.SetFence(d->replica_->Fence());
  }
  const std::string db_path = (std::filesystem::path(config.state_dir) / "fleet.db").string();
  if (d->replica_) {
    RETURN_IF_ERROR(replication::InstallFetchedSnapshot(SnapshotFile(config), db_path));
  } else if (std::error_code ignored; std::filesystem::remove(SnapshotFile(config), ignored)) {
    // A single fleetd keeps its own database: a snapshot fetched while it was a replica would
    // replace a newer one if etcd were configured again.
    FLEET_LOG(WARNING) << "removed " << SnapshotFile(config)
                       << ", a replicated log's snapshot this single fleetd does not use";
  }
  store::SqliteStoreOptions store_options{
      .path = db_path, .clock = clock, .commit_point = &d->commit_point_};
  if (d->replica_) {
    store_options.commit_log = d->replica_->commit_log();
    store_options.before_migrating = [replica = d->replica_.get()](store::LogReplica& older) {
      return replica->CatchUpBeforeMigrating(older);
    };
  }
  ASSIGN_OR_RETURN(d->store_, store::OpenSqliteStore(store_options));
  FLEET_LOG(INFO) << "state database " << db_path << " open";
  // Caught up with the log before anything reads the store.
  if (d->replica_) d->replica_->Follow(d->store_.get());
  std::vector<std::shared_ptr<prometheus::Collectable>> scraped = {
      d->registry_, metrics::NewStoreStateCollector(d->store_.get(), d->store_.get())};
  if (d->replica_) scraped.push_back(ReplicaGauges(d->replica_.get()));
  ASSIGN_OR_RETURN(d->metrics_endpoint_,
                   metrics::MetricsEndpoint::Start(config.metrics_listen_address,
                                                   config.metrics_port, std::move(scraped)));
  d->metrics_address_ = d->metrics_endpoint_->address();

  d->applier_ = std::make_unique<inventory::InventoryApplier>(d->store_.get());
  d->switches_ = std::make_unique<switch_registry::SwitchRegistry>(
      std::move(credentials), config.switch_credentials, d->metrics_.get(), &d->commit_point_);
  RegisterSwitchDrivers(*d->switches_);

  // A replica applies it once it leads (a follower's store moves only by the log).
  if (!d->replica_) RETURN_IF_ERROR(d->ApplyInventoryFile(config));

  agent_registry::AgentRegistryOptions agent_options;
  agent_options.heartbeat_interval = config.agent_heartbeat;
  agent_options.max_heartbeats_per_second = static_cast<double>(config.agent_heartbeats_per_second);
  agent_options.metrics = d->metrics_.get();
  agent_options.commit_point = &d->commit_point_;
  d->agents_ = std::make_unique<agent_registry::AgentRegistry>(agent_options, d->store_.get(),
                                                               d->store_.get(), clock);
  ASSIGN_OR_RETURN(engine::EngineOptions engine_options, EngineOptionsOf(config));
  engine_options.metrics = d->metrics_.get();
  d->engine_ = std::make_unique<engine::Engine>(std::move(engine_options), d->store_.get(),
                                                d->switches_.get(), d->agents_.get(), clock);
  agent_registry::AgentRegistry::Listener listener;
  listener.connected = [engine = d->engine_.get()](const std::string& host,
                                                   const std::vector<std::string>& serials) {
    engine->AgentConnected(host, serials);
  };
  listener.gone = [engine = d->engine_.get()](
                      const std::string& host, const std::vector<std::string>& serials,
                      const std::string& why) { engine->AgentGone(host, serials, why); };
  listener.links_down = [engine = d->engine_.get()](const std::string& host,
                                                    const std::vector<v1::LinkState>& links) {
    engine->LinksDown(host, links);
  };
  d->agents_->SetListener(std::move(listener));
  ASSIGN_OR_RETURN(d->security_, ServerSecurity::Start(config, d->metrics_.get(), clock));
  if (config.insecure) {
    FLEET_LOG(WARNING) << "--insecure: plaintext gRPC on " << config.listen_address
                       << "; callers name themselves in x-fleet-principal, and anyone who "
                          "reaches the port may rewire the fabric";
  }
  auth::GrantSource* grants = d->security_->grants();
  d->agent_service_ = std::make_unique<service::AgentServiceImpl>(d->agents_.get(), grants);
  service::RpcExecutor::Options rpc_options{
      .refused = [metrics = d->metrics_.get()] { metrics->QueueRefused("rpcs"); }};
  if (d->replica_) {
    // Read-your-writes across replicas (rpc_executor.h).
    rpc_options.await_position = [store = d->store_.get()](uint64_t entry, absl::Duration wait) {
      return store->AwaitReplicaPosition(entry, wait);
    };
  }
  d->rpcs_ = std::make_unique<service::RpcExecutor>(std::move(rpc_options));
  d->inventory_service_ = std::make_unique<service::InventoryServiceImpl>(
      d->store_.get(), d->applier_.get(), d->rpcs_.get(), d->agents_.get(), d->switches_.get(),
      grants);
  d->watches_ = std::make_unique<service::WatchHub>(d->store_.get());
  d->watches_->Start();
  d->topology_service_ = std::make_unique<service::TopologyServiceImpl>(
      d->store_.get(), d->engine_.get(), grants, d->watches_.get(), d->rpcs_.get());
  d->admin_service_ = std::make_unique<service::AdminServiceImpl>(
      d->store_.get(), d->engine_.get(), d->switches_.get(), d->agents_.get(), grants,
      d->watches_.get(), d->rpcs_.get(), kVersion,
      [security = d->security_.get(), replica = d->replica_.get()] {
        std::vector<v1::ComponentHealth> components = {security->Health()};
        if (replica != nullptr) {
          for (v1::ComponentHealth& c : replica->Health()) components.push_back(std::move(c));
        }
        return components;
      });

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Sync-server threads poll their queues with this timeout, and shutdown waits for the
  // poll to end: the 1 s default would make every stop take a second.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::CQ_TIMEOUT_MSEC, 50);
  int grpc_port = 0;
  builder.AddListeningPort(absl::StrCat(config.listen_address, ":", config.grpc_port),
                           d->security_->credentials(), &grpc_port);
  builder.RegisterService(d->inventory_service_.get());
  builder.RegisterService(d->topology_service_.get());
  builder.RegisterService(d->admin_service_.get());
  builder.RegisterService(d->agent_service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(metrics::NewRpcMetricsInterceptor(d->metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  d->server_ = builder.BuildAndStart();
  if (d->server_ == nullptr || grpc_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC on ", config.listen_address, ":",
                                               config.grpc_port, " (address in use?)"));
  }
  d->grpc_address_ = absl::StrCat(config.listen_address, ":", grpc_port);
  d->retention_ = std::make_unique<store::Retention>(
      d->store_.get(), config.retention,
      [metrics = d->metrics_.get()](const store::RetentionPass& p) {
        metrics->RetentionPassed(p);
      });
  if (!d->replica_) {
    d->SetLeading(true);
    // After the server is up, so agents can reconnect while the switches are read.
    RETURN_IF_ERROR(d->StartActing());
    return d;
  }
  d->SetLeading(false);
  Fleetd* const self = d.get();
  d->replica_->Campaign(
      [self, config]() -> absl::Status {
        // The takeover: the store is at the log's head and the fence open. What a single
        // fleetd does at start, in the same order; then clients are told this one leads. An
        // inventory file that cannot be applied is said, not fatal: every replica has the same
        // file, and a site without a leader is worse than one on its stored inventory.
        absl::Status applied = self->ApplyInventoryFile(config);
        if (!applied.ok()) {
          FLEET_LOG(ERROR) << "taking over: " << applied;
        }
        absl::Status acting = self->StartActing();
        // Not if it was deposed meanwhile (the takeover thread deposes it next).
        if (self->replica_->Current().role == replication::Replica::Role::kLeader &&
            !self->restart_requested_) {
          self->SetLeading(true);
        }
        return acting;
      },
      [self, on_restart = std::move(on_restart)](const std::string& why) {
        self->SetLeading(false);
        self->restart_requested_ = true;
        FLEET_LOG(ERROR) << "this replica " << why << ": "
                         << (on_restart ? "stopping, to start again"
                                        : "acting no more, serving reads");
        if (on_restart) on_restart();
      });
  return d;
}

absl::Status Fleetd::ApplyInventoryFile(const FleetdConfig& config) {
  if (config.inventory.empty()) return absl::OkStatus();
  // At start the file is how the switches are reached: fleetd has not dialled one yet, so a
  // switch that moved while it was down is repointed even though it holds circuits (the
  // log and the event say so); reconciliation then reads it at its new address.
  ASSIGN_OR_RETURN(inventory::FileApplied applied,
                   applier_->ApplyFile(config.inventory, "fleetd:--inventory"));
  if (applied.skipped) {
    FLEET_LOG(INFO) << "inventory " << config.inventory
                    << ": the same file on the same stored inventory as when it was last applied; "
                       "not parsed again";
    return absl::OkStatus();
  }
  const v1::ApplyInventoryResponse& response = applied.response;
  FLEET_LOG(INFO) << "inventory " << config.inventory << ": created " << response.created()
                  << ", updated " << response.updated() << ", unchanged " << response.unchanged();
  for (const std::string& change : response.changes()) {
    if (absl::StartsWith(change, "updated ")) {
      FLEET_LOG(INFO) << "inventory: " << change;
    }
  }
  return absl::OkStatus();
}

absl::Status Fleetd::StartActing() {
  RETURN_IF_ERROR(engine_->Start());
  retention_->Start();
  return absl::OkStatus();
}

void Fleetd::SetLeading(bool leading) {
  grpc::HealthCheckServiceInterface* health =
      server_ != nullptr ? server_->GetHealthCheckService() : nullptr;
  if (health != nullptr) health->SetServingStatus(kLeaderHealthService, leading);
}

void Fleetd::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ && server_->GetHealthCheckService() != nullptr) {
    server_->GetHealthCheckService()->Shutdown();  // Health checks see NOT_SERVING from now.
  }
  // A stopping fleetd drops no agent it is too busy to hear (agent_registry.h).
  if (agents_) agents_->StopJudgingLiveness();
  // A leader resigns first, so that another replica takes over without waiting out the
  // lease; its fence is closed from here, and what the engine has under way stops at its next
  // effect, for the next leader to resume.
  if (replica_) {
    replica_->Stop();
    // The position moves no more: calls waiting for a caller's position are answered now.
    if (store_) store_->EndReplicaPositionWaits();
  }
  if (retention_) retention_->Stop();  // Its pass ends after the transaction under way.
  // Transactions reach a persisted state; watch streams end; then agent streams, which never
  // end on their own, so the server can drain.
  if (engine_) engine_->Shutdown();
  FLEET_LOG(DEBUG) << "engine stopped";
  if (watches_) watches_->Stop();
  if (agents_) agents_->Shutdown();
  FLEET_LOG(DEBUG) << "agent streams ended";
  // Calls still waiting for a thread are refused, so the server's Shutdown, which waits for
  // every call's answer, waits only for those running.
  if (rpcs_) rpcs_->Stop();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoSeconds(grace));
  FLEET_LOG(DEBUG) << "gRPC server stopped";
  metrics_endpoint_.reset();
}

absl::Status Fleetd::ReloadSecurity() { return security_->Reload(); }

Fleetd::~Fleetd() { Shutdown(absl::ZeroDuration()); }

}  // namespace fleet::fleetd
