// polatis-emu's TL1 front end: a raw TCP listener with one thread per connection, each
// connection a Tl1Session answering its commands in order.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TL1_SERVER_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TL1_SERVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "switch_adapters/polatis/emulator/switch_model.h"
#include "switch_adapters/polatis/emulator/tl1_session.h"

namespace fleet::polatis_emu {

struct Tl1ServerOptions {
  std::string listen_address = "127.0.0.1";  // IPv4
  int port = 0;                              // 0: pick a free port
  // Connections beyond this are closed as soon as they are accepted, like a switch whose
  // session table is full.
  int max_sessions = 64;
  Tl1SessionOptions session;
};

class Tl1Server {
 public:
  // Binds and starts accepting. `model` and `clock` are not owned and must outlive the server.
  static absl::StatusOr<std::unique_ptr<Tl1Server>> Start(const Tl1ServerOptions& options,
                                                          SwitchModel* model, const Clock* clock);
  ~Tl1Server();  // Stop()

  int port() const { return port_; }

  // Closes every open session's connection now; the listener stays open, so clients can
  // reconnect at once. The sessions' threads finish in the background.
  void DropConnections();

  // Closes the listener and every connection and joins all threads. A session waiting on
  // settling or injected latency is woken. Idempotent.
  void Stop();

 private:
  struct Connection {
    int fd = -1;  // -1 once the session thread has closed it
    bool done = false;
    std::thread thread;
  };

  Tl1Server(const Tl1ServerOptions& options, SwitchModel* model, const Clock* clock)
      : options_(options), model_(model), clock_(clock) {}

  void AcceptLoop();
  void Serve(uint64_t id, int fd);
  void ReapFinished();

  const Tl1ServerOptions options_;
  SwitchModel* const model_;
  const Clock* const clock_;
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};  // a pipe that wakes AcceptLoop for Stop()
  int port_ = 0;
  std::thread accept_thread_;
  absl::Notification stopping_;

  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Connection> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::polatis_emu

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_TL1_SERVER_H_
