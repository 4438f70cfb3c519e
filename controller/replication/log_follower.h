// Keeps a replica's store at the head of the replicated log (docs/ha.md). It runs on every
// replica, the leader included: a leader's own writes move its position, so it finds nothing
// new; after a takeover it is how the new leader catches up, and until it has, the log
// refuses the new leader's appends (their entry numbers are behind the head), so no write can
// be made on a stale replica.
//
// Contract:
// - CatchUp() applies, in order, every entry past the store's position that the log holds
//   when it is called (LogReplica::ApplyReplicated), reading in rounds of the log's byte
//   budget. It returns the first error: an unreachable etcd (nothing lost: the next call goes
//   on from the position), an entry that does not apply (DATA_LOSS), or a position behind the
//   log's first kept entry, as read again after the refusal (OUT_OF_RANGE: the replica then
//   loads the log's snapshot, replica.h).
// - Start() runs CatchUp every `poll` on a thread of its own until Stop() (once: a second
//   Start, or one after Stop, does nothing). An unreachable
//   etcd is retried; DATA_LOSS and OUT_OF_RANGE stop it, since applying anything after would
//   diverge: Current().stopped says why.
// - Current() is what the last round saw: the store's position, the log's head (never below
//   the position), and so the replica's lag in entries.
#ifndef FLEET_CONTROLLER_REPLICATION_LOG_FOLLOWER_H_
#define FLEET_CONTROLLER_REPLICATION_LOG_FOLLOWER_H_

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "controller/etcd/replicated_log.h"
#include "controller/store/storage_control.h"

namespace fleet::replication {

class LogFollower {
 public:
  struct Progress {
    uint64_t position = 0;  // The last entry the store holds.
    uint64_t head = 0;      // The log's last entry, as last read.
    absl::Status stopped;   // Why the loop stopped (OK while it runs, or before it started).
  };

  // `log` and `store` outlive this.
  LogFollower(etcd::ReplicatedLog* log, store::LogReplica* store,
              absl::Duration poll = absl::Milliseconds(50))
      : log_(log), store_(store), poll_(poll) {}
  ~LogFollower() { Stop(); }
  LogFollower(const LogFollower&) = delete;
  LogFollower& operator=(const LogFollower&) = delete;

  absl::Status CatchUp() ABSL_LOCKS_EXCLUDED(mu_);
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  Progress Current() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();

  etcd::ReplicatedLog* const log_;
  store::LogReplica* const store_;
  const absl::Duration poll_;
  absl::Mutex catch_up_mu_;  // One CatchUp at a time: entries apply in order.
  mutable absl::Mutex mu_;
  Progress progress_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;  // Started and joined by the owner's thread only.
};

}  // namespace fleet::replication

#endif  // FLEET_CONTROLLER_REPLICATION_LOG_FOLLOWER_H_
