#include "switch_adapters/polatis/polatis_switch.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include "absl/strings/str_cat.h"

namespace fleet::polatis {

std::unique_ptr<switch_adapters::OpticalSwitch> NewPolatisSwitch(
    const PolatisSwitchOptions& options) {
  if (options.protocol == Protocol::kRest) return NewRestSwitch(options);
  return NewTl1Switch(options, NewTcpDialer());
}

absl::StatusOr<std::map<std::string, Credentials>> ReadCredentialsFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("switch credentials file ", path, " does not exist"));
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    // The message names a line and column, not the file's contents.
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", e.mark.line + 1, ": not a valid credentials file"));
  }
  if (!root.IsMap() || !root["switches"] || !root["switches"].IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected 'switches:' mapping switch ids to {user, password}"));
  }
  std::map<std::string, Credentials> out;
  for (const auto& entry : root["switches"]) {
    const std::string id = entry.first.as<std::string>();
    const YAML::Node& c = entry.second;
    if (!c.IsMap() || !c["user"] || !c["password"] || !c["user"].IsScalar() ||
        !c["password"].IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": switch ", id, " needs 'user' and 'password'"));
    }
    out[id] = Credentials{c["user"].Scalar(), c["password"].Scalar()};
  }
  return out;
}

}  // namespace fleet::polatis
