// One fleetd replica of a replicated site (docs/ha.md): its etcd client, its part in the
// leader election, the replicated log, the store's commit log on it, the loop that keeps its
// store at the log's head, and the takeover that turns a follower into the leader.
//
// Contract:
// - Create() connects to etcd (nothing is sent yet) and checks the options; the daemon then
//   opens its store with commit_log() and installs Fence() on its commit point, before the
//   store's first write.
// - Follow(store) catches the store up with the log once (an unreachable etcd is only logged:
//   the follower loop goes on trying) and starts the follower loop; the daemon calls it before
//   it serves reads. Campaign(...) then enters the leader election. From then on the replica
//   is a follower, or the leader.
// - A follower's fence refuses every effect UNAVAILABLE naming the leader (LeaderElection's
//   "not the leader: ADDRESS leads"), so no switch, agent or store write leaves it; its store
//   moves only by the log, and serves reads.
// - When the campaign is won, the takeover thread catches the store up to the log's head (no
//   other replica can append once this one holds the key), and only then, if this replica
//   has led without interruption since it won, opens the fence and calls `on_leading`: the
//   daemon applies its inventory, reads every switch and resumes what was interrupted, as a
//   single fleetd does at start (requests arriving meanwhile are taken as they are there).
//   Until the fence opens every effect is refused UNAVAILABLE "taking over".
// - Any change of leadership after the campaign was won (lost, even if won again before the
//   takeover thread looked) deposes the replica: the fence closes at once, and `on_restart`
//   is called, on the takeover thread, after `on_leading` if that was running. The daemon
//   exits so that its supervisor starts it again as a follower, with nothing in memory from
//   its reign. A replica never leads twice in one life.
// - Upkeep runs on a thread of its own every `upkeep_interval`. On the leader, once
//   `snapshot_every` entries were appended since the log's newest snapshot, it copies its
//   store (StorageControl::SnapshotTo) into the log as the newest snapshot and trims the
//   entries before the last `keep_entries`, so etcd's space stays bounded however long the
//   site runs. On any replica whose store is behind the log's first kept entry (away past a
//   trim, or new), it writes the log's newest snapshot to `snapshot_file` (whole, then
//   renamed into place) and calls `on_restart`: the daemon exits, and at its next start
//   InstallFetchedSnapshot puts the file in place of its database before opening it. It
//   then follows the log from the snapshot's entry on.
// - The leader's upkeep also looks after etcd's space (etcd_space.h: a member whose file is
//   mostly free pages is defragmented, one at a time, never etcd's leader; a NOSPACE alarm
//   is cleared once every reachable member was), its first pass `space_every` after it began
//   to lead.
// - `on_restart` is called at most once per Replica, with the reason.
// - A replica whose store cannot follow the log (an entry that does not apply, or a position
//   behind the log's first entry) does not campaign, or resigns if it won; it stays a follower
//   that serves what it has, its `replica` health DOWN, until upkeep fetches a snapshot (for a
//   position behind the first entry; an entry that does not apply needs an operator).
// - Stop() closes the fence, resigns at once when leading (the lease is revoked, so another
//   replica takes over without waiting out the TTL), then stops the campaign, the takeover
//   (waiting for `on_leading` if it is running), the upkeep and the follower loop;
//   `on_restart` is not called for it. Idempotent, from one thread; the destructor calls it.
// - Current() and Health() read what the threads last saw, except Health's etcd members,
//   which are asked live (bounded by the client's request timeout).
#ifndef FLEET_CONTROLLER_REPLICATION_REPLICA_H_
#define FLEET_CONTROLLER_REPLICATION_REPLICA_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/commit_point/commit_point.h"
#include "controller/etcd/etcd_client.h"
#include "controller/etcd/etcd_space.h"
#include "controller/etcd/leader_election.h"
#include "controller/etcd/replicated_log.h"
#include "controller/replication/etcd_commit_log.h"
#include "controller/replication/log_follower.h"
#include "controller/store/storage_control.h"
#include "fleet/v1/admin.pb.h"

namespace fleet::replication {

struct ReplicaOptions {
  etcd::EtcdOptions etcd;
  // This replica's address as clients and agents dial it (HOST:PORT): the leader key's value.
  std::string advertise;
  // Every key this site keeps in etcd starts with it (the leader key, the log).
  std::string prefix = "fleet/";
  absl::Duration lease_ttl = absl::Seconds(5);
  // How long before its lease could run out a leader stops acting (LeaderOptions::margin).
  absl::Duration margin = absl::Seconds(1);
  // How often a follower applies what the log holds past its position.
  absl::Duration poll = absl::Milliseconds(50);
  // Snapshots and trims (the contract's upkeep): entries between two snapshots (0: none
  // taken), entries kept before the newest when trimming, where a replica behind the log
  // writes the snapshot it fetches ("": none fetched), and how often upkeep looks.
  uint64_t snapshot_every = 10000;
  uint64_t keep_entries = 1000;
  std::string snapshot_file;
  absl::Duration upkeep_interval = absl::Seconds(1);
  // etcd's space (controller/etcd/etcd_space.h), looked after by the leader's upkeep every
  // `space_every`, and at every upkeep while a NOSPACE alarm is active (zero: never).
  absl::Duration space_every = absl::Seconds(30);
  etcd::SpaceOptions space;
};

// Before the store at `db_path` is opened: when a snapshot was fetched into `snapshot_file`
// (Replica's upkeep), puts it in place of the database (its write-ahead log removed first, so
// nothing of the old database is replayed into it). OK when there is none.
absl::Status InstallFetchedSnapshot(const std::string& snapshot_file, const std::string& db_path);

class Replica {
 public:
  // INVALID_ARGUMENT naming the option for an empty advertised address or prefix, election
  // options that cannot work (LeaderElection::Check), or etcd options the client refuses.
  static absl::StatusOr<std::unique_ptr<Replica>> Create(ReplicaOptions options);
  ~Replica();  // Stop().
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // What the store appends each write's changes to; valid for this object's life.
  store::CommitLog* commit_log() { return &commit_log_; }
  // For CommitPoint::SetFence: the contract's rules, the same for every effect. Valid for
  // this object's life.
  CommitPoint::Fence Fence();

  // For the store's SqliteStoreOptions::before_migrating, before Follow: applies the log's
  // entries past `older`'s position while they are of its schema (an upgrade's first start,
  // docs/ha.md). OK once it meets an entry of another schema (the new one's, applied after the
  // migration), or a position behind the log's first kept entry (upkeep then fetches the log's
  // snapshot); also OK, logged as an error, for an entry of its schema that does not fit it
  // (this replica cannot follow the log either way: its health says so after the migration).
  // Otherwise the error reading etcd (UNAVAILABLE when it cannot be reached), naming what it
  // was for: migrating without those entries would leave the store unable to follow, so the
  // daemon does not start (its supervisor starts it again).
  absl::Status CatchUpBeforeMigrating(store::LogReplica& older);
  // `store` outlives this. Once; before Campaign.
  void Follow(store::StorageControl* store);
  // `on_leading` and `on_restart` as in the contract (either may be empty); `on_leading`'s
  // error is logged and the replica leads on (what it could not do, the periodic passes
  // retry). Once, after Follow.
  void Campaign(std::function<absl::Status()> on_leading,
                std::function<void(const std::string& why)> on_restart) ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  enum class Role { kFollower, kTakingOver, kLeader };
  struct Status {
    Role role = Role::kFollower;
    std::string leader;  // The leader's advertised address; "" when none is known.
    std::string self;    // This replica's.
    LogFollower::Progress log;
    int64_t leader_changes = 0;  // Times this replica began or ceased to lead.
  };
  Status Current() const ABSL_LOCKS_EXCLUDED(mu_);
  // For `fleetctl health`: a `replica` component (role, leader, log position and lag) and one
  // `etcd/ENDPOINT` per member (its raft term, index, database size and alarms).
  std::vector<v1::ComponentHealth> Health() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Replica(ReplicaOptions options, std::unique_ptr<etcd::EtcdClient> client);
  void OnLeadingChanged(bool leading) ABSL_LOCKS_EXCLUDED(mu_);
  void RunTakeover() ABSL_LOCKS_EXCLUDED(mu_);
  // Applies the log up to its head and opens the fence, if leadership has not changed since
  // `generation` (leader_changes_ when the campaign was won); false when it changed, the
  // replica is stopping, or its store cannot follow the log (then it resigns).
  bool CatchUpAsLeader(int64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `status`, from catching up, means the store can never follow the log.
  static bool CannotFollow(const absl::Status& status);
  void RunUpkeep() ABSL_LOCKS_EXCLUDED(mu_);
  // The leader's snapshot and trim, when due.
  absl::Status SnapshotIfDue();
  // A pass of space_keeper_ when due.
  absl::Status KeepSpaceIfDue();
  // Trims the entries before the last keep_entries up to `snapshot`, unless done already.
  absl::Status TrimBefore(uint64_t snapshot, const etcd::LogBounds& bounds);
  // A replica behind the log's first entry: fetches the newest snapshot into snapshot_file.
  absl::Status FetchSnapshot();
  // Calls on_restart_ once.
  void Restart(const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);

  const ReplicaOptions options_;
  const std::unique_ptr<etcd::EtcdClient> client_;
  etcd::ReplicatedLog log_;
  etcd::LeaderElection election_;
  EtcdCommitLog commit_log_;
  // etcd's space, and when its next pass is due: the upkeep thread's only.
  etcd::SpaceKeeper space_keeper_;
  absl::Time next_space_pass_ = absl::InfinitePast();
  bool space_scheduled_ = false;   // The first pass is a space_every after leading begins.
  bool space_alarm_back_ = false;  // This NOSPACE alarm came back soon after being cleared.
  // Made by Follow, before anything reads it from another thread.
  std::unique_ptr<LogFollower> follower_;
  // True only while this replica leads, without a change since it won, and has caught up:
  // the fence opens only then. Set under mu_; cleared at once when leadership changes.
  std::atomic<bool> serving_{false};

  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  bool campaigning_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool cannot_lead_ ABSL_GUARDED_BY(mu_) = false;  // The store cannot follow the log.
  bool leading_ ABSL_GUARDED_BY(mu_) = false;      // As the campaign last said.
  Role role_ ABSL_GUARDED_BY(mu_) = Role::kFollower;
  // Every change of leadership counts one: the takeover's generation.
  int64_t leader_changes_ ABSL_GUARDED_BY(mu_) = 0;
  bool restarting_ ABSL_GUARDED_BY(mu_) = false;  // on_restart_ was called.
  store::StorageControl* store_ = nullptr;        // Set by Follow.
  std::function<absl::Status()> on_leading_;
  std::function<void(const std::string&)> on_restart_;
  std::thread takeover_;
  std::thread upkeep_;
};

// "follower", "taking over", "leader".
const char* RoleName(Replica::Role role);

}  // namespace fleet::replication

#endif  // FLEET_CONTROLLER_REPLICATION_REPLICA_H_
