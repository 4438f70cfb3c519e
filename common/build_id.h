// The running executable's GNU build ID: a hash the linker computes over the program it wrote,
// so it differs between any two builds whose code differs (the project version does not).
// For records that are only valid for the build that wrote them.
#ifndef FLEET_COMMON_BUILD_ID_H_
#define FLEET_COMMON_BUILD_ID_H_

#include <string>

namespace fleet {

// The build ID of the main executable as lower-case hex, or empty when it has none (linked
// without --build-id; Debian's toolchain always adds one).
std::string ExecutableBuildId();

}  // namespace fleet

#endif  // FLEET_COMMON_BUILD_ID_H_
