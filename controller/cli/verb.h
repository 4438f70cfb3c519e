// A fleetctl verb as the command line sees it (name, help, flags, the words its first argument
// may be, and how it runs), and the registry the verb groups add theirs to. The registry is
// what the parser, `--help` and the completion scripts all read, so they cannot disagree.
#ifndef FLEET_CONTROLLER_CLI_VERB_H_
#define FLEET_CONTROLLER_CLI_VERB_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "controller/cli/completion.h"
#include "controller/cli/session.h"

namespace fleet::cli {

// The arguments of a command line that are not flags, the verb itself left out.
using Positional = std::vector<std::string>;

// Runs a verb whose flags are parsed: checks the positional arguments and calls the verb.
using VerbRun = std::function<int(const Session& session, const Positional& positional)>;

// Declares a verb's flags on `flags`, each bound to storage of this one command line, and
// returns how to run the verb once they are parsed.
using VerbFlags = std::function<VerbRun(FlagTable& flags)>;

struct Verb {
  absl::string_view name;
  absl::string_view usage;
  absl::string_view summary;  // One line, for the overview.
  std::string description;
  VerbFlags flags;
  // What the first argument may be, for completion; the verb checks it against the same list.
  std::vector<std::string> words;
  // False for the verbs that only work locally (completion, config, certs): they are run
  // without credentials and without a connection.
  bool dials = true;
};

// A verb with no flags of its own.
VerbFlags WithoutFlags(int (*run)(const Session&, const Positional&));

// A verb whose flags fill an `Args`: `declare` declares them on a fresh one, `run` gets it.
template <typename Args>
VerbFlags WithFlags(void (*declare)(FlagTable&, Args&),
                    int (*run)(const Session&, const Args&, const Positional&)) {
  return [declare, run](FlagTable& flags) -> VerbRun {
    auto args = std::make_shared<Args>();
    declare(flags, *args);
    return [args, run](const Session& s, const Positional& p) { return run(s, *args, p); };
  };
}

// The verbs in the order `fleetctl --help`, the completion scripts and errors list them.
class VerbRegistry {
 public:
  void Add(Verb verb) { verbs_.push_back(std::move(verb)); }
  // nullptr when no verb has that name.
  const Verb* Find(absl::string_view name) const;
  const std::vector<Verb>& verbs() const { return verbs_; }

 private:
  std::vector<Verb> verbs_;
};

// Prints a command-line problem with a pointer to the verb's help (`verb` empty: the
// overview's); returns kExitUsage.
int UsageError(std::ostream& err, absl::string_view verb, absl::string_view problem);

// Arguments as an error message quotes them: 'a b c'.
std::string Joined(const std::vector<std::string>& words);

// A kind's two names; every verb accepts either ("switches" or "switch").
struct KindName {
  absl::string_view plural;
  absl::string_view singular;
};

// The singular name of the kind `text` names, or "" when it names none of `kinds`.
template <size_t N>
absl::string_view Singular(const KindName (&kinds)[N], absl::string_view text) {
  for (const KindName& k : kinds) {
    if (text == k.plural || text == k.singular) return k.singular;
  }
  return "";
}

template <size_t N>
std::vector<std::string> SingularWords(const KindName (&kinds)[N]) {
  std::vector<std::string> names;
  for (const KindName& k : kinds) names.emplace_back(k.singular);
  return names;
}

template <size_t N>
std::string Singulars(const KindName (&kinds)[N]) {
  return absl::StrJoin(SingularWords(kinds), ", ");
}

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_VERB_H_
