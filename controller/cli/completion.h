// Shell completion for fleetctl, generated from the command line's own tables.
//
// Every verb declares its flags through a FlagTable, which hands them to the parser's FlagSet
// and remembers them; the verbs' nouns come from the same lists the verbs check their
// arguments against. CommandLineSpec (in commands.h) collects all of it, and the functions
// here only render it as a script, so completion cannot offer what the parser refuses or miss
// what it accepts.
#ifndef FLEET_CONTROLLER_CLI_COMPLETION_H_
#define FLEET_CONTROLLER_CLI_COMPLETION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/flags.h"

namespace fleet::cli {

struct FlagSpec {
  std::string name;     // Long name, without the dashes.
  char short_name = 0;  // 0: none.
  bool takes_value = false;
  std::vector<std::string> values;  // What its value may be; empty: anything.
  bool file = false;                // Its value is a file name.
  std::string help;
};

struct VerbSpec {
  std::string name;
  std::string summary;
  std::vector<std::string> words;  // What the first argument may be (a kind, a subcommand).
  std::vector<FlagSpec> flags;     // The verb's own flags.
};

struct CommandLineSpec {
  std::vector<VerbSpec> verbs;
  std::vector<FlagSpec> global_flags;  // Accepted anywhere on the line.
};

// Declares flags on a FlagSet (when given one) and records them as FlagSpecs.
class FlagTable {
 public:
  explicit FlagTable(FlagSet* flags) : flags_(flags) {}

  // `name` as FlagSet takes it: "output,o" for a long and a short name.
  void String(const std::string& name, std::string* value, const std::string& help,
              std::vector<std::string> values = {});
  void File(const std::string& name, std::string* value, const std::string& help);
  // `shown_default` as FlagSet::Int takes it.
  void Int(const std::string& name, int64_t* value, const std::string& help,
           std::optional<std::string> shown_default = std::nullopt);
  void Bool(const std::string& name, bool* value, const std::string& help);
  // Another name of the flag `long_name` declared before (FlagSet::Alias); completed too,
  // since the parser accepts it.
  void Alias(const std::string& alias, const std::string& long_name);

  const std::vector<FlagSpec>& specs() const { return specs_; }

 private:
  void Record(const std::string& name, bool takes_value, std::vector<std::string> values, bool file,
              const std::string& help);

  FlagSet* flags_;  // Not owned; may be null.
  std::vector<FlagSpec> specs_;
};

// The shells `fleetctl completion` writes for.
const std::vector<std::string>& CompletionShells();

// A bash script defining _fleetctl and registering it with `complete -F`; source it, or put it
// in bash-completion's directory.
std::string BashCompletion(const CommandLineSpec& spec);
// A zsh script for `source <(fleetctl completion zsh)` or, saved as _fleetctl, for $fpath.
std::string ZshCompletion(const CommandLineSpec& spec);

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_COMPLETION_H_
