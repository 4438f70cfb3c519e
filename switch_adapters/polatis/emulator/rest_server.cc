#include "switch_adapters/polatis/emulator/rest_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "civetweb.h"
#include "common/knock_while_stopping.h"
#include "common/log.h"

namespace fleet::polatis_emu {
namespace {

// Larger bodies are refused; the biggest real one (a 384-pair PATCH) is about 15 KB.
constexpr size_t kMaxBodyBytes = 1 << 20;

// The local port of `fd` if it is a connected IPv4/IPv6 TCP socket, else 0.
int ConnectedLocalPort(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return 0;
  // A listening socket has no peer: this keeps the listener open.
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return 0;
  if (local.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  if (local.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
  }
  return 0;
}

}  // namespace

RestServer::RestServer(const RestServerOptions& options, SwitchModel* model, const Clock* clock)
    : options_(options), api_(options.api, model, clock, [this](absl::Duration d) {
        stopping_.WaitForNotificationWithTimeout(d);
      }) {}

absl::StatusOr<std::unique_ptr<RestServer>> RestServer::Start(const RestServerOptions& options,
                                                              SwitchModel* model,
                                                              const Clock* clock) {
  in_addr ignored;
  if (options.port < 0 || options.port > 65535 ||
      inet_pton(AF_INET, options.listen_address.c_str(), &ignored) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("REST listen address ", options.listen_address,
                                                   ":", options.port, " is not IPv4:PORT"));
  }
  static absl::once_flag library_once;
  absl::call_once(library_once, [] { mg_init_library(0); });

  const bool tls = !options.tls_certificate_file.empty() || !options.tls_key_file.empty();
  if (tls && (options.tls_certificate_file.empty() || options.tls_key_file.empty())) {
    return absl::InvalidArgumentError(
        "HTTPS needs both a certificate file and a key file, not one of them");
  }
  std::unique_ptr<RestServer> server(new RestServer(options, model, clock));
  // With TLS, civetweb serves plain HTTP on a loopback port of its own behind the TLS front.
  server->http_address_ = tls ? "127.0.0.1" : options.listen_address;
  const std::string listening = absl::StrCat(server->http_address_, ":", tls ? 0 : options.port);
  const std::string threads = absl::StrCat(options.threads);
  // Name/value pairs, as civetweb takes them.
  const char* config[] = {"listening_ports", listening.c_str(),  //
                          "num_threads", threads.c_str(),        //
                          "enable_keep_alive", "yes",            //
                          // Long enough for a client's connection pool to reuse its connections.
                          "keep_alive_timeout_ms", "15000",  //
                          "request_timeout_ms", "30000",     //
                          // Small answers, each awaited: do not let Nagle delay them.
                          "tcp_nodelay", "1",  //
                          nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = [](const mg_connection*, const char* message) {
    FLEET_LOG(WARNING) << "civetweb: " << message;
    return 1;
  };
  mg_init_data init{&callbacks, server.get(), config};
  char error_text[256] = "";
  unsigned error_code = 0;
  mg_error_data error{&error_code, error_text, sizeof error_text};
  server->context_ = mg_start2(&init, &error);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on ", listening, ": ", error_text));
  }
  mg_set_request_handler(server->context_, "/", &RestServer::HandleRequest, server.get());
  mg_server_port ports[4];
  if (mg_get_server_ports(server->context_, 4, ports) < 1) {
    return absl::InternalError("civetweb reports no listening port");
  }
  server->port_ = ports[0].port;
  if (tls) {
    absl::StatusOr<std::unique_ptr<TlsFront>> front =
        TlsFront::Start({.listen_address = options.listen_address,
                         .port = options.port,
                         .certificate_file = options.tls_certificate_file,
                         .key_file = options.tls_key_file,
                         .backend_port = server->port_});
    if (!front.ok()) return front.status();
    server->tls_ = *std::move(front);
  }
  return server;
}

RestServer::~RestServer() { Stop(); }

int RestServer::HandleRequest(mg_connection* connection, void* self) {
  return static_cast<RestServer*>(self)->Serve(connection);
}

int RestServer::Serve(mg_connection* connection) {
  const mg_request_info* info = mg_get_request_info(connection);
  HttpRequest request;
  request.method = info->request_method ? info->request_method : "";
  request.path = info->local_uri ? info->local_uri : "/";
  if (info->query_string) request.query = info->query_string;
  if (const char* auth = mg_get_header(connection, "Authorization")) request.authorization = auth;
  char chunk[8192];
  int n;
  while ((n = mg_read(connection, chunk, sizeof chunk)) > 0) {
    request.body.append(chunk, static_cast<size_t>(n));
    if (request.body.size() > kMaxBodyBytes) break;
  }

  HttpResponse response;
  if (request.body.size() > kMaxBodyBytes) {
    response.status = 413;
    mg_disable_connection_keep_alive(connection);  // the rest of the body is not wanted
  } else {
    const ChangeOrigin origin(absl::StrCat("rest ", info->remote_addr, ":", info->remote_port));
    response = api_.Handle(request);
  }
  if (response.drop_connections) mg_disable_connection_keep_alive(connection);

  const std::string length = absl::StrCat(response.body.size());
  mg_response_header_start(connection, response.status);
  if (!response.content_type.empty()) {
    mg_response_header_add(connection, "Content-Type", response.content_type.c_str(), -1);
  }
  mg_response_header_add(connection, "Content-Length", length.c_str(), -1);
  for (const auto& [name, value] : response.headers) {
    mg_response_header_add(connection, name.c_str(), value.c_str(), -1);
  }
  mg_response_header_send(connection);
  if (!response.body.empty()) mg_write(connection, response.body.data(), response.body.size());

  // After the answer is on the wire, so the caller gets its 204 before its connection goes.
  if (response.drop_connections) {
    if (options_.drop_connections) {
      options_.drop_connections();
    } else {
      DropConnections();
    }
  }
  return response.status;
}

void RestServer::DropConnections() {
  if (port_ == 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) {
    FLEET_LOG(ERROR) << "REST: cannot list /proc/self/fd; connections not dropped";
    return;
  }
  std::vector<int> fds;
  while (dirent* entry = readdir(dir)) {
    int fd;
    if (absl::SimpleAtoi(entry->d_name, &fd) && fd != dirfd(dir)) fds.push_back(fd);
  }
  closedir(dir);
  int dropped = 0;
  for (int fd : fds) {
    // Checked right before the shutdown: a descriptor closed and reused in between would
    // have to be another accepted connection to this port, which is dropped just as well.
    if (ConnectedLocalPort(fd) == port_ && shutdown(fd, SHUT_RDWR) == 0) ++dropped;
  }
  FLEET_LOG(INFO) << "REST: dropped " << dropped << " connections";
}

void RestServer::Stop() {
  absl::MutexLock lock(&stop_mu_);
  if (context_ == nullptr) return;
  if (!stopping_.HasBeenNotified()) stopping_.Notify();
  api_.Stop();  // Long polls answer now, so their workers let go of their connections.
  DropConnections();
  // civetweb notices mg_stop only between polls of its listener: knock so it stops at once.
  // The TLS front first: its relays end when their HTTP connections are dropped.
  if (tls_) tls_->Stop();
  StopWhileKnocking(http_address_, port_, [this] { mg_stop(context_); });
  context_ = nullptr;
}

}  // namespace fleet::polatis_emu
