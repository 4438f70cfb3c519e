// HTTPS for polatis-emu's REST port: TLS is ended here and the plain bytes are relayed to the
// HTTP server on a loopback port of its own.
//
// Why not civetweb's own TLS: Debian 12's civetweb 1.15 loads libssl at run time by the
// OpenSSL 1.1 symbol names and fails on OpenSSL 3 ("cannot find SSL_get_peer_certificate").
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TLS_FRONT_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TLS_FRONT_H_

#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace fleet::polatis_emu {

struct TlsFrontOptions {
  std::string listen_address = "127.0.0.1";  // IPv4
  int port = 0;                              // 0: pick a free port
  std::string certificate_file;              // PEM certificate (chain)
  std::string key_file;                      // PEM private key
  int backend_port = 0;                      // The plain HTTP server, on 127.0.0.1
};

class TlsFront {
 public:
  // INVALID_ARGUMENT naming the file when the certificate or key does not load or they do not
  // match; UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<TlsFront>> Start(const TlsFrontOptions& options);
  ~TlsFront();  // Stop()

  int port() const { return port_; }

  // Closes the listener and every relayed connection, and joins their threads. Idempotent.
  void Stop();

 private:
  struct Connection;
  explicit TlsFront(const TlsFrontOptions& options);
  void AcceptLoop();
  void Relay(Connection* connection);
  void ReapFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TlsFrontOptions options_;
  struct Context;
  std::unique_ptr<Context> context_;  // The SSL_CTX.
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::list<std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::polatis_emu

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TLS_FRONT_H_
