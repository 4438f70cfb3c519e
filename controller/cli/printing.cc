#include "controller/cli/printing.h"

namespace fleet::cli {

int PrintMessage(const Session& s, const google::protobuf::Message& message) {
  absl::StatusOr<std::string> text = FormatMessage(s.format, message);
  if (!text.ok()) return s.Failed(ToGrpcStatus(text.status()));
  *s.out << *text;
  return kExitOk;
}

grpc::Status LastEventSequence(const Session& s, uint64_t* last) {
  grpc::Status status;
  auto any_after = [&](uint64_t after) {
    v1::ListEventsRequest request;
    request.set_after_sequence(after);
    request.set_limit(1);
    v1::ListEventsResponse response;
    status = s.Call(
        [&](grpc::ClientContext* c) { return s.server->admin->ListEvents(c, request, &response); });
    return status.ok() && response.events_size() > 0;
  };
  *last = 0;
  if (!any_after(0)) return status;
  // Some event comes after `low`, none after `high`.
  uint64_t low = 0, high = 1;
  while (any_after(high)) {
    low = high;
    high *= 2;
  }
  if (!status.ok()) return status;
  while (high - low > 1) {
    uint64_t middle = low + (high - low) / 2;
    (any_after(middle) ? low : high) = middle;
    if (!status.ok()) return status;
  }
  *last = high;
  return status;
}

}  // namespace fleet::cli
