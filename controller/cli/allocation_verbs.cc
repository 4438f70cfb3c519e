#include "controller/cli/allocation_verbs.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/wording.h"
#include "controller/cli/allocation_wait.h"
#include "controller/cli/object_text.h"
#include "controller/cli/printing.h"

namespace fleet::cli {
namespace {

const std::vector<std::string>& AllocationSubcommands() {
  static const auto* words = new std::vector<std::string>{"replace"};
  return *words;
}

void DeclareReplaceFlags(FlagTable& f, ReplaceMemberArgs& a) {
  f.String("spare", &a.spare, "replace: the device to use instead of the best free one");
  f.Bool("dry-run", &a.dry_run, "replace: plan only; change nothing");
  f.Bool("wait", &a.wait, "replace: follow the allocation until it is ready");
}

int RunAllocation(const Session& s, const ReplaceMemberArgs& flags, const Positional& p) {
  if (p.empty() || p[0] != "replace") {
    return UsageError(*s.err, "allocation",
                      p.empty() ? std::string("allocation needs a subcommand: replace ID "
                                              "MEMBER")
                                : absl::StrCat("unknown allocation subcommand '", p[0],
                                               "'; subcommands: replace"));
  }
  if (p.size() != 3) {
    return UsageError(*s.err, "allocation",
                      absl::StrCat("allocation replace needs an ID and a MEMBER, got ", Joined(p)));
  }
  if (flags.dry_run && flags.wait) {
    return UsageError(*s.err, "allocation", "--dry-run and --wait do not go together");
  }
  ReplaceMemberArgs args = flags;
  args.id = p[1];
  args.member = p[2];
  return ReplaceMember(s, args);
}

}  // namespace

int ReplaceMember(const Session& s, const ReplaceMemberArgs& args) {
  const absl::Time deadline = absl::Now() + s.timeout;
  v1::ReplaceMemberRequest request;
  request.set_allocation_id(args.id);
  request.set_member(args.member);
  request.set_spare(args.spare);
  request.set_dry_run(args.dry_run);
  v1::ReplaceMemberResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->admin->ReplaceMember(c, request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (s.format == OutputFormat::kTable) {
    // The plan lists the members with the spare in the failed member's place.
    *s.out << absl::StrCat(args.dry_run ? "dry run: " : "", args.id, " member ", args.member,
                           " replaced: ", Counted(response.plan().remove_size(), "cross-connect"),
                           " removed, ", response.plan().add_size(),
                           " added\nmembers: ", absl::StrJoin(response.plan().members(), ", "),
                           "\n");
    for (const v1::CrossConnect& xc : response.plan().remove()) {
      *s.out << "  removed  " << CrossConnectText(xc) << "\n";
    }
    for (const v1::CrossConnect& xc : response.plan().add()) {
      *s.out << "  added    " << CrossConnectText(xc) << "\n";
    }
  }
  if (!args.wait) {
    if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
    if (!args.dry_run) *s.out << AllocationStateLine(response.allocation()) << "\n";
    return kExitOk;
  }
  return WaitUntilReady(s, deadline, response);
}

Verb AllocationVerb() {
  return {"allocation",
          "fleetctl allocation replace ID MEMBER [--spare DEVICE] [--dry-run] [--wait] [flags]",
          "Replace a failed member of an allocation",
          "Subcommands:\n"
          "  replace ID MEMBER  Substitute a spare for the failed device MEMBER in every phase:\n"
          "                     a free device of the same kind on the same switch (or\n"
          "                     --spare DEVICE). Only MEMBER's circuits change; the others stay\n"
          "                     on the switch untouched. Prints the spare and the cross-connects\n"
          "                     removed and added; with --dry-run nothing changes. With --wait, a\n"
          "                     line per state change until it is ready again (exit 0, then the\n"
          "                     allocation). For operators.\n\n"
          "With -o json or yaml, prints the response; the --wait lines then go to stderr.",
          WithFlags<ReplaceMemberArgs>(DeclareReplaceFlags, RunAllocation),
          AllocationSubcommands()};
}

}  // namespace fleet::cli
