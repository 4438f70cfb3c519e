#include "common/free_ports.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fleet {

namespace {

// Binds 127.0.0.1:`port` (0: the kernel's choice); the bound port and its socket, or -1.
std::pair<int, int> Bind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {-1, -1};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return {-1, -1};
  }
  return {ntohs(address.sin_port), fd};
}

}  // namespace

absl::StatusOr<std::vector<int>> FreeLoopbackPorts(int count) {
  int ephemeral_low = 0, ephemeral_high = 0;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low >> ephemeral_high;
  // Below the ephemeral range, else above it; where neither leaves room (or the range cannot
  // be read), the kernel chooses, from the range.
  int from = 10000, to = ephemeral_low - 1;
  if (to - from < 1000) std::tie(from, to) = std::pair(ephemeral_high + 1, 65535);
  const bool kernel_chooses = ephemeral_low <= 0 || ephemeral_high <= 0 || to - from < 1000;
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(from, std::max(from, to));
  // Each port stays bound until all are found, so they differ.
  std::vector<int> fds;
  std::vector<int> ports;
  for (int tries = 0; tries < 100 * count && static_cast<int>(ports.size()) < count; ++tries) {
    const auto [port, fd] = Bind(kernel_chooses ? 0 : pick(random));
    if (fd < 0) continue;
    fds.push_back(fd);
    ports.push_back(port);
  }
  for (int fd : fds) ::close(fd);
  if (static_cast<int>(ports.size()) < count) {
    return absl::InternalError(
        absl::StrCat("found ", ports.size(), " of ", count, " free loopback ports"));
  }
  return ports;
}

}  // namespace fleet
