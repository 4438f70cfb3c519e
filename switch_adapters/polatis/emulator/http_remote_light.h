// How one polatis-emu asks another what arrives at its egress, for light crossing a trunk
// fiber: GET http://FROM/sim/v1/light/E?hops=N on the far emulator's side-channel.
//
// libcurl used directly rather than through the adapter's HTTP client: the emulator shares no
// code with the adapter (see CMakeLists.txt).
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_HTTP_REMOTE_LIGHT_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_HTTP_REMOTE_LIGHT_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "switch_adapters/polatis/emulator/switch_model.h"

namespace fleet::polatis_emu {

class HttpRemoteLight final : public RemoteLight {
 public:
  // `timeout` bounds each fetch, connecting included: a reader of light waits at most this
  // long on a far emulator that is down or stuck.
  explicit HttpRemoteLight(absl::Duration timeout = absl::Seconds(1));
  ~HttpRemoteLight() override;

  // UNAVAILABLE when the far emulator cannot be reached in time; INVALID_ARGUMENT when it
  // refuses (its error message included) or answers something that is not a light reading.
  absl::StatusOr<Light> Fetch(const std::string& from, int egress, int hops) override;

 private:
  const absl::Duration timeout_;
  absl::Mutex mu_;
  // Handles not in use by a fetch. Kept so their connections are reused: light is read
  // often (every agent polls it).
  std::vector<void*> idle_handles_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::polatis_emu

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_HTTP_REMOTE_LIGHT_H_
