#include "controller/cli/completion.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace fleet::cli {

void FlagTable::Record(const std::string& name, bool takes_value, std::vector<std::string> values,
                       bool file, const std::string& help) {
  std::vector<std::string> parts = absl::StrSplit(name, ',');
  FlagSpec spec;
  spec.name = parts[0];
  spec.short_name = parts.size() > 1 && !parts[1].empty() ? parts[1][0] : 0;
  spec.takes_value = takes_value;
  spec.values = std::move(values);
  spec.file = file;
  spec.help = help;
  specs_.push_back(std::move(spec));
}

void FlagTable::String(const std::string& name, std::string* value, const std::string& help,
                       std::vector<std::string> values) {
  if (flags_ != nullptr) flags_->String(name, value, help);
  Record(name, true, std::move(values), false, help);
}

void FlagTable::File(const std::string& name, std::string* value, const std::string& help) {
  if (flags_ != nullptr) flags_->String(name, value, help);
  Record(name, true, {}, true, help);
}

void FlagTable::Int(const std::string& name, int64_t* value, const std::string& help,
                    std::optional<std::string> shown_default) {
  if (flags_ != nullptr) flags_->Int(name, value, help, std::move(shown_default));
  Record(name, true, {}, false, help);
}

void FlagTable::Alias(const std::string& alias, const std::string& long_name) {
  if (flags_ != nullptr) flags_->Alias(alias, long_name);
  for (const FlagSpec& spec : specs_) {
    if (spec.name != long_name) continue;
    FlagSpec same = spec;
    same.name = alias;
    same.short_name = 0;
    same.help = absl::StrCat("the same as --", long_name);
    specs_.push_back(std::move(same));
    return;
  }
}

void FlagTable::Bool(const std::string& name, bool* value, const std::string& help) {
  if (flags_ != nullptr) flags_->Bool(name, value, help);
  Record(name, false, {}, false, help);
}

const std::vector<std::string>& CompletionShells() {
  static const auto* shells = new std::vector<std::string>{"bash", "zsh"};
  return *shells;
}

namespace {

// A word for either shell, in single quotes unless it needs none.
std::string Quoted(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789-_./:,") == std::string::npos) {
    return word;
  }
  return absl::StrCat("'", absl::StrReplaceAll(word, {{"'", "'\\''"}}), "'");
}

std::string Words(const std::vector<std::string>& words) {
  std::vector<std::string> quoted;
  for (const std::string& word : words) quoted.push_back(Quoted(word));
  return absl::StrJoin(quoted, " ");
}

// Every way of writing each flag: --name and -n.
std::vector<std::string> Spellings(const FlagSpec& flag) {
  std::vector<std::string> spellings = {absl::StrCat("--", flag.name)};
  if (flag.short_name != 0) spellings.push_back(absl::StrCat("-", std::string(1, flag.short_name)));
  return spellings;
}

std::vector<std::string> FlagWords(const std::vector<FlagSpec>& flags, bool value_only) {
  std::vector<std::string> words;
  for (const FlagSpec& flag : flags) {
    if (value_only && !flag.takes_value) continue;
    for (std::string& spelling : Spellings(flag)) words.push_back(std::move(spelling));
  }
  return words;
}

// What both scripts share, in the syntax both shells read: a function printing the flags of
// VERB (all of them, or with "value" those that take a value), space-padded so a test for
// `*" $word "*` matches whole words.
std::string FlagFunctions(const CommandLineSpec& spec) {
  auto cases = [&](bool value_only) {
    std::string arms = "    case $1 in\n";
    const std::string globals = Words(FlagWords(spec.global_flags, value_only));
    for (const VerbSpec& verb : spec.verbs) {
      absl::StrAppend(&arms, "      ", Quoted(verb.name), ") echo \" ",
                      Words(FlagWords(verb.flags, value_only)), " ", globals, " \" ;;\n");
    }
    return absl::StrCat(arms, "      *) echo \" ", globals, " \" ;;\n    esac\n");
  };
  return absl::StrCat(
      "# __fleetctl_flags VERB [value]: the verb's flags and the global ones, or only those\n"
      "# that take a value.\n"
      "__fleetctl_flags() {\n"
      "  if [[ $2 == value ]]; then\n",
      cases(true), "  else\n", cases(false), "  fi\n}\n\n");
}

// The case arms that complete a flag's value: `pattern) ACTION; return ;;` for each flag with
// known values or a file name, `$verb:$prev` being matched.
std::string ValueArms(const CommandLineSpec& spec, const std::string& indent,
                      const std::string& file_action,
                      std::string (*words_action)(const std::vector<std::string>&)) {
  std::string out;
  auto arm = [&](const std::string& verb_pattern, const FlagSpec& flag) {
    if (flag.values.empty() && !flag.file) return;
    std::vector<std::string> patterns;
    for (const std::string& spelling : Spellings(flag)) {
      patterns.push_back(absl::StrCat(verb_pattern, ":", spelling));
    }
    absl::StrAppend(&out, indent, absl::StrJoin(patterns, "|"), ") ",
                    flag.file ? file_action : words_action(flag.values), "; return ;;\n");
  };
  for (const FlagSpec& flag : spec.global_flags) arm("*", flag);
  for (const VerbSpec& verb : spec.verbs) {
    for (const FlagSpec& flag : verb.flags) arm(Quoted(verb.name), flag);
  }
  return out;
}

std::string BashWords(const std::vector<std::string>& words) {
  return absl::StrCat("COMPREPLY=($(compgen -W \"", Words(words), "\" -- \"$cur\"))");
}

std::string ZshWords(const std::vector<std::string>& words) {
  return absl::StrCat("compadd -- ", Words(words));
}

std::vector<std::string> VerbNames(const CommandLineSpec& spec) {
  std::vector<std::string> names;
  for (const VerbSpec& verb : spec.verbs) names.push_back(verb.name);
  return names;
}

// The loop that finds the verb and counts its arguments so far, skipping flags and the values
// of flags that take one. `first` and `end` are the shell's indices of the words to scan.
std::string ScanLoop(const std::string& words, const std::string& first, const std::string& end) {
  return absl::StrCat(
      "  local verb='' w vflags\n"
      "  local -i nargs=0 i\n"
      "  for (( i = ",
      first, "; i < ", end,
      "; i++ )); do\n"
      "    w=",
      words,
      "[i]}\n"
      "    vflags=$(__fleetctl_flags \"$verb\" value)\n"
      "    if [[ $vflags == *\" $w \"* ]]; then\n"
      "      (( i++ ))\n"
      "      [[ ",
      words,
      "[i]} == = ]] && (( i++ ))\n"
      "      continue\n"
      "    fi\n"
      "    [[ $w == -* ]] && continue\n"
      "    if [[ -z $verb ]]; then verb=$w; else (( nargs++ )); fi\n"
      "  done\n");
}

}  // namespace

std::string BashCompletion(const CommandLineSpec& spec) {
  std::string out =
      "# bash completion for fleetctl, generated by 'fleetctl completion bash'.\n"
      "# Load it with: source <(fleetctl completion bash)\n\n";
  absl::StrAppend(&out, FlagFunctions(spec));
  absl::StrAppend(&out,
                  "_fleetctl() {\n"
                  "  local cur=${COMP_WORDS[COMP_CWORD]} prev=''\n"
                  "  (( COMP_CWORD > 0 )) && prev=${COMP_WORDS[COMP_CWORD-1]}\n"
                  "  # With '=' a word break, --output=js arrives as --output, =, js.\n"
                  "  if [[ $cur == = ]]; then\n"
                  "    cur=''\n"
                  "  elif [[ $prev == = ]] && (( COMP_CWORD > 1 )); then\n"
                  "    prev=${COMP_WORDS[COMP_CWORD-2]}\n"
                  "  fi\n",
                  ScanLoop("${COMP_WORDS", "1", "COMP_CWORD"), "  case \"$verb:$prev\" in\n",
                  ValueArms(spec, "    ",
                            "compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "
                            "\"$cur\"))",
                            BashWords),
                  "  esac\n"
                  "  vflags=$(__fleetctl_flags \"$verb\" value)\n"
                  "  # A flag whose value could be anything: nothing to offer.\n"
                  "  [[ $vflags == *\" $prev \"* ]] && return 0\n"
                  "  local offer\n"
                  "  if [[ $cur == -* ]]; then\n"
                  "    offer=$(__fleetctl_flags \"$verb\")\n"
                  "  elif [[ -z $verb ]]; then\n"
                  "    offer=",
                  Quoted(Words(VerbNames(spec))),
                  "\n"
                  "  elif (( nargs == 0 )); then\n"
                  "    case $verb in\n");
  for (const VerbSpec& verb : spec.verbs) {
    if (verb.words.empty()) continue;
    absl::StrAppend(&out, "      ", Quoted(verb.name), ") offer=", Quoted(Words(verb.words)),
                    " ;;\n");
  }
  absl::StrAppend(&out,
                  "    esac\n"
                  "  fi\n"
                  "  COMPREPLY=($(compgen -W \"$offer\" -- \"$cur\"))\n"
                  "}\n\n"
                  "complete -F _fleetctl fleetctl\n");
  return out;
}

std::string ZshCompletion(const CommandLineSpec& spec) {
  std::string out =
      "#compdef fleetctl\n"
      "# zsh completion for fleetctl, generated by 'fleetctl completion zsh'.\n"
      "# Load it with: source <(fleetctl completion zsh), or save it as _fleetctl in $fpath.\n\n";
  absl::StrAppend(&out, FlagFunctions(spec));
  absl::StrAppend(&out,
                  "_fleetctl() {\n"
                  "  local cur=${words[CURRENT]} prev=${words[CURRENT-1]}\n",
                  ScanLoop("${words", "2", "CURRENT"), "  case \"$verb:$prev\" in\n",
                  ValueArms(spec, "    ", "_files", ZshWords),
                  "  esac\n"
                  "  vflags=$(__fleetctl_flags \"$verb\" value)\n"
                  "  [[ $vflags == *\" $prev \"* ]] && return 1\n"
                  "  if [[ $cur == -* ]]; then\n"
                  "    compadd -- ${=$(__fleetctl_flags \"$verb\")}\n"
                  "  elif [[ -z $verb ]]; then\n"
                  "    local -a verbs\n"
                  "    verbs=(\n");
  for (const VerbSpec& verb : spec.verbs) {
    // _describe reads NAME:DESCRIPTION; a colon in either would split it.
    absl::StrAppend(
        &out, "      ",
        Quoted(absl::StrCat(verb.name, ":", absl::StrReplaceAll(verb.summary, {{":", "\\:"}}))),
        "\n");
  }
  absl::StrAppend(&out,
                  "    )\n"
                  "    _describe -t commands 'fleetctl command' verbs\n"
                  "  elif (( nargs == 0 )); then\n"
                  "    case $verb in\n");
  for (const VerbSpec& verb : spec.verbs) {
    if (verb.words.empty()) continue;
    absl::StrAppend(&out, "      ", Quoted(verb.name), ") compadd -- ", Words(verb.words), " ;;\n");
  }
  absl::StrAppend(&out,
                  "    esac\n"
                  "  fi\n"
                  "}\n\n"
                  "if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then\n"
                  "  _fleetctl \"$@\"\n"
                  "else\n"
                  "  compdef _fleetctl fleetctl\n"
                  "fi\n");
  return out;
}

}  // namespace fleet::cli
