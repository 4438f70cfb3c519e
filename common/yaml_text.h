// The project's YAML files (inventory, fleetd and agent configs) are read the same way:
// whole text in, a yaml-cpp node out, and a syntax error named by file and line.
#ifndef FLEET_COMMON_YAML_TEXT_H_
#define FLEET_COMMON_YAML_TEXT_H_

#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleet {

// INVALID_ARGUMENT "FILE:LINE: YAML syntax error: ..." on malformed text, and
// "FILE:LINE: not UTF-8 text (byte 0xff at column C)" on text that is not UTF-8 (YAML's own
// rule, and every string read goes into a proto whose strings must be UTF-8), and
// "FILE:LINE: a NUL byte is not YAML text (...)" on a NUL byte, so every string read is UTF-8.
absl::StatusOr<YAML::Node> LoadYaml(absl::string_view text, absl::string_view file_name);

// The file's whole text; NOT_FOUND "cannot read WHAT PATH".
absl::StatusOr<std::string> ReadTextFile(const std::string& path, absl::string_view what);

}  // namespace fleet

#endif  // FLEET_COMMON_YAML_TEXT_H_
