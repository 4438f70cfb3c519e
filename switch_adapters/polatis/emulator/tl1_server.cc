#include "switch_adapters/polatis/emulator/tl1_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "switch_adapters/polatis/emulator/tl1_command.h"

namespace fleet::polatis_emu {
namespace {

// A command longer than this without its ';' is garbage, not a command still arriving.
constexpr size_t kMaxCommandBytes = 64 * 1024;

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tl1Server>> Tl1Server::Start(const Tl1ServerOptions& options,
                                                            SwitchModel* model,
                                                            const Clock* clock) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options.port));
  if (options.port < 0 || options.port > 65535 ||
      inet_pton(AF_INET, options.listen_address.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("TL1 listen address ", options.listen_address,
                                                   ":", options.port, " is not IPv4:PORT"));
  }
  std::unique_ptr<Tl1Server> server(new Tl1Server(options, model, clock));
  server->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server->listen_fd_ < 0) return Errno("TL1 socket");
  // Lets a restarted emulator take its port back while old connections sit in TIME_WAIT.
  int one = 1;
  setsockopt(server->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(server->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Errno(absl::StrCat("TL1 bind ", options.listen_address, ":", options.port));
  }
  if (listen(server->listen_fd_, 64) != 0) return Errno("TL1 listen");
  socklen_t len = sizeof addr;
  getsockname(server->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  server->port_ = ntohs(addr.sin_port);
  if (pipe2(server->wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) return Errno("TL1 pipe");
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

Tl1Server::~Tl1Server() {
  Stop();
  for (int fd : {listen_fd_, wake_fds_[0], wake_fds_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void Tl1Server::AcceptLoop() {
  while (!stopping_.HasBeenNotified()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fds_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      FLEET_LOG(ERROR) << "TL1 poll: " << std::strerror(errno);
      return;
    }
    if (fds[1].revents & POLLIN) {
      char drain[64];
      while (read(wake_fds_[0], drain, sizeof drain) > 0) {
      }
    }
    ReapFinished();
    if (stopping_.HasBeenNotified()) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the peer gave up before we got to it, or EMFILE: try again
    int one = 1;
    // Answers are small and a client waits for each one: do not let Nagle hold them back.
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    absl::MutexLock lock(&mu_);
    int open = 0;
    for (const auto& [id, connection] : connections_) open += connection.done ? 0 : 1;
    if (open >= options_.max_sessions) {
      FLEET_LOG(WARNING) << "TL1: refusing a connection: " << open << " sessions open (max "
                         << options_.max_sessions << ")";
      close(fd);
      continue;
    }
    const uint64_t id = next_id_++;
    Connection& connection = connections_[id];
    connection.fd = fd;
    connection.thread = std::thread([this, id, fd] { Serve(id, fd); });
  }
}

void Tl1Server::ReapFinished() {
  std::vector<std::thread> finished;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->second.done && it->second.thread.joinable()) {
        finished.push_back(std::move(it->second.thread));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (std::thread& thread : finished) thread.join();
}

void Tl1Server::Serve(uint64_t id, int fd) {
  const ChangeOrigin origin(absl::StrCat("tl1 session ", id));
  model_->SessionOpened();
  Tl1Session session(options_.session, model_, clock_,
                     [this](absl::Duration d) { stopping_.WaitForNotificationWithTimeout(d); });
  std::string buffer;
  char chunk[4096];
  bool open = true;
  while (open && !stopping_.HasBeenNotified()) {
    ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // closed by the peer, or shut down by DropConnections/Stop
    buffer.append(chunk, static_cast<size_t>(n));
    while (open) {
      std::optional<std::string> command = TakeTl1Command(&buffer);
      if (!command) break;
      open = SendAll(fd, session.Handle(*command));
    }
    if (open && buffer.size() > kMaxCommandBytes) {
      SendAll(fd,
              Tl1Denied(options_.session.sid, clock_->Now(), "0", "IICT",
                        absl::StrCat("Parse error at offset ", kMaxCommandBytes, " in command")));
      open = false;
    }
  }
  model_->SessionClosed();
  // Closed under the lock so DropConnections never shuts down a descriptor number that has
  // been reused by something else.
  absl::MutexLock lock(&mu_);
  close(fd);
  Connection& connection = connections_[id];
  connection.fd = -1;
  connection.done = true;
  if (!stopping_.HasBeenNotified() && wake_fds_[1] >= 0) {
    (void)!write(wake_fds_[1], "r", 1);  // let AcceptLoop join this thread
  }
}

void Tl1Server::DropConnections() {
  absl::MutexLock lock(&mu_);
  int dropped = 0;
  for (auto& [id, connection] : connections_) {
    if (connection.fd >= 0) {
      shutdown(connection.fd, SHUT_RDWR);
      ++dropped;
    }
  }
  FLEET_LOG(INFO) << "TL1: dropped " << dropped << " connections";
}

void Tl1Server::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stopping_.Notify();
  (void)!write(wake_fds_[1], "s", 1);
  if (accept_thread_.joinable()) accept_thread_.join();
  close(listen_fd_);
  listen_fd_ = -1;
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, connection] : connections_) {
      if (connection.fd >= 0) shutdown(connection.fd, SHUT_RDWR);
      if (connection.thread.joinable()) threads.push_back(std::move(connection.thread));
    }
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace fleet::polatis_emu
