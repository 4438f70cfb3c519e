// One TL1 session of polatis-emu: its login state and the answer to each command, as
// docs/polatis-emulator.md specifies. No sockets: Tl1Server feeds it the commands of one
// connection, in order, from that connection's thread.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TL1_SESSION_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TL1_SESSION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "switch_adapters/polatis/emulator/switch_model.h"
#include "switch_adapters/polatis/emulator/tl1_command.h"

namespace fleet::polatis_emu {

struct Tl1SessionOptions {
  std::string user = "admin";
  std::string password = "root";
  std::string sid = "POLATIS-EMU";
  absl::Duration session_timeout = absl::ZeroDuration();  // idle time to logout; 0 = never
  SwitchIdentity identity;
};

class Tl1Session {
 public:
  // `model` and `clock` are not owned. `wait` delays answers (settling, injected latency).
  Tl1Session(const Tl1SessionOptions& options, SwitchModel* model, const Clock* clock, Waiter wait);

  // Answers one command (`text` through its ';'): the response bytes, GR-831 framed. Returns
  // once the change is made and, for cross-connects made, settled.
  std::string Handle(absl::string_view text);

 private:
  struct Reply {
    std::string code;  // empty: COMPLD
    std::string text;
    std::vector<std::string> data;
    absl::Time settled_at = absl::InfinitePast();  // answer no earlier than this
  };
  static Reply Ok(std::vector<std::string> data = {});
  static Reply Deny(absl::string_view code, absl::string_view text);
  static Reply DenyFor(const absl::Status& status);

  enum class AidPorts { kRequired, kAllWhenEmpty };
  using Handler = Reply (Tl1Session::*)(const Tl1Command&);
  struct Verb {
    Handler handler;
    std::vector<std::string> keys;  // KEY= parameters the verb accepts
  };
  static const Verb* FindVerb(absl::string_view verb);

  Reply Execute(const Tl1Command& command);
  Reply Login(const Tl1Command& command, absl::Time now);
  bool LoggedIn(absl::Time now);
  std::optional<Reply> CheckParameters(const Tl1Command& command,
                                       const std::vector<std::string>& keys) const;
  // Parses the AID as ports of either side, range-checked; a Deny on error.
  std::optional<Reply> AidPortList(const Tl1Command& command, AidPorts use,
                                   std::vector<int>* ports) const;
  // Checks every port of `list` is within [low, high]; a Deny naming the first that is not.
  std::optional<Reply> CheckRange(const PortList& list, int low, int high) const;

  Reply EnterPatch(const Tl1Command& command);
  Reply DeletePatch(const Tl1Command& command);
  Reply RetrievePatch(const Tl1Command& command);
  Reply RetrieveEquipment(const Tl1Command& command);
  Reply RetrieveNeType(const Tl1Command& command);
  Reply RetrieveInventory(const Tl1Command& command);
  Reply CloseShutters(const Tl1Command& command);
  Reply OpenShutters(const Tl1Command& command);
  Reply SetShutters(const Tl1Command& command, bool open);
  Reply RetrieveShutters(const Tl1Command& command);
  Reply RetrievePower(const Tl1Command& command);
  Reply RetrieveAlarms(const Tl1Command& command);

  const Tl1SessionOptions options_;
  SwitchModel* const model_;
  const Clock* const clock_;
  const Waiter wait_;

  // Touched only by the connection's own thread.
  bool logged_in_ = false;
  uint64_t login_epoch_ = 0;
  absl::Time last_activity_ = absl::InfinitePast();
};

}  // namespace fleet::polatis_emu

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TL1_SESSION_H_
