#include "controller/auth/policy.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/yaml_text.h"

namespace fleet::auth {
namespace {

// The text after the last '/' (or the ':' of "cn:NAME"): a job identity's tenant, an agent's
// host.
std::string LastSegment(absl::string_view identity) {
  const size_t slash = identity.find_last_of("/:");
  return std::string(slash == absl::string_view::npos ? identity : identity.substr(slash + 1));
}

}  // namespace

absl::StatusOr<Policy> Policy::Parse(absl::string_view text, absl::string_view file_name) {
  absl::StatusOr<YAML::Node> loaded = LoadYaml(text, file_name);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node root = *loaded;
  Policy policy;
  if (!root || root.IsNull()) return policy;
  std::vector<std::string> problems;
  auto problem = [&](const YAML::Node& node, const auto&... what) {
    problems.push_back(absl::StrCat(file_name, ":", node.Mark().line + 1, ": ", what...));
  };
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": must be a mapping with the key 'grants'"));
  }
  for (const auto& entry : root) {
    if (entry.first.Scalar() != "grants") {
      problem(entry.first, "unknown key '", entry.first.Scalar(), "' (known: grants)");
    }
  }
  const YAML::Node grants = root["grants"];
  if (grants && !grants.IsSequence()) problem(grants, "'grants' must be a list");
  for (size_t i = 0; grants && grants.IsSequence() && i < grants.size(); ++i) {
    const YAML::Node g = grants[i];
    if (!g.IsMap()) {
      problem(g, "grants[", i, "] must be a mapping of identity, role and tenants");
      continue;
    }
    for (const auto& entry : g) {
      const std::string key = entry.first.Scalar();
      if (key != "identity" && key != "role" && key != "tenants") {
        problem(entry.first, "grants[", i, "]: unknown key '", key,
                "' (known: identity, role, tenants)");
      }
    }
    Rule rule;
    const YAML::Node identity = g["identity"];
    if (!identity || !identity.IsScalar() || identity.Scalar().empty()) {
      problem(g, "grants[", i, "].identity must be a non-empty string");
    } else {
      rule.identity = identity.Scalar();
      const size_t star = rule.identity.find('*');
      if (star != std::string::npos && star + 1 != rule.identity.size()) {
        problem(identity, "grants[", i, "].identity '", rule.identity,
                "': '*' may only end the identity (a prefix match)");
      }
      rule.prefix = star != std::string::npos;
      if (rule.prefix) rule.identity.pop_back();
    }
    const YAML::Node role = g["role"];
    std::optional<Role> parsed = role && role.IsScalar() ? ParseRole(role.Scalar()) : std::nullopt;
    if (!parsed) {
      problem(role ? role : g, "grants[", i, "].role '",
              role && role.IsScalar() ? role.Scalar() : "",
              "' is not one of viewer, job, operator, agent");
    } else {
      rule.role = *parsed;
    }
    if (const YAML::Node tenants = g["tenants"]; tenants) {
      if (parsed && *parsed != Role::kJob) {
        problem(tenants, "grants[", i, "].tenants: only a job acts for tenants, not role ",
                RoleName(*parsed));
      }
      if (!tenants.IsSequence() || tenants.size() == 0) {
        problem(tenants, "grants[", i, "].tenants must be a non-empty list of tenant names");
      } else {
        for (const YAML::Node& t : tenants) {
          if (!t.IsScalar() || t.Scalar().empty()) {
            problem(t, "grants[", i, "].tenants: a tenant must be a non-empty name");
          } else {
            rule.tenants.push_back(t.Scalar());
          }
        }
      }
    }
    policy.rules_.push_back(std::move(rule));
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  return policy;
}

absl::StatusOr<Policy> Policy::ReadFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, "policy file");
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

std::optional<Grant> Policy::Resolve(absl::string_view identity) const {
  if (identity.empty()) return std::nullopt;
  for (const Rule& rule : rules_) {
    const bool matches =
        rule.prefix ? absl::StartsWith(identity, rule.identity) : identity == rule.identity;
    if (!matches) continue;
    Grant grant;
    grant.role = rule.role;
    if (rule.role == Role::kJob) {
      grant.tenants = rule.tenants;
      if (grant.tenants.empty()) grant.tenants.push_back(LastSegment(identity));
      if (grant.tenants.front().empty()) return std::nullopt;
    }
    if (rule.role == Role::kAgent) {
      grant.host = LastSegment(identity);
      if (grant.host.empty()) return std::nullopt;
    }
    return grant;
  }
  return std::nullopt;
}

std::string IdentityOf(const std::vector<std::string>& uris, const std::string& common_name) {
  if (uris.size() == 1) return uris.front();
  if (uris.empty() && !common_name.empty()) return absl::StrCat("cn:", common_name);
  return "";
}

}  // namespace fleet::auth
