// libFuzzer target: an inventory file (ParseInventoryYaml), then the whole-site validation and
// the apply planning fleetd runs on it (PlanApply over an empty site, as on a first apply).
// Any text must be parsed or refused with INVALID_ARGUMENT naming the file, never crash or
// hang; what is parsed must survive the wire; a site that plans must plan again to no change,
// as `fleetctl apply` twice does.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "controller/inventory/inventory.h"

namespace {

constexpr char kFile[] = "fuzz.yaml";

void Check(bool invariant) {
  if (!invariant) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<fleet::v1::Inventory> site = fleet::inventory::ParseInventoryYaml(text, kFile);
  if (!site.ok()) {
    Check(site.status().code() == absl::StatusCode::kInvalidArgument);
    Check(absl::StartsWith(site.status().message(), kFile));
    return 0;
  }
  // What is read can be sent over gRPC (strings are UTF-8) and read back the same.
  fleet::v1::Inventory sent;
  Check(sent.ParseFromString(site->SerializeAsString()) &&
        sent.SerializeAsString() == site->SerializeAsString());
  (void)fleet::inventory::ValidateInventory(*site);
  absl::StatusOr<fleet::store::InventoryWrite> first =
      fleet::inventory::PlanApply(fleet::v1::Inventory(), *site);
  if (!first.ok()) {
    Check(first.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  fleet::v1::Inventory stored = first->objects;
  stored.set_site(site->site());
  absl::StatusOr<fleet::store::InventoryWrite> again = fleet::inventory::PlanApply(stored, *site);
  Check(again.ok() && again->created.empty() && again->updated.empty());
  return 0;
}
