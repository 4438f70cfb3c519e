#include "controller/cli/commands.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/flags.h"
#include "common/grpc_status.h"
#include "common/wording.h"
#include "controller/cli/admin_verbs.h"
#include "controller/cli/allocation_verbs.h"
#include "controller/cli/apply_delete_verbs.h"
#include "controller/cli/certs_verbs.h"
#include "controller/cli/client_config.h"
#include "controller/cli/completion_verb.h"
#include "controller/cli/config_verbs.h"
#include "controller/cli/get_describe_verbs.h"
#include "controller/cli/health_verbs.h"
#include "controller/cli/topology_verbs.h"
#include "controller/cli/verb.h"

namespace fleet::cli {
namespace {

struct GlobalOptions {
  ConnectionFlags connection;  // --insecure is `insecure` until the line is parsed.
  bool insecure = false;
  std::string output = "table";
  int64_t timeout_seconds = 10;
  std::string color = "auto";
};

constexpr absl::string_view kHelpSummary = "Show this, or a command's help: fleetctl help COMMAND";

const VerbRegistry& Verbs() {
  static const VerbRegistry* registry = [] {
    auto* verbs = new VerbRegistry;
    // In the order `fleetctl --help` lists them.
    for (Verb (*verb)() :
         {GetVerb, DescribeVerb, ApplyVerb, DiffVerb, TopologyVerb, AllocationVerb, DeleteVerb,
          DrainVerb, UndrainVerb, DeviceVerb, WhatIfVerb, ReconcileVerb, EventsVerb, LinkVerb,
          HealthVerb, VersionVerb, ConfigVerb, CertsVerb, CompletionVerb}) {
      verbs->Add(verb());
    }
    return verbs;
  }();
  return *registry;
}

std::vector<std::string> VerbNames() {
  std::vector<std::string> names;
  for (const Verb& verb : Verbs().verbs()) names.emplace_back(verb.name);
  names.push_back("help");
  return names;
}

// `unknown command 'gett' (did you mean 'get'?); commands: …`.
int UnknownVerb(std::ostream& err, const std::string& name) {
  return UsageError(err, "",
                    absl::StrCat("unknown command '", name, "'", DidYouMean(name, VerbNames()),
                                 "; commands: ", absl::StrJoin(VerbNames(), ", ")));
}

// `waits`: the flags are a verb's that has --wait (or the overview's, which covers every verb),
// so --timeout's help speaks of it.
void DeclareGlobalFlags(FlagTable& flags, GlobalOptions& global, bool waits = true) {
  flags.String("server", &global.connection.server,
               "fleetd's address, HOST:PORT, or the replicas' comma-separated (the leader is "
               "found) (env FLEET_SERVER; else the context's; else localhost:50051)");
  flags.File("ca", &global.connection.ca,
             "the site CA bundle fleetd's certificate must chain to, PEM (env FLEET_CA)");
  flags.File("cert", &global.connection.cert,
             "this client's certificate, PEM, signed by the site CA (env FLEET_CERT)");
  flags.File("key", &global.connection.key, "its private key, PEM (env FLEET_KEY)");
  flags.Bool("insecure", &global.insecure,
             "plaintext, no TLS: only for a fleetd started with --insecure (env FLEET_INSECURE=1)");
  flags.String("context", &global.connection.context,
               "the config file's context to use (env FLEET_CONTEXT; else its current-context)");
  flags.File("config", &global.connection.config,
             "the client config file (env FLEET_CONFIG; else $XDG_CONFIG_HOME/fleet/config.yaml, "
             "else ~/.config/fleet/config.yaml)");
  flags.String("output,o", &global.output,
               absl::StrCat("output format: ", absl::StrJoin(OutputFormatNames(), ", ")),
               OutputFormatNames());
  flags.Int("timeout", &global.timeout_seconds,
            waits ? "deadline of each RPC, in seconds; with --wait, of the whole wait"
                  : "deadline of each RPC, in seconds");
  flags.String("color", &global.color,
               absl::StrCat("colour states in tables: ", absl::StrJoin(ColorModeNames(), ", "),
                            " (auto: when stdout is a terminal and NO_COLOR is not set)"),
               ColorModeNames());
}

// The global flags as the parser sees them, for finding the verb and for completion.
std::vector<FlagSpec> GlobalFlagSpecs() {
  GlobalOptions global;
  FlagTable flags(nullptr);
  DeclareGlobalFlags(flags, global);
  return flags.specs();
}

std::string OverviewHelp(const Environment& env) {
  std::string description =
      "The FLEET operator's command line: inspect and change the site's inventory,\n"
      "allocations and health through fleetd's gRPC API.\n\nCommands:\n";
  size_t width = 0;
  for (const Verb& verb : Verbs().verbs()) width = std::max(width, verb.name.size() + 2);
  auto line = [&](absl::string_view name, absl::string_view summary) {
    std::string padded(name);
    padded.resize(width, ' ');
    absl::StrAppend(&description, "  ", padded, summary, "\n");
  };
  for (const Verb& verb : Verbs().verbs()) line(verb.name, verb.summary);
  line("help", kHelpSummary);
  absl::StrAppend(&description,
                  "\nRun 'fleetctl COMMAND --help' for a command's arguments and flags.\n"
                  "The flags below are accepted anywhere on the line.");
  FlagSet flags("fleetctl COMMAND [ARGS] [flags]", description);
  FlagTable table(&flags);
  GlobalOptions global;
  DeclareGlobalFlags(table, global);
  return flags.Help();
}

// Whether the verb's own flags, declared on `table`, include --wait.
bool Waits(const FlagTable& table) {
  return std::any_of(table.specs().begin(), table.specs().end(),
                     [](const FlagSpec& flag) { return flag.name == "wait"; });
}

std::string VerbHelp(const Verb& verb, const Environment& env) {
  FlagSet flags(std::string(verb.usage), verb.description);
  FlagTable table(&flags);
  GlobalOptions global;
  verb.flags(table);
  DeclareGlobalFlags(table, global, Waits(table));
  return flags.Help();
}

// The verb is the first argument that is neither a flag nor the value of a global flag.
// (A verb's own flags belong after the verb.)
std::optional<size_t> VerbIndex(const std::vector<std::string>& args) {
  const std::vector<FlagSpec> globals = GlobalFlagSpecs();
  auto takes_value = [&](const std::string& arg) {
    for (const FlagSpec& flag : globals) {
      if (!flag.takes_value) continue;
      if (arg == "--" + flag.name ||
          (flag.short_name != 0 && arg == std::string{'-', flag.short_name})) {
        return true;
      }
    }
    return false;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return i + 1 < args.size() ? std::optional<size_t>(i + 1) : std::nullopt;
    if (arg.size() > 1 && arg[0] == '-') {
      if (takes_value(arg)) ++i;
      continue;
    }
    return i;
  }
  return std::nullopt;
}

// `help [COMMAND]`: the overview, or the command's help.
int RunHelp(const std::vector<std::string>& rest, const Environment& env, std::ostream& out,
            std::ostream& err) {
  std::vector<std::string> topics;
  for (const std::string& arg : rest) {
    if (arg.empty() || arg[0] != '-') topics.push_back(arg);
  }
  if (topics.empty()) {
    out << OverviewHelp(env);
    return kExitOk;
  }
  const Verb* verb = Verbs().Find(topics[0]);
  if (verb == nullptr) return UnknownVerb(err, topics[0]);
  out << VerbHelp(*verb, env);
  return kExitOk;
}

// Checks the global flags and sets the session's format, colour and timeout from them; false,
// having printed a usage error for `verb`, when one is malformed.
bool ApplyGlobalFlags(absl::string_view verb, const GlobalOptions& global, const Environment& env,
                      std::ostream& err, Session* session) {
  std::optional<OutputFormat> format = ParseOutputFormat(global.output);
  if (!format) {
    UsageError(err, verb,
               absl::StrCat("unknown output format '", global.output,
                            "'; formats: ", absl::StrJoin(OutputFormatNames(), ", ")));
    return false;
  }
  if (*format == OutputFormat::kDot && verb != "get" && verb != "describe") {
    UsageError(err, verb, kDotDrawsOnly);
    return false;
  }
  session->format = *format;
  if (global.color == "always") {
    session->color = true;
  } else if (global.color == "auto") {
    session->color = env.color_terminal;
  } else if (global.color != "never") {
    UsageError(err, verb,
               absl::StrCat("unknown --color '", global.color,
                            "'; accepted: ", absl::StrJoin(ColorModeNames(), ", ")));
    return false;
  }
  if (global.timeout_seconds <= 0) {
    UsageError(err, verb,
               absl::StrCat("--timeout must be a positive number of seconds, got ",
                            global.timeout_seconds));
    return false;
  }
  session->timeout = absl::Seconds(global.timeout_seconds);
  return true;
}

// Parses the rest of the line for `verb` and runs it; `connect` is called only once the line
// is found well formed.
int RunVerb(const Verb& verb, const std::vector<std::string>& rest, const Environment& env,
            const Connector& connect, std::ostream& out, std::ostream& err) {
  FlagSet flags(std::string(verb.usage), verb.description);
  FlagTable table(&flags);
  GlobalOptions global;
  VerbRun run = verb.flags(table);
  DeclareGlobalFlags(table, global, Waits(table));
  absl::StatusOr<std::vector<std::string>> positional = flags.Parse(rest);
  if (!positional.ok()) {
    // FlagSet ends some messages with its own "see --help"; ours names the verb's help.
    return UsageError(err, verb.name,
                      absl::StripSuffix(positional.status().message(), "; see --help"));
  }
  if (flags.help_requested()) {
    out << flags.Help();
    return kExitOk;
  }
  Session session;
  if (!ApplyGlobalFlags(verb.name, global, env, err, &session)) return kExitUsage;
  if (flags.IsSet("server") && global.connection.server.empty()) {
    return UsageError(err, verb.name, "--server must not be empty");
  }
  if (flags.IsSet("insecure")) global.connection.insecure = global.insecure;

  SystemClock system_clock;
  session.clock = env.clock != nullptr ? env.clock : &system_clock;
  session.out = &out;
  session.err = &err;
  session.stop = env.stop;
  session.config_file = ClientConfigPath(global.connection, env.variables);
  session.line = global.connection;
  if (!verb.dials) return run(session, *positional);

  absl::StatusOr<ClientConfig> config = ReadClientConfig(session.config_file);
  if (!config.ok()) return session.Failed(ToGrpcStatus(config.status()));
  absl::StatusOr<Connection> connection =
      ResolveConnection(global.connection, env.variables, *config, env.default_server);
  if (!connection.ok()) {
    err << "fleetctl: " << connection.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<ServerStubs> stubs = connect(connection->server, connection->tls);
  if (!stubs.ok()) return session.Failed(ToGrpcStatus(stubs.status()));
  session.server = &*stubs;
  // Over TLS fleetd knows the caller by its certificate; a principal sent along would only
  // be ignored, or worse, believed by a proxy.
  if (connection->tls.insecure) {
    session.principal = env.principal;
    session.plaintext_by = global.connection.insecure.value_or(false) ? "--insecure"
                           : !env.variables.insecure.empty()          ? "FLEET_INSECURE"
                           : !connection->context.empty()
                               ? absl::StrCat("the insecure: true of context ", connection->context)
                               : "--insecure";
  }
  return run(session, *positional);
}

}  // namespace

const std::vector<std::string>& ColorModeNames() {
  static const auto* names = new std::vector<std::string>{"auto", "always", "never"};
  return *names;
}

CommandLineSpec FleetctlCommandLine() {
  CommandLineSpec spec;
  std::vector<std::string> verb_names;
  for (const Verb& verb : Verbs().verbs()) {
    FlagTable flags(nullptr);
    verb.flags(flags);
    spec.verbs.push_back(
        {std::string(verb.name), std::string(verb.summary), verb.words, flags.specs()});
    verb_names.emplace_back(verb.name);
  }
  spec.verbs.push_back({"help", std::string(kHelpSummary), verb_names, {}});
  spec.global_flags = GlobalFlagSpecs();
  // FlagSet declares --help on every verb itself.
  FlagSpec help;
  help.name = "help";
  help.short_name = 'h';
  help.help = "show this help";
  spec.global_flags.push_back(std::move(help));
  return spec;
}

int RunFleetctl(const std::vector<std::string>& args, const Environment& env,
                const Connector& connect, std::ostream& out, std::ostream& err) {
  std::optional<size_t> verb_index = VerbIndex(args);
  if (!verb_index) {
    for (const std::string& arg : args) {
      if (arg == "--help" || arg == "-h") {
        out << OverviewHelp(env);
        return kExitOk;
      }
    }
    return UsageError(
        err, "", absl::StrCat("missing command; commands: ", absl::StrJoin(VerbNames(), ", ")));
  }
  const std::string& name = args[*verb_index];
  std::vector<std::string> rest = args;
  rest.erase(rest.begin() + *verb_index);

  if (name == "help") return RunHelp(rest, env, out, err);
  const Verb* verb = Verbs().Find(name);
  if (verb == nullptr) return UnknownVerb(err, name);
  return RunVerb(*verb, rest, env, connect, out, err);
}

}  // namespace fleet::cli
