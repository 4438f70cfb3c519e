#include "controller/cli/completion_verb.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/cli/commands.h"
#include "controller/cli/completion.h"

namespace fleet::cli {
namespace {

int RunCompletion(const Session& s, const Positional& p) {
  if (p.size() != 1) {
    return UsageError(
        *s.err, "completion",
        absl::StrCat("completion needs one shell (", absl::StrJoin(CompletionShells(), ", "),
                     "), got ", p.empty() ? "nothing" : Joined(p)));
  }
  return Completion(s, p[0]);
}

}  // namespace

int Completion(const Session& s, const std::string& shell) {
  if (s.format != OutputFormat::kTable) {
    return UsageError(*s.err, "completion",
                      "-o applies to commands that print objects; completion prints a script");
  }
  if (shell == "bash") {
    *s.out << BashCompletion(FleetctlCommandLine());
  } else if (shell == "zsh") {
    *s.out << ZshCompletion(FleetctlCommandLine());
  } else {
    return UsageError(*s.err, "completion",
                      absl::StrCat("unknown shell '", shell,
                                   "'; shells: ", absl::StrJoin(CompletionShells(), ", ")));
  }
  return kExitOk;
}

Verb CompletionVerb() {
  return {"completion",
          "fleetctl completion (bash | zsh)",
          "Print a shell completion script",
          "Print a script that completes fleetctl's commands, kinds, subcommands and flags in\n"
          "the shell, generated from this fleetctl's own command table.\n\n"
          "  bash  source <(fleetctl completion bash), or save it in\n"
          "        /etc/bash_completion.d/fleetctl\n"
          "  zsh   source <(fleetctl completion zsh), or save it as _fleetctl in a directory\n"
          "        of $fpath (before compinit runs)",
          WithoutFlags(RunCompletion),
          CompletionShells(),
          /*dials=*/false};
}

}  // namespace fleet::cli
