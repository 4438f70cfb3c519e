#include "switch_adapters/polatis/emulator/emulator.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fleet::polatis_emu {

absl::StatusOr<std::unique_ptr<Emulator>> Emulator::Start(const EmulatorOptions& options,
                                                          const Clock* clock) {
  std::unique_ptr<Emulator> emulator(new Emulator(options));
  const SwitchIdentity identity = MakeSwitchIdentity(options.size, options.sid);

  ASSIGN_OR_RETURN(emulator->model_,
                   SwitchModel::Create({.size = options.size,
                                        .switch_time = options.switch_time,
                                        .insertion_loss_db = options.insertion_loss_db,
                                        .state_file = options.state_file},
                                       clock, &emulator->remote_light_));

  Tl1ServerOptions tl1;
  tl1.listen_address = options.listen_address;
  tl1.port = options.tl1_port;
  tl1.session = {.user = options.user,
                 .password = options.password,
                 .sid = options.sid,
                 .session_timeout = options.session_timeout,
                 .identity = identity};
  ASSIGN_OR_RETURN(emulator->tl1_, Tl1Server::Start(tl1, emulator->model_.get(), clock));

  RestServerOptions rest;
  rest.listen_address = options.listen_address;
  rest.port = options.rest_port;
  rest.api = {.user = options.user,
              .password = options.password,
              .yang_revision = options.yang_revision,
              .identity = identity};
  rest.tls_certificate_file = options.tls_certificate_file;
  rest.tls_key_file = options.tls_key_file;
  rest.drop_connections = [e = emulator.get()] { e->DropConnections(); };
  ASSIGN_OR_RETURN(emulator->rest_, RestServer::Start(rest, emulator->model_.get(), clock));
  return emulator;
}

Emulator::~Emulator() { Stop(); }

std::string Emulator::tl1_address() const {
  return absl::StrCat(options_.listen_address, ":", tl1_->port());
}

std::string Emulator::rest_address() const {
  return absl::StrCat(options_.listen_address, ":", rest_->port());
}

void Emulator::DropConnections() {
  if (tl1_) tl1_->DropConnections();
  if (rest_) rest_->DropConnections();
}

void Emulator::Stop() {
  // REST first: its drop-connections hook reaches into the TL1 server.
  if (rest_) rest_->Stop();
  if (tl1_) tl1_->Stop();
}

}  // namespace fleet::polatis_emu
