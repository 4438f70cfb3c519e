#include "controller/cli/output.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fleet/v1/names.h"

namespace fleet::cli {
namespace {

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

// A table cell as shown: a newline inside would break the grid, and an empty cell would
// shift the eye to the next column.
std::string CellText(std::string cell) {
  absl::StrReplaceAll({{"\r\n", " "}, {"\n", " "}, {"\t", " "}}, &cell);
  return cell.empty() ? "-" : cell;
}

std::string PadRight(const std::string& text, size_t width) {
  size_t w = DisplayWidth(text);
  return w >= width ? text : text + std::string(width - w, ' ');
}

// YAML would read these plain scalars as something other than a string (a bool, a number, a
// null), so a JSON string holding one must stay quoted to keep its type.
bool NeedsQuotes(const std::string& scalar) {
  if (scalar.empty() || scalar == "~" || absl::AsciiStrToLower(scalar) == "null") return true;
  YAML::Node plain(scalar);
  bool b;
  double d;
  return YAML::convert<bool>::decode(plain, b) || YAML::convert<double>::decode(plain, d);
}

// Re-emits a node parsed from JSON in block style. The parser remembers that JSON is flow
// style and the emitter would keep it, so the tree is walked instead of streamed as is.
void EmitBlock(const YAML::Node& node, YAML::Emitter& out) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out << YAML::BeginMap;
      for (const auto& entry : node) {
        out << YAML::Key << entry.first.Scalar() << YAML::Value;
        EmitBlock(entry.second, out);
      }
      out << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      out << YAML::BeginSeq;
      for (const auto& item : node) EmitBlock(item, out);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      // The non-specific tag "!" marks a quoted scalar, i.e. a JSON string.
      if (node.Tag() == "!" && NeedsQuotes(node.Scalar())) out << YAML::DoubleQuoted;
      out << node.Scalar();
      break;
    default:
      out << YAML::Null;
      break;
  }
}

const v1::OnicPort* FindOnicPort(const v1::Onic& onic, uint32_t index) {
  for (const v1::OnicPort& port : onic.ports()) {
    if (port.index() == index) return &port;
  }
  return nullptr;
}

std::string OnicPortLine(const v1::OnicPort& port) {
  return absl::StrCat("port ", port.index(), "  tx ", OrDash(SwitchPortText(port.tx())), "  rx ",
                      OrDash(SwitchPortText(port.rx())), "  admin ",
                      OrDash(v1::Name(port.admin_state())), "  oper ",
                      OrDash(v1::Name(port.oper_state())));
}

// The age of `time` for a table's AGE column; "" when unset.
std::string AgeText(const google::protobuf::Timestamp& time, absl::Time now) {
  return FormatTime(time).empty() ? "" : FormatAge(now - ToAbslTime(time));
}

std::string TimeWithAge(const google::protobuf::Timestamp& time, absl::Time now) {
  if (FormatTime(time).empty()) return "";
  absl::Duration since = now - ToAbslTime(time);
  if (since < absl::ZeroDuration()) {
    return absl::StrCat(FormatTime(time), " (in ", FormatAge(-since), ")");
  }
  return absl::StrCat(FormatTime(time), " (", FormatAge(since), " ago)");
}

}  // namespace

const std::vector<std::string>& OutputFormatNames() {
  static const auto* names = new std::vector<std::string>{"table", "json", "yaml"};
  return *names;
}

std::optional<OutputFormat> ParseOutputFormat(absl::string_view text) {
  // In the order of OutputFormatNames().
  constexpr OutputFormat kFormats[] = {OutputFormat::kTable, OutputFormat::kJson,
                                       OutputFormat::kYaml};
  for (size_t i = 0; i < OutputFormatNames().size(); ++i) {
    if (text == OutputFormatNames()[i]) return kFormats[i];
  }
  return std::nullopt;
}

std::string ColorState(absl::string_view word) {
  constexpr absl::string_view kGreen = "\x1b[32m", kYellow = "\x1b[33m", kRed = "\x1b[31m",
                              kReset = "\x1b[0m";
  static constexpr std::pair<absl::string_view, absl::string_view> kPalette[] = {
      {"ready", kGreen},     {"active", kGreen},   {"up", kGreen},   {"ok", kGreen},
      {"degraded", kYellow}, {"drained", kYellow}, {"failed", kRed}, {"down", kRed}};
  for (const auto& [state, color] : kPalette) {
    if (word == state) return absl::StrCat(color, word, kReset);
  }
  return std::string(word);
}

// ---------------------------------------------------------------------------------------
// Table and Description

Table::Table(std::vector<std::string> columns)
    : columns_(std::move(columns)), state_columns_(columns_.size(), false) {}

void Table::MarkStateColumn(absl::string_view column) {
  auto it = std::find(columns_.begin(), columns_.end(), column);
  // A column the table does not have is a bug in the table's code, not in its input.
  assert(it != columns_.end());
  if (it != columns_.end()) state_columns_[it - columns_.begin()] = true;
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  for (std::string& cell : cells) cell = CellText(std::move(cell));
  rows_.push_back(std::move(cells));
}

std::string Table::Render(bool color) const {
  std::vector<std::string> header;
  for (const std::string& column : columns_) header.push_back(absl::AsciiStrToUpper(column));
  std::vector<size_t> widths(columns_.size(), 0);
  auto measure = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i)
      widths[i] = std::max(widths[i], DisplayWidth(cells[i]));
  };
  measure(header);
  for (const auto& row : rows_) measure(row);

  std::string out;
  auto render = [&](const std::vector<std::string>& cells, bool paint) {
    for (size_t i = 0; i < cells.size(); ++i) {
      // The last column is not padded, so no line ends in spaces.
      bool last = i + 1 == cells.size();
      std::string padded = last ? cells[i] : PadRight(cells[i], widths[i] + 2);
      if (paint && state_columns_[i]) {
        // The colour goes around the word only, so the padding after it stays plain.
        padded = absl::StrCat(ColorState(cells[i]), padded.substr(cells[i].size()));
      }
      absl::StrAppend(&out, padded);
    }
    out += '\n';
  };
  render(header, false);
  for (const auto& row : rows_) render(row, color);
  return out;
}

void Description::Field(std::string key, std::string value) {
  entries_.push_back({std::move(key), std::move(value), {}, false});
}

void Description::List(std::string key, std::vector<std::string> items) {
  entries_.push_back({std::move(key), "", std::move(items), true});
}

std::string Description::Render() const {
  // Keys of one-line entries (fields and empty lists) share one column of values.
  size_t key_width = 0;
  for (const Entry& e : entries_) {
    if (!e.is_list || e.items.empty()) key_width = std::max(key_width, DisplayWidth(e.key) + 1);
  }
  std::string out;
  for (const Entry& e : entries_) {
    if (!e.is_list) {
      // A multi-line value continues under its first line.
      std::string indent(key_width + 2, ' ');
      std::string value = absl::StrReplaceAll(OrDash(e.value), {{"\n", "\n" + indent}});
      absl::StrAppend(&out, PadRight(e.key + ":", key_width), "  ", value, "\n");
      continue;
    }
    if (e.items.empty()) {
      absl::StrAppend(&out, PadRight(e.key + ":", key_width), "  (none)\n");
      continue;
    }
    absl::StrAppend(&out, e.key, ":\n");
    for (const std::string& item : e.items) {
      absl::StrAppend(&out, "  ", absl::StrReplaceAll(item, {{"\n", "\n    "}}), "\n");
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// JSON and YAML

namespace {

absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message, bool indented) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = indented;
  options.always_print_primitive_fields = false;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print ", message.GetTypeName(), " as JSON: ", status.ToString()));
  }
  absl::StripTrailingAsciiWhitespace(&json);
  return json + "\n";
}

}  // namespace

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  return MessageToJson(message, /*indented=*/true);
}

absl::StatusOr<std::string> ToYaml(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ToJson(message);
  if (!json.ok()) return json.status();
  YAML::Node node;
  try {
    node = YAML::Load(*json);
  } catch (const YAML::Exception& e) {
    // Protobuf's JSON is valid YAML; this would be a bug, but a CLI should say so, not abort.
    return absl::InternalError(
        absl::StrCat("cannot read ", message.GetTypeName(), " JSON as YAML: ", e.what()));
  }
  YAML::Emitter out;
  EmitBlock(node, out);
  return std::string(out.c_str()) + "\n";
}

absl::StatusOr<std::string> FormatMessage(OutputFormat format,
                                          const google::protobuf::Message& message) {
  return format == OutputFormat::kYaml ? ToYaml(message) : ToJson(message);
}

absl::StatusOr<std::string> FormatStreamedMessage(OutputFormat format,
                                                  const google::protobuf::Message& message) {
  if (format != OutputFormat::kYaml) return MessageToJson(message, /*indented=*/false);
  absl::StatusOr<std::string> yaml = ToYaml(message);
  if (!yaml.ok()) return yaml.status();
  return absl::StrCat("---\n", *yaml);
}

// ---------------------------------------------------------------------------------------
// Scalars

size_t DisplayWidth(absl::string_view text) {
  // Count every byte except UTF-8 continuation bytes (10xxxxxx).
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

namespace {

// `big` units then, unless zero, `small` ones: "3m12s", "5d".
std::string TwoUnits(int64_t big, absl::string_view big_unit, int64_t small,
                     absl::string_view small_unit) {
  if (small == 0) return absl::StrCat(big, big_unit);
  return absl::StrCat(big, big_unit, small, small_unit);
}

}  // namespace

std::string FormatAge(absl::Duration age) {
  // kubectl's steps: a second unit while it still says something at a glance.
  constexpr int64_t kMinute = 60, kHour = 60 * kMinute, kDay = 24 * kHour, kYear = 365 * kDay;
  const int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(age));
  if (s < 2 * kMinute) return absl::StrCat(s, "s");
  if (s < 10 * kMinute) return TwoUnits(s / kMinute, "m", s % kMinute, "s");
  if (s < 3 * kHour) return absl::StrCat(s / kMinute, "m");
  if (s < 8 * kHour) return TwoUnits(s / kHour, "h", s % kHour / kMinute, "m");
  if (s < 2 * kDay) return absl::StrCat(s / kHour, "h");
  if (s < 8 * kDay) return TwoUnits(s / kDay, "d", s % kDay / kHour, "h");
  if (s < 2 * kYear) return absl::StrCat(s / kDay, "d");
  if (s < 8 * kYear) return TwoUnits(s / kYear, "y", s % kYear / kDay, "d");
  return absl::StrCat(s / kYear, "y");
}

absl::Time ToAbslTime(const google::protobuf::Timestamp& time) {
  return absl::FromUnixSeconds(time.seconds()) + absl::Nanoseconds(time.nanos());
}

absl::Duration ToAbslDuration(const google::protobuf::Duration& duration) {
  return absl::Seconds(duration.seconds()) + absl::Nanoseconds(duration.nanos());
}

std::string FormatTime(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", ToAbslTime(time), absl::UTCTimeZone());
}

std::string SwitchPortText(const v1::SwitchPortRef& port) {
  if (port.switch_id().empty() && port.port() == 0) return "";
  return absl::StrCat(port.switch_id(), "/", port.port());
}

std::string OnicPortText(const v1::OnicPortRef& port) {
  if (port.onic().empty() && port.port() == 0) return "";
  return absl::StrCat(port.onic(), "/", port.port());
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

std::string PortRanges(const std::vector<uint32_t>& ports) {
  std::vector<std::string> ranges;
  for (size_t i = 0; i < ports.size();) {
    size_t j = i;
    while (j + 1 < ports.size() && ports[j + 1] == ports[j] + 1) ++j;
    ranges.push_back(i == j ? absl::StrCat(ports[i]) : absl::StrCat(ports[i], "-", ports[j]));
    i = j + 1;
  }
  return absl::StrJoin(ranges, ", ");
}

std::string CircuitLine(const v1::Circuit& circuit) {
  std::vector<std::string> xcs;
  for (const v1::CrossConnect& xc : circuit.cross_connects()) xcs.push_back(CrossConnectText(xc));
  std::string line = absl::StrCat(circuit.id(), "  ", OrDash(OnicPortText(circuit.source())), " → ",
                                  OrDash(OnicPortText(circuit.destination())), "  via ",
                                  xcs.empty() ? "-" : absl::StrJoin(xcs, ","));
  if (!circuit.trunks().empty())
    absl::StrAppend(&line, " trunks ", absl::StrJoin(circuit.trunks(), ","));
  absl::StrAppend(&line, "  ", OrDash(v1::Name(circuit.state())));
  if (!circuit.phase().empty()) absl::StrAppend(&line, "  phase ", circuit.phase());
  if (circuit.manual()) absl::StrAppend(&line, "  manual");
  if (!circuit.reason().empty()) absl::StrAppend(&line, "  (", circuit.reason(), ")");
  return line;
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

// ---------------------------------------------------------------------------------------
// `get` tables

Table SwitchesTable(const v1::ListSwitchesResponse& response) {
  Table table({"id", "model", "size", "address", "protocol", "cluster", "reserved"});
  for (const v1::Switch& sw : response.switches()) {
    std::string size = sw.ingress_ports() || sw.egress_ports()
                           ? absl::StrCat(sw.ingress_ports(), "x", sw.egress_ports())
                           : "";
    table.AddRow({sw.id(), sw.model(), size, sw.address(), v1::Name(sw.protocol()), sw.cluster(),
                  absl::StrCat(sw.trunk_reserved_ports_size())});
  }
  return table;
}

Table PortsTable(const v1::ListPortsResponse& response) {
  Table table({"switch", "port", "dir", "admin", "oper", "reserved", "wired-to", "circuit"});
  for (const v1::SwitchPort& port : response.ports()) {
    std::string reserved = port.reservation() == v1::PORT_RESERVATION_TRUNK ? "trunk" : "";
    table.AddRow({port.ref().switch_id(), absl::StrCat(port.ref().port()),
                  v1::Name(port.direction()), v1::Name(port.admin_state()),
                  v1::Name(port.oper_state()), reserved, WiringText(port), port.circuit_id()});
  }
  table.MarkStateColumn("admin");
  table.MarkStateColumn("oper");
  return table;
}

Table HostsTable(const v1::ListHostsResponse& response) {
  Table table({"name", "address", "cluster", "admin"});
  for (const v1::Host& host : response.hosts()) {
    table.AddRow({host.name(), host.address(), host.cluster(), v1::Name(host.admin_state())});
  }
  table.MarkStateColumn("admin");
  return table;
}

Table AgentsTable(const v1::ListAgentsResponse& response, absl::Time now) {
  Table table({"host", "connected", "backend", "version", "onics", "last-heartbeat", "mismatches"});
  for (const v1::Agent& agent : response.agents()) {
    std::string heartbeat = AgeText(agent.last_heartbeat(), now);
    std::string mismatches =
        agent.inventory_mismatches().empty() ? "" : absl::StrCat(agent.inventory_mismatches_size());
    table.AddRow({agent.host(), agent.connected() ? "yes" : "no", agent.backend(),
                  agent.software_version(), absl::StrCat(agent.onic_serials_size()), heartbeat,
                  mismatches});
  }
  return table;
}

Table DevicesTable(const v1::ListDevicesResponse& response) {
  Table table({"id", "kind", "host", "chassis", "model", "onics", "admin"});
  for (const v1::Device& device : response.devices()) {
    table.AddRow({device.id(), v1::Name(device.kind()), device.host(), device.chassis(),
                  device.model(), absl::StrCat(device.onics_size()),
                  v1::Name(device.admin_state())});
  }
  table.MarkStateColumn("admin");
  return table;
}

Table OnicsTable(const v1::ListOnicsResponse& response) {
  Table table({"id", "device", "host", "serial", "pcie", "port1", "port2", "admin"});
  for (const v1::Onic& onic : response.onics()) {
    const v1::OnicPort* port1 = FindOnicPort(onic, 1);
    const v1::OnicPort* port2 = FindOnicPort(onic, 2);
    table.AddRow({onic.id(), onic.device(), onic.host(), onic.serial(), onic.pcie_address(),
                  port1 ? OnicPortFibers(*port1) : "", port2 ? OnicPortFibers(*port2) : "",
                  v1::Name(onic.admin_state())});
  }
  table.MarkStateColumn("admin");
  return table;
}

Table TrunksTable(const v1::ListTrunksResponse& response) {
  Table table({"id", "from", "to"});
  for (const v1::Trunk& trunk : response.trunks()) {
    table.AddRow({trunk.id(), SwitchPortText(trunk.from()), SwitchPortText(trunk.to())});
  }
  return table;
}

Table CircuitsTable(const v1::ListCircuitsResponse& response) {
  Table table({"id", "allocation", "source", "destination", "cross-connects", "state", "phase"});
  for (const v1::Circuit& circuit : response.circuits()) {
    std::vector<std::string> xcs;
    for (const v1::CrossConnect& xc : circuit.cross_connects()) xcs.push_back(CrossConnectText(xc));
    std::string allocation =
        circuit.allocation_id().empty() && circuit.manual() ? "(manual)" : circuit.allocation_id();
    table.AddRow({circuit.id(), allocation, OnicPortText(circuit.source()),
                  OnicPortText(circuit.destination()), absl::StrJoin(xcs, ","),
                  v1::Name(circuit.state()), circuit.phase()});
  }
  table.MarkStateColumn("state");
  return table;
}

Table AllocationsTable(const v1::ListAllocationsResponse& response, absl::Time now) {
  Table table({"id", "tenant", "name", "state", "members", "circuits", "age", "reason"});
  for (const v1::Allocation& a : response.allocations()) {
    table.AddRow({a.id(), a.tenant(), a.name(), v1::Name(a.state()), absl::StrCat(a.members_size()),
                  absl::StrCat(a.circuits_size()), AgeText(a.created(), now), a.reason()});
  }
  table.MarkStateColumn("state");
  return table;
}

namespace {

// Column 1 is the event's time: a TIME in the stream, an AGE in a table.
std::vector<std::string> EventColumns(absl::string_view when) {
  return {"seq", std::string(when), "principal", "kind", "object", "message"};
}

std::vector<std::string> EventCells(const v1::Event& event, std::string when) {
  std::string object = event.object_id().empty()
                           ? event.object_kind()
                           : absl::StrCat(event.object_kind(), "/", event.object_id());
  return {absl::StrCat(event.sequence()),
          std::move(when),
          event.principal(),
          event.kind(),
          object,
          event.message()};
}

// One line of a table whose column widths are fixed in advance: each cell but the last is
// padded to its width, and always followed by at least two spaces.
std::string FixedWidthLine(const std::vector<std::string>& cells,
                           const std::vector<size_t>& widths) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    std::string cell = CellText(cells[i]);
    if (i + 1 == cells.size()) {
      absl::StrAppend(&line, cell);
    } else {
      absl::StrAppend(&line, PadRight(cell, std::max(widths[i], DisplayWidth(cell)) + 2));
    }
  }
  return line + "\n";
}

// Wide enough for a sequence number of a busy year, an RFC 3339 time, an operator's
// principal and the usual event kinds and objects.
const std::vector<size_t>& EventStreamWidths() {
  static const auto* widths = new std::vector<size_t>{6, 20, 18, 22, 24, 0};
  return *widths;
}

}  // namespace

Table EventsTable(const v1::ListEventsResponse& response, absl::Time now) {
  Table table(EventColumns("age"));
  for (const v1::Event& event : response.events()) {
    table.AddRow(EventCells(event, AgeText(event.time(), now)));
  }
  return table;
}

std::string EventsStreamHeader() {
  std::vector<std::string> header;
  for (const std::string& column : EventColumns("time")) {
    header.push_back(absl::AsciiStrToUpper(column));
  }
  return FixedWidthLine(header, EventStreamWidths());
}

std::string EventsStreamRow(const v1::Event& event) {
  return FixedWidthLine(EventCells(event, FormatTime(event.time())), EventStreamWidths());
}

std::string WatchHeader(absl::string_view kind, absl::Time now) {
  return absl::StrCat("# ", kind, " at ",
                      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone()), "\n");
}

Table DriftTable(const v1::ReconcileResponse& response) {
  Table table({"kind", "switch", "ingress", "egress", "circuit", "action"});
  for (const v1::Drift& drift : response.drift()) {
    const v1::CrossConnect& xc = drift.cross_connect();
    table.AddRow(
        {v1::Name(drift.kind()), xc.switch_id(), xc.ingress() ? absl::StrCat(xc.ingress()) : "",
         xc.egress() ? absl::StrCat(xc.egress()) : "", drift.circuit_id(), drift.action()});
  }
  return table;
}

Table HealthTable(const v1::HealthResponse& response) {
  Table table({"component", "state", "detail"});
  for (const v1::ComponentHealth& component : response.components()) {
    table.AddRow({component.name(), v1::Name(component.state()), component.detail()});
  }
  table.MarkStateColumn("state");
  return table;
}

Table LinkStatusTable(const v1::GetLinkStatusResponse& response) {
  Table table({"port", "status", "speed", "width", "rx-dbm", "tx-dbm", "peer", "detail"});
  for (const v1::LinkState& state : response.ports()) {
    table.AddRow({absl::StrCat(state.port()), v1::Name(state.status()),
                  state.link_speed_mts() ? absl::StrCat(state.link_speed_mts(), " MT/s") : "",
                  state.link_width() ? absl::StrCat("x", state.link_width()) : "",
                  PowerText(state.rx_power_dbm()), PowerText(state.tx_power_dbm()),
                  state.peer_seen(), state.detail()});
  }
  table.MarkStateColumn("status");
  return table;
}

// ---------------------------------------------------------------------------------------
// `describe` texts

std::string DescribeSwitch(const v1::Switch& sw, const std::vector<v1::SwitchPort>& ports) {
  Description d;
  d.Field("ID", sw.id());
  d.Field("Model", sw.model());
  std::string size;
  if (sw.ingress_ports() > 0) {
    size = absl::StrCat(sw.ingress_ports(), "x", sw.egress_ports(), " (ingress 1-",
                        sw.ingress_ports(), ", egress ", sw.ingress_ports() + 1, "-",
                        sw.ingress_ports() + sw.egress_ports(), ")");
  }
  d.Field("Size", size);
  d.Field("Address", sw.address());
  d.Field("Protocol", v1::Name(sw.protocol()));
  d.Field("Management port",
          sw.management_port() ? absl::StrCat(sw.management_port()) : "protocol default");
  d.Field("Credentials", sw.credentials_ref());
  d.Field("Cluster", sw.cluster());
  d.Field("Trunk reserved",
          PortRanges({sw.trunk_reserved_ports().begin(), sw.trunk_reserved_ports().end()}));

  int onic_fibers = 0, trunk_fibers = 0;
  std::vector<uint32_t> in_circuits, drained, failed;
  for (const v1::SwitchPort& port : ports) {
    if (port.wiring().has_onic_port()) ++onic_fibers;
    if (port.wiring().has_trunk()) ++trunk_fibers;
    if (!port.circuit_id().empty()) in_circuits.push_back(port.ref().port());
    if (port.admin_state() == v1::ADMIN_STATE_DRAINED) drained.push_back(port.ref().port());
    if (port.oper_state() == v1::OPER_STATE_FAILED) failed.push_back(port.ref().port());
  }
  d.Field("Wired ports", absl::StrCat(onic_fibers, " to O-NICs, ", trunk_fibers, " to trunks"));
  d.Field("In circuits", absl::StrCat(in_circuits.size(), in_circuits.empty() ? "" : ": ",
                                      PortRanges(in_circuits)));
  d.Field("Drained ports", PortRanges(drained));
  d.Field("Failed ports", PortRanges(failed));
  return d.Render();
}

std::string DescribeHost(const v1::Host& host, const std::vector<v1::Device>& devices,
                         const v1::Agent* agent) {
  Description d;
  d.Field("Name", host.name());
  d.Field("Address", host.address());
  d.Field("Cluster", host.cluster());
  d.Field("Admin", v1::Name(host.admin_state()));
  if (agent == nullptr) {
    d.Field("Agent", "never registered");
  } else {
    std::string state =
        agent->connected()
            ? absl::StrCat("connected since ", OrDash(FormatTime(agent->connected_since())))
            : absl::StrCat("disconnected, last heartbeat ",
                           OrDash(FormatTime(agent->last_heartbeat())));
    d.Field("Agent", absl::StrCat(state, "; ", OrDash(agent->backend()), " backend, version ",
                                  OrDash(agent->software_version())));
    if (!agent->inventory_mismatches().empty()) {
      d.List("Agent mismatches",
             {agent->inventory_mismatches().begin(), agent->inventory_mismatches().end()});
    }
  }
  std::vector<std::string> items;
  for (const v1::Device& device : devices) {
    items.push_back(absl::StrCat(
        device.id(), "  ", OrDash(v1::Name(device.kind())), "  ", OrDash(device.model()),
        "  O-NICs ", device.onics().empty() ? "-" : absl::StrJoin(device.onics(), ", ")));
  }
  d.List("Devices", std::move(items));
  return d.Render();
}

std::string DescribeDevice(const v1::Device& device, const std::vector<v1::Onic>& onics) {
  Description d;
  d.Field("ID", device.id());
  d.Field("Kind", v1::Name(device.kind()));
  d.Field("Host", device.host());
  d.Field("Chassis", device.chassis());
  d.Field("Model", device.model());
  d.Field("Admin", v1::Name(device.admin_state()));
  std::vector<std::string> items;
  for (const v1::Onic& onic : onics) {
    std::string item =
        absl::StrCat(onic.id(), "  serial ", OrDash(onic.serial()), "  pcie ",
                     OrDash(onic.pcie_address()), "  admin ", OrDash(v1::Name(onic.admin_state())));
    for (const v1::OnicPort& port : onic.ports()) absl::StrAppend(&item, "\n", OnicPortLine(port));
    items.push_back(std::move(item));
  }
  d.List("O-NICs", std::move(items));
  return d.Render();
}

std::string DescribeOnic(const v1::Onic& onic, const std::vector<v1::Circuit>& circuits) {
  Description d;
  d.Field("ID", onic.id());
  d.Field("Device", onic.device());
  d.Field("Host", onic.host());
  d.Field("Serial", onic.serial());
  d.Field("PCIe", onic.pcie_address());
  d.Field("Admin", v1::Name(onic.admin_state()));
  std::vector<std::string> ports;
  for (const v1::OnicPort& port : onic.ports()) ports.push_back(OnicPortLine(port));
  d.List("Ports", std::move(ports));
  std::vector<std::string> lines;
  for (const v1::Circuit& circuit : circuits) lines.push_back(CircuitLine(circuit));
  d.List("Circuits", std::move(lines));
  return d.Render();
}

namespace {

// What both the short and the full view of an allocation start with.
void AddAllocationIdentity(const v1::Allocation& a, Description& d) {
  d.Field("ID", a.id());
  d.Field("Tenant", a.tenant());
  d.Field("Name", a.name());
  d.Field("State", v1::Name(a.state()));
  d.Field("Reason", a.reason());
}

// "Phases: dp (active), tp" for a phased allocation; nothing for a single topology.
void AddPhases(const v1::Allocation& a, Description& d) {
  std::vector<std::string> phases;
  for (const std::string& phase : a.phases()) {
    phases.push_back(phase == a.active_phase() ? absl::StrCat(phase, " (active)") : phase);
  }
  if (!phases.empty()) d.List("Phases", std::move(phases));
}

std::vector<std::string> CircuitLines(const v1::Allocation& a) {
  std::vector<std::string> lines;
  for (const v1::Circuit& circuit : a.circuits()) lines.push_back(CircuitLine(circuit));
  return lines;
}

}  // namespace

std::string DescribeAllocation(const v1::Allocation& a, const std::vector<v1::Event>& events,
                               absl::Time now) {
  Description d;
  AddAllocationIdentity(a, d);
  d.Field("Created", TimeWithAge(a.created(), now));
  d.Field("Updated", TimeWithAge(a.updated(), now));
  d.Field("Lease expires", TimeWithAge(a.lease_expires(), now));
  if (a.direct_traffic_share() > 0) {
    d.Field("Direct traffic",
            absl::StrCat(absl::StrFormat("%.1f", 100 * a.direct_traffic_share()), "%"));
  }
  AddPhases(a, d);
  d.List("Members", {a.members().begin(), a.members().end()});
  d.List("Circuits", CircuitLines(a));
  size_t stage_width = 0;
  for (const v1::StageTiming& t : a.stage_timings())
    stage_width = std::max(stage_width, DisplayWidth(t.stage()));
  std::vector<std::string> timings;
  for (const v1::StageTiming& t : a.stage_timings()) {
    // Milliseconds to the microsecond: stages of a reconfiguration take from microseconds
    // (plan) to seconds (retrain), and one unit makes them comparable at a glance.
    timings.push_back(absl::StrCat(
        PadRight(t.stage(), stage_width), "  ",
        absl::StrFormat("%.3f ms", absl::ToDoubleMilliseconds(ToAbslDuration(t.duration())))));
  }
  d.List("Stage timings", std::move(timings));
  std::vector<std::string> event_lines;
  if (!events.empty()) {
    v1::ListEventsResponse list;
    for (const v1::Event& event : events) *list.add_events() = event;
    event_lines = absl::StrSplit(EventsTable(list, now).Render(), '\n', absl::SkipEmpty());
  }
  d.List("Events", std::move(event_lines));
  return d.Render();
}

std::string DescribeAgent(const v1::Agent& agent, absl::Time now) {
  Description d;
  d.Field("Host", agent.host());
  d.Field("Connected", agent.connected() ? "yes" : "no");
  if (agent.connected()) d.Field("Connected since", TimeWithAge(agent.connected_since(), now));
  d.Field("Last heartbeat", TimeWithAge(agent.last_heartbeat(), now));
  d.Field("Backend", agent.backend());
  d.Field("Version", agent.software_version());
  d.Field("Capabilities",
          agent.capabilities().empty() ? "(none)" : absl::StrJoin(agent.capabilities(), ", "));
  d.List("O-NIC serials", {agent.onic_serials().begin(), agent.onic_serials().end()});
  d.List("Inventory mismatches",
         {agent.inventory_mismatches().begin(), agent.inventory_mismatches().end()});
  return d.Render();
}

// ---------------------------------------------------------------------------------------
// What the verbs that change things print

std::string PlanText(const v1::Plan& plan) {
  std::string out =
      absl::StrCat("members: ", absl::StrJoin(plan.members(), ", "), "\n", plan.circuits_size(),
                   " circuits, ", plan.add_size(), " cross-connects to make, ", plan.remove_size(),
                   " to remove, ", plan.ports_used_size(), " O-NIC ports\n");
  Table table({"source", "destination", "cross-connects"});
  for (const v1::Circuit& c : plan.circuits()) {
    std::vector<std::string> xcs;
    for (const v1::CrossConnect& xc : c.cross_connects()) xcs.push_back(CrossConnectText(xc));
    table.AddRow(
        {OnicPortText(c.source()), OnicPortText(c.destination()), absl::StrJoin(xcs, ", ")});
  }
  return out + table.Render();
}

std::string AllocationText(const v1::Allocation& a) {
  Description d;
  AddAllocationIdentity(a, d);
  AddPhases(a, d);
  d.List("Members", {a.members().begin(), a.members().end()});
  d.List("Circuits", CircuitLines(a));
  return d.Render();
}

std::string PhaseSwitchText(const v1::Allocation& a, const v1::Plan& plan) {
  std::string out = absl::StrCat(a.id(), " phase ", a.active_phase(), ": ", plan.remove_size(),
                                 " cross-connects removed, ", plan.add_size(), " added\n");
  for (const v1::CrossConnect& xc : plan.remove())
    absl::StrAppend(&out, "  removed  ", CrossConnectText(xc), "\n");
  for (const v1::CrossConnect& xc : plan.add())
    absl::StrAppend(&out, "  added    ", CrossConnectText(xc), "\n");
  return out;
}

std::string DrainText(const v1::DrainRequest& request, const v1::DrainResponse& response) {
  std::string out = absl::StrCat("drained ", DrainTargetText(request.target()));
  if (!request.reason().empty()) absl::StrAppend(&out, ": ", request.reason());
  out += "\n";
  const auto& affected = response.affected_allocations();
  if (affected.empty()) return out + "no allocation uses it\n";
  // Without evict the circuits stay: the operator should know whom a later failure would hit.
  return absl::StrCat(out,
                      request.evict() ? "allocations failed: " : "allocations still using it: ",
                      absl::StrJoin(affected, ", "), "\n");
}

std::string ReconcileText(const v1::ReconcileRequest& request,
                          const v1::ReconcileResponse& response) {
  std::string out = request.dry_run() ? "dry run: nothing was changed\n" : "";
  Table drift = DriftTable(response);
  if (drift.empty()) {
    absl::StrAppend(&out, "no drift",
                    request.switch_id().empty() ? "" : absl::StrCat(" on ", request.switch_id()),
                    "\n");
  } else {
    absl::StrAppend(&out, drift.Render());
  }
  absl::StrAppend(&out, "repaired ", response.repaired(), ", resumed ",
                  response.resumed_transactions(), " transactions, rolled back ",
                  response.rolled_back_transactions(), " transactions\n");
  return out;
}

}  // namespace fleet::cli
