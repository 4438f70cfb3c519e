// Parsing of TL1 responses as a Polatis switch sends them (GR-831 framing):
//
//   \r\n\n   SID YY-MM-DD HH:MM:SS\r\nM  CTAG COMPLD\r\n   "data"\r\n   "data"\r\n;
//   \r\n\n   SID YY-MM-DD HH:MM:SS\r\nM  CTAG DENY\r\n   CODE\r\n   /* text */\r\n;
//
// Pure functions over bytes: no I/O, so they are unit-tested and fuzzed directly.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_TL1_RESPONSE_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_TL1_RESPONSE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleet::polatis {

struct Tl1Response {
  std::string ctag;
  bool completed = false;         // COMPLD; false for DENY (and other completion codes).
  std::string completion;         // "COMPLD", "DENY", "PRTL", "RTRV", ...
  std::vector<std::string> data;  // Quoted data lines, without the quotes.
  std::string error_code;         // DENY: e.g. "IDNV".
  std::string error_text;         // DENY: the comment's text, e.g. "Invalid OXC port: 1000".
  bool autonomous = false;        // An "A" (autonomous) message, not an answer to a command.
};

// Splits off one complete message from `buffer`: everything up to and including the first
// ';' that ends a message (a ';' inside quotes or a comment does not). Returns nullopt when
// no complete message is buffered yet.
std::optional<std::string> TakeMessage(std::string& buffer);

// Parses one complete message (as returned by TakeMessage). INVALID_ARGUMENT names what is
// malformed and where.
absl::StatusOr<Tl1Response> ParseTl1Response(absl::string_view message);

// "1,385" → {1, 385}; "385:-3.10" → {"385", "-3.10"} style helpers for data lines.
std::optional<std::pair<uint32_t, uint32_t>> ParsePatchLine(absl::string_view line);
std::optional<std::pair<uint32_t, std::string>> ParsePortValueLine(absl::string_view line);

}  // namespace fleet::polatis

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_TL1_RESPONSE_H_
