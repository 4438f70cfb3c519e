#include "switch_adapters/polatis/tl1_response.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fleet::polatis {

std::optional<std::string> TakeMessage(std::string& buffer) {
  bool in_quote = false;
  bool in_comment = false;
  for (size_t i = 0; i < buffer.size(); ++i) {
    const char c = buffer[i];
    if (in_comment) {
      if (c == '*' && i + 1 < buffer.size() && buffer[i + 1] == '/') {
        in_comment = false;
        ++i;
      }
    } else if (in_quote) {
      if (c == '\\' && i + 1 < buffer.size()) {
        ++i;
      } else if (c == '"') {
        in_quote = false;
      }
    } else if (c == '"') {
      in_quote = true;
    } else if (c == '/' && i + 1 < buffer.size() && buffer[i + 1] == '*') {
      in_comment = true;
      ++i;
    } else if (c == ';') {
      std::string message = buffer.substr(0, i + 1);
      buffer.erase(0, i + 1);
      return message;
    }
  }
  return std::nullopt;
}

absl::StatusOr<Tl1Response> ParseTl1Response(absl::string_view message) {
  std::vector<absl::string_view> lines =
      absl::StrSplit(message, absl::ByAnyChar("\r\n"), absl::SkipWhitespace());
  // Expected: header line (SID date time), the "M  CTAG CODE" (or "A  ATAG ...") line,
  // zero or more body lines, and the final ";".
  Tl1Response response;
  size_t i = 0;
  // The header's SID, date and time are informational; a missing header is tolerated
  // because some firmware omits it on DENY.
  for (; i < lines.size(); ++i) {
    absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
    if (absl::StartsWith(line, "M ") || absl::StartsWith(line, "A ") ||
        absl::StartsWith(line, "*")) {
      break;
    }
  }
  if (i == lines.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TL1 response has no 'M CTAG CODE' line: '", message.substr(0, 120), "'"));
  }
  std::vector<absl::string_view> words =
      absl::StrSplit(absl::StripAsciiWhitespace(lines[i]), ' ', absl::SkipEmpty());
  if (words[0] == "A" || words[0][0] == '*') {
    response.autonomous = true;
    if (words.size() > 1) response.ctag = std::string(words[1]);
    return response;
  }
  if (words.size() < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("TL1 response line '", lines[i], "' is not 'M CTAG CODE'"));
  }
  response.ctag = std::string(words[1]);
  response.completion = std::string(words[2]);
  response.completed = response.completion == "COMPLD";
  for (++i; i < lines.size(); ++i) {
    absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
    if (line == ";" || line.empty()) continue;
    if (absl::ConsumePrefix(&line, "/*")) {
      absl::ConsumeSuffix(&line, ";");
      line = absl::StripAsciiWhitespace(line);
      absl::ConsumeSuffix(&line, "*/");
      response.error_text = std::string(absl::StripAsciiWhitespace(line));
    } else if (absl::ConsumePrefix(&line, "\"")) {
      absl::ConsumeSuffix(&line, ";");
      if (!absl::ConsumeSuffix(&line, "\"")) {
        return absl::InvalidArgumentError(
            absl::StrCat("TL1 data line has no closing quote: '", lines[i], "'"));
      }
      response.data.emplace_back(line);
    } else if (!response.completed && response.error_code.empty()) {
      absl::ConsumeSuffix(&line, ";");
      response.error_code = std::string(absl::StripAsciiWhitespace(line));
    } else {
      absl::ConsumeSuffix(&line, ";");
      line = absl::StripAsciiWhitespace(line);
      if (!line.empty())
        response.data.emplace_back(line);  // Unquoted data, as some firmware sends.
    }
  }
  return response;
}

std::optional<std::pair<uint32_t, uint32_t>> ParsePatchLine(absl::string_view line) {
  std::vector<absl::string_view> parts = absl::StrSplit(line, ',');
  uint32_t ingress = 0, egress = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &ingress) ||
      !absl::SimpleAtoi(parts[1], &egress)) {
    return std::nullopt;
  }
  return std::make_pair(ingress, egress);
}

std::optional<std::pair<uint32_t, std::string>> ParsePortValueLine(absl::string_view line) {
  std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(line, absl::MaxSplits(':', 1));
  uint32_t port = 0;
  if (parts.second.empty() || !absl::SimpleAtoi(parts.first, &port)) return std::nullopt;
  return std::make_pair(port, std::string(parts.second));
}

}  // namespace fleet::polatis
