// One TL1 management session with a Polatis switch: connect, log in, send commands with
// unique ctags and match the answers to them. Not thread-safe; the owner serializes.
//
// Recovery, as real clients of these switches do it:
// - A DENY whose text says "Not logged in" (the session timed out): log in again and resend,
//   once.
// - A dropped or dead connection: reconnect, log in and resend, once. Resending is safe for
//   the commands the adapter uses: reads change nothing, ENT-PATCH of a patch that exists is
//   accepted, DLT-PATCH of a patch that is gone is accepted, shutter commands set a state.
// - Answers with another ctag (late answers to a command that timed out) and autonomous
//   messages are skipped.
// The password is sent only in ACT-USER and never logged or put into a status message.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_TL1_SESSION_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_TL1_SESSION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "switch_adapters/optical_switch.h"
#include "switch_adapters/polatis/byte_stream.h"
#include "switch_adapters/polatis/tl1_response.h"

namespace fleet::polatis {

struct Tl1SessionOptions {
  std::string name;  // The switch's id, for messages.
  std::string host;
  uint16_t port = 3082;
  std::string user;
  std::string password;
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration command_timeout = absl::Seconds(10);
};

class Tl1Session {
 public:
  Tl1Session(Tl1SessionOptions options, std::unique_ptr<StreamDialer> dialer);

  // Sends `VERB::AID:CTAG:TAIL;` (TAIL may hold more fields, e.g. "::PARAMETER=SIZE") and
  // returns the matching answer. A DENY becomes a status: IDNV → INVALID_ARGUMENT,
  // SROF → FAILED_PRECONDITION, PICC → PERMISSION_DENIED, malformed-command codes →
  // INTERNAL; the switch's code and text are in the message. Transport failures and
  // timeouts → UNAVAILABLE.
  absl::StatusOr<Tl1Response> Execute(absl::string_view verb, absl::string_view aid,
                                      absl::string_view tail = "");
  // As Execute, for a command that changes the switch: `gate` (when set) is asked just before
  // each time the command is written, the resend after a recovery included (a login is not
  // gated). Refused, the command is not written and the refusal is returned as it is.
  absl::StatusOr<Tl1Response> ExecuteChange(const switch_adapters::ChangeGate& gate,
                                            absl::string_view verb, absl::string_view aid,
                                            absl::string_view tail = "");

  // Commands sent, logins and resends included.
  int commands_sent() const { return commands_sent_; }

 private:
  absl::StatusOr<Tl1Response> Run(absl::string_view verb, absl::string_view aid,
                                  absl::string_view tail, const switch_adapters::ChangeGate* gate);
  absl::Status Connect();
  absl::Status Login();
  // One send and receive, no recovery.
  absl::StatusOr<Tl1Response> Exchange(absl::string_view verb, absl::string_view aid,
                                       absl::string_view tail);
  absl::Status DenyStatus(absl::string_view verb, const Tl1Response& response) const;

  Tl1SessionOptions options_;
  std::unique_ptr<StreamDialer> dialer_;
  std::unique_ptr<ByteStream> stream_;
  std::string buffer_;
  bool logged_in_ = false;
  uint64_t next_ctag_ = 1;
  int commands_sent_ = 0;
};

}  // namespace fleet::polatis

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_TL1_SESSION_H_
