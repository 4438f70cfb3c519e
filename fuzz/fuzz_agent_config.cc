// libFuzzer target: the O-NIC agent's config file (ParseAgentConfig). Any text must be read or
// refused with INVALID_ARGUMENT, never crash or hang; a metrics port read is a port, 0 or -1.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "onic_agent/config.h"

namespace {

void Check(bool invariant) {
  if (!invariant) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<fleet::onic_agent::AgentConfig> config =
      fleet::onic_agent::ParseAgentConfig(text, "fuzz.yaml");
  if (!config.ok()) {
    Check(config.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  Check(config->metrics_port >= -1 && config->metrics_port <= 65535);
  return 0;
}
