// libFuzzer entry for the TL1 text parsers: arbitrary bytes must never crash them, and what
// they accept must survive a format/parse round trip. Built with -DFLEET_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "switch_adapters/polatis/emulator/tl1_command.h"

namespace {

using fleet::polatis_emu::FormatPortList;
using fleet::polatis_emu::FormatTl1Command;
using fleet::polatis_emu::ParsePortList;
using fleet::polatis_emu::ParseTl1Command;
using fleet::polatis_emu::TakeTl1Command;

void Check(bool invariant) {
  if (!invariant) std::abort();
}

void CheckCommand(const std::string& text) {
  const fleet::polatis_emu::Tl1ParseResult parsed = ParseTl1Command(text);
  if (!parsed.command) {
    // The offset points into the command (or just past it, where ';' was missing).
    Check(parsed.error_offset <= text.size());
    Check(!parsed.ctag.empty());
    return;
  }
  const fleet::polatis_emu::Tl1Command& command = *parsed.command;
  Check(command.blocks.size() >= 4 && command.blocks.size() == command.offsets.size());
  for (size_t i = 0; i < command.blocks.size(); ++i) {
    Check(text.compare(command.offsets[i], command.blocks[i].size(), command.blocks[i]) == 0);
  }
  // Formatting gives back the bytes parsed, and those parse to the same command.
  const std::string formatted = FormatTl1Command(command);
  Check(formatted == text);
  const fleet::polatis_emu::Tl1ParseResult again = ParseTl1Command(formatted);
  Check(again.command.has_value() && *again.command == command);
}

void CheckPortList(const std::string& text) {
  const fleet::polatis_emu::PortListParseResult parsed = ParsePortList(text);
  if (!parsed.list) {
    Check(parsed.error_offset <= text.size());
    return;
  }
  const fleet::polatis_emu::PortListParseResult again = ParsePortList(FormatPortList(*parsed.list));
  Check(again.list.has_value() && *again.list == *parsed.list);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  CheckCommand(input);
  CheckPortList(input);

  // The stream splitter hands out ';'-terminated commands and loses no other byte.
  std::string buffer = input;
  size_t taken = 0;
  while (std::optional<std::string> command = TakeTl1Command(&buffer)) {
    Check(!command->empty() && command->back() == ';');
    Check(command->find(';') == command->size() - 1);
    taken += command->size();
    CheckCommand(*command);
  }
  Check(buffer.find(';') == std::string::npos);
  Check(taken + buffer.size() <= input.size());
  return 0;
}
