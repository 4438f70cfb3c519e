#include "scheduler/limits.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "fleet/v1/names.h"

namespace fleet::scheduler {
namespace {

// Counts are summed as uint64_t: a request's uint32 fields can never overflow it, where an
// int would wrap (4,000,000,000 members read as -294,967,296).
absl::Status CheckMembers(const SiteLimits& site, const v1::MemberSet& members,
                          const std::string& field) {
  for (int i = 0; i < members.devices_size(); ++i) {
    RETURN_IF_ERROR(CheckName(absl::StrCat(field, ".devices[", i, "]"), members.devices(i)));
  }
  uint64_t total = static_cast<uint64_t>(members.devices_size());
  for (int i = 0; i < members.counts_size(); ++i) {
    const uint64_t count = members.counts(i).count();
    if (count > site.devices) {
      return absl::ResourceExhaustedError(absl::StrCat(field, ".counts[", i, "].count: ", count,
                                                       " is more than the ", site.devices,
                                                       " devices of the site"));
    }
    RETURN_IF_ERROR(
        CheckName(absl::StrCat(field, ".counts[", i, "].cluster"), members.counts(i).cluster()));
    RETURN_IF_ERROR(
        CheckName(absl::StrCat(field, ".counts[", i, "].host"), members.counts(i).host()));
    total += count;
  }
  if (total > site.devices) {
    return absl::ResourceExhaustedError(absl::StrCat(field, ": ", total,
                                                     " members (named plus counted) is more than "
                                                     "the ",
                                                     site.devices, " devices of the site"));
  }
  return absl::OkStatus();
}

// Parallel circuits between two devices each take a port of both: no device has more.
absl::Status CheckWidth(const SiteLimits& site, uint32_t width, const std::string& field) {
  if (width > 1 && width > site.max_device_ports) {
    return absl::ResourceExhaustedError(
        absl::StrCat(field, ": ", width, " parallel circuits need as many ports of a device, and ",
                     "no device of the site has more than ", site.max_device_ports));
  }
  return absl::OkStatus();
}

absl::Status CheckLinks(const SiteLimits& site, const v1::LinksSpec& links,
                        const std::string& field) {
  // Every circuit takes the tx of its own O-NIC port.
  uint64_t circuits = 0;
  for (int i = 0; i < links.links_size(); ++i) {
    const v1::Link& link = links.links(i);
    const std::string at = absl::StrCat(field, ".links[", i, "]");
    RETURN_IF_ERROR(CheckWidth(site, link.width(), at + ".width"));
    for (const auto& [end, name] : {std::pair{&link.a(), ".a"}, std::pair{&link.b(), ".b"}}) {
      RETURN_IF_ERROR(
          CheckName(at + name, end->has_onic_port() ? end->onic_port().onic() : end->device()));
    }
    circuits += uint64_t{std::max(1u, link.width())} * (link.duplex() ? 2 : 1);
    if (circuits > site.onic_ports) {
      return absl::ResourceExhaustedError(
          absl::StrCat(field, ".links: ", i + 1, " links need ", circuits,
                       " circuits or more, and the site has ", site.onic_ports,
                       " O-NIC ports to send them from"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTemplate(const SiteLimits& site, const v1::TemplateSpec& t,
                           const std::string& field) {
  RETURN_IF_ERROR(CheckMembers(site, t.members(), field + ".members"));
  RETURN_IF_ERROR(CheckWidth(site, t.width(), field + ".width"));
  RETURN_IF_ERROR(CheckName(field + ".hub", t.hub()));
  if (t.fanout() > site.devices) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".fanout: ", t.fanout(),
                                                   " is more than the ", site.devices,
                                                   " devices of the site"));
  }
  // The circuits the shape makes: each sends from its own O-NIC port, so a shape with more
  // than the site's ports is refused before its arcs are built (a full mesh's are quadratic
  // in its members, and so is the port sharing at a star's hub). Within that bound the
  // planner names the member that lacks ports. Tori are linear in their members: not counted.
  uint64_t n = static_cast<uint64_t>(t.members().devices_size());
  for (const v1::DeviceCount& c : t.members().counts()) n += c.count();
  const uint64_t width = std::max(1u, t.width());
  const uint64_t one_way = t.duplex() ? 2 : 1;
  uint64_t links = 0;
  if (n >= 2) {
    switch (t.kind()) {
      case v1::TEMPLATE_KIND_FULL_MESH:
        links = n * (n - 1);
        break;
      case v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL:
        links = n;
        break;
      case v1::TEMPLATE_KIND_RING_BIDIRECTIONAL:
        links = 2 * n;
        break;
      case v1::TEMPLATE_KIND_CHAIN:
      case v1::TEMPLATE_KIND_STAR:
      case v1::TEMPLATE_KIND_TREE:
        links = (n - 1) * one_way;
        break;
      default:
        break;
    }
  }
  if (links * width > site.onic_ports) {
    return absl::ResourceExhaustedError(
        absl::StrCat(field, ": ", v1::Name(t.kind()), " over ", n, " members of width ", width,
                     " is up to ", links * width, " circuits, and the site has ", site.onic_ports,
                     " O-NIC ports to send them from"));
  }
  if (t.dimensions_size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".dimensions: ", t.dimensions_size(), " given; a torus has 2 or 3"));
  }
  for (int i = 0; i < t.dimensions_size(); ++i) {
    if (t.dimensions(i) > site.devices) {
      return absl::ResourceExhaustedError(absl::StrCat(field, ".dimensions[", i,
                                                       "]: ", t.dimensions(i), " is more than the ",
                                                       site.devices, " devices of the site"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTraffic(const SiteLimits& site, const v1::TrafficSpec& t,
                          const std::string& field) {
  RETURN_IF_ERROR(CheckMembers(site, t.members(), field + ".members"));
  // One entry per ordered pair of members is the most a matrix needs.
  uint64_t n = static_cast<uint64_t>(t.members().devices_size());
  for (const v1::DeviceCount& c : t.members().counts()) n += c.count();
  const uint64_t pairs = n * (n > 0 ? n - 1 : 0);
  if (static_cast<uint64_t>(t.matrix_size()) > std::max<uint64_t>(pairs, 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".matrix: ", t.matrix_size(), " entries for ", n, " members; at most ",
                     std::max<uint64_t>(pairs, 1), ", one per ordered pair"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckName(const std::string& field, const std::string& value) {
  if (value.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", value.size(), " bytes long; at most ", kMaxNameBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckSwitchHops(const FabricSnapshot& snapshot, uint32_t max_switch_hops,
                             const std::string& field) {
  // A bound past the site's switches only means "any path"; past this it is a mistake.
  const uint64_t limit = std::max<uint64_t>(kMaxSwitchHops, snapshot.limits().switches);
  if (max_switch_hops > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", max_switch_hops, " is more than ", limit));
  }
  return absl::OkStatus();
}

absl::Status CheckTopologyLimits(const FabricSnapshot& snapshot, const v1::TopologySpec& topology,
                                 const std::string& field) {
  const SiteLimits& site = snapshot.limits();
  RETURN_IF_ERROR(
      CheckSwitchHops(snapshot, topology.max_switch_hops(), field + ".max_switch_hops"));
  switch (topology.form_case()) {
    case v1::TopologySpec::kLinks:
      return CheckLinks(site, topology.links(), field);
    case v1::TopologySpec::kTemplate:
      return CheckTemplate(site, topology.template_(), field + ".template");
    case v1::TopologySpec::kAttach: {
      const std::string at = field + ".attach";
      RETURN_IF_ERROR(CheckName(at + ".host", topology.attach().host()));
      RETURN_IF_ERROR(CheckMembers(site, topology.attach().devices(), at + ".devices"));
      return CheckWidth(site, topology.attach().width(), at + ".width");
    }
    case v1::TopologySpec::kAllToAll: {
      const std::string at = field + ".all_to_all.members";
      RETURN_IF_ERROR(CheckMembers(site, topology.all_to_all().members(), at));
      // Each round is a phase holding n circuits: the fewest rounds the site's ports allow.
      uint64_t n = static_cast<uint64_t>(topology.all_to_all().members().devices_size());
      for (const v1::DeviceCount& c : topology.all_to_all().members().counts()) n += c.count();
      const uint64_t ports = std::max<uint64_t>(site.max_device_ports, 1);
      const uint64_t rounds = n > 1 ? (n - 2) / ports + 1 : 0;
      if (rounds > kMaxPhases) {
        return absl::ResourceExhaustedError(
            absl::StrCat(at, ": all-to-all over ", n, " members takes at least ", rounds,
                         " rounds with the site's ", site.max_device_ports,
                         " ports per device, and a request has at most ", kMaxPhases, " phases"));
      }
      return absl::OkStatus();
    }
    case v1::TopologySpec::kTraffic:
      return CheckTraffic(site, topology.traffic(), field + ".traffic");
    case v1::TopologySpec::FORM_NOT_SET:
      return absl::OkStatus();  // The planner names the missing form.
  }
  return absl::OkStatus();
}

absl::Status CheckFailurePolicy(const FabricSnapshot& snapshot, const v1::FailurePolicy& policy) {
  const google::protobuf::Duration& within = policy.within();
  const bool negative = within.seconds() < 0 || within.nanos() < 0;
  if (negative || within.seconds() > kMaxHealWithinSeconds ||
      (within.seconds() == kMaxHealWithinSeconds && within.nanos() > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("on_failure.within: ", within.seconds(), "s ",
                                                   within.nanos(),
                                                   "ns is not from 0 (the default, 2 s) to 24h"));
  }
  if (policy.max_replacements() > snapshot.limits().devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("on_failure.max_replacements: ", policy.max_replacements(),
                     " is more than the site's ", snapshot.limits().devices, " devices"));
  }
  if (!v1::SpareScope_IsValid(policy.spares())) {
    return absl::InvalidArgumentError(
        absl::StrCat("on_failure.spares: ", policy.spares(), " is not a spare scope"));
  }
  return absl::OkStatus();
}

absl::Status CheckRequestLimits(const FabricSnapshot& snapshot,
                                const v1::RequestTopologyRequest& request) {
  RETURN_IF_ERROR(CheckName("tenant", request.tenant()));
  RETURN_IF_ERROR(CheckName("name", request.name()));
  RETURN_IF_ERROR(CheckName("request_id", request.request_id()));
  RETURN_IF_ERROR(CheckName("initial_phase", request.initial_phase()));
  if (static_cast<size_t>(request.phases_size()) > kMaxPhases) {
    return absl::InvalidArgumentError(absl::StrCat("phases: ", request.phases_size(),
                                                   " given; a request has at most ", kMaxPhases));
  }
  RETURN_IF_ERROR(CheckFailurePolicy(snapshot, request.on_failure()));
  RETURN_IF_ERROR(CheckTopologyLimits(snapshot, request.topology()));
  for (int i = 0; i < request.phases_size(); ++i) {
    const std::string field = absl::StrCat("phases[", i, "]");
    RETURN_IF_ERROR(CheckName(field + ".name", request.phases(i).name()));
    RETURN_IF_ERROR(
        CheckTopologyLimits(snapshot, request.phases(i).topology(), field + ".topology"));
  }
  return absl::OkStatus();
}

}  // namespace fleet::scheduler
