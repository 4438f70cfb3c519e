#include "common/flags.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/wording.h"

namespace fleet {

FlagSet::FlagSet(std::string usage, std::string description)
    : usage_(std::move(usage)), description_(std::move(description)) {
  Bool("help,h", &help_, "show this help");
}

void FlagSet::Add(const std::string& name, Type type, void* value, const std::string& help,
                  std::string default_text) {
  std::vector<std::string> parts = absl::StrSplit(name, ',');
  Flag flag{
      parts[0], parts.size() > 1 ? parts[1][0] : '\0', type, value, help, std::move(default_text),
      {}};
  by_name_[flag.long_name] = flags_.size();
  if (flag.short_name) by_name_[std::string(1, flag.short_name)] = flags_.size();
  flags_.push_back(std::move(flag));
}

void FlagSet::String(const std::string& name, std::string* value, const std::string& help) {
  Add(name, Type::kString, value, help, *value);
}
void FlagSet::Int(const std::string& name, int64_t* value, const std::string& help,
                  std::optional<std::string> shown_default) {
  Add(name, Type::kInt, value, help, shown_default.value_or(absl::StrCat(*value)));
}
void FlagSet::Bool(const std::string& name, bool* value, const std::string& help) {
  Add(name, Type::kBool, value, help, "");
}

void FlagSet::Alias(const std::string& alias, const std::string& long_name) {
  const size_t index = by_name_.at(long_name);
  by_name_[alias] = index;
  flags_[index].aliases.push_back(alias);
}

absl::Status FlagSet::Assign(Flag& flag, const std::string& text) {
  switch (flag.type) {
    case Type::kString:
      *static_cast<std::string*>(flag.value) = text;
      break;
    case Type::kInt:
      if (!absl::SimpleAtoi(text, static_cast<int64_t*>(flag.value))) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", flag.long_name, ": '", text, "' is not a whole number"));
      }
      break;
    case Type::kBool:
      if (!absl::SimpleAtob(text, static_cast<bool*>(flag.value))) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", flag.long_name, ": '", text, "' is not true or false"));
      }
      break;
  }
  set_.insert(flag.long_name);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FlagSet::Parse(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positional.insert(positional.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string name = body;
    std::string value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    auto it = by_name_.find(name);
    if (it == by_name_.end() || (arg[1] != '-' && name.size() != 1)) {
      std::vector<std::string> known;
      for (const auto& [known_name, index] : by_name_) {
        if (known_name.size() > 1) known.push_back("--" + known_name);
      }
      // As typed, so that `-name` finds `--name` too.
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag ", arg, DidYouMean(arg.substr(0, arg.find('=')), known), "; see --help"));
    }
    Flag& flag = flags_[it->second];
    if (!has_value) {
      if (flag.type == Type::kBool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", flag.long_name, " needs a value"));
      }
    }
    if (absl::Status s = Assign(flag, value); !s.ok()) return s;
  }
  return positional;
}

std::string FlagSet::Help() const {
  std::string out = absl::StrCat("Usage: ", usage_, "\n");
  if (!description_.empty()) absl::StrAppend(&out, "\n", description_, "\n");
  absl::StrAppend(&out, "\nFlags:\n");
  for (const Flag& flag : flags_) {
    std::string left = flag.short_name ? absl::StrCat("-", std::string(1, flag.short_name), ", ")
                                       : std::string("    ");
    absl::StrAppend(&left, "--", flag.long_name);
    if (flag.type != Type::kBool) absl::StrAppend(&left, " VALUE");
    if (left.size() < 28) left.resize(28, ' ');
    absl::StrAppend(&out, "  ", left, " ", flag.help);
    if (!flag.default_text.empty()) absl::StrAppend(&out, " (default ", flag.default_text, ")");
    for (const std::string& alias : flag.aliases) absl::StrAppend(&out, " (also --", alias, ")");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace fleet
