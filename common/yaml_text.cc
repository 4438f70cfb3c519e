#include "common/yaml_text.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace fleet {
namespace {

// The offset of the first byte of `text` that is not part of well-formed UTF-8 (no overlong
// forms, no surrogates, nothing past U+10FFFF: what protobuf accepts in a string field), or
// npos when all of it is.
size_t FirstNonUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // The range of the byte after the lead.
    if (lead < 0x80) {
      length = 1;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // Overlong below U+0800.
      if (lead == 0xED) high = 0x9F;  // Surrogates U+D800..U+DFFF.
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;   // Overlong below U+10000.
      if (lead == 0xF4) high = 0x8F;  // Past U+10FFFF.
    } else {
      return i;
    }
    if (i + length > text.size()) return i;
    for (size_t k = 1; k < length; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      if (next < (k == 1 ? low : 0x80) || next > (k == 1 ? high : 0xBF)) return i;
    }
    i += length;
  }
  return absl::string_view::npos;
}

// INVALID_ARGUMENT "FILE:LINE: WHAT (byte 0xNN at column C)" for the byte at `offset`.
absl::Status BadByte(absl::string_view text, size_t offset, absl::string_view file_name,
                     absl::string_view what) {
  const absl::string_view before = text.substr(0, offset);
  const size_t line_start = before.rfind('\n');
  const size_t column = line_start == absl::string_view::npos ? offset + 1 : offset - line_start;
  return absl::InvalidArgumentError(absl::StrCat(
      file_name, ":", std::count(before.begin(), before.end(), '\n') + 1, ": ", what, " (byte 0x",
      absl::Hex(static_cast<unsigned char>(text[offset]), absl::kZeroPad2), " at column ", column,
      ")"));
}

}  // namespace

absl::StatusOr<YAML::Node> LoadYaml(absl::string_view text, absl::string_view file_name) {
  // yaml-cpp passes any bytes through into its strings, which go into protos and over gRPC,
  // whose receiving side refuses a string that is not UTF-8 with no word of which: refused
  // here instead, where the file and line can be named.
  if (const size_t bad = FirstNonUtf8(text); bad != absl::string_view::npos) {
    return BadByte(text, bad, file_name, "not UTF-8 text");
  }
  // A NUL byte is not YAML text (YAML 1.2, c-printable). It is also how yaml-cpp guesses
  // UTF-16 or UTF-32 without a byte-order mark, and its decoding of those lets lone surrogates
  // through as invalid UTF-8: so a NUL anywhere is refused, and the text is always read as the
  // UTF-8 just checked.
  if (const size_t nul = text.find('\0'); nul != absl::string_view::npos) {
    return BadByte(text, nul, file_name, "a NUL byte is not YAML text");
  }
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ":", e.mark.line + 1, ": YAML syntax error: ", e.msg));
  }
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace fleet
