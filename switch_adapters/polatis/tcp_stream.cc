#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "switch_adapters/polatis/byte_stream.h"

namespace fleet::polatis {
namespace {

// Waits for `events` on `fd` until `deadline`.
absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms < 0) return absl::DeadlineExceededError("switch did not answer in time");
    pollfd pfd{fd, events, 0};
    int rc = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(ms + 1, 60'000)));
    if (rc > 0) return absl::OkStatus();
    if (rc < 0 && errno != EINTR)
      return absl::UnavailableError(absl::StrCat("poll: ", strerror(errno)));
  }
}

class TcpStream : public ByteStream {
 public:
  explicit TcpStream(int fd) : fd_(fd) {}
  ~TcpStream() override { close(fd_); }

  absl::Status Write(absl::string_view bytes, absl::Time deadline) override {
    while (!bytes.empty()) {
      if (absl::Status s = WaitFor(fd_, POLLOUT, deadline); !s.ok()) return s;
      ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return absl::UnavailableError(absl::StrCat("connection to switch lost: ", strerror(errno)));
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Read(absl::Time deadline) override {
    while (true) {
      if (absl::Status s = WaitFor(fd_, POLLIN, deadline); !s.ok()) return s;
      char buf[8192];
      ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n > 0) return std::string(buf, static_cast<size_t>(n));
      if (n == 0) return absl::UnavailableError("switch closed the connection");
      if (errno != EAGAIN && errno != EINTR) {
        return absl::UnavailableError(absl::StrCat("connection to switch lost: ", strerror(errno)));
      }
    }
  }

 private:
  int fd_;
};

class TcpDialer : public StreamDialer {
 public:
  absl::StatusOr<std::unique_ptr<ByteStream>> Dial(const std::string& host, uint16_t port,
                                                   absl::Time deadline) override {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string service = absl::StrCat(port);
    if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot resolve switch address ", host, ": ", gai_strerror(rc)));
    }
    std::string last_error = "no address";
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      int rc = connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        absl::Status waited = WaitFor(fd, POLLOUT, deadline);
        int error = 0;
        socklen_t len = sizeof error;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
        if (waited.ok() && error == 0) rc = 0;
        last_error = waited.ok() ? strerror(error) : std::string(waited.message());
      } else if (rc != 0) {
        last_error = strerror(errno);
      }
      if (rc == 0) {
        freeaddrinfo(found);
        return std::make_unique<TcpStream>(fd);
      }
      close(fd);
    }
    freeaddrinfo(found);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to switch at ", host, ":", port, ": ", last_error));
  }
};

}  // namespace

std::unique_ptr<StreamDialer> NewTcpDialer() { return std::make_unique<TcpDialer>(); }

}  // namespace fleet::polatis
