#include "common/hex_id.h"

#include <charconv>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace fleet {
namespace {

// "48-b0-2d-03-00-a1-b2-c3" (or with ':'): eight two-digit bytes, one separator throughout.
bool IsByteGroups(absl::string_view text) {
  if (text.size() != 23) return false;
  const char separator = text[2];
  if (separator != '-' && separator != ':') return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i % 3 == 2 ? text[i] != separator : !absl::ascii_isxdigit(text[i])) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<uint64_t> ParseHexId(absl::string_view text, int bits, absl::string_view what) {
  std::string digits = absl::AsciiStrToLower(text);
  if (bits >= 64 && IsByteGroups(text)) {
    digits = absl::StrReplaceAll(digits, {{"-", ""}, {":", ""}});
  } else if (absl::StartsWith(digits, "0x")) {
    digits.erase(0, 2);
  }
  const uint64_t max = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  uint64_t value = 0;
  // from_chars takes no sign and no 0x: anything left over is refused.
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 16);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || value > max ||
      value == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", text, "' is not a non-zero hex number of at most ", bits,
                     " bits (e.g. ", bits <= 16 ? "0x10de" : "48-b0-2d-03-00-a1-b2-c3", ")"));
  }
  return value;
}

std::string PcieIdText(uint32_t id) { return absl::StrCat(absl::Hex(id, absl::kZeroPad4)); }

std::string DsnText(uint64_t dsn) {
  std::string out;
  for (int shift = 56; shift >= 0; shift -= 8) {
    absl::StrAppend(&out, absl::Hex((dsn >> shift) & 0xff, absl::kZeroPad2), shift > 0 ? "-" : "");
  }
  return out;
}

}  // namespace fleet
