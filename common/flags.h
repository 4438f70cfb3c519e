// Command-line flags for the project's binaries (fleetd, fleetctl, polatis-emu, the agent).
//
// Each main() declares its flags on a FlagSet bound to its own variables (no globals), then
// parses. Accepted forms: `--name value`, `--name=value`, `-n value` for a declared short
// name, `--flag` / `--flag=false` for booleans, and `--` to end flags. Flags may appear
// before, between or after positional arguments. `--help`/`-h` is always declared. An unknown
// flag's error suggests the nearest declared one.
#ifndef FLEET_COMMON_FLAGS_H_
#define FLEET_COMMON_FLAGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fleet {

class FlagSet {
 public:
  // `usage` is the synopsis line shown by Help(), e.g. "fleetctl get KIND [flags]".
  FlagSet(std::string usage, std::string description = "");

  // `name` is the long name, optionally followed by ",x" for a one-letter short name.
  // The variable's current value is the default and is shown in Help(), unless
  // `shown_default` says otherwise ("": none shown, for a help text that says it itself).
  void String(const std::string& name, std::string* value, const std::string& help);
  void Int(const std::string& name, int64_t* value, const std::string& help,
           std::optional<std::string> shown_default = std::nullopt);
  void Bool(const std::string& name, bool* value, const std::string& help);
  // `--alias` is another name of the declared flag `long_name` (an old name kept working):
  // parsing it sets that flag, IsSet(long_name) is then true, and Help() lists it on the
  // flag's line.
  void Alias(const std::string& alias, const std::string& long_name);

  // Parses `args` (without the program name). Returns the positional arguments. Unknown
  // flags, missing values and malformed numbers are INVALID_ARGUMENT naming the flag.
  absl::StatusOr<std::vector<std::string>> Parse(const std::vector<std::string>& args);

  // True when the flag was given on the command line (so it overrides a config file).
  bool IsSet(const std::string& long_name) const { return set_.contains(long_name); }
  bool help_requested() const { return help_; }
  std::string Help() const;

 private:
  enum class Type { kString, kInt, kBool };
  struct Flag {
    std::string long_name;
    char short_name = 0;
    Type type;
    void* value;
    std::string help;
    std::string default_text;
    std::vector<std::string> aliases;
  };
  void Add(const std::string& name, Type type, void* value, const std::string& help,
           std::string default_text);
  absl::Status Assign(Flag& flag, const std::string& text);

  std::string usage_;
  std::string description_;
  std::vector<Flag> flags_;
  std::map<std::string, size_t> by_name_;
  std::set<std::string> set_;
  bool help_ = false;
};

}  // namespace fleet

#endif  // FLEET_COMMON_FLAGS_H_
