// libFuzzer target: the REST driver's reading of a switch's answers (rest_json.h) must never
// crash, hang or throw on any body, and what it accepts must be what the body said.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "switch_adapters/polatis/rest_json.h"

namespace {

using fleet::polatis::ParseRestBody;

void Check(bool invariant) {
  if (!invariant) std::abort();
}

template <typename T>
void CheckSortedByPort(const std::vector<T>& items) {
  Check(std::is_sorted(items.begin(), items.end(),
                       [](const T& a, const T& b) { return a.port < b.port; }));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);

  // As the body of a refusal: what it says comes from the body, so it is no longer.
  Check(fleet::polatis::RestErrorMessage(body).size() <= body.size());

  // As the body of a 2xx answer to each GET the driver sends.
  std::optional<nlohmann::json> parsed = ParseRestBody(body);
  if (!parsed) return 0;
  if (auto pairs = fleet::polatis::ParseRestCrossConnects(*parsed); pairs.ok()) {
    Check(std::is_sorted(pairs->pairs.begin(), pairs->pairs.end()));
    Check(pairs->list_name.empty() || pairs->list_name == "pair" || pairs->list_name == "pairs");
  }
  if (auto ports = fleet::polatis::ParseRestPortConfig(*parsed); ports.ok()) {
    CheckSortedByPort(*ports);
  }
  if (auto power = fleet::polatis::ParseRestOpmPower(*parsed, {}); power.ok()) {
    CheckSortedByPort(*power);
    // Asking for some ports keeps only those, from the same readings.
    auto some = fleet::polatis::ParseRestOpmPower(*parsed, {1, 385});
    Check(some.ok() && some->size() <= power->size());
    for (const fleet::switch_adapters::PortPower& p : *some) Check(p.port == 1 || p.port == 385);
  }
  (void)fleet::polatis::ParseRestProductInformation(*parsed);
  (void)fleet::polatis::RestPortCount(*parsed);
  return 0;
}
