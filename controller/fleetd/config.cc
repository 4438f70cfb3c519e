#include "controller/fleetd/config.h"

#include <yaml-cpp/yaml.h>

#include "common/yaml_text.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fleet::fleetd {
namespace {

const std::set<std::string> kLogLevels = {"debug", "info", "warning", "error"};

// A century: an age beyond it is a typo (hours for days, say), and absl::Duration holds it.
constexpr int64_t kMaxAgeDays = 36500;
constexpr int kMaxBatchRows = 10000;

// Problems with `retention`, each naming the config key, the value and the rule.
void ValidateRetention(const store::RetentionPolicy& retention,
                       std::vector<std::string>& problems) {
  for (const auto& [kind, limits] :
       {std::pair<const char*, const store::RetentionLimits&>{"events", retention.events},
        {"ended_allocations", retention.ended_allocations}}) {
    // Whole days from the config; a duration from elsewhere is shown as it is.
    const double age_days = absl::ToDoubleHours(limits.max_age) / 24;
    if (limits.max_age < absl::ZeroDuration() || age_days > kMaxAgeDays) {
      problems.push_back(absl::StrCat(kind, "_max_age_days ", age_days, " is not in 0..",
                                      kMaxAgeDays, " (0: no limit by age)"));
    }
    if (limits.max_count < 0) {
      problems.push_back(absl::StrCat(kind, "_max_count ", limits.max_count,
                                      " is negative (0: no limit by count)"));
    }
  }
  if (retention.interval < absl::ZeroDuration()) {
    problems.push_back(absl::StrCat("retention_interval_seconds ",
                                    absl::ToInt64Seconds(retention.interval),
                                    " is negative (0: no background pruning)"));
  }
  if (retention.batch_rows < 1 || retention.batch_rows > kMaxBatchRows) {
    problems.push_back(absl::StrCat("retention_batch_rows ", retention.batch_rows, " is not in 1..",
                                    kMaxBatchRows));
  }
  if (retention.pass_max_rows < retention.batch_rows) {
    problems.push_back(absl::StrCat("retention_pass_max_rows ", retention.pass_max_rows,
                                    " is below retention_batch_rows ", retention.batch_rows));
  }
}

// Problems with the replication settings, each naming the key, the value and the rule.
void ValidateReplication(const FleetdConfig& config, std::vector<std::string>& problems) {
  const std::vector<std::pair<const char*, const std::string*>> tls = {
      {"etcd_ca_file", &config.etcd_ca_file},
      {"etcd_cert_file", &config.etcd_cert_file},
      {"etcd_key_file", &config.etcd_key_file}};
  std::vector<std::string> set, unset;
  for (const auto& [name, value] : tls) (value->empty() ? unset : set).push_back(name);
  if (config.etcd.empty()) {
    if (!config.advertise.empty()) set.push_back("advertise");
    if (!set.empty()) {
      problems.push_back(absl::StrCat(absl::StrJoin(set, ", "),
                                      " is set but etcd is not: replication needs etcd's members "
                                      "(--etcd URL[,URL...])"));
    }
    return;
  }
  if (!set.empty() && !unset.empty()) {
    problems.push_back(absl::StrCat("etcd over mutual TLS needs ", absl::StrJoin(unset, ", "),
                                    " too (flags --etcd-ca, --etcd-cert, --etcd-key)"));
  }
  if (config.advertise.empty()) {
    problems.push_back(
        "advertise is empty: a replica needs the HOST:PORT clients and agents dial it at "
        "(--advertise)");
  } else if (config.advertise.find(':') == std::string::npos) {
    problems.push_back(absl::StrCat("advertise '", config.advertise, "' is not HOST:PORT"));
  }
  if (config.etcd_prefix.empty()) problems.push_back("etcd_prefix is empty");
  if (config.leader_lease < absl::Seconds(2)) {
    problems.push_back(absl::StrCat("leader_lease_seconds ",
                                    absl::ToInt64Seconds(config.leader_lease),
                                    " is below 2 (etcd grants no shorter lease)"));
  }
  if (config.log_snapshot_every < 0) {
    problems.push_back(absl::StrCat("log_snapshot_every ", config.log_snapshot_every,
                                    " is negative (0: no snapshots)"));
  }
  if (config.log_keep_entries < 1) {
    problems.push_back(absl::StrCat("log_keep_entries ", config.log_keep_entries,
                                    " is below 1 (a trim keeps at least the newest entry)"));
  }
  if (config.leader_margin <= absl::ZeroDuration() ||
      config.leader_margin >= config.leader_lease / 2) {
    problems.push_back(absl::StrCat("leader_margin_ms ",
                                    absl::ToInt64Milliseconds(config.leader_margin),
                                    " is not above 0 and below half the leader lease"));
  }
}

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
    auto number = [&](auto* out) {
      if (!absl::SimpleAtoi(text_value, out)) {
        problem(value, absl::StrCat("'", key, "' must be a whole number, not '", text_value, "'"));
      }
    };
    auto days = [&](absl::Duration* out) {
      int64_t n = 0;
      number(&n);
      *out = absl::Hours(24) * n;
    };
    store::RetentionPolicy& retention = config.retention;
    if (key == "listen_address") {
      config.listen_address = text_value;
    } else if (key == "metrics_listen_address") {
      config.metrics_listen_address = text_value;
    } else if (key == "tls_ca_file") {
      config.tls_ca_file = text_value;
    } else if (key == "tls_cert_file") {
      config.tls_cert_file = text_value;
    } else if (key == "tls_key_file") {
      config.tls_key_file = text_value;
    } else if (key == "policy_file") {
      config.policy_file = text_value;
    } else if (key == "tls_reload_interval_seconds") {
      int seconds = 0;
      number(&seconds);
      config.tls_reload_interval = absl::Seconds(seconds);
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
    } else if (key == "agent_heartbeats_per_second") {
      number(&config.agent_heartbeats_per_second);
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
    } else if (key == "monitor_interval_ms") {
      int ms = 0;
      number(&ms);
      config.monitor_interval = absl::Milliseconds(ms);
    } else if (key == "low_power_dbm") {
      if (!absl::SimpleAtod(text_value, &config.low_power_dbm) ||
          !std::isfinite(config.low_power_dbm)) {
        problem(value, absl::StrCat("'", key, "' must be a number of dBm, not '", text_value, "'"));
      }
    } else if (key == "suspect_after_failed_retrains") {
      number(&config.suspect_after_failed_retrains);
    } else if (key == "unknown_cross_connects") {
      config.unknown_cross_connects = text_value;
    } else if (key == "armed_light_wait_ms") {
      int ms = 0;
      number(&ms);
      config.armed_light_wait = absl::Milliseconds(ms);
    } else if (key == "events_max_age_days") {
      days(&retention.events.max_age);
    } else if (key == "events_max_count") {
      number(&retention.events.max_count);
    } else if (key == "ended_allocations_max_age_days") {
      days(&retention.ended_allocations.max_age);
    } else if (key == "ended_allocations_max_count") {
      number(&retention.ended_allocations.max_count);
    } else if (key == "retention_interval_seconds") {
      int64_t seconds = 0;
      number(&seconds);
      retention.interval = absl::Seconds(seconds);
    } else if (key == "retention_batch_rows") {
      number(&retention.batch_rows);
    } else if (key == "retention_pass_max_rows") {
      number(&retention.pass_max_rows);
    } else if (key == "etcd") {
      config.etcd = text_value;
    } else if (key == "etcd_ca_file") {
      config.etcd_ca_file = text_value;
    } else if (key == "etcd_cert_file") {
      config.etcd_cert_file = text_value;
    } else if (key == "etcd_key_file") {
      config.etcd_key_file = text_value;
    } else if (key == "advertise") {
      config.advertise = text_value;
    } else if (key == "etcd_prefix") {
      config.etcd_prefix = text_value;
    } else if (key == "leader_lease_seconds") {
      int seconds = 0;
      number(&seconds);
      config.leader_lease = absl::Seconds(seconds);
    } else if (key == "log_snapshot_every") {
      number(&config.log_snapshot_every);
    } else if (key == "log_keep_entries") {
      number(&config.log_keep_entries);
    } else if (key == "leader_margin_ms") {
      int ms = 0;
      number(&ms);
      config.leader_margin = absl::Milliseconds(ms);
    } else {
      problem(entry.first,
              absl::StrCat("unknown setting '", key,
                           "'; known: listen_address, metrics_listen_address, grpc_port, "
                           "metrics_port, tls_ca_file, tls_cert_file, tls_key_file, policy_file, "
                           "tls_reload_interval_seconds, state_dir, inventory, "
                           "switch_credentials, shutdown_grace_seconds, agent_heartbeat_ms, "
                           "agent_heartbeats_per_second, log_level, default_lease_seconds, "
                           "reconcile_interval_seconds, "
                           "monitor_interval_ms, low_power_dbm, suspect_after_failed_retrains, "
                           "unknown_cross_connects, armed_light_wait_ms, events_max_age_days, "
                           "events_max_count, ended_allocations_max_age_days, "
                           "ended_allocations_max_count, retention_interval_seconds, "
                           "retention_batch_rows, retention_pass_max_rows, etcd, etcd_ca_file, "
                           "etcd_cert_file, etcd_key_file, advertise, etcd_prefix, "
                           "leader_lease_seconds, leader_margin_ms, log_snapshot_every, "
                           "log_keep_entries"));
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
  if (config.metrics_listen_address.empty()) problems.push_back("metrics_listen_address is empty");
  const std::vector<std::pair<const char*, const std::string*>> tls = {
      {"tls_ca_file", &config.tls_ca_file},
      {"tls_cert_file", &config.tls_cert_file},
      {"tls_key_file", &config.tls_key_file},
      {"policy_file", &config.policy_file}};
  std::vector<std::string> set, unset;
  for (const auto& [name, value] : tls) (value->empty() ? unset : set).push_back(name);
  if (config.insecure && !set.empty()) {
    problems.push_back(absl::StrCat("--insecure serves plaintext, yet ", absl::StrJoin(set, ", "),
                                    " is set: choose one"));
  } else if (!config.insecure && !unset.empty()) {
    problems.push_back(absl::StrCat(
        "mutual TLS needs ", absl::StrJoin(unset, ", "),
        " (flags --tls-ca, --tls-cert, --tls-key, --policy); or --insecure for plaintext"));
  }
  if (config.tls_reload_interval <= absl::ZeroDuration()) {
    problems.push_back(absl::StrCat("tls_reload_interval_seconds ",
                                    absl::ToInt64Seconds(config.tls_reload_interval),
                                    " must be positive"));
  }
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
  if (config.monitor_interval < absl::ZeroDuration()) {
    problems.push_back(absl::StrCat("monitor_interval_ms ",
                                    absl::ToInt64Milliseconds(config.monitor_interval),
                                    " is negative (0 turns the switch monitor off)"));
  }
  if (config.low_power_dbm > 30 || config.low_power_dbm < -60) {
    problems.push_back(
        absl::StrCat("low_power_dbm ", config.low_power_dbm, " is not in -60..30 dBm"));
  }
  if (config.suspect_after_failed_retrains < 0) {
    problems.push_back(absl::StrCat("suspect_after_failed_retrains ",
                                    config.suspect_after_failed_retrains,
                                    " is negative (0: never)"));
  }
  if (config.agent_heartbeat <= absl::ZeroDuration()) {
    problems.push_back(absl::StrCat("agent_heartbeat_ms ",
                                    absl::ToInt64Milliseconds(config.agent_heartbeat),
                                    " must be positive"));
  }
  if (config.agent_heartbeats_per_second < 0) {
    problems.push_back(absl::StrCat("agent_heartbeats_per_second ",
                                    config.agent_heartbeats_per_second,
                                    " is negative (0: the interval never lengthens)"));
  }
  if (config.armed_light_wait < absl::ZeroDuration())
    problems.push_back("armed light wait is negative");
  if (config.unknown_cross_connects != "report" && config.unknown_cross_connects != "adopt" &&
      config.unknown_cross_connects != "remove") {
    problems.push_back(absl::StrCat("unknown_cross_connects '", config.unknown_cross_connects,
                                    "' is not one of: report, adopt, remove"));
  }
  ValidateRetention(config.retention, problems);
  ValidateReplication(config, problems);
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  return absl::OkStatus();
}

}  // namespace fleet::fleetd
