#include "controller/cli/topology_spec.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "controller/base/yaml_text.h"
#include "fleet/v1/names.h"

namespace fleet::cli {
namespace {

// "s1c0-n0/2" is O-NIC s1c0-n0's port 2; anything else names a device.
v1::Endpoint ParseEndpoint(const std::string& text) {
  v1::Endpoint e;
  const size_t slash = text.rfind('/');
  uint32_t port = 0;
  if (slash != std::string::npos && absl::SimpleAtoi(text.substr(slash + 1), &port)) {
    e.mutable_onic_port()->set_onic(text.substr(0, slash));
    e.mutable_onic_port()->set_port(port);
  } else {
    e.set_device(text);
  }
  return e;
}

}  // namespace

absl::StatusOr<google::protobuf::Duration> ParseLease(absl::string_view text) {
  absl::Duration lease;
  if (!absl::ParseDuration(text, &lease) || lease == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a duration such as 90s, 10m or 1h30m"));
  }
  if (lease < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is negative; a lease is 0 (the server's default) or more"));
  }
  google::protobuf::Duration proto;
  const int64_t seconds = absl::IDivDuration(lease, absl::Seconds(1), &lease);
  proto.set_seconds(seconds);
  proto.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(lease)));
  return proto;
}

absl::StatusOr<v1::RequestTopologyRequest> ParseTopologySpec(absl::string_view text,
                                                             absl::string_view file_name) {
  absl::StatusOr<YAML::Node> loaded = LoadYaml(text, file_name);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node root = *loaded;
  std::vector<std::string> problems;
  auto problem = [&](const YAML::Node& node, absl::string_view what) {
    problems.push_back(absl::StrCat(file_name, ":", node.Mark().line + 1, ": ", what));
  };
  v1::RequestTopologyRequest request;
  try {
    if (!root.IsMap())
      return absl::InvalidArgumentError(absl::StrCat(file_name, ": must be a mapping"));
    for (const auto& entry : root) {
      const std::string key = entry.first.as<std::string>();
      if (key != "tenant" && key != "name" && key != "lease" && key != "topology") {
        problem(entry.first,
                absl::StrCat("unknown key '", key, "'; expected tenant, name, lease, topology"));
      }
    }
    if (root["tenant"]) request.set_tenant(root["tenant"].as<std::string>());
    if (root["name"]) request.set_name(root["name"].as<std::string>());
    if (const YAML::Node lease_node = root["lease"]; lease_node) {
      absl::StatusOr<google::protobuf::Duration> lease =
          lease_node.IsScalar()
              ? ParseLease(lease_node.Scalar())
              : absl::InvalidArgumentError("must be a duration such as 90s, 10m or 1h30m");
      if (lease.ok()) {
        *request.mutable_lease() = *lease;
      } else {
        problem(lease_node, absl::StrCat("lease: ", lease.status().message()));
      }
    }
    const YAML::Node topology = root["topology"];
    if (!topology || !topology.IsMap()) {
      problem(root, "'topology' (with template: or links:) is required");
    } else if (topology["template"]) {
      const YAML::Node t = topology["template"];
      v1::TemplateSpec* spec = request.mutable_topology()->mutable_template_();
      const std::string kind = t["kind"] ? t["kind"].as<std::string>() : "";
      std::optional<v1::TemplateKind> parsed = v1::Parse<v1::TemplateKind>(kind);
      if (!parsed) {
        problem(t, absl::StrCat("template.kind '", kind, "' is not one of: ",
                                absl::StrJoin(v1::Names<v1::TemplateKind>(), ", ")));
      } else {
        spec->set_kind(*parsed);
      }
      if (t["members"] && t["members"].IsSequence()) {
        for (const YAML::Node& m : t["members"])
          spec->mutable_members()->add_devices(m.as<std::string>());
      } else {
        problem(t, "template.members must be a list of device ids");
      }
      if (t["width"]) spec->set_width(t["width"].as<uint32_t>());
    } else if (topology["links"] && topology["links"].IsSequence()) {
      v1::LinksSpec* links = request.mutable_topology()->mutable_links();
      for (const YAML::Node& l : topology["links"]) {
        if (!l["a"] || !l["b"]) {
          problem(l, "a link needs a and b");
          continue;
        }
        v1::Link* link = links->add_links();
        *link->mutable_a() = ParseEndpoint(l["a"].as<std::string>());
        *link->mutable_b() = ParseEndpoint(l["b"].as<std::string>());
        if (l["duplex"]) link->set_duplex(l["duplex"].as<bool>());
        if (l["width"]) link->set_width(l["width"].as<uint32_t>());
      }
    } else {
      problem(topology, "topology needs template: or links:");
    }
  } catch (const YAML::Exception& e) {
    problems.push_back(absl::StrCat(file_name, ":", e.mark.line + 1, ": ", e.msg));
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  return request;
}

absl::StatusOr<v1::RequestTopologyRequest> ReadTopologySpecFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, "topology request file");
  if (!text.ok()) return text.status();
  return ParseTopologySpec(*text, path);
}

}  // namespace fleet::cli
