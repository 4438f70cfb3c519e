#include "controller/cli/topology_spec.h"

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/proto_time.h"
#include "common/yaml_text.h"
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
  return ToProtoDuration(lease);
}

namespace {

// Reads one request file, collecting every problem as "FILE:LINE: FIELD: ..." rather than
// stopping at the first. Each form's fields are checked by name, so a misspelt key is an error
// instead of a silently dropped option.
class SpecReader {
 public:
  explicit SpecReader(absl::string_view file_name) : file_name_(file_name) {}

  std::vector<std::string>& problems() { return problems_; }

  void Problem(const YAML::Node& node, absl::string_view what) {
    problems_.push_back(absl::StrCat(file_name_, ":", node.Mark().line + 1, ": ", what));
  }

  // Every key of `map` is one of `known`; `field` is how the mapping is named in messages.
  void CheckKeys(const YAML::Node& map, absl::string_view field,
                 std::initializer_list<absl::string_view> known) {
    for (const auto& entry : map) {
      const std::string key = entry.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        Problem(entry.first, absl::StrCat(field, field.empty() ? "" : ": ", "unknown key '", key,
                                          "'; expected ", absl::StrJoin(known, ", ")));
      }
    }
  }

  bool Mapping(const YAML::Node& node, absl::string_view field) {
    if (node.IsMap()) return true;
    Problem(node, absl::StrCat(field, " must be a mapping"));
    return false;
  }

  std::optional<std::string> Text(const YAML::Node& node, absl::string_view field) {
    if (node.IsScalar() && !node.Scalar().empty()) return node.Scalar();
    Problem(node, absl::StrCat(field, " must be a non-empty string"));
    return std::nullopt;
  }

  std::optional<uint32_t> Uint(const YAML::Node& node, absl::string_view field) {
    uint32_t value = 0;
    if (node.IsScalar() && absl::SimpleAtoi(node.Scalar(), &value)) return value;
    Problem(node, absl::StrCat(field, " must be a non-negative integer"));
    return std::nullopt;
  }

  std::optional<bool> Bool(const YAML::Node& node, absl::string_view field) {
    bool value = false;
    if (node.IsScalar() && YAML::convert<bool>::decode(node, value)) return value;
    Problem(node, absl::StrCat(field, " must be true or false"));
    return std::nullopt;
  }

  std::optional<double> Number(const YAML::Node& node, absl::string_view field) {
    double value = 0;
    if (node.IsScalar() && absl::SimpleAtod(node.Scalar(), &value) && value >= 0) return value;
    Problem(node, absl::StrCat(field, " must be a non-negative number"));
    return std::nullopt;
  }

  template <typename E>
  std::optional<E> Enum(const YAML::Node& node, absl::string_view field) {
    const std::string text = node.IsScalar() ? node.Scalar() : "";
    if (std::optional<E> value = v1::Parse<E>(text)) return value;
    Problem(node, absl::StrCat(field, " '", text,
                               "' is not one of: ", absl::StrJoin(v1::Names<E>(), ", ")));
    return std::nullopt;
  }

  // on_failure: {replace: bool, within: DURATION, max_replacements: N, spares: same-switch|any}.
  void FailurePolicy(const YAML::Node& node, v1::FailurePolicy* policy) {
    if (!Mapping(node, "on_failure")) return;
    CheckKeys(node, "on_failure", {"replace", "within", "max_replacements", "spares"});
    if (const YAML::Node n = node["replace"]) {
      if (auto v = Bool(n, "on_failure.replace")) policy->set_replace(*v);
    }
    if (const YAML::Node n = node["within"]) {
      absl::Duration within;
      if (!n.IsScalar() || !absl::ParseDuration(n.Scalar(), &within) ||
          within <= absl::ZeroDuration() || within > absl::Hours(24)) {
        Problem(n, absl::StrCat("on_failure.within: '", n.IsScalar() ? n.Scalar() : "",
                                "' is not a duration from 1ms to 24h, such as 2s or 500ms"));
      } else {
        *policy->mutable_within() = ToProtoDuration(within);
      }
    }
    if (const YAML::Node n = node["max_replacements"]) {
      if (auto v = Uint(n, "on_failure.max_replacements")) policy->set_max_replacements(*v);
    }
    if (const YAML::Node n = node["spares"]) {
      const std::string text = n.IsScalar() ? n.Scalar() : "";
      if (text == "same-switch" || text == "same_switch") {
        policy->set_spares(v1::SPARE_SCOPE_SAME_SWITCH);
      } else if (text == "any") {
        policy->set_spares(v1::SPARE_SCOPE_ANY);
      } else {
        Problem(n, absl::StrCat("on_failure.spares '", text, "' is not one of: same-switch, any"));
      }
    }
  }

  // A list of names, or {devices: [names], count: [{kind, count, cluster, host}]}.
  void Members(const YAML::Node& node, absl::string_view field, v1::MemberSet* members) {
    if (node.IsMap()) {
      CheckKeys(node, field, {"devices", "count"});
      if (const YAML::Node names = node["devices"]) {
        Names(names, absl::StrCat(field, ".devices"), members);
      }
      if (const YAML::Node counts = node["count"]) {
        const std::string count_field = absl::StrCat(field, ".count");
        if (!counts.IsSequence()) {
          Problem(counts,
                  absl::StrCat(count_field, " must be a list of {kind, count, cluster, host}"));
        } else {
          for (size_t i = 0; i < counts.size(); ++i) {
            Count(counts[i], absl::StrCat(count_field, "[", i, "]"), members->add_counts());
          }
        }
      }
      if (members->devices().empty() && members->counts().empty()) {
        Problem(node, absl::StrCat(field, " needs devices: or count:"));
      }
    } else if (node.IsSequence()) {
      Names(node, field, members);
    } else {
      Problem(node, absl::StrCat(field,
                                 " must be a list of device names or a mapping with devices: "
                                 "and/or count: [{kind, count, cluster, host}]"));
    }
  }

  void Topology(const YAML::Node& node, const std::string& prefix, v1::TopologySpec* spec) {
    const std::string field = prefix.empty() ? "topology" : absl::StrCat(prefix, "topology");
    if (!Mapping(node, field)) return;
    CheckKeys(node, field,
              {"template", "links", "attach", "all_to_all", "traffic", "max_switch_hops"});
    if (const YAML::Node n = node["max_switch_hops"]) {
      if (auto v = Uint(n, absl::StrCat(field, ".max_switch_hops"))) spec->set_max_switch_hops(*v);
    }
    if (node.size() != (node["max_switch_hops"] ? 2u : 1u)) {
      Problem(node, absl::StrCat(field,
                                 " needs exactly one of template:, links:, attach:, all_to_all: "
                                 "or traffic:"));
      return;
    }
    // The top-level topology's fields keep their short names ("template.kind").
    const std::string inner = prefix.empty() ? "" : absl::StrCat(field, ".");
    if (const YAML::Node t = node["template"]) {
      Template(t, absl::StrCat(inner, "template"), spec->mutable_template_());
    } else if (const YAML::Node l = node["links"]) {
      Links(l, absl::StrCat(inner, "links"), spec->mutable_links());
    } else if (const YAML::Node a = node["attach"]) {
      Attach(a, absl::StrCat(inner, "attach"), spec->mutable_attach());
    } else if (const YAML::Node all = node["all_to_all"]) {
      const std::string f = absl::StrCat(inner, "all_to_all");
      if (!Mapping(all, f)) return;
      CheckKeys(all, f, {"members"});
      Required(all, "members", f, [&](const YAML::Node& m, const std::string& mf) {
        Members(m, mf, spec->mutable_all_to_all()->mutable_members());
      });
    } else if (const YAML::Node traffic = node["traffic"]) {
      Traffic(traffic, absl::StrCat(inner, "traffic"), spec->mutable_traffic());
    }
  }

  // `phases:` of a request: a non-empty list of {name, topology}, each name once.
  void Phases(const YAML::Node& phases, v1::RequestTopologyRequest* request) {
    if (!phases.IsSequence() || phases.size() == 0) {
      Problem(phases, "phases must be a non-empty list of {name, topology}");
      return;
    }
    for (size_t i = 0; i < phases.size(); ++i) {
      const YAML::Node p = phases[i];
      const std::string field = absl::StrCat("phases[", i, "]");
      if (!Mapping(p, field)) continue;
      CheckKeys(p, field, {"name", "topology"});
      v1::Phase* phase = request->add_phases();
      if (const YAML::Node n = p["name"]) {
        if (auto v = Text(n, field + ".name")) phase->set_name(*v);
      } else {
        Problem(p, absl::StrCat(field, ".name is required"));
      }
      for (int j = 0; j + 1 < request->phases_size(); ++j) {
        if (!phase->name().empty() && request->phases(j).name() == phase->name()) {
          Problem(p["name"], absl::StrCat(field, ".name '", phase->name(), "' is also phases[", j,
                                          "]'s name"));
        }
      }
      if (const YAML::Node t = p["topology"]) {
        Topology(t, field + ".", phase->mutable_topology());
      } else {
        Problem(p, absl::StrCat(field, ".topology is required"));
      }
    }
  }

 private:
  template <typename Read>
  void Required(const YAML::Node& map, absl::string_view key, absl::string_view field, Read read) {
    const std::string name = absl::StrCat(field, ".", key);
    if (const YAML::Node value = map[std::string(key)]) {
      read(value, name);
    } else {
      Problem(map, absl::StrCat(name, " is required"));
    }
  }

  void Names(const YAML::Node& node, absl::string_view field, v1::MemberSet* members) {
    if (!node.IsSequence()) {
      Problem(node, absl::StrCat(field, " must be a list of device names"));
      return;
    }
    for (size_t i = 0; i < node.size(); ++i) {
      if (std::optional<std::string> name = Text(node[i], absl::StrCat(field, "[", i, "]"))) {
        members->add_devices(*name);
      }
    }
  }

  void Count(const YAML::Node& node, const std::string& field, v1::DeviceCount* count) {
    if (!Mapping(node, field)) return;
    CheckKeys(node, field, {"kind", "count", "cluster", "host"});
    Required(node, "kind", field, [&](const YAML::Node& n, const std::string& f) {
      if (auto kind = Enum<v1::DeviceKind>(n, f)) count->set_kind(*kind);
    });
    Required(node, "count", field, [&](const YAML::Node& n, const std::string& f) {
      std::optional<uint32_t> value = Uint(n, f);
      if (value && *value == 0) {
        Problem(n, absl::StrCat(f, " must be at least 1"));
      } else if (value) {
        count->set_count(*value);
      }
    });
    if (const YAML::Node c = node["cluster"]) {
      if (auto cluster = Text(c, absl::StrCat(field, ".cluster"))) count->set_cluster(*cluster);
    }
    if (const YAML::Node h = node["host"]) {
      if (auto host = Text(h, absl::StrCat(field, ".host"))) count->set_host(*host);
    }
  }

  void Template(const YAML::Node& t, const std::string& field, v1::TemplateSpec* spec) {
    if (!Mapping(t, field)) return;
    CheckKeys(t, field,
              {"kind", "members", "width", "duplex", "reverse", "hub", "fanout", "dimensions"});
    if (const YAML::Node kind = t["kind"]) {
      if (auto parsed = Enum<v1::TemplateKind>(kind, field + ".kind")) spec->set_kind(*parsed);
    } else {
      Problem(t, absl::StrCat(field, ".kind '' is not one of: ",
                              absl::StrJoin(v1::Names<v1::TemplateKind>(), ", ")));
    }
    Required(t, "members", field, [&](const YAML::Node& n, const std::string& f) {
      Members(n, f, spec->mutable_members());
    });
    if (const YAML::Node n = t["width"]) {
      if (auto v = Uint(n, field + ".width")) spec->set_width(*v);
    }
    if (const YAML::Node n = t["duplex"]) {
      if (auto v = Bool(n, field + ".duplex")) spec->set_duplex(*v);
    }
    if (const YAML::Node n = t["reverse"]) {
      if (auto v = Bool(n, field + ".reverse")) spec->set_reverse(*v);
    }
    if (const YAML::Node n = t["hub"]) {
      if (auto v = Text(n, field + ".hub")) spec->set_hub(*v);
    }
    if (const YAML::Node n = t["fanout"]) {
      if (auto v = Uint(n, field + ".fanout")) spec->set_fanout(*v);
    }
    if (const YAML::Node n = t["dimensions"]) {
      const std::string f = field + ".dimensions";
      if (!n.IsSequence()) {
        Problem(n, absl::StrCat(f, " must be a list such as [2, 4]"));
      } else {
        for (size_t i = 0; i < n.size(); ++i) {
          if (auto v = Uint(n[i], absl::StrCat(f, "[", i, "]"))) spec->add_dimensions(*v);
        }
      }
    }
  }

  void Links(const YAML::Node& node, const std::string& field, v1::LinksSpec* links) {
    if (!node.IsSequence()) {
      Problem(node, absl::StrCat(field, " must be a list of {a, b, duplex, width}"));
      return;
    }
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node l = node[i];
      const std::string f = absl::StrCat(field, "[", i, "]");
      if (!Mapping(l, f)) continue;
      CheckKeys(l, f, {"a", "b", "duplex", "width"});
      if (!l["a"] || !l["b"]) {
        Problem(l, absl::StrCat(f, " needs a and b"));
        continue;
      }
      v1::Link* link = links->add_links();
      if (auto a = Text(l["a"], f + ".a")) *link->mutable_a() = ParseEndpoint(*a);
      if (auto b = Text(l["b"], f + ".b")) *link->mutable_b() = ParseEndpoint(*b);
      if (const YAML::Node n = l["duplex"]) {
        if (auto v = Bool(n, f + ".duplex")) link->set_duplex(*v);
      }
      if (const YAML::Node n = l["width"]) {
        if (auto v = Uint(n, f + ".width")) link->set_width(*v);
      }
    }
  }

  void Attach(const YAML::Node& a, const std::string& field, v1::AttachSpec* spec) {
    if (!Mapping(a, field)) return;
    CheckKeys(a, field, {"host", "devices", "width"});
    Required(a, "host", field, [&](const YAML::Node& n, const std::string& f) {
      if (auto host = Text(n, f)) spec->set_host(*host);
    });
    Required(a, "devices", field, [&](const YAML::Node& n, const std::string& f) {
      Members(n, f, spec->mutable_devices());
    });
    if (const YAML::Node n = a["width"]) {
      if (auto v = Uint(n, field + ".width")) spec->set_width(*v);
    }
  }

  void Traffic(const YAML::Node& t, const std::string& field, v1::TrafficSpec* spec) {
    if (!Mapping(t, field)) return;
    CheckKeys(t, field, {"members", "matrix"});
    Required(t, "members", field, [&](const YAML::Node& n, const std::string& f) {
      Members(n, f, spec->mutable_members());
    });
    Required(t, "matrix", field, [&](const YAML::Node& n, const std::string& f) {
      if (!n.IsSequence()) {
        Problem(n, absl::StrCat(f, " must be a list of {source, destination, bytes}"));
        return;
      }
      for (size_t i = 0; i < n.size(); ++i) {
        const std::string ef = absl::StrCat(f, "[", i, "]");
        if (!Mapping(n[i], ef)) continue;
        CheckKeys(n[i], ef, {"source", "destination", "bytes"});
        v1::TrafficEntry* entry = spec->add_matrix();
        Required(n[i], "source", ef, [&](const YAML::Node& v, const std::string& vf) {
          if (auto x = Uint(v, vf)) entry->set_source(*x);
        });
        Required(n[i], "destination", ef, [&](const YAML::Node& v, const std::string& vf) {
          if (auto x = Uint(v, vf)) entry->set_destination(*x);
        });
        Required(n[i], "bytes", ef, [&](const YAML::Node& v, const std::string& vf) {
          if (auto x = Number(v, vf)) entry->set_bytes(*x);
        });
      }
    });
  }

  std::string file_name_;
  std::vector<std::string> problems_;
};

}  // namespace

absl::StatusOr<v1::RequestTopologyRequest> ParseTopologySpec(absl::string_view text,
                                                             absl::string_view file_name) {
  absl::StatusOr<YAML::Node> loaded = LoadYaml(text, file_name);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node root = *loaded;
  SpecReader reader(file_name);
  v1::RequestTopologyRequest request;
  try {
    if (!root.IsMap())
      return absl::InvalidArgumentError(absl::StrCat(file_name, ": must be a mapping"));
    reader.CheckKeys(root, "",
                     {"tenant", "name", "request_id", "lease", "topology", "phases",
                      "initial_phase", "prepare_next_phase", "on_failure"});
    if (const YAML::Node n = root["on_failure"])
      reader.FailurePolicy(n, request.mutable_on_failure());
    if (const YAML::Node n = root["tenant"]) {
      if (auto v = reader.Text(n, "tenant")) request.set_tenant(*v);
    }
    if (const YAML::Node n = root["request_id"]) {
      if (auto v = reader.Text(n, "request_id")) request.set_request_id(*v);
    }
    if (const YAML::Node n = root["name"]) {
      if (auto v = reader.Text(n, "name")) request.set_name(*v);
    }
    if (const YAML::Node lease_node = root["lease"]; lease_node) {
      absl::StatusOr<google::protobuf::Duration> lease =
          lease_node.IsScalar()
              ? ParseLease(lease_node.Scalar())
              : absl::InvalidArgumentError("must be a duration such as 90s, 10m or 1h30m");
      if (lease.ok()) {
        *request.mutable_lease() = *lease;
      } else {
        reader.Problem(lease_node, absl::StrCat("lease: ", lease.status().message()));
      }
    }
    const YAML::Node topology = root["topology"];
    const YAML::Node phases = root["phases"];
    if (topology && phases) {
      reader.Problem(phases, "phases: a request has topology: or phases:, not both");
    } else if (topology) {
      reader.Topology(topology, "", request.mutable_topology());
    } else if (phases) {
      reader.Phases(phases, &request);
    } else {
      reader.Problem(root,
                     "'topology' (with template:, links:, attach:, all_to_all: or traffic:) or "
                     "'phases' is required");
    }
    if (const YAML::Node n = root["initial_phase"]) {
      if (!phases) {
        reader.Problem(n, "initial_phase needs phases:");
      } else if (auto v = reader.Text(n, "initial_phase")) {
        const bool known = std::any_of(request.phases().begin(), request.phases().end(),
                                       [&](const v1::Phase& p) { return p.name() == *v; });
        if (!known && phases.IsSequence() && request.phases_size() == int(phases.size())) {
          reader.Problem(n, absl::StrCat("initial_phase '", *v, "' is not one of the phases"));
        }
        request.set_initial_phase(*v);
      }
    }
    if (const YAML::Node n = root["prepare_next_phase"]) {
      if (auto v = reader.Bool(n, "prepare_next_phase")) {
        if (*v && (!phases || !phases.IsSequence() || phases.size() != 2)) {
          reader.Problem(n,
                         "prepare_next_phase needs exactly two phases: make before break "
                         "keeps both on the switch, each on its own ports");
        }
        request.set_prepare_next_phase(*v);
      }
    }
  } catch (const YAML::Exception& e) {
    reader.problems().push_back(absl::StrCat(file_name, ":", e.mark.line + 1, ": ", e.msg));
  }
  if (!reader.problems().empty())
    return absl::InvalidArgumentError(absl::StrJoin(reader.problems(), "\n"));
  return request;
}

absl::StatusOr<v1::RequestTopologyRequest> ReadTopologySpecFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, "topology request file");
  if (!text.ok()) return text.status();
  return ParseTopologySpec(*text, path);
}

}  // namespace fleet::cli
