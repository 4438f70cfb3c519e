// Following the store's event log: what the watches (WatchEvents, WatchAllocation) share.
#ifndef FLEET_CONTROLLER_SERVICE_EVENT_FOLLOW_H_
#define FLEET_CONTROLLER_SERVICE_EVENT_FOLLOW_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "controller/store/commit_feed.h"
#include "controller/store/event_log.h"
#include "fleet/v1/admin.pb.h"

namespace fleet::service {

// Hands `on_event` the committed events after `after` matching the filter, in order, up to
// `upto` or a page of them; returns the sequence read up to, or nullopt when `on_event` said
// stop or the log could not be read.
std::optional<uint64_t> ReadEvents(store::EventLog& log, uint64_t after, uint64_t upto,
                                   const std::string& object_kind, const std::string& object_id,
                                   const std::function<bool(const v1::Event&)>& on_event);

// The newest committed sequence, once it is past `after`; nullopt after up to 200 ms without
// one, so that the caller checks again whether to go on.
std::optional<uint64_t> NewerThan(store::CommitFeed& feed, uint64_t after);

// Follows the event log after `after`: calls `on_event` for each committed event matching
// the filter, in order, until it returns false or `following` does (the client went away,
// fleetd stops).
void FollowEvents(store::CommitFeed& feed, store::EventLog& log,
                  const std::function<bool()>& following, uint64_t after,
                  const std::string& object_kind, const std::string& object_id,
                  const std::function<bool(const v1::Event&)>& on_event);

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_EVENT_FOLLOW_H_
