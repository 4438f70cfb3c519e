#include "controller/cli/object_text.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/proto_time.h"
#include "controller/cli/output.h"
#include "fleet/v1/names.h"

namespace fleet::cli {

std::string SwitchPortText(const v1::SwitchPortRef& port) {
  if (port.switch_id().empty() && port.port() == 0) return "";
  return v1::PortName(port);
}

bool ParseSwitchPort(const std::string& text, v1::SwitchPortRef* port) {
  const size_t slash = text.rfind('/');
  uint32_t number = 0;
  if (slash == std::string::npos || slash == 0 ||
      !absl::SimpleAtoi(text.substr(slash + 1), &number) || number == 0) {
    return false;
  }
  port->set_switch_id(text.substr(0, slash));
  port->set_port(number);
  return true;
}

std::string OnicPortText(const v1::OnicPortRef& port) {
  if (port.onic().empty() && port.port() == 0) return "";
  return v1::PortName(port);
}

std::string CrossConnectText(const v1::CrossConnect& xc) {
  return absl::StrCat(xc.switch_id(), ":", xc.ingress(), "→", xc.egress());
}

std::string OnicPortFibers(const v1::OnicPort& port) {
  return absl::StrCat(OrDash(SwitchPortText(port.tx())), "→", OrDash(SwitchPortText(port.rx())));
}

std::string WiringText(const v1::SwitchPort& port) {
  switch (port.wiring().peer_case()) {
    case v1::PortWiring::kOnicPort: {
      // An ingress receives the O-NIC port's tx fiber; an egress feeds its rx fiber.
      std::string text = absl::StrCat("onic ", OnicPortText(port.wiring().onic_port()));
      if (port.direction() == v1::PORT_DIRECTION_INGRESS) absl::StrAppend(&text, " tx");
      if (port.direction() == v1::PORT_DIRECTION_EGRESS) absl::StrAppend(&text, " rx");
      return text;
    }
    case v1::PortWiring::kTrunk:
      return absl::StrCat("trunk ", port.wiring().trunk());
    case v1::PortWiring::PEER_NOT_SET:
      break;
  }
  return "";
}

std::string PortWhyText(const v1::SwitchPort& port) {
  std::vector<std::string> why;
  if (port.admin_state() == v1::ADMIN_STATE_DRAINED && !port.admin_reason().empty()) {
    why.push_back(AdminText(port.admin_state(), port.admin_reason()));
  }
  if (!port.oper_reason().empty()) why.push_back(port.oper_reason());
  return absl::StrJoin(why, "; ");
}

std::string AdminText(v1::AdminState state, const std::string& reason) {
  if (state != v1::ADMIN_STATE_DRAINED || reason.empty()) return v1::Name(state);
  return absl::StrCat(v1::Name(state), ": ", reason);
}

namespace {

// A circuit line's parts: the id, the ends, the path, the state, and the rest, which is last
// and so never padded.
std::vector<std::string> CircuitLineParts(const v1::Circuit& circuit) {
  std::vector<std::string> xcs;
  for (const v1::CrossConnect& xc : circuit.cross_connects()) xcs.push_back(CrossConnectText(xc));
  std::string path = absl::StrCat("via ", xcs.empty() ? "-" : absl::StrJoin(xcs, ","));
  if (!circuit.trunks().empty())
    absl::StrAppend(&path, " trunks ", absl::StrJoin(circuit.trunks(), ","));
  std::vector<std::string> rest;
  if (!circuit.phase().empty()) rest.push_back(absl::StrCat("phase ", circuit.phase()));
  if (circuit.manual()) rest.push_back("manual");
  if (!circuit.reason().empty()) rest.push_back(absl::StrCat("(", circuit.reason(), ")"));
  return {circuit.id(),
          OrDash(OnicPortText(circuit.source())),
          OrDash(OnicPortText(circuit.destination())),
          std::move(path),
          OrDash(v1::Name(circuit.state())),
          absl::StrJoin(rest, "  ")};
}

}  // namespace

std::string CircuitLine(const v1::Circuit& circuit) { return CircuitLines({circuit}).front(); }

std::vector<std::string> CircuitLines(const std::vector<v1::Circuit>& circuits) {
  std::vector<std::vector<std::string>> parts;
  std::vector<size_t> widths;
  for (const v1::Circuit& circuit : circuits) {
    parts.push_back(CircuitLineParts(circuit));
    widths.resize(parts.back().size(), 0);
    for (size_t i = 0; i < parts.back().size(); ++i) {
      widths[i] = std::max(widths[i], DisplayWidth(parts.back()[i]));
    }
  }
  std::vector<std::string> lines;
  for (const std::vector<std::string>& p : parts) {
    std::string line =
        absl::StrCat(PadRight(p[0], widths[0]), "  ", PadRight(p[1], widths[1]), " → ",
                     PadRight(p[2], widths[2]), "  ", PadRight(p[3], widths[3]), "  ",
                     PadRight(p[4], widths[4]), "  ", p[5]);
    absl::StripTrailingAsciiWhitespace(&line);
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string AllocationStateLine(const v1::Allocation& allocation) {
  std::string line = absl::StrCat(allocation.id(), " ", OrDash(v1::Name(allocation.state())));
  if (!allocation.reason().empty()) absl::StrAppend(&line, " ", allocation.reason());
  return line;
}

std::string LeaseLine(absl::string_view allocation_id,
                      const google::protobuf::Timestamp& lease_expires, absl::Time now) {
  return absl::StrCat(allocation_id, " lease expires ", OrDash(TimeWithAge(lease_expires, now)));
}

std::string DrainTargetText(const v1::DrainTarget& target) {
  switch (target.target_case()) {
    case v1::DrainTarget::kSwitchPort:
      return absl::StrCat("port ", SwitchPortText(target.switch_port()));
    case v1::DrainTarget::kOnic:
      return absl::StrCat("onic ", target.onic());
    case v1::DrainTarget::kHost:
      return absl::StrCat("host ", target.host());
    case v1::DrainTarget::TARGET_NOT_SET:
      break;
  }
  return "nothing";
}

std::string DirectTrafficText(double share) {
  return absl::StrFormat("%.1f%% of the bytes on direct circuits", 100 * share);
}

std::string StageMillisText(const google::protobuf::Duration& duration) {
  return absl::StrFormat("%.3f ms", absl::ToDoubleMilliseconds(FromProtoDuration(duration)));
}

std::string PowerText(double dbm) {
  // The agent's sentinel for "no reading"; compared loosely, it is a double.
  if (dbm <= kNoPowerReadingDbm + 0.001) return "";
  return absl::StrFormat("%.2f", dbm);
}

std::string LinkStateLine(absl::string_view onic, const v1::LinkState& state) {
  std::string status = v1::Name(state.status());
  std::string line =
      absl::StrCat(onic, " port ", state.port(), ": ", status.empty() ? "unknown" : status);
  if (state.status() != v1::LINK_STATUS_UP) {
    if (!state.detail().empty()) absl::StrAppend(&line, ": ", state.detail());
    return line;
  }
  std::vector<std::string> facts;
  if (state.link_speed_mts() > 0 || state.link_width() > 0) {
    facts.push_back(absl::StrCat(state.link_speed_mts(), " MT/s x", state.link_width()));
  }
  if (!PowerText(state.rx_power_dbm()).empty()) {
    facts.push_back(absl::StrCat("rx ", PowerText(state.rx_power_dbm()), " dBm"));
  }
  if (!state.peer_seen().empty()) facts.push_back(absl::StrCat("peer ", state.peer_seen()));
  if (!state.detail().empty()) facts.push_back(state.detail());
  if (!facts.empty()) absl::StrAppend(&line, " (", absl::StrJoin(facts, ", "), ")");
  return line;
}

}  // namespace fleet::cli
