#include "controller/cli/verb.h"

#include "absl/strings/str_cat.h"

namespace fleet::cli {

VerbFlags WithoutFlags(int (*run)(const Session&, const Positional&)) {
  return [run](FlagTable&) -> VerbRun { return run; };
}

const Verb* VerbRegistry::Find(absl::string_view name) const {
  for (const Verb& verb : verbs_) {
    if (verb.name == name) return &verb;
  }
  return nullptr;
}

int UsageError(std::ostream& err, absl::string_view verb, absl::string_view problem) {
  err << "error: " << problem << "\n";
  if (verb.empty()) {
    err << "Run 'fleetctl --help' for usage.\n";
  } else {
    err << "Run 'fleetctl " << verb << " --help' for usage.\n";
  }
  return kExitUsage;
}

std::string Joined(const std::vector<std::string>& words) {
  return absl::StrCat("'", absl::StrJoin(words, " "), "'");
}

}  // namespace fleet::cli
