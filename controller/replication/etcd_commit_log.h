// The store's commit log on etcd (docs/ha.md): the leader's store appends each write's
// changeset (controller/store/commit_log.h) to the replicated log (controller/etcd), fenced
// on this replica's leadership.
//
// Contract:
// - Append(entry, changeset) appends the changeset as log entry `entry`, compared on the
//   election's StillLeading. OK once it is in the log, and only then. FAILED_PRECONDITION
//   when this replica does not lead or another leader appended that entry: it is not in the
//   log, and the store's write rolls back.
// - When etcd leaves the outcome unknown (a member lost mid-call, no quorum), the same append
//   is made again every `retry` for as long as this replica's fence is open
//   (LeaderElection::Fence). Once the fence has closed, the answer is UNAVAILABLE saying the
//   entry may be in the log: the write rolls back here, and this replica, whose commit point
//   now refuses every effect, learns the entry's fate when it catches up from the log. A
//   write is therefore never acknowledged unless it is in the log, and an entry in the log
//   that its leader rolled back is applied by every replica, that one included, when it
//   catches up. Without quorum, a write is refused within about one lease TTL.
// - Called by the store under its connection lock, one call at a time.
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

  absl::Status Append(uint64_t entry, const std::string& changeset) override;

 private:
  etcd::ReplicatedLog* const log_;
  const etcd::LeaderElection* const election_;
  const absl::Duration retry_;
};

}  // namespace fleet::replication

#endif  // FLEET_CONTROLLER_REPLICATION_ETCD_COMMIT_LOG_H_
