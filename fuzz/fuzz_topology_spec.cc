// libFuzzer target: fleetctl's topology request file (ParseTopologySpec) and the lease text
// it and `--lease` take (ParseLease). Any text must be read or refused with
// INVALID_ARGUMENT, never crash or hang; a request read can be sent over gRPC; a lease read is
// a valid, non-negative Duration.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "controller/cli/topology_spec.h"

namespace {

void Check(bool invariant) {
  if (!invariant) std::abort();
}

void CheckRefusal(const absl::Status& status) {
  Check(status.code() == absl::StatusCode::kInvalidArgument && !status.message().empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<fleet::v1::RequestTopologyRequest> request =
      fleet::cli::ParseTopologySpec(text, "fuzz.yaml");
  if (request.ok()) {
    // What is read can be sent to fleetd (strings are UTF-8) and read back the same.
    fleet::v1::RequestTopologyRequest sent;
    Check(sent.ParseFromString(request->SerializeAsString()) &&
          sent.SerializeAsString() == request->SerializeAsString());
  } else {
    CheckRefusal(request.status());
  }

  absl::StatusOr<google::protobuf::Duration> lease = fleet::cli::ParseLease(text);
  if (lease.ok()) {
    Check(lease->seconds() >= 0 && lease->nanos() >= 0 && lease->nanos() < 1'000'000'000);
  } else {
    CheckRefusal(lease.status());
  }
  return 0;
}
