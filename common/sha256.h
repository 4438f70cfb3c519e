// SHA-256 of bytes, for records that say "these very bytes" across restarts (absl::Hash and
// std::hash are seeded per process). Not for secrets or signatures: common/pki does those.
#ifndef FLEET_COMMON_SHA256_H_
#define FLEET_COMMON_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

namespace fleet {

// The SHA-256 of `bytes` as 64 lower-case hex digits.
std::string Sha256Hex(absl::string_view bytes);

}  // namespace fleet

#endif  // FLEET_COMMON_SHA256_H_
