#include "tests/ha/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace fleet::testing {
namespace {

// Sends all of `size` bytes; false when the peer is gone.
bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t sent = ::send(fd, data, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    data += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(const std::string& target) {
  std::unique_ptr<TcpProxy> proxy(new TcpProxy());
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(target.substr(colon + 1), &proxy->target_port_)) {
    return absl::InvalidArgumentError(absl::StrCat("proxy target ", target, ": not HOST:PORT"));
  }
  proxy->target_host_ = target.substr(0, colon);
  proxy->listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (proxy->listener_ < 0 ||
      ::bind(proxy->listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(proxy->listener_, 64) != 0 ||
      ::getsockname(proxy->listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::InternalError(absl::StrCat("proxy: cannot listen: ", std::strerror(errno)));
  }
  proxy->address_ = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
  proxy->thread_ = std::thread([p = proxy.get()] { p->Run(); });
  return proxy;
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  for (const auto& [client, server] : pairs_) {
    ::close(client);
    ::close(server);
  }
  if (listener_ >= 0) ::close(listener_);
}

void TcpProxy::Run() {
  char buffer[64 * 1024];
  while (!stopping_) {
    if (cut_) {
      ::usleep(5000);  // Nothing read, nothing accepted: the peers' data waits in the kernel.
      continue;
    }
    std::vector<pollfd> fds = {{listener_, POLLIN, 0}};
    for (const auto& [client, server] : pairs_) {
      fds.push_back({client, POLLIN, 0});
      fds.push_back({server, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
    if (cut_) continue;  // Cut while polling: what is ready stays unread.
    std::vector<bool> closed(pairs_.size(), false);
    for (size_t i = 1; i < fds.size() && !cut_; ++i) {
      if (fds[i].revents == 0) continue;
      const size_t pair = (i - 1) / 2;
      if (closed[pair]) continue;
      const int from = fds[i].fd;
      const int to = from == pairs_[pair].first ? pairs_[pair].second : pairs_[pair].first;
      const ssize_t got = ::recv(from, buffer, sizeof(buffer), 0);
      if (got > 0 && SendAll(to, buffer, static_cast<size_t>(got))) continue;
      if (got < 0 && errno == EINTR) continue;
      closed[pair] = true;
    }
    for (size_t pair = pairs_.size(); pair-- > 0;) {
      if (!closed[pair]) continue;
      ::close(pairs_[pair].first);
      ::close(pairs_[pair].second);
      pairs_.erase(pairs_.begin() + static_cast<std::ptrdiff_t>(pair));
    }
    if (fds[0].revents & POLLIN) {
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(static_cast<uint16_t>(target_port_));
      if (server < 0 || ::inet_pton(AF_INET, target_host_.c_str(), &address.sin_addr) != 1 ||
          ::connect(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        ::close(client);
        if (server >= 0) ::close(server);
        continue;
      }
      // A peer that stops reading holds the thread up for a second at most, not for good.
      const timeval second{.tv_sec = 1, .tv_usec = 0};
      for (int fd : {client, server}) {
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &second, sizeof(second));
      }
      pairs_.emplace_back(client, server);
    }
  }
}

}  // namespace fleet::testing
