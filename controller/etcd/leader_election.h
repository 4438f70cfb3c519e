// Which fleetd replica leads, decided on etcd (docs/ha.md): the leader holds one key
// (LeaderOptions::key) whose value is its advertised address, put on a lease it keeps alive.
// The key's create_revision is the leader's epoch: a write that compares it (StillLeading)
// is refused by etcd once another replica has taken the key, whatever this one believes.
//
// Contract:
// - At most one replica leads at a time as etcd sees it (the key exists once). As this process
//   sees it, Fence() answers OK only while it holds the key and its lease, renewed at time t
//   for TTL T (as etcd answered), has more than LeaderOptions::margin left by this process's
//   monotonic clock, counted from when the renewal was sent: T - margin after t at the latest
//   it closes, before etcd can have let the lease expire and another replica taken the key
//   (clocks on the two machines are assumed to run at the same rate, not to agree).
//   Clocks: the monotonic clock stops while this machine is suspended (etcd's does not), so a
//   replica is assumed never to be suspended while it leads; the clocks of the machines are
//   assumed to run at the same rate, not to agree.
// - The campaign runs on a thread of its own: every `retry` while not leading (a read of the
//   key; a lease and the create only when it is free, or on this replica's own lease after a
//   round whose answer was lost; a lease granted in an earlier round is not kept alive while
//   another replica leads); while leading,
//   every third of the TTL (at most half the time the fence stays open after a renewal). Each
//   round of a leader reads its key first and renews the lease only while the key is still its
//   own (created at its epoch, on its lease). A leader that cannot reach etcd keeps trying and
//   its fence closes on its own as above; after a whole TTL without renewal it stops leading.
//   One that learns its lease or key is gone, or gets any other error than "unreachable",
//   stops leading at once. If something else deletes the key or revokes the lease, another
//   replica may lead before this one's next round notices (at most a round and two calls'
//   deadlines later): the key and lease are the election's alone.
// - The client's request timeout should be well under a round (a third of the TTL), or slow
//   calls close the fence of a healthy leader.
// - Stop() resigns: a leader revokes its lease, so its key goes at once and another replica
//   can lead without waiting out the TTL.
// - `on_change` is called on the campaign thread each time this replica starts or stops
//   leading (never under the election's lock); it must not call Stop().
#ifndef FLEET_CONTROLLER_ETCD_LEADER_ELECTION_H_
#define FLEET_CONTROLLER_ETCD_LEADER_ELECTION_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/etcd/etcd_client.h"

namespace fleet::etcd {

struct LeaderOptions {
  std::string key = "fleet/leader";
  // This replica's advertised address (HOST:PORT), the key's value while it leads: what
  // followers name as the leader.
  std::string name;
  // The lease's time to live, whole seconds; etcd 3.4 grants at least about 2 s.
  absl::Duration lease_ttl = absl::Seconds(5);
  // How long before its lease could have expired a leader stops acting: more than the longest
  // effect it may be in the middle of (a switch batch) and the clock's drift over a TTL.
  absl::Duration margin = absl::Seconds(1);
  // How often a replica that does not lead looks at the key (a read), and tries for it when
  // it is free: a resigned leader's successor takes over within about this long.
  absl::Duration retry = absl::Milliseconds(100);
};

class LeaderElection {
 public:
  // INVALID_ARGUMENT naming the option for an empty key or name, a TTL under 1 s, or a margin
  // not below the TTL.
  static absl::Status Check(const LeaderOptions& options);
  // `client` outlives this.
  LeaderElection(EtcdClient* client, LeaderOptions options,
                 std::function<void(bool leading)> on_change = nullptr);
  ~LeaderElection();  // Stop().
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // Starts the campaign thread; Check()'s error, and nothing started, for bad options.
  absl::Status Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Resigns if leading (the lease is revoked) and ends the campaign thread. Waits for the
  // round in flight, whose calls are bounded by the client's request timeout.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // OK while this replica leads and may still act (the contract); otherwise UNAVAILABLE
  // "not the leader: LEADER leads" (or "no leader is known"), or that its lease is about to
  // run out unrenewed. Cheap: a lock and a clock read. For CommitPoint::SetFence.
  absl::Status Fence() const ABSL_LOCKS_EXCLUDED(mu_);

  struct View {
    bool leading = false;  // Holds the key (its fence may still be closed: see Fence()).
    std::string leader;    // The leader's name as last read; "" when none is known.
    int64_t epoch = 0;     // This replica's key's create_revision while it leads, else 0.
  };
  View Current() const ABSL_LOCKS_EXCLUDED(mu_);

  // A compare that holds only while the key is the one this replica created (its epoch).
  // When not leading, one that never holds (create_revision -1: an absent key has 0).
  etcdserverpb::Compare StillLeading() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Steady = std::chrono::steady_clock;
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // One round while not leading: tries to create the key; returns true when it did.
  bool Campaign() ABSL_LOCKS_EXCLUDED(mu_);
  // One round while leading: checks the key, then renews the lease; false when leadership is
  // lost (the contract).
  bool Renew() ABSL_LOCKS_EXCLUDED(mu_);
  void SetLeading(bool leading, int64_t epoch, Steady::time_point valid_until, std::string leader)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Resign();
  // How long a leader waits between rounds.
  absl::Duration RenewEvery() const;

  EtcdClient* const client_;
  const LeaderOptions options_;
  const std::function<void(bool)> on_change_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::string leader_ ABSL_GUARDED_BY(mu_);
  Steady::time_point valid_until_ ABSL_GUARDED_BY(mu_);
  std::thread thread_ ABSL_GUARDED_BY(mu_);
  // Logs a campaign round's failure, once while it stays the same (rounds are frequent).
  void WarnOnce(const absl::Status& status);

  // The campaign thread's own.
  std::string warned_;  // The failure last logged; cleared by a round etcd answered.
  int64_t lease_ = 0;
  Steady::time_point last_renewed_;
};

}  // namespace fleet::etcd

#endif  // FLEET_CONTROLLER_ETCD_LEADER_ELECTION_H_
