// Bare-socket TL1 and HTTP clients for the polatis-emu tests. Deliberately minimal and
// independent of the adapter's protocol code: the tests must see the bytes the emulator
// sends, not what a client library makes of them. Every read has a deadline.
#ifndef FLEET_TESTS_POLATIS_EMULATOR_RAW_CLIENTS_H_
#define FLEET_TESTS_POLATIS_EMULATOR_RAW_CLIENTS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fleet::polatis_emu::raw {

inline constexpr absl::Duration kReadTimeout = absl::Seconds(20);

// A connected TCP socket to "HOST:PORT", closed on destruction.
class Socket {
 public:
  static std::unique_ptr<Socket> Connect(const std::string& address) {
    std::vector<std::string> parts = absl::StrSplit(address, ':');
    int port = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) return nullptr;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, parts[0].c_str(), &addr.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return nullptr;
    }
    return std::unique_ptr<Socket>(new Socket(fd));
  }
  ~Socket() { close(fd_); }

  bool Send(const std::string& data) {
    return send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }

  // Reads whatever arrives within `timeout` into `buffer`. False on end-of-file, error or
  // timeout.
  bool ReadSome(std::string* buffer, absl::Duration timeout = kReadTimeout) {
    pollfd pfd{fd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) return false;
    char chunk[4096];
    ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer->append(chunk, static_cast<size_t>(n));
    return true;
  }

  // True when the peer closes the connection within `timeout` (data before that is skipped).
  bool ClosedByPeer(absl::Duration timeout = kReadTimeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      pollfd pfd{fd_, POLLIN, 0};
      if (poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now())) + 1) <=
          0) {
        continue;
      }
      char chunk[4096];
      ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  explicit Socket(int fd) : fd_(fd) {}
  int fd_;
};

// A TL1 session: commands go out as typed, responses come back through their ';'.
class Tl1Client {
 public:
  static std::unique_ptr<Tl1Client> Connect(const std::string& address) {
    std::unique_ptr<Socket> socket = Socket::Connect(address);
    if (!socket) return nullptr;
    return std::unique_ptr<Tl1Client>(new Tl1Client(std::move(socket)));
  }
  // Sends `command` and returns the response to it ("" on timeout or close).
  std::string Command(const std::string& command) {
    if (!socket_->Send(command)) return "";
    return Response();
  }
  // The next response, through its terminating ';'.
  std::string Response() {
    size_t end;
    while ((end = buffer_.find(';')) == std::string::npos) {
      if (!socket_->ReadSome(&buffer_)) return "";
    }
    std::string response = buffer_.substr(0, end + 1);
    buffer_.erase(0, end + 1);
    return response;
  }
  bool LogIn(const std::string& user = "admin", const std::string& password = "root") {
    return absl::StrContains(Command(absl::StrCat("ACT-USER::", user, ":1::", password, ";")),
                             " COMPLD");
  }
  Socket& socket() { return *socket_; }

 private:
  explicit Tl1Client(std::unique_ptr<Socket> socket) : socket_(std::move(socket)) {}
  std::unique_ptr<Socket> socket_;
  std::string buffer_;
};

struct HttpReply {
  int status = 0;                              // 0: no answer
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

// An HTTP/1.1 connection that is kept alive across requests.
class HttpClient {
 public:
  static std::unique_ptr<HttpClient> Connect(const std::string& address) {
    std::unique_ptr<Socket> socket = Socket::Connect(address);
    if (!socket) return nullptr;
    return std::unique_ptr<HttpClient>(new HttpClient(address, std::move(socket)));
  }
  // `credentials` "user:password" for Basic auth; "" sends no Authorization header.
  HttpReply Request(const std::string& method, const std::string& path,
                    const std::string& body = "", const std::string& credentials = "admin:root") {
    std::string request = absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: ", address_,
                                       "\r\nContent-Length: ", body.size(), "\r\n");
    if (!credentials.empty()) {
      absl::StrAppend(&request, "Authorization: Basic ", absl::Base64Escape(credentials), "\r\n");
    }
    absl::StrAppend(&request, "\r\n", body);
    HttpReply reply;
    if (!socket_->Send(request)) return reply;
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!socket_->ReadSome(&buffer_)) return reply;
    }
    std::vector<std::string> lines =
        absl::StrSplit(buffer_.substr(0, header_end), "\r\n", absl::SkipEmpty());
    buffer_.erase(0, header_end + 4);
    std::vector<std::string> status_line = absl::StrSplit(lines[0], ' ');
    if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &reply.status)) return reply;
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      reply.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
    size_t length = 0;
    if (auto it = reply.headers.find("content-length"); it != reply.headers.end()) {
      absl::SimpleAtoi(it->second, &length);
    }
    while (buffer_.size() < length) {
      if (!socket_->ReadSome(&buffer_)) return HttpReply{};
    }
    reply.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return reply;
  }
  Socket& socket() { return *socket_; }

 private:
  HttpClient(std::string address, std::unique_ptr<Socket> socket)
      : address_(std::move(address)), socket_(std::move(socket)) {}
  std::string address_;
  std::unique_ptr<Socket> socket_;
  std::string buffer_;
};

// One request on a fresh connection.
inline HttpReply Http(const std::string& address, const std::string& method,
                      const std::string& path, const std::string& body = "",
                      const std::string& credentials = "admin:root") {
  std::unique_ptr<HttpClient> client = HttpClient::Connect(address);
  if (!client) return HttpReply{};
  return client->Request(method, path, body, credentials);
}

}  // namespace fleet::polatis_emu::raw

#endif  // FLEET_TESTS_POLATIS_EMULATOR_RAW_CLIENTS_H_
