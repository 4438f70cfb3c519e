#include "controller/cli/client_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/yaml_text.h"

namespace fleet::cli {
namespace {

const std::set<std::string>& TopKeys() {
  static const auto* keys = new std::set<std::string>{"contexts", "current-context"};
  return *keys;
}

const std::set<std::string>& ContextKeys() {
  static const auto* keys =
      new std::set<std::string>{"ca", "cert", "insecure", "key", "name", "server"};
  return *keys;
}

int Line(const YAML::Node& node) { return node.Mark().line + 1; }

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// One source of settings, in precedence order, for deciding TLS or plaintext.
struct Source {
  std::string name;  // "flags", "environment", "context demo"
  std::string ca, cert, key;
  std::optional<bool> insecure;
  std::string insecure_by;  // How this source says insecure: "--insecure".
  std::string files_by;     // How this source names files: "--ca, --cert, --key".
  bool HasFiles() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

}  // namespace

const ConfigContext* ClientConfig::Find(absl::string_view name) const {
  for (const ConfigContext& context : contexts) {
    if (context.name == name) return &context;
  }
  return nullptr;
}

std::string ClientConfig::ContextNames() const {
  if (contexts.empty()) return "(none)";
  std::vector<std::string> names;
  for (const ConfigContext& context : contexts) names.push_back(context.name);
  return absl::StrJoin(names, ", ");
}

std::string ClientConfig::Resolve(const std::string& file) const {
  if (file.empty() || std::filesystem::path(file).is_absolute()) return file;
  return (std::filesystem::path(path).parent_path() / file).string();
}

std::string ClientConfigPath(const ConnectionFlags& flags, const ClientEnvironment& env) {
  if (!flags.config.empty()) return flags.config;
  if (!env.config.empty()) return env.config;
  if (!env.xdg_config_home.empty()) return env.xdg_config_home + "/fleet/config.yaml";
  if (!env.home.empty()) return env.home + "/.config/fleet/config.yaml";
  return "";
}

absl::StatusOr<ClientConfig> ParseClientConfig(absl::string_view text, const std::string& path) {
  ClientConfig config;
  config.path = path;
  config.exists = true;
  absl::StatusOr<YAML::Node> loaded = LoadYaml(text, path);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node& root = *loaded;
  if (!root || root.IsNull()) return config;
  std::vector<std::string> problems;
  auto problem = [&](const YAML::Node& node, absl::string_view what) {
    problems.push_back(absl::StrCat(path, ":", Line(node), ": ", what));
  };
  if (!root.IsMap()) {
    problem(root, "the client config must be a mapping (current-context, contexts)");
    return absl::InvalidArgumentError(problems.front());
  }
  // A string setting; a problem naming `key` when it is not a scalar.
  auto scalar = [&](const YAML::Node& node, absl::string_view key, std::string* value) {
    if (!node.IsScalar()) {
      problem(node, absl::StrCat(key, " must be a string"));
      return;
    }
    *value = node.Scalar();
  };
  YAML::Node current;
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    if (!TopKeys().contains(key)) {
      problem(entry.first,
              absl::StrCat("unknown key '", key, "'; known: ", absl::StrJoin(TopKeys(), ", ")));
    } else if (key == "current-context") {
      current = entry.second;
      scalar(entry.second, key, &config.current_context);
    } else if (!entry.second.IsNull() && !entry.second.IsSequence()) {
      problem(entry.second, "contexts must be a list of contexts");
    } else {
      std::map<std::string, int> first_line;
      for (const YAML::Node& node : entry.second) {
        if (!node.IsMap()) {
          problem(node, "a context must be a mapping (name, server, ca, cert, key, insecure)");
          continue;
        }
        ConfigContext context;
        for (const auto& field : node) {
          const std::string name = field.first.Scalar();
          if (!ContextKeys().contains(name)) {
            problem(field.first, absl::StrCat("unknown key '", name, "' in a context; known: ",
                                              absl::StrJoin(ContextKeys(), ", ")));
          } else if (name == "insecure") {
            bool insecure = false;
            if (!field.second.IsScalar() || !YAML::convert<bool>::decode(field.second, insecure)) {
              problem(field.second,
                      absl::StrCat("insecure must be true or false, got '",
                                   field.second.IsScalar() ? field.second.Scalar() : "a collection",
                                   "'"));
            }
            context.insecure = insecure;
          } else {
            std::string* value = name == "name"     ? &context.name
                                 : name == "server" ? &context.server
                                 : name == "ca"     ? &context.ca
                                 : name == "cert"   ? &context.cert
                                                    : &context.key;
            scalar(field.second, name, value);
          }
        }
        if (context.name.empty()) {
          problem(node, "a context needs a name");
          continue;
        }
        auto [at, inserted] = first_line.emplace(context.name, Line(node));
        if (!inserted) {
          problem(node, absl::StrCat("context '", context.name, "' is named twice (first at line ",
                                     at->second, "); names must be unique"));
          continue;
        }
        const int files = !context.ca.empty() + !context.cert.empty() + !context.key.empty();
        if (context.insecure && files > 0) {
          problem(node, absl::StrCat("context '", context.name,
                                     "' is insecure and has ca/cert/key: a context is either "
                                     "insecure (plaintext) or TLS"));
        } else if (files > 0 && files < 3) {
          std::vector<std::string> missing;
          if (context.ca.empty()) missing.push_back("ca");
          if (context.cert.empty()) missing.push_back("cert");
          if (context.key.empty()) missing.push_back("key");
          problem(node,
                  absl::StrCat("context '", context.name, "' has no ",
                               absl::StrJoin(missing, " and "), ": ca, cert and key go together"));
        }
        config.contexts.push_back(std::move(context));
      }
    }
  }
  if (!config.current_context.empty() && config.Find(config.current_context) == nullptr) {
    problem(current, absl::StrCat("current-context '", config.current_context,
                                  "' is not a context; contexts: ", config.ContextNames()));
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  return config;
}

absl::StatusOr<ClientConfig> ReadClientConfig(const std::string& path) {
  ClientConfig config;
  config.path = path;
  std::error_code error;
  if (path.empty() || !std::filesystem::exists(path, error)) return config;
  absl::StatusOr<std::string> text = ReadTextFile(path, "client config file");
  if (!text.ok()) return text.status();
  return ParseClientConfig(*text, path);
}

std::string ClientConfigYaml(const ClientConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  if (!config.current_context.empty()) {
    out << YAML::Key << "current-context" << YAML::Value << config.current_context;
  }
  out << YAML::Key << "contexts" << YAML::Value;
  if (config.contexts.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const ConfigContext& context : config.contexts) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << context.name;
    for (auto [key, value] : {std::pair<const char*, const std::string&>{"server", context.server},
                              {"ca", context.ca},
                              {"cert", context.cert},
                              {"key", context.key}}) {
      if (!value.empty()) out << YAML::Key << key << YAML::Value << value;
    }
    if (context.insecure) out << YAML::Key << "insecure" << YAML::Value << true;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return absl::StrCat(out.c_str(), "\n");
}

std::string ClientConfigJson(const ClientConfig& config) {
  std::string out = "{\n";
  if (!config.current_context.empty()) {
    absl::StrAppend(&out, "  \"current-context\": ", JsonString(config.current_context), ",\n");
  }
  absl::StrAppend(&out, "  \"contexts\": [");
  for (size_t i = 0; i < config.contexts.size(); ++i) {
    const ConfigContext& context = config.contexts[i];
    absl::StrAppend(&out, i == 0 ? "\n" : ",\n", "    {\"name\": ", JsonString(context.name));
    for (auto [key, value] : {std::pair<const char*, const std::string&>{"server", context.server},
                              {"ca", context.ca},
                              {"cert", context.cert},
                              {"key", context.key}}) {
      if (!value.empty()) absl::StrAppend(&out, ", \"", key, "\": ", JsonString(value));
    }
    if (context.insecure) absl::StrAppend(&out, ", \"insecure\": true");
    out += "}";
  }
  absl::StrAppend(&out, config.contexts.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return out;
}

absl::Status WriteClientConfig(const ClientConfig& config) {
  auto failed = [&](absl::string_view what) {
    return absl::InternalError(absl::StrCat("cannot write client config file ", config.path, ": ",
                                            what, ": ", std::strerror(errno)));
  };
  const std::filesystem::path folder = std::filesystem::path(config.path).parent_path();
  if (!folder.empty()) {
    std::error_code error;
    if (!std::filesystem::exists(folder, error)) {
      std::filesystem::create_directories(folder, error);
      if (error) {
        return absl::InternalError(absl::StrCat("cannot write client config file ", config.path,
                                                ": creating ", folder.string(), ": ",
                                                error.message()));
      }
      std::filesystem::permissions(folder, std::filesystem::perms::owner_all, error);
    }
  }
  const std::string text = ClientConfigYaml(config);
  const std::string temporary = absl::StrCat(config.path, ".tmp.", getpid());
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return failed(absl::StrCat("creating ", temporary));
  // O_CREAT's mode does not apply to a file left over by an earlier run.
  bool ok = fchmod(fd, 0600) == 0;
  for (size_t written = 0; ok && written < text.size();) {
    ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) written += static_cast<size_t>(n);
  }
  ok = ok && fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  if (!ok) {
    errno = saved;
    absl::Status status = failed(absl::StrCat("writing ", temporary));
    unlink(temporary.c_str());
    return status;
  }
  if (rename(temporary.c_str(), config.path.c_str()) != 0) {
    absl::Status status = failed(absl::StrCat("renaming ", temporary));
    unlink(temporary.c_str());
    return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<Connection> ResolveConnection(const ConnectionFlags& flags,
                                             const ClientEnvironment& env,
                                             const ClientConfig& config,
                                             const std::string& default_server) {
  Connection connection;
  // The context: named on the line, in the environment, or the file's current one.
  std::string context_by;
  if (!flags.context.empty()) {
    connection.context = flags.context;
    context_by = "--context";
  } else if (!env.context.empty()) {
    connection.context = env.context;
    context_by = "FLEET_CONTEXT";
  } else {
    connection.context = config.current_context;
    context_by = "current-context";
  }
  const ConfigContext* context = nullptr;
  if (!connection.context.empty()) {
    context = config.Find(connection.context);
    if (context == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "context '", connection.context, "' (", context_by, ") is not in ",
          config.path.empty() ? "any config file (no FLEET_CONFIG, XDG_CONFIG_HOME or HOME)"
                              : config.path,
          config.exists ? absl::StrCat("; contexts: ", config.ContextNames()) : " (no such file)"));
    }
  }

  connection.server = !flags.server.empty()                            ? flags.server
                      : !env.server.empty()                            ? env.server
                      : context != nullptr && !context->server.empty() ? context->server
                                                                       : default_server;

  std::vector<Source> sources;
  Source from_flags{"the command line", flags.ca,     flags.cert,         flags.key,
                    flags.insecure,     "--insecure", "--ca/--cert/--key"};
  sources.push_back(from_flags);
  Source from_env{"the environment",
                  env.ca,
                  env.cert,
                  env.key,
                  std::nullopt,
                  "FLEET_INSECURE",
                  "FLEET_CA/FLEET_CERT/FLEET_KEY"};
  if (!env.insecure.empty()) {
    const std::string value = absl::AsciiStrToLower(env.insecure);
    if (value == "1" || value == "true" || value == "yes") {
      from_env.insecure = true;
    } else if (value == "0" || value == "false" || value == "no") {
      from_env.insecure = false;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "FLEET_INSECURE='", env.insecure, "' is not a boolean: 1 (plaintext) or 0 (TLS)"));
    }
  }
  sources.push_back(from_env);
  if (context != nullptr) {
    sources.push_back({absl::StrCat("context ", context->name), config.Resolve(context->ca),
                       config.Resolve(context->cert), config.Resolve(context->key),
                       context->insecure ? std::optional<bool>(true) : std::nullopt,
                       "insecure: true", "ca/cert/key"});
  }

  // The first source that says anything about TLS decides between TLS and plaintext.
  std::optional<bool> insecure;
  for (const Source& source : sources) {
    if (source.insecure == true && source.HasFiles()) {
      return absl::InvalidArgumentError(absl::StrCat(source.insecure_by, " and ", source.files_by,
                                                     " both come from ", source.name,
                                                     ": plaintext or TLS, not both"));
    }
    if (source.insecure.has_value() || source.HasFiles()) {
      insecure = source.insecure.value_or(false);
      break;
    }
  }
  if (insecure == true) {
    connection.tls.insecure = true;
    return connection;
  }
  // TLS: each file from the first source that names it.
  for (const Source& source : sources) {
    if (connection.tls.ca.empty()) connection.tls.ca = source.ca;
    if (connection.tls.cert.empty()) connection.tls.cert = source.cert;
    if (connection.tls.key.empty()) connection.tls.key = source.key;
  }
  if (connection.tls.ca.empty() && connection.tls.cert.empty() && connection.tls.key.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no credentials for ", connection.server,
        ": give --ca, --cert and --key (or FLEET_CA, FLEET_CERT, FLEET_KEY), or a context "
        "(fleetctl config use-context NAME); --insecure for a fleetd started with --insecure"));
  }
  struct Missing {
    const std::string& value;
    const char* what;
    const char* flag;
    const char* variable;
  };
  for (const Missing& m :
       {Missing{connection.tls.ca, "CA bundle", "--ca", "FLEET_CA"},
        Missing{connection.tls.cert, "client certificate", "--cert", "FLEET_CERT"},
        Missing{connection.tls.key, "client key", "--key", "FLEET_KEY"}}) {
    if (m.value.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("no ", m.what, " for ", connection.server,
                                                     ": give ", m.flag, " or ", m.variable,
                                                     " (TLS needs --ca, --cert and --key)"));
    }
  }
  return connection;
}

}  // namespace fleet::cli
