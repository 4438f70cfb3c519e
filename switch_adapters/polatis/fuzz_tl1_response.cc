// libFuzzer target: the adapter's TL1 response parsing must never crash, hang or read out
// of bounds on what a switch (or a broken link) sends, and what it extracts must come from
// the input.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "switch_adapters/polatis/tl1_response.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string buffer(reinterpret_cast<const char*>(data), size);
  const size_t total = buffer.size();
  size_t consumed = 0;
  while (std::optional<std::string> message = fleet::polatis::TakeMessage(buffer)) {
    consumed += message->size();
    // Every message ends at a ';' and the buffer only shrinks by what was taken.
    if (message->empty() || message->back() != ';' || consumed + buffer.size() != total) abort();
    absl::StatusOr<fleet::polatis::Tl1Response> response =
        fleet::polatis::ParseTl1Response(*message);
    if (response.ok()) {
      for (const std::string& line : response->data) {
        if (line.size() > message->size()) abort();
        fleet::polatis::ParsePatchLine(line);
        fleet::polatis::ParsePortValueLine(line);
      }
      if (response->ctag.size() > message->size()) abort();
    }
  }
  return 0;
}
