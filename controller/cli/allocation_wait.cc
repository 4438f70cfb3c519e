#include "controller/cli/allocation_wait.h"

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "controller/cli/object_text.h"
#include "fleet/v1/names.h"

namespace fleet::cli {
namespace {

// Where a wait's progress lines go: stdout for people; stderr with -o json|yaml, so that stdout
// holds only the final message for a script to parse.
std::ostream& ProgressStream(const Session& s) {
  return s.format == OutputFormat::kTable ? *s.out : *s.err;
}

std::string StateText(const v1::Allocation& a) {
  std::string state = v1::Name(a.state());
  return state.empty() ? "in an unknown state" : state;
}

// kExitOk when `a` is in `done`; kExitFailed, having said why, when it can no longer get
// there (FAILED, or RELEASED when that is not the goal); nullopt while it still may. DEGRADED
// is not an end: the engine may retrain the link and recover.
std::optional<int> Settled(const Session& s, const v1::Allocation& a, v1::AllocationState done) {
  if (a.state() == done) return kExitOk;
  if (a.state() != v1::ALLOCATION_STATE_FAILED && a.state() != v1::ALLOCATION_STATE_RELEASED) {
    return std::nullopt;
  }
  *s.err << "error: allocation " << a.id()
         << (a.state() == v1::ALLOCATION_STATE_FAILED ? " failed" : " was released");
  if (!a.reason().empty()) *s.err << ": " << a.reason();
  *s.err << "\n";
  return kExitFailed;
}

}  // namespace

int WaitForAllocation(const Session& s, v1::AllocationState done, absl::Time deadline,
                      v1::Allocation* allocation) {
  std::ostream& progress = ProgressStream(s);
  progress << AllocationStateLine(*allocation) << "\n" << std::flush;
  if (std::optional<int> settled = Settled(s, *allocation, done)) return *settled;

  const std::string id = allocation->id();
  grpc::ClientContext context;
  s.Prepare(&context, deadline);
  v1::WatchAllocationRequest request;
  request.set_id(id);
  std::unique_ptr<grpc::ClientReaderInterface<v1::WatchAllocationResponse>> reader =
      s.server->topology->WatchAllocation(&context, request);
  v1::WatchAllocationResponse update;
  std::optional<int> settled;
  while (!settled && reader->Read(&update)) {
    const v1::Allocation& seen = update.allocation();
    if (seen.state() != allocation->state() || seen.reason() != allocation->reason()) {
      progress << AllocationStateLine(seen) << "\n" << std::flush;
    }
    *allocation = seen;
    settled = Settled(s, *allocation, done);
  }
  if (settled) {
    // The server may keep the stream open past the end state; nothing more is wanted from it.
    AbandonStream(context, reader);
    return *settled;
  }
  grpc::Status status = reader->Finish();
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return s.Failed(
        grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                     absl::StrCat("allocation ", id, " is still ", StateText(*allocation),
                                  " after ", absl::FormatDuration(s.timeout))));
  }
  if (!status.ok()) return s.Failed(status);
  return s.Failed(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                               absl::StrCat("the server ended the watch of allocation ", id,
                                            " while it was ", StateText(*allocation))));
}

}  // namespace fleet::cli
