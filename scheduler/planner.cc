#include "scheduler/planner.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/base/status_macros.h"
#include "fleet/v1/names.h"

namespace fleet::scheduler {
namespace {

// Which sides of a port a use needs.
struct Sides {
  bool tx = false;
  bool rx = false;
};

std::string PortName(const OnicPortState& st) { return absl::StrCat(st.onic, "/", st.port); }

class Planner {
 public:
  Planner(const FabricSnapshot& snapshot, std::string tenant)
      : snapshot_(snapshot), tenant_(std::move(tenant)) {}

  absl::StatusOr<v1::Plan> Plan(const v1::TopologySpec& spec) {
    switch (spec.form_case()) {
      case v1::TopologySpec::kLinks:
        RETURN_IF_ERROR(Links(spec.links()));
        break;
      case v1::TopologySpec::kTemplate:
        RETURN_IF_ERROR(Template(spec.template_()));
        break;
      case v1::TopologySpec::kAttach:
        return absl::UnimplementedError("topology.attach is not supported by this planner yet");
      case v1::TopologySpec::kAllToAll:
        return absl::UnimplementedError("topology.all_to_all is not supported by this planner yet");
      case v1::TopologySpec::kTraffic:
        return absl::UnimplementedError("topology.traffic is not supported by this planner yet");
      default:
        return absl::InvalidArgumentError("topology: no form given (links, template, ...)");
    }
    return plan_;
  }

 private:
  // Why `st` cannot give `sides` to this request, or "".
  std::string Problem(const OnicPortState& st, Sides sides) const {
    if (!st.unusable.empty()) return st.unusable;
    auto held = [&](const std::string& holder, bool taken, const char* side) -> std::string {
      if (taken) return absl::StrCat(side, " is used twice by this request");
      if (holder.empty()) return "";
      const std::string owner = snapshot_.TenantOf(holder);
      if (!owner.empty() && owner != tenant_)
        return absl::StrCat(side, " belongs to another tenant");
      return absl::StrCat(side, " is in a circuit of ", holder);
    };
    const std::pair<std::string, uint32_t> key{st.onic, st.port};
    if (sides.tx) {
      if (std::string p = held(st.tx_holder, taken_tx_.contains(key), "tx"); !p.empty()) return p;
    }
    if (sides.rx) {
      if (std::string p = held(st.rx_holder, taken_rx_.contains(key), "rx"); !p.empty()) return p;
    }
    return "";
  }

  void Mark(const OnicPortState& st, Sides sides) {
    if (sides.tx) taken_tx_.insert({st.onic, st.port});
    if (sides.rx) taken_rx_.insert({st.onic, st.port});
    if (ports_used_.insert({st.onic, st.port}).second) {
      v1::OnicPortRef* ref = plan_.add_ports_used();
      ref->set_onic(st.onic);
      ref->set_port(st.port);
    }
    if (members_.insert(st.device).second) plan_.add_members(st.device);
  }

  // The port an endpoint resolves to, with `sides` reserved for this plan.
  absl::StatusOr<const OnicPortState*> Take(const v1::Endpoint& endpoint, Sides sides,
                                            const std::string& field) {
    const char* needed = sides.tx && sides.rx ? "tx and rx" : sides.tx ? "tx" : "rx";
    if (endpoint.has_onic_port()) {
      const v1::OnicPortRef& ref = endpoint.onic_port();
      if (!snapshot_.HasOnic(ref.onic())) {
        return absl::NotFoundError(absl::StrCat(field, ": onic ", ref.onic(), " not found"));
      }
      const OnicPortState* st = snapshot_.Port(ref.onic(), ref.port());
      if (st == nullptr) {
        return absl::NotFoundError(absl::StrCat(field, ": onic ", ref.onic(), " has no port ",
                                                ref.port(), " (ports are 1 and 2)"));
      }
      if (std::string problem = Problem(*st, sides); !problem.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat(field, ": onic ", PortName(*st), " cannot be used: ", problem));
      }
      Mark(*st, sides);
      return st;
    }
    const std::string& device = endpoint.device();
    if (device.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": names neither an O-NIC port nor a device"));
    }
    if (!snapshot_.HasDevice(device)) {
      return absl::NotFoundError(absl::StrCat(field, ": device ", device, " not found"));
    }
    std::vector<std::string> why;
    for (const OnicPortState* st : snapshot_.DevicePorts(device)) {
      std::string problem = Problem(*st, sides);
      if (problem.empty()) {
        Mark(*st, sides);
        return st;
      }
      why.push_back(absl::StrCat(PortName(*st), " ", problem));
    }
    if (why.empty()) {
      return absl::ResourceExhaustedError(
          absl::StrCat(field, ": device ", device, " has no O-NIC"));
    }
    return absl::ResourceExhaustedError(absl::StrCat(field, ": device ", device,
                                                     " has no port with ", needed,
                                                     " free: ", absl::StrJoin(why, "; ")));
  }

  absl::Status Circuit(const OnicPortState& src, const OnicPortState& dst) {
    if (src.tx.switch_id() != dst.rx.switch_id()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "circuit ", PortName(src), " -> ", PortName(dst), ": its tx fiber enters switch ",
          src.tx.switch_id(), " and its rx fiber leaves switch ", dst.rx.switch_id(),
          "; this planner does not route over trunks"));
    }
    v1::Circuit* c = plan_.add_circuits();
    c->mutable_source()->set_onic(src.onic);
    c->mutable_source()->set_port(src.port);
    c->mutable_destination()->set_onic(dst.onic);
    c->mutable_destination()->set_port(dst.port);
    c->set_state(v1::CIRCUIT_STATE_PLANNED);
    v1::CrossConnect* x = c->add_cross_connects();
    x->set_switch_id(src.tx.switch_id());
    x->set_ingress(src.tx.port());
    x->set_egress(dst.rx.port());
    *plan_.add_add() = *x;
    return absl::OkStatus();
  }

  // A duplex link: one port at each end, a circuit each way.
  absl::Status Duplex(const v1::Endpoint& a, const v1::Endpoint& b, const std::string& field_a,
                      const std::string& field_b) {
    absl::StatusOr<const OnicPortState*> pa = Take(a, {true, true}, field_a);
    if (!pa.ok()) return pa.status();
    absl::StatusOr<const OnicPortState*> pb = Take(b, {true, true}, field_b);
    if (!pb.ok()) return pb.status();
    RETURN_IF_ERROR(Circuit(**pa, **pb));
    return Circuit(**pb, **pa);
  }

  static bool SameEndpoint(const v1::Endpoint& a, const v1::Endpoint& b) {
    return a.SerializeAsString() == b.SerializeAsString();
  }

  absl::Status Links(const v1::LinksSpec& links) {
    if (links.links().empty()) return absl::InvalidArgumentError("topology.links: no links given");
    for (int i = 0; i < links.links_size(); ++i) {
      const v1::Link& link = links.links(i);
      const std::string field = absl::StrCat("topology.links[", i, "]");
      const uint32_t width = std::max(1u, link.width());
      if (SameEndpoint(link.a(), link.b())) {
        return absl::InvalidArgumentError(absl::StrCat(field, ": a and b are the same endpoint"));
      }
      if (width > 1 && (link.a().has_onic_port() || link.b().has_onic_port())) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".width: ", width, " parallel circuits need device endpoints"));
      }
      for (uint32_t k = 0; k < width; ++k) {
        if (link.duplex()) {
          RETURN_IF_ERROR(Duplex(link.a(), link.b(), field + ".a", field + ".b"));
          continue;
        }
        absl::StatusOr<const OnicPortState*> src = Take(link.a(), {true, false}, field + ".a");
        if (!src.ok()) return src.status();
        absl::StatusOr<const OnicPortState*> dst = Take(link.b(), {false, true}, field + ".b");
        if (!dst.ok()) return dst.status();
        RETURN_IF_ERROR(Circuit(**src, **dst));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Template(const v1::TemplateSpec& t) {
    const bool uni = t.kind() == v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL;
    const bool bi = t.kind() == v1::TEMPLATE_KIND_RING_BIDIRECTIONAL;
    if (!uni && !bi) {
      if (t.kind() == v1::TEMPLATE_KIND_UNSPECIFIED) {
        return absl::InvalidArgumentError("topology.template.kind is not set");
      }
      return absl::UnimplementedError(
          absl::StrCat("topology.template: the ", v1::Name(t.kind()),
                       " template is not supported by this planner yet"));
    }
    if (!t.members().counts().empty()) {
      return absl::UnimplementedError(
          "topology.template.members.counts: choosing members by count is not supported by this "
          "planner yet; name the devices");
    }
    const auto& names = t.members().devices();
    if (names.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "topology.template.members: a ring needs at least 2 devices, got ", names.size()));
    }
    std::set<std::string> seen;
    for (const std::string& name : names) {
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("topology.template.members: device ", name, " is named twice"));
      }
    }
    const uint32_t width = std::max(1u, t.width());
    const int n = names.size();
    auto member = [&](int i) {
      v1::Endpoint e;
      e.set_device(names[i % n]);
      return e;
    };
    auto field = [&](int i) {
      return absl::StrCat("topology.template.members[", i % n, "] (", names[i % n], ")");
    };
    for (uint32_t k = 0; k < width; ++k) {
      if (bi) {
        // A bidirectional ring of two is a double link; of n > 2, n duplex links.
        for (int i = 0; i < (n == 2 ? 2 : n); ++i) {
          RETURN_IF_ERROR(Duplex(member(i), member(i + 1), field(i), field(i + 1)));
        }
        continue;
      }
      // Unidirectional: each member's port sends to the next member and hears the previous.
      std::vector<const OnicPortState*> ports;
      for (int i = 0; i < n; ++i) {
        absl::StatusOr<const OnicPortState*> p = Take(member(i), {true, true}, field(i));
        if (!p.ok()) return p.status();
        ports.push_back(*p);
      }
      for (int i = 0; i < n; ++i) RETURN_IF_ERROR(Circuit(*ports[i], *ports[(i + 1) % n]));
    }
    return absl::OkStatus();
  }

  const FabricSnapshot& snapshot_;
  const std::string tenant_;
  std::set<std::pair<std::string, uint32_t>> taken_tx_, taken_rx_, ports_used_;
  std::set<std::string> members_;
  v1::Plan plan_;
};

}  // namespace

absl::StatusOr<v1::Plan> PlanTopology(const FabricSnapshot& snapshot, const PlanRequest& request) {
  if (request.tenant.empty()) return absl::InvalidArgumentError("tenant is empty");
  return Planner(snapshot, request.tenant).Plan(request.topology);
}

}  // namespace fleet::scheduler
