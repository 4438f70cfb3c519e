#include "controller/cli/config_verbs.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "controller/cli/client_config.h"

namespace fleet::cli {
namespace {

const std::vector<std::string>& Subcommands() {
  static const auto* names =
      new std::vector<std::string>{"view", "get-contexts", "use-context", "set-context"};
  return *names;
}

int Refused(const Session& s, const absl::Status& status) { return s.Failed(ToGrpcStatus(status)); }

std::string Auth(const ConfigContext& context) {
  if (context.insecure) return "insecure";
  return context.cert.empty() ? "" : "tls";
}

// Prints the config as -o asks; `table` renders it for people.
int Print(const Session& s, const ClientConfig& config, const Table& table) {
  switch (s.format) {
    case OutputFormat::kJson:
      *s.out << ClientConfigJson(config);
      return kExitOk;
    case OutputFormat::kYaml:
      *s.out << ClientConfigYaml(config);
      return kExitOk;
    case OutputFormat::kTable:
    case OutputFormat::kDot:  // Refused for this verb before it runs (ApplyGlobalFlags).
      break;
  }
  if (config.contexts.empty()) {
    *s.out << "No contexts in " << (config.path.empty() ? "(no config file)" : config.path)
           << (config.exists || config.path.empty() ? "" : " (no such file)") << ".\n";
    return kExitOk;
  }
  *s.out << table.Render(s.color);
  return kExitOk;
}

int View(const Session& s, const ClientConfig& config) {
  Table table({"CURRENT", "NAME", "SERVER", "AUTH", "CA", "CERT", "KEY"});
  for (const ConfigContext& c : config.contexts) {
    table.AddRow({c.name == config.current_context ? "*" : " ", c.name, c.server, Auth(c), c.ca,
                  c.cert, c.key});
  }
  return Print(s, config, table);
}

int GetContexts(const Session& s, const ClientConfig& config) {
  Table table({"CURRENT", "NAME", "SERVER", "AUTH"});
  for (const ConfigContext& c : config.contexts) {
    table.AddRow({c.name == config.current_context ? "*" : " ", c.name, c.server, Auth(c)});
  }
  return Print(s, config, table);
}

absl::Status Writable(const Session& s) {
  if (!s.config_file.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "no client config file: give --config or FLEET_CONFIG (neither XDG_CONFIG_HOME nor HOME "
      "is set)");
}

int UseContext(const Session& s, ClientConfig config, const std::string& name) {
  if (absl::Status writable = Writable(s); !writable.ok()) return Refused(s, writable);
  if (config.Find(name) == nullptr) {
    return Refused(s,
                   absl::NotFoundError(absl::StrCat("context '", name, "' is not in ", config.path,
                                                    "; contexts: ", config.ContextNames())));
  }
  config.current_context = name;
  if (absl::Status written = WriteClientConfig(config); !written.ok()) return Refused(s, written);
  *s.out << "current-context is " << name << " (" << config.path << ")\n";
  return kExitOk;
}

int SetContext(const Session& s, ClientConfig config, const std::string& name) {
  const ConnectionFlags& line = s.line;
  const bool files = !line.ca.empty() || !line.cert.empty() || !line.key.empty();
  if (line.insecure == true && files) {
    return UsageError(*s.err, "config",
                      "--insecure and --ca/--cert/--key: a context is plaintext or TLS, not both");
  }
  if (absl::Status writable = Writable(s); !writable.ok()) return Refused(s, writable);
  const bool created = config.Find(name) == nullptr;
  if (created) {
    ConfigContext fresh;
    fresh.name = name;
    config.contexts.push_back(std::move(fresh));
  }
  ConfigContext* context = nullptr;
  for (ConfigContext& c : config.contexts) {
    if (c.name == name) context = &c;
  }
  if (!line.server.empty()) context->server = line.server;
  // Stored absolute: the file resolves relative paths against its own folder, not the folder
  // this command ran in.
  auto absolute = [](const std::string& file) {
    return file.empty() ? file : std::filesystem::absolute(file).lexically_normal().string();
  };
  if (files) {
    context->insecure = false;
    if (!line.ca.empty()) context->ca = absolute(line.ca);
    if (!line.cert.empty()) context->cert = absolute(line.cert);
    if (!line.key.empty()) context->key = absolute(line.key);
  }
  if (line.insecure.has_value()) context->insecure = *line.insecure;
  if (context->insecure) context->ca = context->cert = context->key = "";
  const int given = !context->ca.empty() + !context->cert.empty() + !context->key.empty();
  if (given > 0 && given < 3) {
    return UsageError(*s.err, "config",
                      absl::StrCat("context '", name,
                                   "' would not have all of ca, cert and key: give --ca, --cert "
                                   "and --key together"));
  }
  if (absl::Status written = WriteClientConfig(config); !written.ok()) return Refused(s, written);
  *s.out << "context " << name << (created ? " created in " : " updated in ") << config.path
         << "\n";
  return kExitOk;
}

int RunConfig(const Session& s, const Positional& p) {
  if (p.empty()) {
    return UsageError(
        *s.err, "config",
        absl::StrCat("config needs a subcommand: ", absl::StrJoin(Subcommands(), ", ")));
  }
  const std::string& sub = p[0];
  const bool takes_name = sub == "use-context" || sub == "set-context";
  if (sub != "view" && sub != "get-contexts" && !takes_name) {
    return UsageError(*s.err, "config",
                      absl::StrCat("unknown subcommand '", sub,
                                   "'; subcommands: ", absl::StrJoin(Subcommands(), ", ")));
  }
  if (p.size() != (takes_name ? 2u : 1u)) {
    return UsageError(
        *s.err, "config",
        absl::StrCat("config ", sub, takes_name ? " needs one context NAME" : " takes no arguments",
                     ", got ", Joined(p)));
  }
  absl::StatusOr<ClientConfig> config = ReadClientConfig(s.config_file);
  if (!config.ok()) return Refused(s, config.status());
  if (sub == "view") return View(s, *config);
  if (sub == "get-contexts") return GetContexts(s, *config);
  if (sub == "use-context") return UseContext(s, *std::move(config), p[1]);
  return SetContext(s, *std::move(config), p[1]);
}

}  // namespace

Verb ConfigVerb() {
  return {"config",
          "fleetctl config (view | get-contexts | use-context NAME | set-context NAME) [flags]",
          "Show or change the client config file's contexts",
          "Show or change the client config file: named contexts, each a server and how to\n"
          "dial it (ca, cert and key for mutual TLS, or insecure for plaintext). The file is\n"
          "--config, else $FLEET_CONFIG, else $XDG_CONFIG_HOME/fleet/config.yaml, else\n"
          "~/.config/fleet/config.yaml. These commands never dial the server.\n\n"
          "  view                 the file as read (-o yaml or json prints it as such)\n"
          "  get-contexts         the contexts; * marks the current one\n"
          "  use-context NAME     make NAME the current context\n"
          "  set-context NAME     create or update NAME from --server, --ca, --cert, --key and\n"
          "                       --insecure (files are stored as absolute paths)\n\n"
          "Writes replace the file atomically, mode 0600, keeping the other contexts.",
          WithoutFlags(RunConfig),
          Subcommands(),
          /*dials=*/false};
}

}  // namespace fleet::cli
