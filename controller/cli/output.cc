#include "controller/cli/output.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/proto_time.h"

namespace fleet::cli {
namespace {

// A table cell as shown: a newline inside would break the grid, and an empty cell would
// shift the eye to the next column.
std::string CellText(std::string cell) {
  absl::StrReplaceAll({{"\r\n", " "}, {"\n", " "}, {"\t", " "}}, &cell);
  return cell.empty() ? "-" : cell;
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
}  // namespace

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

std::string PadRight(const std::string& text, size_t width) {
  size_t w = DisplayWidth(text);
  return w >= width ? text : text + std::string(width - w, ' ');
}

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

std::string AgeText(const google::protobuf::Timestamp& time, absl::Time now) {
  return FormatTime(time).empty() ? "" : FormatAge(now - FromProtoTime(time));
}

std::string TimeWithAge(const google::protobuf::Timestamp& time, absl::Time now) {
  if (FormatTime(time).empty()) return "";
  absl::Duration since = now - FromProtoTime(time);
  if (since < absl::ZeroDuration()) {
    return absl::StrCat(FormatTime(time), " (in ", FormatAge(-since), ")");
  }
  return absl::StrCat(FormatTime(time), " (", FormatAge(since), " ago)");
}

const std::vector<std::string>& OutputFormatNames() {
  static const auto* names = new std::vector<std::string>{"table", "json", "yaml", "dot"};
  return *names;
}

std::optional<OutputFormat> ParseOutputFormat(absl::string_view text) {
  // In the order of OutputFormatNames().
  constexpr OutputFormat kFormats[] = {OutputFormat::kTable, OutputFormat::kJson,
                                       OutputFormat::kYaml, OutputFormat::kDot};
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
  if (format == OutputFormat::kDot) {
    return absl::InvalidArgumentError(kDotDrawsOnly);
  }
  return format == OutputFormat::kYaml ? ToYaml(message) : ToJson(message);
}

absl::StatusOr<std::string> FormatStreamedMessage(OutputFormat format,
                                                  const google::protobuf::Message& message) {
  if (format == OutputFormat::kDot) return FormatMessage(format, message);
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

std::string FormatTime(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", FromProtoTime(time), absl::UTCTimeZone());
}

}  // namespace fleet::cli
