// How fleetctl shows things: aligned tables and "Key: value" descriptions for people, the
// response protos as JSON or YAML for scripts. The layouts and formats live here; what each
// object looks like in them is in object_text.h, tables.h and descriptions.h.
//
// Every function here is pure text formatting (no RPCs, no clock: the caller passes `now`),
// so the rendering of each object kind is tested without a server.
#ifndef FLEET_CONTROLLER_CLI_OUTPUT_H_
#define FLEET_CONTROLLER_CLI_OUTPUT_H_

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fleet::cli {

// kDot (Graphviz) draws only `get circuits` and `describe allocation` (dot.h).
enum class OutputFormat { kTable, kJson, kYaml, kDot };
// The usage error for -o dot anywhere else.
inline constexpr char kDotDrawsOnly[] =
    "-o dot draws only `get circuits` and `describe allocation`; use table, json or yaml";

// The names -o accepts, in the order help and errors list them: "table", "json", "yaml",
// "dot".
const std::vector<std::string>& OutputFormatNames();
// One of OutputFormatNames(); nullopt for anything else.
std::optional<OutputFormat> ParseOutputFormat(absl::string_view text);

// A state word (`ready`, `degraded`, `failed`, `up`, `down`, `ok`, ...) wrapped in the ANSI
// colour people read it by: green when all is well, yellow when it needs an eye, red when it
// failed. Words with no colour (pending, enabled, ...) are returned as they are.
std::string ColorState(absl::string_view word);

// Columns separated by two spaces, each as wide as its widest cell, header in upper case,
// no trailing spaces. Width counts UTF-8 code points, so cells holding '→' still line up.
class Table {
 public:
  explicit Table(std::vector<std::string> columns);

  // An empty cell is shown as "-"; missing trailing cells are empty. A newline inside a cell
  // would break the grid, so it is shown as a space.
  void AddRow(std::vector<std::string> cells);
  // The cells of `column` (as named to the constructor) are state words, shown with
  // ColorState when rendered in colour.
  void MarkStateColumn(absl::string_view column);
  bool empty() const { return rows_.empty(); }
  // With `color`, state columns are coloured; the widths are those of the plain text, so the
  // columns line up either way.
  std::string Render(bool color = false) const;

 private:
  std::vector<std::string> columns_;
  std::vector<bool> state_columns_;
  std::vector<std::vector<std::string>> rows_;
};

// A `describe` block: "Key:" then the value, values aligned after the longest key. A list
// goes under its key, one item per line, indented; an item's own extra lines are indented
// further, so an item can carry nested detail.
class Description {
 public:
  void Field(std::string key, std::string value);              // An empty value is shown as "-".
  void List(std::string key, std::vector<std::string> items);  // Empty: "(none)".
  std::string Render() const;

 private:
  struct Entry {
    std::string key;
    std::string value;
    std::vector<std::string> items;
    bool is_list = false;
  };
  std::vector<Entry> entries_;
};

// The proto as JSON: proto field names, indented, default values left out, one trailing
// newline. The stable form for scripts.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);
// The same JSON as block-style YAML (enums keep their proto JSON names).
absl::StatusOr<std::string> ToYaml(const google::protobuf::Message& message);
// ToJson or ToYaml by `format` (kTable is not a message format and is a caller bug);
// INVALID_ARGUMENT for kDot, which draws only what dot.h draws.
absl::StatusOr<std::string> FormatMessage(OutputFormat format,
                                          const google::protobuf::Message& message);
// One message of a followed stream: JSON on one line (so each line parses alone), or a YAML
// document starting with "---".
absl::StatusOr<std::string> FormatStreamedMessage(OutputFormat format,
                                                  const google::protobuf::Message& message);

// Number of columns `text` takes on a terminal: its UTF-8 code points.
size_t DisplayWidth(absl::string_view text);

// An age or a duration as kubectl shows them: precise while small, coarser as it grows:
// "45s", "3m12s", "42m", "2h", "5h30m", "36h", "5d", "3d4h", "90d", "2y10d". Negative (clock
// skew between client and server) is "0s".
std::string FormatAge(absl::Duration age);
// RFC 3339 in UTC to the second, e.g. 2024-05-01T12:00:00Z; "" when unset.
std::string FormatTime(const google::protobuf::Timestamp& time);

// `text`, or "-" when it is empty: how tables and descriptions show a missing value.
std::string OrDash(const std::string& text);
// `text` padded with spaces to `width` display columns (never cut).
std::string PadRight(const std::string& text, size_t width);
// One line of a table whose column widths are fixed in advance (a followed stream's rows):
// each cell but the last is padded to its width, and always followed by at least two spaces;
// cells are shown as Table shows them.
std::string FixedWidthLine(const std::vector<std::string>& cells,
                           const std::vector<size_t>& widths);
// The age of `time` for a table's AGE column: FormatAge(now - time); "" when unset.
std::string AgeText(const google::protobuf::Timestamp& time, absl::Time now);
// FormatTime with the age: `2023-11-14T22:08:20Z (5m ago)`, or `(in 2m)` for a time to come;
// "" when unset.
std::string TimeWithAge(const google::protobuf::Timestamp& time, absl::Time now);

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_OUTPUT_H_
