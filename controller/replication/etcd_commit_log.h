// The store's commit log on etcd (docs/ha.md): the leader's store appends each write's
// entry (controller/store/commit_log.h) to the replicated log (controller/etcd), fenced on
// this replica's leadership.
//
// Contract:
// - Append(entry, bytes) appends `bytes` as log entry `entry`, compared on the
//   election's StillLeading. OK once it is in the log, and only then. FAILED_PRECONDITION
//   when this replica does not lead; UNAVAILABLE "catching up" when the log already holds
//   another write under that number (this replica has not applied the log's head yet: a new
//   leader's follower loop catches it up within a poll); any other refusal of etcd (no space
//   left, not allowed) as etcd's code. In all these the entry is not in the log, and the
//   store's write rolls back.
// - When etcd leaves the outcome unknown (UNAVAILABLE, DEADLINE_EXCEEDED, UNKNOWN, INTERNAL:
//   a member lost mid-call, no quorum), the same append is made again every `retry` for as
//   long as this replica's fence is open (LeaderElection::Fence); the fence closes at most a
//   lease TTL less its margin after the last renewal, so this ends. Once the fence has
//   closed, the answer is UNAVAILABLE saying the entry may be in the log, and the write rolls
//   back here. If the entry did land, this replica's next write under that number is
//   answered "catching up" until its follower loop has applied it, so no write is made on a
//   store behind the log; every replica, this one included, applies the entry. A write is
//   therefore never acknowledged unless it is in the log. Without quorum a write is refused
//   within about one lease TTL.
// - Called by the store under its connection lock, one call at a time: while it waits, that
//   store's other reads and writes wait too.
#ifndef FLEET_CONTROLLER_REPLICATION_ETCD_COMMIT_LOG_H_
#define FLEET_CONTROLLER_REPLICATION_ETCD_COMMIT_LOG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "controller/etcd/leader_election.h"
#include "controller/etcd/replicated_log.h"
#include "controller/store/commit_log.h"

namespace fleet::replication {

class EtcdCommitLog : public store::CommitLog {
 public:
  // `log` and `election` outlive this.
  EtcdCommitLog(etcd::ReplicatedLog* log, const etcd::LeaderElection* election,
                absl::Duration retry = absl::Milliseconds(100))
      : log_(log), election_(election), retry_(retry) {}

  absl::Status Append(uint64_t entry, const std::string& bytes) override;

 private:
  etcd::ReplicatedLog* const log_;
  const etcd::LeaderElection* const election_;
  const absl::Duration retry_;
};

}  // namespace fleet::replication

#endif  // FLEET_CONTROLLER_REPLICATION_ETCD_COMMIT_LOG_H_
