// TL1 text as the Polatis switch reads and writes it: splitting a byte stream into commands,
// parsing one command `VERB-NOUN:TID:AID:CTAG[:GB[:payload...]];`, parsing port lists
// (`1&2`, `1&&4`, `ALL`) and formatting GR-831 responses. No I/O, so it can be fuzzed.
//
// Offsets in parse errors count from the command's first character (after the whitespace
// between commands), which is what `Parse error at offset N in command` reports.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TL1_COMMAND_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TL1_COMMAND_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fleet::polatis_emu {

// Block positions in a command; payload blocks follow the general block.
inline constexpr size_t kVerbBlock = 0;
inline constexpr size_t kTidBlock = 1;
inline constexpr size_t kAidBlock = 2;
inline constexpr size_t kCtagBlock = 3;
inline constexpr size_t kGeneralBlock = 4;
inline constexpr size_t kFirstPayloadBlock = 5;

struct Tl1Command {
  std::string verb;                 // upper-cased, e.g. "ENT-PATCH"
  std::vector<std::string> blocks;  // every ':'-separated block as typed, verb first
  std::vector<size_t> offsets;      // where each block starts in the command text

  const std::string& aid() const { return blocks[kAidBlock]; }
  const std::string& ctag() const { return blocks[kCtagBlock]; }
  // Block `i`, or "" when the command has fewer blocks.
  absl::string_view block(size_t i) const;
  bool operator==(const Tl1Command&) const = default;
};

struct Tl1ParseResult {
  std::optional<Tl1Command> command;
  size_t error_offset = 0;  // when !command: the first character that breaks the grammar
  std::string ctag = "0";   // when !command: the command's ctag if one could be read
};

// Parses one command, `text` ending with its ';'. Grammar (case-insensitive verb):
//   verb  = ALPHA *ALNUM 1*("-" 1*ALNUM)     tid = *(ALNUM / "-")
//   aid   = *(printable, no space)           ctag = 1*32ALNUM
//   later blocks: printable ASCII, spaces allowed. ':' and ';' always delimit (no quoting).
Tl1ParseResult ParseTl1Command(absl::string_view text);

// The command's text: blocks joined by ':' and ';'. ParseTl1Command(FormatTl1Command(c)) == c.
std::string FormatTl1Command(const Tl1Command& command);

// Removes the next complete command (through its ';') from the front of `buffer`, dropping
// the whitespace before it; nullopt while no ';' has arrived.
std::optional<std::string> TakeTl1Command(std::string* buffer);

// A port list: `ALL`, or `&`-separated ports and `A&&B` ranges (inclusive, either direction).
struct PortRange {
  int first = 0;
  int last = 0;
  bool operator==(const PortRange&) const = default;
};
struct PortList {
  bool all = false;
  std::vector<PortRange> ranges;
  bool operator==(const PortList&) const = default;
};
struct PortListParseResult {
  std::optional<PortList> list;
  size_t error_offset = 0;  // when !list, within the parsed text
};
// Ports have at most 9 digits; the caller checks them against the switch size before
// expanding, so `1&&999999999` costs nothing here.
PortListParseResult ParsePortList(absl::string_view text);
std::string FormatPortList(const PortList& list);
int64_t PortCount(const PortList& list);  // ALL counts 0
// Every port of `list` in order (ranges expanded). Only for lists already range-checked.
std::vector<int> ExpandPortList(const PortList& list);

// GR-831 responses. `data` lines are sent quoted, one per line.
std::string Tl1Completed(absl::string_view sid, absl::Time now, absl::string_view ctag,
                         const std::vector<std::string>& data);
std::string Tl1Denied(absl::string_view sid, absl::Time now, absl::string_view ctag,
                      absl::string_view code, absl::string_view text);

}  // namespace fleet::polatis_emu

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TL1_COMMAND_H_
