// How the verbs print what the server answered: a message in the session's -o format, and a
// List response as a table or a message, once or (`get --watch`) again each time it changes.
#ifndef FLEET_CONTROLLER_CLI_PRINTING_H_
#define FLEET_CONTROLLER_CLI_PRINTING_H_

#include <google/protobuf/message.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/grpc_status.h"
#include "controller/cli/output.h"
#include "controller/cli/session.h"
#include "controller/cli/tables.h"

namespace fleet::cli {

// Prints `message` in the session's -o format (json or yaml).
int PrintMessage(const Session& s, const google::protobuf::Message& message);

// The sequence number of the newest event (0 when there is none), so that a watch can follow
// from there without replaying the log. Asks ListEvents whether any event comes after a
// number, doubling and then halving it: about 2·log2(length) small RPCs.
grpc::Status LastEventSequence(const Session& s, uint64_t* last);
// The sequence number of the last event recorded before `time` (0 when there is none), so that
// the events after it are those since `time`. A binary search over the log with ListEvents, as
// LastEventSequence's, on the log's times rising with its sequence numbers.
grpc::Status LastEventBefore(const Session& s, absl::Time time, uint64_t* last);

// A list's table as of `now`: `make_table` takes the response, and the time when its table
// shows ages.
template <typename Response, typename MakeTable>
Table ListTable(MakeTable make_table, const Response& response, absl::Time now) {
  if constexpr (std::is_invocable_v<MakeTable, const Response&, absl::Time>) {
    return make_table(response, now);
  } else {
    return make_table(response);
  }
}

// Whether a watch has something new to print: the message, or for a table what the table
// shows. Both tables are made as of the same moment, so an age that only grew, or a field
// the table does not show (an allocation's `updated`, an agent's heartbeat), is no change.
template <typename Response, typename MakeTable>
bool WatchedListChanged(const Session& s, MakeTable make_table, const Response& shown,
                        const Response& now) {
  if (s.format != OutputFormat::kTable) {
    return !google::protobuf::util::MessageDifferencer::Equals(now, shown);
  }
  const absl::Time at = s.clock->Now();
  return ListTable(make_table, shown, at).Render() != ListTable(make_table, now, at).Render();
}

// One version of a watched list: a table under a header with the time, or one streamed
// message. Flushed, so a pipe sees it at once.
template <typename Response, typename MakeTable>
int PrintWatchedList(const Session& s, absl::string_view kind, const Response& response,
                     MakeTable make_table, bool first) {
  if (s.format != OutputFormat::kTable) {
    absl::StatusOr<std::string> text = FormatStreamedMessage(s.format, response);
    if (!text.ok()) return s.Failed(ToGrpcStatus(text.status()));
    *s.out << *text << std::flush;
    return kExitOk;
  }
  if (!first) *s.out << "\n";
  const absl::Time now = s.clock->Now();
  *s.out << WatchHeader(kind, now);
  Table table = ListTable(make_table, response, now);
  // On stdout this time: the list going empty is a change the watcher should see there.
  *s.out << (table.empty() ? absl::StrCat("no ", kind, " found\n") : table.Render(s.color))
         << std::flush;
  return kExitOk;
}

// `get KIND --watch`: prints the list, then follows the event log from its newest event and
// asks for the list again on each event, printing it when what it shows differs from the last
// version printed (WatchedListChanged). Ends with exit 0 when StopSignal stops it or the
// server ends the stream without error.
template <typename Response, typename Rpc, typename MakeTable>
int WatchList(const Session& s, absl::string_view kind, Rpc rpc, MakeTable make_table) {
  uint64_t last = 0;
  grpc::Status status = LastEventSequence(s, &last);
  if (!status.ok()) return s.Failed(status);
  Response shown;
  status = s.Call([&](grpc::ClientContext* c) { return rpc(c, &shown); });
  if (!status.ok()) return s.Failed(status);
  int code = PrintWatchedList(s, kind, shown, make_table, /*first=*/true);
  if (code != kExitOk) return code;

  v1::WatchEventsRequest request;
  request.set_after_sequence(last);
  EventStream stream(s, request);
  v1::Event event;
  while (stream.Read(&event)) {
    Response now;
    status = s.Call([&](grpc::ClientContext* c) { return rpc(c, &now); });
    if (!status.ok()) {
      stream.Abandon();
      return s.Failed(status);
    }
    if (!WatchedListChanged(s, make_table, shown, now)) continue;
    shown = std::move(now);
    code = PrintWatchedList(s, kind, shown, make_table, /*first=*/false);
    if (code != kExitOk) {
      stream.Abandon();
      return code;
    }
  }
  return stream.Finish();
}

// Runs a List RPC (`rpc(context, &response)`) and prints the response: as a table for
// people (ListTable), or as the whole message for scripts. With `watch`, see WatchList.
template <typename Response, typename Rpc, typename MakeTable>
int PrintList(const Session& s, absl::string_view kind, Rpc rpc, MakeTable make_table,
              bool watch = false) {
  if (watch) return WatchList<Response>(s, kind, rpc, make_table);
  Response response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) { return rpc(c, &response); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  Table table = ListTable(make_table, response, s.clock->Now());
  // Like kubectl: the note goes to stderr so a pipe sees an empty list, not a sentence.
  if (table.empty()) {
    *s.err << "no " << kind << " found\n";
  } else {
    *s.out << table.Render(s.color);
  }
  return kExitOk;
}

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_PRINTING_H_
