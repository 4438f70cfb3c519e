#include "common/knock_while_stopping.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/time/clock.h"

namespace fleet {

void StopWhileKnocking(const std::string& host, int port, const std::function<void()>& stop) {
  std::atomic<bool> stopped{false};
  std::thread knocker([&] {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, host == "0.0.0.0" ? "127.0.0.1" : host.c_str(), &addr.sin_addr);
    while (!stopped.load()) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0) {
        connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        close(fd);
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  });
  stop();
  stopped.store(true);
  knocker.join();
}

}  // namespace fleet
