// The running executable's GNU build ID: a hash the linker computes over the program it wrote,
// so two builds whose code differs have different ones (the project version does not change).
// For records only valid for the build that wrote them. It covers what is linked into the
// executable (all of fleet's own libraries), not the shared libraries it loads.
#ifndef FLEET_COMMON_BUILD_ID_H_
#define FLEET_COMMON_BUILD_ID_H_

#include <string>

namespace fleet {

// The build ID of the main executable as lower-case hex, or empty when it has none (linked
// without --build-id; Debian's toolchain always adds one).
std::string ExecutableBuildId();

}  // namespace fleet

#endif  // FLEET_COMMON_BUILD_ID_H_
