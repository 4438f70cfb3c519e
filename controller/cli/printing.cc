#include "controller/cli/printing.h"

#include "common/proto_time.h"

namespace fleet::cli {
namespace {

// The first event after sequence `after`, into `*next`; false when there is none (or the call
// failed: see `*status`).
bool NextEvent(const Session& s, uint64_t after, v1::Event* next, grpc::Status* status) {
  v1::ListEventsRequest request;
  request.set_after_sequence(after);
  request.set_limit(1);
  v1::ListEventsResponse response;
  *status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->admin->ListEvents(c, request, &response); });
  if (!status->ok() || response.events_size() == 0) return false;
  *next = response.events(0);
  return true;
}

// The first sequence number in (low, high] at which `holds` turns true, given that it is false
// at `low` and true at `high` and turns only once between; stops early once `status` (which
// `holds` sets) is bad.
template <typename Predicate>
uint64_t Bisect(uint64_t low, uint64_t high, Predicate holds, const grpc::Status& status) {
  while (high - low > 1 && status.ok()) {
    const uint64_t middle = low + (high - low) / 2;
    (holds(middle) ? high : low) = middle;
  }
  return high;
}

}  // namespace

int PrintMessage(const Session& s, const google::protobuf::Message& message) {
  absl::StatusOr<std::string> text = FormatMessage(s.format, message);
  if (!text.ok()) return s.Failed(ToGrpcStatus(text.status()));
  *s.out << *text;
  return kExitOk;
}

grpc::Status LastEventSequence(const Session& s, uint64_t* last) {
  grpc::Status status;
  v1::Event unused;
  auto any_after = [&](uint64_t after) { return NextEvent(s, after, &unused, &status); };
  *last = 0;
  if (!any_after(0)) return status;
  // Some event comes after `low`, none after `high`.
  uint64_t low = 0, high = 1;
  while (any_after(high)) {
    low = high;
    high *= 2;
  }
  if (!status.ok()) return status;
  const uint64_t newest = Bisect(
      low, high, [&](uint64_t x) { return !any_after(x); }, status);
  if (status.ok()) *last = newest;
  return status;
}

grpc::Status LastEventBefore(const Session& s, absl::Time time, uint64_t* last) {
  uint64_t newest = 0;
  grpc::Status status = LastEventSequence(s, &newest);
  if (!status.ok()) return status;
  // The first event after `after` is from `time` on, or there is none: false up to the answer,
  // true from it on.
  auto starts_since = [&](uint64_t after) {
    v1::Event next;
    return !NextEvent(s, after, &next, &status) || FromProtoTime(next.time()) >= time;
  };
  // starts_since(newest) holds: no event comes after the newest.
  const uint64_t first = starts_since(0) ? 0 : Bisect(0, newest, starts_since, status);
  if (status.ok()) *last = first;
  return status;
}

}  // namespace fleet::cli
