#include "controller/service/event_follow.h"

#include <vector>

#include "absl/time/clock.h"

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

std::optional<uint64_t> NewerThan(store::CommitFeed& feed, uint64_t after) {
  const uint64_t upto = feed.LastEventSequence();
  if (upto > after) return upto;
  // Woken by a commit, or after 200 ms to notice a cancelled client or a stop.
  feed.WaitForEvent(after, absl::Now() + absl::Milliseconds(200));
  return std::nullopt;
}

void FollowEvents(store::CommitFeed& feed, store::EventLog& log,
                  const std::function<bool()>& following, uint64_t after,
                  const std::string& object_kind, const std::string& object_id,
                  const std::function<bool(const v1::Event&)>& on_event) {
  while (following()) {
    const std::optional<uint64_t> upto = NewerThan(feed, after);
    if (!upto) continue;
    std::optional<uint64_t> next = ReadEvents(log, after, *upto, object_kind, object_id, on_event);
    if (!next) return;
    after = *next;
  }
}

}  // namespace fleet::service
