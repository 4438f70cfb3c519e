// etcd's space (docs/ha.md): compaction frees the pages of old revisions inside each member's
// database file, and bbolt reuses them but never hands them back, while etcd's space quota
// counts the file. A member whose file passes the quota raises the NOSPACE alarm, and from
// then on etcd takes no write but deletes and compactions (no Put, no lease granted), until
// the alarm is cleared.
//
// Contract:
// - Pass() reads the alarms and every member's status (EtcdClient::Members), and does at most
//   one thing: defragments one member (EtcdClient::Defragment; its status is read again after)
//   or moves etcd's leadership. One call at a time, but etcd goes on with a defragmentation
//   whose call timed out. The member due is the reachable
//   one with the most free bytes among those whose file is at least `min_bytes` and more than
//   `max_free_fraction` free. etcd's leader is never defragmented (every write and lease
//   renewal would wait for it): when it is the one due, the pass hands its leadership to
//   another reachable member (EtcdClient::MoveLeader), and a later pass defragments it.
// - While a NOSPACE alarm is active the thresholds are waived: each reachable member is
//   defragmented once (one per pass); the pass after the last clears every NOSPACE alarm.
//   If the data alone is past the quota, etcd raises the alarm again at the next write; a
//   pass that finds it back within `alarm_backoff` of clearing it says so (alarm_back), and
//   the passes begin again.
// - After a defragmentation that failed (etcd goes on with one that timed out), no member is
//   defragmented for `defragment_timeout`.
// - Thread-compatible: one caller (the leader's upkeep).
#ifndef FLEET_CONTROLLER_ETCD_ETCD_SPACE_H_
#define FLEET_CONTROLLER_ETCD_ETCD_SPACE_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/etcd/etcd_client.h"

namespace fleet::etcd {

struct SpaceOptions {
  int64_t min_bytes = int64_t{32} << 20;
  double max_free_fraction = 0.5;
  // Below fleetd's stop timeout (deploy/systemd: 30 s), since a stop waits for the call.
  absl::Duration defragment_timeout = absl::Seconds(20);
  absl::Duration alarm_backoff = absl::Minutes(5);
};

// What one pass did.
struct SpacePass {
  std::string defragmented;  // The member's endpoint; "" when none was.
  int64_t bytes_before = 0;  // Its file before and after.
  int64_t bytes_after = 0;
  absl::Duration took;             // The defragmentation: the member answered nothing else.
  std::string moved_leader_from;   // etcd's leader, when its leadership was handed on.
  std::vector<uint64_t> disarmed;  // Members whose NOSPACE alarm was cleared.
  bool alarm_back = false;         // A NOSPACE alarm within alarm_backoff of the last clearing.
};

class SpaceKeeper {
 public:
  // `client` outlives this.
  SpaceKeeper(EtcdClient* client, SpaceOptions options) : client_(client), options_(options) {}

  // The first error of etcd (reading the alarms, a defragmentation, a move of the leadership,
  // clearing an alarm); an unreachable member is skipped, not an error.
  absl::StatusOr<SpacePass> Pass();
  // Whether the last pass saw a NOSPACE alarm it has not cleared yet.
  bool UnderAlarm() const { return under_alarm_; }

 private:
  EtcdClient* const client_;
  const SpaceOptions options_;
  // The members defragmented since a NOSPACE alarm was seen.
  std::set<std::string> defragmented_under_alarm_;
  bool under_alarm_ = false;
  absl::Time disarmed_at_ = absl::InfinitePast();
  absl::Time quiet_until_ = absl::InfinitePast();  // After a failed defragmentation.
};

}  // namespace fleet::etcd

#endif  // FLEET_CONTROLLER_ETCD_ETCD_SPACE_H_
