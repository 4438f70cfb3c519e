#include "controller/base/yaml_text.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace fleet {

absl::StatusOr<YAML::Node> LoadYaml(absl::string_view text, absl::string_view file_name) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ":", e.mark.line + 1, ": YAML syntax error: ", e.msg));
  }
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace fleet
