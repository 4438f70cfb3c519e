#include "switch_adapters/polatis/emulator/tl1_command.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace fleet::polatis_emu {
namespace {

constexpr size_t kMaxCtagLength = 32;
constexpr size_t kMaxPortDigits = 9;

bool Printable(char c) { return c >= 0x20 && c <= 0x7e && c != ';'; }

// Each returns the offset (within the block) of the first bad character, or nullopt.
std::optional<size_t> CheckVerb(absl::string_view verb) {
  if (verb.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(verb[0]))) return 0;
  int hyphens = 0;
  bool after_hyphen = false;
  for (size_t i = 1; i < verb.size(); ++i) {
    const char c = verb[i];
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      after_hyphen = false;
    } else if (c == '-' && !after_hyphen) {
      ++hyphens;
      after_hyphen = true;
    } else {
      return i;
    }
  }
  if (hyphens == 0 || after_hyphen) return verb.size();  // a noun was expected here
  return std::nullopt;
}

std::optional<size_t> CheckTid(absl::string_view tid) {
  for (size_t i = 0; i < tid.size(); ++i) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(tid[i])) && tid[i] != '-') return i;
  }
  return std::nullopt;
}

std::optional<size_t> CheckAid(absl::string_view aid) {
  for (size_t i = 0; i < aid.size(); ++i) {
    if (!Printable(aid[i]) || aid[i] == ' ') return i;
  }
  return std::nullopt;
}

std::optional<size_t> CheckCtag(absl::string_view ctag) {
  if (ctag.empty()) return 0;
  for (size_t i = 0; i < ctag.size(); ++i) {
    if (i == kMaxCtagLength || !absl::ascii_isalnum(static_cast<unsigned char>(ctag[i]))) return i;
  }
  return std::nullopt;
}

std::optional<size_t> CheckPayload(absl::string_view block) {
  for (size_t i = 0; i < block.size(); ++i) {
    if (!Printable(block[i])) return i;
  }
  return std::nullopt;
}

std::string Header(absl::string_view sid, absl::Time now) {
  return absl::StrCat("\r\n\n   ", sid, " ",
                      absl::FormatTime("%y-%m-%d %H:%M:%S", now, absl::UTCTimeZone()), "\r\n");
}

}  // namespace

absl::string_view Tl1Command::block(size_t i) const {
  return i < blocks.size() ? absl::string_view(blocks[i]) : absl::string_view();
}

Tl1ParseResult ParseTl1Command(absl::string_view text) {
  Tl1ParseResult result;
  if (text.empty() || text.back() != ';') {
    result.error_offset = text.size();
    return result;
  }
  const absl::string_view body = text.substr(0, text.size() - 1);

  Tl1Command command;
  size_t start = 0;
  while (true) {
    const size_t colon = body.find(':', start);
    const size_t end = colon == absl::string_view::npos ? body.size() : colon;
    command.blocks.emplace_back(body.substr(start, end - start));
    command.offsets.push_back(start);
    if (colon == absl::string_view::npos) break;
    start = colon + 1;
  }
  if (command.blocks.size() > kCtagBlock && !CheckCtag(command.blocks[kCtagBlock])) {
    result.ctag = command.blocks[kCtagBlock];
  }

  // Left to right, so the offset reported is the first thing wrong in the command.
  for (size_t i = 0; i < command.blocks.size(); ++i) {
    const absl::string_view block = command.blocks[i];
    std::optional<size_t> bad;
    switch (i) {
      case kVerbBlock:
        bad = CheckVerb(block);
        break;
      case kTidBlock:
        bad = CheckTid(block);
        break;
      case kAidBlock:
        bad = CheckAid(block);
        break;
      case kCtagBlock:
        bad = CheckCtag(block);
        break;
      default:
        bad = CheckPayload(block);
        break;
    }
    if (bad) {
      result.error_offset = command.offsets[i] + *bad;
      return result;
    }
  }
  if (command.blocks.size() <= kCtagBlock) {
    result.error_offset = body.size();  // a ':' and more blocks were expected at the ';'
    return result;
  }
  command.verb = absl::AsciiStrToUpper(command.blocks[kVerbBlock]);
  result.command = std::move(command);
  return result;
}

std::string FormatTl1Command(const Tl1Command& command) {
  return absl::StrCat(absl::StrJoin(command.blocks, ":"), ";");
}

std::optional<std::string> TakeTl1Command(std::string* buffer) {
  const size_t first = buffer->find_first_not_of(" \t\r\n");
  buffer->erase(0, first == std::string::npos ? buffer->size() : first);
  const size_t end = buffer->find(';');
  if (end == std::string::npos) return std::nullopt;
  std::string command = buffer->substr(0, end + 1);
  buffer->erase(0, end + 1);
  return command;
}

PortListParseResult ParsePortList(absl::string_view text) {
  PortListParseResult result;
  if (absl::EqualsIgnoreCase(text, "ALL")) {
    result.list = PortList{.all = true, .ranges = {}};
    return result;
  }
  PortList list;
  size_t i = 0;
  // Reads one port number at `i`; false (with the error offset set) if there is none.
  auto number = [&](int* out) {
    const size_t begin = i;
    while (i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i]))) {
      if (i - begin == kMaxPortDigits) {
        result.error_offset = i;
        return false;
      }
      ++i;
    }
    if (i == begin) {
      result.error_offset = i;
      return false;
    }
    *out = std::atoi(std::string(text.substr(begin, i - begin)).c_str());
    return true;
  };
  while (true) {
    PortRange range;
    if (!number(&range.first)) return result;
    range.last = range.first;
    if (text.substr(i, 2) == "&&") {
      i += 2;
      if (!number(&range.last)) return result;
    }
    list.ranges.push_back(range);
    if (i == text.size()) break;
    if (text[i] != '&') {
      result.error_offset = i;
      return result;
    }
    ++i;
  }
  result.list = std::move(list);
  return result;
}

std::string FormatPortList(const PortList& list) {
  if (list.all) return "ALL";
  return absl::StrJoin(list.ranges, "&", [](std::string* out, const PortRange& range) {
    if (range.first == range.last) {
      absl::StrAppend(out, range.first);
    } else {
      absl::StrAppend(out, range.first, "&&", range.last);
    }
  });
}

int64_t PortCount(const PortList& list) {
  int64_t count = 0;
  for (const PortRange& range : list.ranges) {
    count += std::abs(static_cast<int64_t>(range.last) - range.first) + 1;
  }
  return count;
}

std::vector<int> ExpandPortList(const PortList& list) {
  std::vector<int> ports;
  for (const PortRange& range : list.ranges) {
    const int step = range.first <= range.last ? 1 : -1;
    for (int port = range.first;; port += step) {
      ports.push_back(port);
      if (port == range.last) break;
    }
  }
  return ports;
}

std::string Tl1Completed(absl::string_view sid, absl::Time now, absl::string_view ctag,
                         const std::vector<std::string>& data) {
  std::string out = absl::StrCat(Header(sid, now), "M  ", ctag, " COMPLD\r\n");
  for (const std::string& line : data) absl::StrAppend(&out, "   \"", line, "\"\r\n");
  absl::StrAppend(&out, ";");
  return out;
}

std::string Tl1Denied(absl::string_view sid, absl::Time now, absl::string_view ctag,
                      absl::string_view code, absl::string_view text) {
  return absl::StrCat(Header(sid, now), "M  ", ctag, " DENY\r\n   ", code, "\r\n   /* ", text,
                      " */\r\n;");
}

}  // namespace fleet::polatis_emu
