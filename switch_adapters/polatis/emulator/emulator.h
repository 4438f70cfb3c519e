// polatis-emu assembled: one SwitchModel behind the TL1 server and the REST server (which
// also carries the /sim/v1 side-channel), fetching light across trunks over HTTP. main() and
// in-process tests build it from EmulatorOptions.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_EMULATOR_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_EMULATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "switch_adapters/polatis/emulator/http_remote_light.h"
#include "switch_adapters/polatis/emulator/rest_api.h"
#include "switch_adapters/polatis/emulator/rest_server.h"
#include "switch_adapters/polatis/emulator/switch_model.h"
#include "switch_adapters/polatis/emulator/tl1_server.h"

namespace fleet::polatis_emu {

// The command line of polatis-emu (docs/polatis-emulator.md), as values.
struct EmulatorOptions {
  SwitchSize size;
  std::string listen_address = "127.0.0.1";
  int tl1_port = 3082;  // the real switch's ports; 0 picks a free one
  int rest_port = 8008;
  std::string user = "admin";
  std::string password = "root";
  absl::Duration switch_time = absl::Milliseconds(25);
  std::string state_file;  // empty: nothing persisted
  absl::Duration session_timeout = absl::ZeroDuration();
  double insertion_loss_db = 1.5;
  std::string sid = "POLATIS-EMU";
  YangRevision yang_revision = YangRevision::kCurrent;
  // Both set: the REST port (and /sim/v1 on it) serves HTTPS only.
  std::string tls_certificate_file;
  std::string tls_key_file;
};

class Emulator {
 public:
  // Loads the state file, binds both ports and starts serving. `clock` is not owned.
  static absl::StatusOr<std::unique_ptr<Emulator>> Start(const EmulatorOptions& options,
                                                         const Clock* clock);
  ~Emulator();  // Stop()

  std::string tl1_address() const;   // "HOST:PORT"
  std::string rest_address() const;  // "HOST:PORT"
  SwitchModel& model() { return *model_; }

  // Closes every open TL1 and REST connection; both listeners stay open.
  void DropConnections();

  // Stops both servers, waking any session waiting on settling or latency. Idempotent.
  void Stop();

 private:
  explicit Emulator(const EmulatorOptions& options) : options_(options) {}

  const EmulatorOptions options_;
  HttpRemoteLight remote_light_;  // before model_, which uses it
  std::unique_ptr<SwitchModel> model_;
  std::unique_ptr<Tl1Server> tl1_;
  std::unique_ptr<RestServer> rest_;
};

}  // namespace fleet::polatis_emu

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_EMULATOR_H_
