#include "switch_adapters/polatis/tl1_session.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace fleet::polatis {

Tl1Session::Tl1Session(Tl1SessionOptions options, std::unique_ptr<StreamDialer> dialer)
    : options_(std::move(options)), dialer_(std::move(dialer)) {}

absl::Status Tl1Session::Connect() {
  stream_.reset();
  buffer_.clear();
  logged_in_ = false;
  ASSIGN_OR_RETURN(
      stream_, dialer_->Dial(options_.host, options_.port, absl::Now() + options_.connect_timeout));
  return absl::OkStatus();
}

absl::Status Tl1Session::Login() {
  absl::StatusOr<Tl1Response> response =
      Exchange("ACT-USER", options_.user, ":" + options_.password);
  if (!response.ok()) return response.status();
  if (!response->completed) {
    return absl::PermissionDeniedError(
        absl::StrCat("switch ", options_.name, " refused login of user '", options_.user,
                     "': ", response->error_code, " ", response->error_text));
  }
  logged_in_ = true;
  return absl::OkStatus();
}

absl::StatusOr<Tl1Response> Tl1Session::Exchange(absl::string_view verb, absl::string_view aid,
                                                 absl::string_view tail) {
  if (stream_ == nullptr) RETURN_IF_ERROR(Connect());
  const std::string ctag = absl::StrCat(next_ctag_++);
  const std::string command = absl::StrCat(verb, "::", aid, ":", ctag, ":", tail, ";");
  const absl::Time deadline = absl::Now() + options_.command_timeout;
  ++commands_sent_;
  absl::Status written = stream_->Write(command, deadline);
  if (!written.ok()) {
    stream_.reset();
    return absl::UnavailableError(
        absl::StrCat(verb, " to switch ", options_.name, ": ", written.message()));
  }
  while (true) {
    while (std::optional<std::string> message = TakeMessage(buffer_)) {
      absl::StatusOr<Tl1Response> response = ParseTl1Response(*message);
      if (!response.ok()) {
        FLEET_LOG(WARNING) << "switch " << options_.name
                           << ": skipping unparsable TL1 message: " << response.status().message();
        continue;
      }
      if (response->autonomous || response->ctag != ctag) continue;
      return response;
    }
    absl::StatusOr<std::string> bytes = stream_->Read(deadline);
    if (!bytes.ok()) {
      // A late answer would carry a ctag we no longer wait for; a fresh connection is simpler
      // and safer than resynchronizing this one.
      stream_.reset();
      return absl::UnavailableError(
          absl::StrCat(verb, " to switch ", options_.name, ": ", bytes.status().message()));
    }
    buffer_ += *bytes;
  }
}

absl::Status Tl1Session::DenyStatus(absl::string_view verb, const Tl1Response& response) const {
  const std::string message = absl::StrCat("switch ", options_.name, " refused ", verb, ": ",
                                           response.error_code, " ", response.error_text);
  const std::string& code = response.error_code;
  if (code == "IDNV") return absl::InvalidArgumentError(message);
  if (code == "SROF") return absl::FailedPreconditionError(message);
  if (code == "PICC") return absl::PermissionDeniedError(message);
  if (code == "IIAC" || code == "IICT" || code == "ICNV" || code == "IPNV") {
    return absl::InternalError(message);  // The adapter sent something the switch cannot read.
  }
  return absl::UnknownError(message);
}

absl::StatusOr<Tl1Response> Tl1Session::Execute(absl::string_view verb, absl::string_view aid,
                                                absl::string_view tail) {
  return Run(verb, aid, tail, nullptr);
}

absl::StatusOr<Tl1Response> Tl1Session::ExecuteChange(const switch_adapters::ChangeGate& gate,
                                                      absl::string_view verb, absl::string_view aid,
                                                      absl::string_view tail) {
  return Run(verb, aid, tail, &gate);
}

absl::StatusOr<Tl1Response> Tl1Session::Run(absl::string_view verb, absl::string_view aid,
                                            absl::string_view tail,
                                            const switch_adapters::ChangeGate* gate) {
  bool recovered = false;
  while (true) {
    absl::Status ready = absl::OkStatus();
    if (stream_ == nullptr) ready = Connect();
    if (ready.ok() && !logged_in_) ready = Login();
    // Asked after the (re)connect and login, so nothing slow lies between its answer and the
    // write; a refusal is final, never taken for a transport failure to recover from.
    if (ready.ok() && gate != nullptr && *gate) RETURN_IF_ERROR((*gate)());
    absl::StatusOr<Tl1Response> response =
        ready.ok() ? Exchange(verb, aid, tail) : absl::StatusOr<Tl1Response>(ready);
    if (!response.ok()) {
      if (response.status().code() == absl::StatusCode::kUnavailable && !recovered) {
        FLEET_LOG(INFO) << "switch " << options_.name << ": " << response.status().message()
                        << "; reconnecting";
        recovered = true;
        stream_.reset();
        continue;
      }
      return response.status();
    }
    if (response->completed) return response;
    if (absl::StrContains(response->error_text, "Not logged in") && !recovered) {
      FLEET_LOG(INFO) << "switch " << options_.name << ": session expired; logging in again";
      recovered = true;
      logged_in_ = false;
      continue;
    }
    return DenyStatus(verb, *response);
  }
}

}  // namespace fleet::polatis
