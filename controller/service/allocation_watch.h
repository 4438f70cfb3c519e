// One WatchAllocation stream: follows the store's allocation commits and sends an allocation
// again whenever its state, reason or a circuit's state changed. The stream starts with the
// current state; a watch of one allocation ends after it is FAILED or RELEASED; a tenant's
// watch (or everyone's, with no tenant) goes on until the client leaves or fleetd stops.
#ifndef FLEET_CONTROLLER_SERVICE_ALLOCATION_WATCH_H_
#define FLEET_CONTROLLER_SERVICE_ALLOCATION_WATCH_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/service/watch_hub.h"
#include "controller/store/commit_feed.h"
#include "controller/store/event_log.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::service {

class AllocationWatch {
 public:
  // Watches allocation `id`, or when it is empty every allocation of `tenant` (of every
  // tenant when that is empty too), from `feed`, reading `log` when too far behind for the
  // commits the feed keeps. Neither is owned.
  AllocationWatch(store::CommitFeed* feed, store::EventLog* log, std::string id,
                  std::string tenant);

  // A WatchHub follower (watch_hub.h): the first step appends the current state to `out`,
  // each later one every change committed up to `upto`. Over with OK once the watched
  // allocation has ended; with an error when it cannot be read (NOT_FOUND for an unknown id),
  // a tenant's allocations cannot be listed, or the event log cannot be read.
  WatchStep Step(uint64_t upto, std::vector<v1::Allocation>* out);

 private:
  // Sends what the watch starts with; false when the watch is over before following.
  absl::StatusOr<bool> SendFirst();
  // Follows one step past `after_`; false when the watch is over.
  bool FollowOnce(uint64_t upto);
  // Sends the state `commit` left; read from the database for a watch's first state and for
  // a watcher too far behind for the commits the store keeps. False when the watch is over.
  absl::StatusOr<bool> Consider(store::AllocationCommit commit);
  // Sends `a` if what a watcher is told about it changed; false when the watch is over.
  bool Send(const v1::Allocation& a);
  // Whether `commit` is about a watched allocation (one that is gone is read, and the read
  // says so).
  bool Watched(const store::AllocationCommit& commit) const;
  // A tenant-wide watch forgets an allocation once it has sent its end and followed past it
  // (no commit or event at or before `after_` is considered again), so a watch left open for
  // months holds only the allocations that are live.
  void ForgetEnded();

  store::CommitFeed* const feed_;
  store::EventLog* const log_;
  const std::string id_;
  const std::string tenant_;
  std::vector<v1::Allocation>* out_ = nullptr;  // Where the step under way sends.
  bool started_ = false;
  // Taken before the first read, so no change between the read and the follow is missed.
  uint64_t after_ = 0;
  std::map<std::string, std::string> sent_;  // Allocation id → what was last sent of it.
  // Allocation id → the sequence its last state considered reflects: a commit no newer is
  // not sent, so a state read from the database is never followed by an older one.
  std::map<std::string, uint64_t> as_of_;
  std::multimap<uint64_t, std::string> ended_at_;  // The sequence of its end → allocation id.
  bool ended_ = false;                             // The watched allocation ended.
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_ALLOCATION_WATCH_H_
