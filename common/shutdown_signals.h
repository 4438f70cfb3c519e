// How the daemons stop: SIGTERM and SIGINT are blocked in every thread (call Block() in
// main() before any thread starts; threads inherit the mask) and taken synchronously with
// Wait(), so no work ever runs in a signal handler.
#ifndef FLEET_COMMON_SHUTDOWN_SIGNALS_H_
#define FLEET_COMMON_SHUTDOWN_SIGNALS_H_

#include <signal.h>

namespace fleet {

class ShutdownSignals {
 public:
  static ShutdownSignals Block() {
    ShutdownSignals s;
    sigemptyset(&s.set_);
    sigaddset(&s.set_, SIGTERM);
    sigaddset(&s.set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &s.set_, nullptr);
    return s;
  }
  // Blocks until SIGTERM or SIGINT arrives; returns which.
  int Wait() const {
    int signal_number = 0;
    sigwait(&set_, &signal_number);
    return signal_number;
  }

 private:
  sigset_t set_;
};

}  // namespace fleet

#endif  // FLEET_COMMON_SHUTDOWN_SIGNALS_H_
