#include "controller/fleetd/config.h"

#include <yaml-cpp/yaml.h>

#include "controller/base/yaml_text.h"

#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fleet::fleetd {
namespace {

const std::set<std::string> kLogLevels = {"debug", "info", "warning", "error"};

}  // namespace

absl::StatusOr<FleetdConfig> ParseFleetdConfig(absl::string_view text,
                                               absl::string_view file_name) {
  absl::StatusOr<YAML::Node> loaded = LoadYaml(text, file_name);
  if (!loaded.ok()) return loaded.status();
  YAML::Node root = *loaded;
  FleetdConfig config;
  if (!root || root.IsNull()) return config;  // An empty file means all defaults.
  std::vector<std::string> problems;
  auto problem = [&](const YAML::Node& node, absl::string_view what) {
    problems.push_back(absl::StrCat(file_name, ":", node.Mark().line + 1, ": ", what));
  };
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": must be a mapping of settings"));
  }
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>();
    const YAML::Node& value = entry.second;
    if (!value.IsScalar()) {
      problem(value, absl::StrCat("'", key, "' must be a single value"));
      continue;
    }
    const std::string& text_value = value.Scalar();
    auto number = [&](int* out) {
      if (!absl::SimpleAtoi(text_value, out)) {
        problem(value, absl::StrCat("'", key, "' must be a whole number, not '", text_value, "'"));
      }
    };
    if (key == "listen_address") {
      config.listen_address = text_value;
    } else if (key == "grpc_port") {
      number(&config.grpc_port);
    } else if (key == "metrics_port") {
      number(&config.metrics_port);
    } else if (key == "state_dir") {
      config.state_dir = text_value;
    } else if (key == "inventory") {
      config.inventory = text_value;
    } else if (key == "switch_credentials") {
      config.switch_credentials = text_value;
    } else if (key == "shutdown_grace_seconds") {
      int seconds = 0;
      number(&seconds);
      config.shutdown_grace = absl::Seconds(seconds);
    } else if (key == "agent_heartbeat_ms") {
      int ms = 0;
      number(&ms);
      config.agent_heartbeat = absl::Milliseconds(ms);
    } else if (key == "log_level") {
      config.log_level = text_value;
    } else if (key == "default_lease_seconds") {
      int seconds = 0;
      number(&seconds);
      config.default_lease = absl::Seconds(seconds);
    } else if (key == "reconcile_interval_seconds") {
      int seconds = 0;
      number(&seconds);
      config.reconcile_interval = absl::Seconds(seconds);
    } else if (key == "unknown_cross_connects") {
      config.unknown_cross_connects = text_value;
    } else if (key == "armed_light_wait_ms") {
      int ms = 0;
      number(&ms);
      config.armed_light_wait = absl::Milliseconds(ms);
    } else {
      problem(
          entry.first,
          absl::StrCat("unknown setting '", key,
                       "'; known: listen_address, grpc_port, metrics_port, state_dir, "
                       "inventory, switch_credentials, shutdown_grace_seconds, agent_heartbeat_ms, "
                       "log_level, default_lease_seconds, reconcile_interval_seconds, "
                       "unknown_cross_connects, armed_light_wait_ms"));
    }
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  }
  return config;
}

absl::StatusOr<FleetdConfig> ReadFleetdConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, "config file");
  if (!text.ok()) return text.status();
  return ParseFleetdConfig(*text, path);
}

absl::Status ValidateFleetdConfig(const FleetdConfig& config) {
  std::vector<std::string> problems;
  for (const auto& [name, port] : {std::pair<const char*, int>{"grpc_port", config.grpc_port},
                                   {"metrics_port", config.metrics_port}}) {
    if (port < 0 || port > 65535)
      problems.push_back(absl::StrCat(name, " ", port, " is not in 0..65535"));
  }
  if (config.state_dir.empty()) problems.push_back("state_dir is empty");
  if (config.listen_address.empty()) problems.push_back("listen_address is empty");
  if (!kLogLevels.contains(config.log_level)) {
    problems.push_back(absl::StrCat("log_level '", config.log_level,
                                    "' is not one of: ", absl::StrJoin(kLogLevels, ", ")));
  }
  if (config.shutdown_grace < absl::ZeroDuration())
    problems.push_back("shutdown grace is negative");
  if (config.default_lease <= absl::ZeroDuration())
    problems.push_back("default lease must be positive");
  if (config.reconcile_interval < absl::ZeroDuration())
    problems.push_back("reconcile interval is negative");
  if (config.armed_light_wait < absl::ZeroDuration())
    problems.push_back("armed light wait is negative");
  if (config.unknown_cross_connects != "report" && config.unknown_cross_connects != "adopt" &&
      config.unknown_cross_connects != "remove") {
    problems.push_back(absl::StrCat("unknown_cross_connects '", config.unknown_cross_connects,
                                    "' is not one of: report, adopt, remove"));
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  return absl::OkStatus();
}

}  // namespace fleet::fleetd
