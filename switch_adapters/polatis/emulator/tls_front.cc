#include "switch_adapters/polatis/emulator/tls_front.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace fleet::polatis_emu {
namespace {

std::string OpenSslReason() {
  char reason[256] = "no reason given";
  if (unsigned long code = ERR_get_error()) ERR_error_string_n(code, reason, sizeof reason);
  ERR_clear_error();
  return reason;
}

bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void NoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

struct TlsFront::Context {
  ~Context() { SSL_CTX_free(ctx); }
  SSL_CTX* ctx = nullptr;
};

struct TlsFront::Connection {
  int client = -1;   // Guarded by the front's mu_ once the relay runs.
  int backend = -1;  // Likewise.
  std::thread thread;
  std::atomic<bool> done{false};
};

TlsFront::TlsFront(const TlsFrontOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<TlsFront>> TlsFront::Start(const TlsFrontOptions& options) {
  std::unique_ptr<TlsFront> front(new TlsFront(options));
  front->context_ = std::make_unique<Context>();
  ERR_clear_error();
  SSL_CTX* ctx = front->context_->ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError("cannot make a TLS context: " + OpenSslReason());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, options.certificate_file.c_str()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot load TLS certificate ", options.certificate_file, ": ", OpenSslReason()));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load TLS key ", options.key_file, ": ", OpenSslReason()));
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS key ", options.key_file, " does not match certificate ", options.certificate_file));
  }

  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(options.port));
  if (inet_pton(AF_INET, options.listen_address.c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTPS listen address ", options.listen_address, " is not IPv4"));
  }
  front->listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(front->listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t length = sizeof address;
  if (front->listener_ < 0 ||
      bind(front->listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(front->listener_, 128) != 0 ||
      getsockname(front->listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTPS on ", options.listen_address,
                                               ":", options.port, ": ", std::strerror(errno)));
  }
  front->port_ = ntohs(address.sin_port);
  front->acceptor_ = std::thread([f = front.get()] { f->AcceptLoop(); });
  return front;
}

TlsFront::~TlsFront() {
  Stop();
  if (listener_ >= 0) close(listener_);
}

void TlsFront::AcceptLoop() {
  while (true) {
    const int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      if (client >= 0) close(client);
      return;
    }
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      FLEET_LOG(ERROR) << "HTTPS: accept failed: " << std::strerror(errno);
      return;
    }
    ReapFinished();
    auto connection = std::make_unique<Connection>();
    connection->client = client;
    Connection* relayed = connection.get();
    connections_.push_back(std::move(connection));
    relayed->thread = std::thread([this, relayed] { Relay(relayed); });
  }
}

void TlsFront::ReapFinished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if ((*it)->done) {
      (*it)->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

// One connection: the TLS handshake, then bytes both ways until either side closes.
void TlsFront::Relay(Connection* connection) {
  int client, backend = -1;
  {
    absl::MutexLock lock(&mu_);
    client = connection->client;
  }
  SSL* ssl = SSL_new(context_->ctx);
  if (ssl != nullptr && SSL_set_fd(ssl, client) == 1 && SSL_accept(ssl) == 1) {
    backend = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(options_.backend_port));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    {
      absl::MutexLock lock(&mu_);
      connection->backend = backend;
      if (stopping_) shutdown(backend, SHUT_RDWR);
    }
    if (backend >= 0 && connect(backend, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
      NoDelay(client);
      NoDelay(backend);
      char buffer[16384];
      pollfd fds[2] = {{client, POLLIN, 0}, {backend, POLLIN, 0}};
      while (true) {
        // Bytes OpenSSL has decrypted already are not visible to poll.
        if (poll(fds, 2, SSL_pending(ssl) > 0 ? 0 : -1) < 0) {
          if (errno == EINTR) continue;
          break;
        }
        if (SSL_pending(ssl) > 0 || fds[0].revents != 0) {
          const int n = SSL_read(ssl, buffer, sizeof buffer);
          if (n <= 0 || !SendAll(backend, buffer, static_cast<size_t>(n))) break;
        }
        if (fds[1].revents != 0) {
          const ssize_t n = recv(backend, buffer, sizeof buffer, 0);
          // civetweb, started first, ignores SIGPIPE for the process: a client gone mid-write
          // is an error here, not a signal.
          if (n <= 0 || SSL_write(ssl, buffer, static_cast<int>(n)) <= 0) {
            // The server closed (or failed): tell the client the stream ended on purpose.
            if (n == 0) SSL_shutdown(ssl);
            break;
          }
        }
      }
    }
  }
  ERR_clear_error();  // This thread's queue; a failed handshake is the client's affair.
  SSL_free(ssl);
  absl::MutexLock lock(&mu_);
  close(connection->client);
  connection->client = -1;
  if (connection->backend >= 0) close(connection->backend);
  connection->backend = -1;
  connection->done = true;
}

void TlsFront::Stop() {
  std::list<std::unique_ptr<Connection>> connections;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    // Wakes the acceptor (accept fails with EINVAL) and every relay's poll or read.
    if (listener_ >= 0) shutdown(listener_, SHUT_RDWR);
    for (const auto& c : connections_) {
      if (c->client >= 0) shutdown(c->client, SHUT_RDWR);
      if (c->backend >= 0) shutdown(c->backend, SHUT_RDWR);
    }
    connections = std::move(connections_);
  }
  if (acceptor_.joinable()) acceptor_.join();
  // The acceptor has stopped: no connection is added after this.
  {
    absl::MutexLock lock(&mu_);
    connections.splice(connections.end(), connections_);
  }
  for (auto& c : connections) c->thread.join();
}

}  // namespace fleet::polatis_emu
