// Following the store's event log: what the watches (WatchEvents, WatchAllocation) share.
#ifndef FLEET_CONTROLLER_SERVICE_EVENT_FOLLOW_H_
#define FLEET_CONTROLLER_SERVICE_EVENT_FOLLOW_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "controller/service/watch_hub.h"
#include "controller/store/event_log.h"
#include "fleet/v1/admin.pb.h"

namespace fleet::service {

// Hands `on_event` the committed events after `after` matching the filter, in order, up to
// `upto` or a page of them; returns the sequence read up to, or nullopt when `on_event` said
// stop or the log could not be read.
std::optional<uint64_t> ReadEvents(store::EventLog& log, uint64_t after, uint64_t upto,
                                   const std::string& object_kind, const std::string& object_id,
                                   const std::function<bool(const v1::Event&)>& on_event);

// A WatchHub follower (watch_hub.h) of the event log after `after`: appends each committed
// event matching the filter that `visible` lets through, in order, a page at a time. Over,
// UNAVAILABLE, when the log cannot be read. `log` is not owned.
WatchHub::Follow<v1::Event> FollowEvents(store::EventLog* log, uint64_t after,
                                         std::string object_kind, std::string object_id,
                                         std::function<bool(const v1::Event&)> visible);

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_EVENT_FOLLOW_H_
