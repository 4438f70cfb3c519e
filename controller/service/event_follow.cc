#include "controller/service/event_follow.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace fleet::service {

std::optional<uint64_t> ReadEvents(store::EventLog& log, uint64_t after, uint64_t upto,
                                   const std::string& object_kind, const std::string& object_id,
                                   const std::function<bool(const v1::Event&)>& on_event) {
  constexpr uint32_t kPage = 1000;
  absl::StatusOr<std::vector<v1::Event>> events =
      log.ListEvents({after, kPage, object_kind, object_id});
  if (!events.ok()) return std::nullopt;
  for (const v1::Event& e : *events) {
    if (e.sequence() > upto) break;
    if (!on_event(e)) return std::nullopt;
  }
  if (events->size() == kPage && events->back().sequence() < upto) {
    return events->back().sequence();
  }
  return upto;
}

WatchHub::Follow<v1::Event> FollowEvents(store::EventLog* log, uint64_t after,
                                         std::string object_kind, std::string object_id,
                                         std::function<bool(const v1::Event&)> visible) {
  return [=, kind = std::move(object_kind), id = std::move(object_id),
          visible = std::move(visible)](uint64_t upto,
                                        std::vector<v1::Event>* out) mutable -> WatchStep {
    std::optional<uint64_t> next = ReadEvents(*log, after, upto, kind, id, [&](const v1::Event& e) {
      if (visible(e)) out->push_back(e);
      return true;
    });
    if (!next) {
      return {after, grpc::Status(grpc::StatusCode::UNAVAILABLE, "the event log cannot be read")};
    }
    after = std::max(after, *next);
    return {after, std::nullopt};
  };
}

}  // namespace fleet::service
