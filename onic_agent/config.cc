#include "onic_agent/config.h"

#include <yaml-cpp/yaml.h>

#include "common/yaml_text.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fleet::onic_agent {
namespace {

int TlsFilesGiven(const AgentConfig& config) {
  return !config.tls_ca_file.empty() + !config.tls_cert_file.empty() + !config.tls_key_file.empty();
}

}  // namespace

absl::StatusOr<AgentConfig> ParseAgentConfig(absl::string_view text, absl::string_view file_name) {
  absl::StatusOr<YAML::Node> loaded = LoadYaml(text, file_name);
  if (!loaded.ok()) return loaded.status();
  YAML::Node root = *loaded;
  AgentConfig config;
  if (!root || root.IsNull()) return config;
  if (!root.IsMap())
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": must be a mapping"));
  std::vector<std::string> problems;
  auto problem = [&](const YAML::Node& node, absl::string_view what) {
    problems.push_back(absl::StrCat(file_name, ":", node.Mark().line + 1, ": ", what));
  };
  try {
    static const std::set<std::string> kKeys = {
        "controller",         "host",         "backend",          "sysfs_root",
        "simulator",          "training_ms",  "min_rx_power_dbm", "onics",
        "metrics_address",    "metrics_port", "tls_ca_file",      "tls_cert_file",
        "tls_key_file",       "insecure",     "onic_discovery",   "slot_power",
        "monitor_interval_ms"};
    for (const auto& entry : root) {
      const std::string key = entry.first.as<std::string>();
      if (!kKeys.contains(key)) {
        problem(entry.first,
                absl::StrCat("unknown setting '", key, "'; known: ", absl::StrJoin(kKeys, ", ")));
      }
    }
    if (root["controller"]) config.controller = root["controller"].as<std::string>();
    if (root["tls_ca_file"]) config.tls_ca_file = root["tls_ca_file"].as<std::string>();
    if (root["tls_cert_file"]) config.tls_cert_file = root["tls_cert_file"].as<std::string>();
    if (root["tls_key_file"]) config.tls_key_file = root["tls_key_file"].as<std::string>();
    auto read_bool = [&](const char* key, bool& value) {
      const YAML::Node node = root[key];
      if (!node) return;
      if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
        problem(node, absl::StrCat(key, " must be true or false, got '",
                                   node.IsScalar() ? node.Scalar() : "a collection", "'"));
      }
    };
    read_bool("insecure", config.insecure);
    read_bool("slot_power", config.slot_power);
    if (root["host"]) config.host = root["host"].as<std::string>();
    if (root["backend"]) config.backend = root["backend"].as<std::string>();
    if (root["sysfs_root"]) config.sysfs_root = root["sysfs_root"].as<std::string>();
    if (root["simulator"]) config.simulator = root["simulator"].as<std::string>();
    if (root["training_ms"]) config.training_ms = root["training_ms"].as<int>();
    if (root["min_rx_power_dbm"]) config.min_rx_power_dbm = root["min_rx_power_dbm"].as<double>();
    if (const YAML::Node node = root["monitor_interval_ms"]) {
      config.monitor_interval_ms = node.as<int>();
      if (config.monitor_interval_ms <= 0 || config.monitor_interval_ms > 3'600'000) {
        problem(node, absl::StrCat("monitor_interval_ms ", config.monitor_interval_ms,
                                   " must be between 1 and 3600000"));
      }
    }
    if (root["metrics_address"]) {
      config.metrics_address = root["metrics_address"].as<std::string>();
    }
    if (root["metrics_port"]) {
      config.metrics_port = root["metrics_port"].as<int>();
      if (config.metrics_port < -1 || config.metrics_port > 65535) {
        problem(root["metrics_port"], absl::StrCat("metrics_port ", config.metrics_port,
                                                   " is not a port (0 picks one, -1 serves none)"));
      }
    }
    if (root["onics"]) {
      for (const YAML::Node& node : root["onics"]) {
        AgentOnicConfig onic;
        if (!node["serial"]) {
          problem(node, "an O-NIC needs a serial");
          continue;
        }
        onic.serial = node["serial"].as<std::string>();
        if (node["pcie"]) onic.pcie_address = node["pcie"].as<std::string>();
        if (!node["ports"] || !node["ports"].IsSequence() || node["ports"].size() != 2) {
          problem(node, absl::StrCat("O-NIC ", onic.serial, " needs exactly two ports"));
          continue;
        }
        for (size_t i = 0; i < 2; ++i) {
          const YAML::Node& p = node["ports"][i];
          if (p["downstream"]) onic.ports[i].downstream = p["downstream"].as<std::string>();
          if (p["tx_ingress"]) onic.ports[i].tx_ingress = p["tx_ingress"].as<uint32_t>();
          if (p["rx_egress"]) onic.ports[i].rx_egress = p["rx_egress"].as<uint32_t>();
        }
        config.onics.push_back(std::move(onic));
      }
    }
    if (const YAML::Node node = root["onic_discovery"]) {
      if (!node.IsMap()) {
        problem(node, "onic_discovery must be a mapping with match (and serial)");
      } else {
        OnicDiscovery discovery;
        for (const auto& entry : node) {
          const std::string key = entry.first.as<std::string>();
          if (key != "match" && key != "serial") {
            problem(entry.first, absl::StrCat("unknown onic_discovery setting '", key,
                                              "'; known: match, serial"));
          }
        }
        const YAML::Node match = node["match"];
        if (!match || !(match.IsScalar() || (match.IsSequence() && match.size() > 0))) {
          problem(node,
                  "onic_discovery.match needs one or more VENDOR:DEVICE patterns (e.g. "
                  "[\"10ee:9038\"])");
        } else {
          std::vector<std::string> texts;
          if (match.IsScalar()) texts.push_back(match.as<std::string>());
          for (const YAML::Node& one : match) texts.push_back(one.as<std::string>());
          for (const std::string& pattern : texts) {
            absl::StatusOr<OnicMatch> parsed = ParseOnicMatch(pattern);
            if (parsed.ok()) {
              discovery.match.push_back(*parsed);
            } else {
              problem(match, parsed.status().message());
            }
          }
        }
        if (node["serial"]) {
          discovery.serial = node["serial"].as<std::string>();
          if (absl::Status checked = CheckSerialTemplate(discovery.serial); !checked.ok()) {
            problem(node["serial"], checked.message());
          }
        }
        if (root["onics"]) {
          problem(node, "give onics (a hand list) or onic_discovery, not both");
        }
        config.onic_discovery = std::move(discovery);
      }
    }
  } catch (const YAML::Exception& e) {
    problems.push_back(absl::StrCat(file_name, ":", e.mark.line + 1, ": ", e.msg));
  }
  if (problems.empty() && (config.insecure || TlsFilesGiven(config) > 0)) {
    if (absl::Status tls = CheckAgentTls(config); !tls.ok()) {
      YAML::Node at = root["insecure"];
      for (const char* key : {"tls_key_file", "tls_cert_file", "tls_ca_file"}) {
        if (!config.insecure && root[key]) at = root[key];
      }
      problem(at, tls.message());
    }
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  return config;
}

absl::StatusOr<AgentConfig> ReadAgentConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, "agent config file");
  if (!text.ok()) return text.status();
  absl::StatusOr<AgentConfig> config = ParseAgentConfig(*text, path);
  if (!config.ok()) return config.status();
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  for (std::string* file : {&config->tls_ca_file, &config->tls_cert_file, &config->tls_key_file}) {
    if (!file->empty() && std::filesystem::path(*file).is_relative()) {
      *file = (folder / *file).string();
    }
  }
  return config;
}

absl::Status CheckAgentTls(const AgentConfig& config) {
  const int files = TlsFilesGiven(config);
  if (config.insecure && files > 0) {
    return absl::InvalidArgumentError(
        "insecure: true with tls_ca_file/tls_cert_file/tls_key_file: the agent dials fleetd "
        "either in plaintext (insecure) or with mutual TLS (the three files), not both");
  }
  if (config.insecure || files == 3) return absl::OkStatus();
  if (files == 0) {
    return absl::InvalidArgumentError(
        "no TLS credentials to dial fleetd: set tls_ca_file, tls_cert_file and tls_key_file "
        "(or --tls-ca-file, --tls-cert-file, --tls-key-file), or insecure: true (--insecure) "
        "for a fleetd started with --insecure");
  }
  std::vector<std::string> missing;
  if (config.tls_ca_file.empty()) missing.push_back("tls_ca_file");
  if (config.tls_cert_file.empty()) missing.push_back("tls_cert_file");
  if (config.tls_key_file.empty()) missing.push_back("tls_key_file");
  return absl::InvalidArgumentError(absl::StrCat(
      "no ", absl::StrJoin(missing, " and "),
      ": tls_ca_file, tls_cert_file and tls_key_file go together (mutual TLS to fleetd)"));
}

}  // namespace fleet::onic_agent
