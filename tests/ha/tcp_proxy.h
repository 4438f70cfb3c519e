// A TCP proxy a test controls, standing for the network between a replica and etcd: it
// forwards each connection made to its address to the target until Cut(). From then on it
// forwards nothing, either way, and accepts no connection, keeping every socket open: a cut
// link, across which calls hang until their deadlines rather than fail at once. Restore()
// forwards again, the stalled connections included.
#ifndef FLEET_TESTS_HA_TCP_PROXY_H_
#define FLEET_TESTS_HA_TCP_PROXY_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace fleet::testing {

class TcpProxy {
 public:
  // Listens on 127.0.0.1 on a port chosen now; `target` is HOST:PORT (an IPv4 address).
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(const std::string& target);
  ~TcpProxy();  // Closes every socket.
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  std::string address() const { return address_; }
  void Cut() { cut_ = true; }
  void Restore() { cut_ = false; }

 private:
  TcpProxy() = default;
  void Run();

  std::string address_;
  std::string target_host_;
  int target_port_ = 0;
  int listener_ = -1;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stopping_{false};
  std::vector<std::pair<int, int>> pairs_;  // Client, target; the proxy thread's only.
  std::thread thread_;
};

}  // namespace fleet::testing

#endif  // FLEET_TESTS_HA_TCP_PROXY_H_
