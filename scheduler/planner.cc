#include "scheduler/planner.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "fleet/v1/names.h"
#include "scheduler/limits.h"
#include "scheduler/member_selection.h"
#include "scheduler/shapes.h"
#include "scheduler/traffic_matching.h"
#include "scheduler/trunk_routing.h"

namespace fleet::scheduler {
namespace {

// Which sides of a port a use needs.
struct Sides {
  bool tx = false;
  bool rx = false;
};

std::string PortName(const OnicPortState& st) { return v1::PortName(st.onic, st.port); }

const char* SidesName(Sides sides) {
  return sides.tx && sides.rx ? "tx and rx" : sides.tx ? "tx" : "rx";
}

v1::Endpoint DeviceEndpoint(const std::string& device) {
  v1::Endpoint e;
  e.set_device(device);
  return e;
}

// "field[i] (device)", how refusals name a member.
std::string MemberField(const std::string& field, const std::vector<std::string>& names, int i) {
  return absl::StrCat(field, "[", i, "] (", names[i], ")");
}

// At least two members; counted ones are wholly free devices, for forms that use every port.
absl::StatusOr<std::vector<std::string>> WholeMembers(const FabricSnapshot& snapshot,
                                                      const v1::MemberSet& members,
                                                      const std::string& field,
                                                      const std::string& what) {
  const int n = MemberCount(members);
  if (n < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", what, " needs at least 2 members, got ", n));
  }
  return PickMembers(snapshot, members, std::vector<int>(n, kWholeDevice), "", field);
}

class Planner {
 public:
  Planner(const FabricSnapshot& snapshot, std::string tenant, uint32_t max_switch_hops,
          std::set<std::pair<std::string, uint32_t>> avoid = {})
      : snapshot_(snapshot),
        tenant_(tenant),
        avoid_(std::move(avoid)),
        router_(snapshot, max_switch_hops, tenant) {}

  absl::StatusOr<v1::Plan> Plan(const v1::TopologySpec& spec) {
    switch (spec.form_case()) {
      case v1::TopologySpec::kLinks:
        RETURN_IF_ERROR(Links(spec.links()));
        break;
      case v1::TopologySpec::kTemplate:
        RETURN_IF_ERROR(Template(spec.template_()));
        break;
      case v1::TopologySpec::kAttach:
        RETURN_IF_ERROR(Attach(spec.attach()));
        break;
      case v1::TopologySpec::kAllToAll:
        return absl::UnimplementedError(
            "topology.all_to_all: all-to-all is planned as phases round-1, round-2, ...; a "
            "single-phase allocation cannot hold it yet");
      case v1::TopologySpec::kTraffic:
        RETURN_IF_ERROR(Traffic(spec.traffic()));
        break;
      default:
        return absl::InvalidArgumentError("topology: no form given (links, template, ...)");
    }
    return plan_;
  }

  v1::Plan TakePlan() { return std::move(plan_); }

  // Lists `names` as the plan's members, in order, ahead of any device its ports add.
  void AddMembers(const std::vector<std::string>& names) {
    for (const std::string& name : names) {
      if (members_.insert(name).second) plan_.add_members(name);
    }
  }

  // How many of `device`'s ports this request could still use with both sides.
  int FreePorts(const std::string& device) const {
    int free = 0;
    for (const OnicPortState* st : snapshot_.DevicePorts(device))
      free += Problem(*st, {true, true}).empty();
    return free;
  }

  // FreePorts of member i, or RESOURCE_EXHAUSTED naming it when it has none.
  absl::StatusOr<int> FreePortsOrRefuse(const std::vector<std::string>& names, int i,
                                        const std::string& field) const {
    const int free = FreePorts(names[i]);
    if (free > 0) return free;
    return absl::ResourceExhaustedError(
        absl::StrCat(MemberField(field, names, i), ": device ", names[i],
                     " has no port with tx and rx free: ", PortProblems(names[i], {true, true})));
  }

  // Circuits for `arcs` between members `names`, their ports shared as MemberSlots pairs
  // them. `what` names the shape in refusals; `field` the member list.
  absl::Status PlaceArcs(const std::vector<std::string>& names, const std::vector<Arc>& arcs,
                         const std::string& what, const std::string& field) {
    const std::vector<std::vector<PortSlot>> slots = MemberSlots(names.size(), arcs);
    std::vector<const OnicPortState*> source(arcs.size()), destination(arcs.size());
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string member = MemberField(field, names, i);
      int whole_taken = 0;  // Ports this member already gave both sides to.
      for (const PortSlot& slot : slots[i]) {
        absl::StatusOr<const OnicPortState*> port =
            Take(DeviceEndpoint(names[i]), {slot.out >= 0, slot.in >= 0}, member);
        if (port.status().code() == absl::StatusCode::kResourceExhausted) {
          return absl::ResourceExhaustedError(
              absl::StrCat(member, ": the ", what, " needs ", slots[i].size(), " ports of device ",
                           names[i], " and it has ", FreePorts(names[i]) + whole_taken,
                           " with tx and rx free (", PortProblems(names[i], {true, true}), ")"));
        }
        if (!port.ok()) return port.status();
        whole_taken += slot.out >= 0 && slot.in >= 0;
        if (slot.out >= 0) source[slot.out] = *port;
        if (slot.in >= 0) destination[slot.in] = *port;
      }
    }
    for (size_t a = 0; a < arcs.size(); ++a) RETURN_IF_ERROR(Circuit(*source[a], *destination[a]));
    return absl::OkStatus();
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
    const char* needed = SidesName(sides);
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
    const std::vector<const OnicPortState*> ports = snapshot_.DevicePorts(device);
    if (ports.empty()) {
      return absl::ResourceExhaustedError(
          absl::StrCat(field, ": device ", device, " has no O-NIC"));
    }
    // Ports another phase keeps on the switch only when no other will do. Then, for one side
    // only, first a port whose other side is already gone, keeping whole ports whole.
    const Sides other = {!sides.tx, !sides.rx};
    for (bool avoided : {false, true}) {
      if (avoided && avoid_.empty()) break;
      for (bool half_used : {sides.tx != sides.rx, false}) {
        for (const OnicPortState* st : ports) {
          if (avoid_.contains({st->onic, st->port}) != avoided) continue;
          if (Problem(*st, sides).empty() && (!half_used || !Problem(*st, other).empty())) {
            Mark(*st, sides);
            return st;
          }
        }
      }
    }
    return absl::ResourceExhaustedError(absl::StrCat(field, ": device ", device,
                                                     " has no port with ", needed,
                                                     " free: ", PortProblems(device, sides)));
  }

  // Why each port of `device` cannot give `sides` to this request, "; "-separated.
  std::string PortProblems(const std::string& device, Sides sides) const {
    std::vector<std::string> why;
    for (const OnicPortState* st : snapshot_.DevicePorts(device)) {
      if (std::string problem = Problem(*st, sides); !problem.empty()) {
        why.push_back(absl::StrCat(PortName(*st), " ", problem));
      }
    }
    return why.empty() ? "every port free" : absl::StrJoin(why, "; ");
  }

  absl::Status Circuit(const OnicPortState& src, const OnicPortState& dst) {
    v1::Circuit* c = plan_.add_circuits();
    c->mutable_source()->set_onic(src.onic);
    c->mutable_source()->set_port(src.port);
    c->mutable_destination()->set_onic(dst.onic);
    c->mutable_destination()->set_port(dst.port);
    c->set_state(v1::CIRCUIT_STATE_PLANNED);
    // Most circuits stay on one switch: one cross-connect, made here without the router, so a
    // full-switch plan stays within its time budget.
    if (src.tx.switch_id() == dst.rx.switch_id()) {
      v1::CrossConnect* x = c->add_cross_connects();
      x->set_switch_id(src.tx.switch_id());
      x->set_ingress(src.tx.port());
      x->set_egress(dst.rx.port());
      *plan_.add_add() = *x;
      return absl::OkStatus();
    }
    absl::StatusOr<Route> route = router_.RouteCircuit(
        src.tx, dst.rx, absl::StrCat("circuit ", PortName(src), " -> ", PortName(dst)));
    if (!route.ok()) {
      plan_.mutable_circuits()->RemoveLast();
      return route.status();
    }
    for (v1::CrossConnect& x : route->cross_connects) {
      *plan_.add_add() = x;
      *c->add_cross_connects() = std::move(x);
    }
    for (std::string& trunk : route->trunks) c->add_trunks(std::move(trunk));
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
    const std::string field = "topology.template.members";
    const int n = MemberCount(t.members());
    int hub = 0;
    if (!t.hub().empty()) {
      const auto& named = t.members().devices();
      auto it = std::find(named.begin(), named.end(), t.hub());
      if (it == named.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("topology.template.hub: ", t.hub(), " is not one of the named members"));
      }
      hub = it - named.begin();
    }
    ASSIGN_OR_RETURN(const std::vector<Arc> arcs, TemplateArcs(t, n, hub));
    std::vector<int> need;
    for (const std::vector<PortSlot>& slots : MemberSlots(n, arcs)) need.push_back(slots.size());
    ASSIGN_OR_RETURN(const std::vector<std::string> names,
                     PickMembers(snapshot_, t.members(), need, "", field));
    AddMembers(names);
    std::string what = v1::Name(t.kind());
    if (!t.dimensions().empty()) absl::StrAppend(&what, " ", absl::StrJoin(t.dimensions(), "x"));
    if (t.width() > 1) absl::StrAppend(&what, " of width ", t.width());
    return PlaceArcs(names, arcs, what, field);
  }

  absl::Status Attach(const v1::AttachSpec& a) {
    const std::string field = "topology.attach.devices";
    if (a.host().empty()) return absl::InvalidArgumentError("topology.attach.host is empty");
    if (!snapshot_.HasHost(a.host())) {
      return absl::NotFoundError(
          absl::StrCat("topology.attach.host: host ", a.host(), " not found"));
    }
    // Port 1 of every O-NIC before any port 2: each device gets an O-NIC of its own while
    // the host has enough.
    std::vector<const OnicPortState*> host_ports;
    for (const std::string& device : snapshot_.HostDevices(a.host())) {
      for (const OnicPortState* st : snapshot_.DevicePorts(device)) host_ports.push_back(st);
    }
    std::stable_sort(
        host_ports.begin(), host_ports.end(),
        [](const OnicPortState* x, const OnicPortState* y) { return x->port < y->port; });
    if (host_ports.empty()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("topology.attach.host: host ", a.host(), " has no O-NIC"));
    }
    const int n = MemberCount(a.devices());
    if (n == 0) return absl::InvalidArgumentError(absl::StrCat(field, ": no devices given"));
    const uint32_t width = std::max(1u, a.width());  // At most a device's ports (limits.h).
    ASSIGN_OR_RETURN(
        const std::vector<std::string> names,
        PickMembers(snapshot_, a.devices(), std::vector<int>(n, static_cast<int>(width)),
                    host_ports.front()->tx.switch_id(), field));
    int host_free = 0;
    std::vector<std::string> why;
    for (const OnicPortState* st : host_ports) {
      std::string problem = Problem(*st, {true, true});
      host_free += problem.empty();
      if (!problem.empty()) why.push_back(absl::StrCat(PortName(*st), " ", problem));
    }
    if (host_free < n * static_cast<int>(width)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("topology.attach.host: host ", a.host(), " has ", host_free,
                       " O-NIC ports with tx and rx free and attaching ", n, " devices with width ",
                       width, " needs ", n * width, " (", absl::StrJoin(why, "; "), ")"));
    }
    for (int i = 0; i < n; ++i) {
      const v1::Device& device = snapshot_.devices().at(names[i]);
      if (!device.host().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(MemberField(field, names, i),
                                                       ": belongs to host ", device.host(),
                                                       "; only pooled devices attach to a host"));
      }
    }
    AddMembers(names);
    for (int i = 0; i < n; ++i) {
      for (uint32_t k = 0; k < width; ++k) {
        ASSIGN_OR_RETURN(const OnicPortState* port, Take(DeviceEndpoint(names[i]), {true, true},
                                                         MemberField(field, names, i)));
        const OnicPortState* host_port = nullptr;
        for (const OnicPortState* st : host_ports) {
          if (Problem(*st, {true, true}).empty()) {
            host_port = st;
            break;
          }
        }
        Mark(*host_port, {true, true});  // There is one: host_free counted them.
        RETURN_IF_ERROR(Circuit(*port, *host_port));
        RETURN_IF_ERROR(Circuit(*host_port, *port));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Traffic(const v1::TrafficSpec& t) {
    const std::string field = "topology.traffic.members";
    ASSIGN_OR_RETURN(const std::vector<std::string> names,
                     WholeMembers(snapshot_, t.members(), field, "traffic-aware planning"));
    const int n = names.size();
    std::vector<std::vector<double>> weight(n, std::vector<double>(n, 0));
    double total = 0;
    for (int k = 0; k < t.matrix_size(); ++k) {
      const v1::TrafficEntry& e = t.matrix(k);
      const std::string entry = absl::StrCat("topology.traffic.matrix[", k, "]");
      if (e.source() >= static_cast<uint32_t>(n) || e.destination() >= static_cast<uint32_t>(n)) {
        return absl::InvalidArgumentError(absl::StrCat(entry, ": ", e.source(), " -> ",
                                                       e.destination(),
                                                       " is not between members 0..", n - 1));
      }
      if (e.source() == e.destination()) {
        return absl::InvalidArgumentError(
            absl::StrCat(entry, ": source and destination are both member ", e.source()));
      }
      if (!std::isfinite(e.bytes()) || e.bytes() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(entry, ".bytes: ", e.bytes(), " is not a finite count of bytes >= 0"));
      }
      weight[e.source()][e.destination()] += e.bytes();
      weight[e.destination()][e.source()] += e.bytes();
      total += e.bytes();
    }
    if (total <= 0) {
      return absl::InvalidArgumentError("topology.traffic.matrix: no traffic between members");
    }
    if (!std::isfinite(total)) {
      return absl::InvalidArgumentError(
          "topology.traffic.matrix: the bytes add up past the largest number a double holds");
    }
    std::vector<int> capacity;
    for (int i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(const int free, FreePortsOrRefuse(names, i, field));
      capacity.push_back(free);
    }
    const Matching matching = MaxWeightBMatching(weight, capacity);
    AddMembers(names);
    for (auto [i, j] : matching.links) {
      RETURN_IF_ERROR(Duplex(DeviceEndpoint(names[i]), DeviceEndpoint(names[j]),
                             MemberField(field, names, i), MemberField(field, names, j)));
    }
    plan_.set_direct_traffic_share(matching.weight / total);
    return absl::OkStatus();
  }

  const FabricSnapshot& snapshot_;
  const std::string tenant_;
  const std::set<std::pair<std::string, uint32_t>> avoid_;  // PlanRequest::avoid_ports.
  std::set<std::pair<std::string, uint32_t>> taken_tx_, taken_rx_, ports_used_;
  std::set<std::string> members_;
  TrunkRouter router_;
  v1::Plan plan_;
};

}  // namespace

absl::StatusOr<v1::Plan> PlanTopology(const FabricSnapshot& snapshot, const PlanRequest& request) {
  if (request.tenant.empty()) return absl::InvalidArgumentError("tenant is empty");
  RETURN_IF_ERROR(CheckTopologyLimits(snapshot, request.topology));
  return Planner(snapshot, request.tenant, request.topology.max_switch_hops(), request.avoid_ports)
      .Plan(request.topology);
}

absl::StatusOr<std::vector<PlannedPhase>> PlanAllToAllRounds(const FabricSnapshot& snapshot,
                                                             const std::string& tenant,
                                                             const v1::AllToAllSpec& spec,
                                                             uint32_t max_switch_hops) {
  if (tenant.empty()) return absl::InvalidArgumentError("tenant is empty");
  v1::TopologySpec topology;
  *topology.mutable_all_to_all() = spec;
  topology.set_max_switch_hops(max_switch_hops);
  RETURN_IF_ERROR(CheckTopologyLimits(snapshot, topology));
  const std::string field = "topology.all_to_all.members";
  ASSIGN_OR_RETURN(const std::vector<std::string> names,
                   WholeMembers(snapshot, spec.members(), field, "all-to-all"));
  const int n = names.size();
  // Rounds are active one at a time, so each is planned on the snapshot as it is.
  int ports = 0;
  for (int i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(const int free,
                     Planner(snapshot, tenant, max_switch_hops).FreePortsOrRefuse(names, i, field));
    ports = i == 0 ? free : std::min(ports, free);
  }
  const std::vector<std::vector<Arc>> rounds = AllToAllRounds(n, ports);
  if (rounds.size() > kMaxPhases) {
    return absl::ResourceExhaustedError(
        absl::StrCat(field, ": all-to-all over ", n, " members with ", ports, " free port",
                     ports == 1 ? "" : "s", " on the least free member takes ", rounds.size(),
                     " rounds, and a request has at most ", kMaxPhases, " phases"));
  }
  std::vector<PlannedPhase> phases;
  for (const std::vector<Arc>& round : rounds) {
    PlannedPhase& phase = phases.emplace_back();
    phase.name = absl::StrCat("round-", phases.size());
    Planner planner(snapshot, tenant, max_switch_hops);
    planner.AddMembers(names);
    RETURN_IF_ERROR(planner.PlaceArcs(names, round, "all-to-all " + phase.name, field));
    phase.plan = planner.TakePlan();
    for (v1::Circuit& c : *phase.plan.mutable_circuits()) c.set_phase(phase.name);
  }
  return phases;
}

}  // namespace fleet::scheduler
