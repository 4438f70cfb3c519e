// polatis-emu's HTTP front end: civetweb serving RestApi (the REST API and the /sim/v1
// side-channel) on one port, with keep-alive, since clients reuse connections; HTTPS only
// when given a certificate and key.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_REST_SERVER_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_REST_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "switch_adapters/polatis/emulator/rest_api.h"
#include "switch_adapters/polatis/emulator/switch_model.h"
#include "switch_adapters/polatis/emulator/tls_front.h"

struct mg_context;
struct mg_connection;

namespace fleet::polatis_emu {

struct RestServerOptions {
  std::string listen_address = "127.0.0.1";  // IPv4
  int port = 0;                              // 0: pick a free port
  // civetweb gives each open connection a worker thread for its life, idle keep-alive
  // included: this many clients can hold connections at once. fleetd's REST driver holds one
  // per switch session and each emulated agent up to four for light reads, so a demo site of a
  // dozen agents fits with room for operators' tools.
  int threads = 96;
  RestApiOptions api;
  // Both set: HTTPS only, with this PEM certificate (chain) and its PEM private key; both
  // empty: plain HTTP.
  std::string tls_certificate_file;
  std::string tls_key_file;
  // Called (from a worker thread, after the answer is sent) for POST
  // /sim/v1/faults/drop-connections; should drop every TL1 and REST connection. When unset,
  // only this server's connections are dropped.
  std::function<void()> drop_connections;
};

class RestServer {
 public:
  // `model` and `clock` are not owned and must outlive the server.
  static absl::StatusOr<std::unique_ptr<RestServer>> Start(const RestServerOptions& options,
                                                           SwitchModel* model, const Clock* clock);
  ~RestServer();  // Stop()

  int port() const { return tls_ ? tls_->port() : port_; }

  // Closes every open HTTP connection now; the listener stays open.
  //
  // civetweb has no call that closes its live connections from another thread
  // (mg_close_connection is for client connections only), and restarting the server would
  // refuse connections for a moment. Instead the server's accepted sockets are found among
  // this process's descriptors (connected TCP sockets whose local port is this server's)
  // and shut down: civetweb's worker then sees end-of-file and closes the connection itself,
  // so no descriptor is closed behind its back.
  void DropConnections();

  // Drops the connections (so no keep-alive wait holds it up) and stops civetweb. Idempotent.
  void Stop();

 private:
  RestServer(const RestServerOptions& options, SwitchModel* model, const Clock* clock);
  static int HandleRequest(mg_connection* connection, void* self);
  int Serve(mg_connection* connection);

  const RestServerOptions options_;
  absl::Notification stopping_;
  RestApi api_;
  mg_context* context_ = nullptr;
  std::string http_address_;       // Where civetweb listens: the options', or loopback behind TLS.
  int port_ = 0;                   // civetweb's port.
  std::unique_ptr<TlsFront> tls_;  // With a certificate: the port clients reach.
  absl::Mutex stop_mu_;
};

}  // namespace fleet::polatis_emu

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_REST_SERVER_H_
