// How the daemons stop: SIGTERM, SIGINT and SIGHUP are blocked in every thread (call Block()
// in main() before any thread starts; threads inherit the mask) and taken synchronously with
// Wait(), so no work ever runs in a signal handler. A daemon that reloads on SIGHUP waits
// again after it; the others stop on it as they would by default.
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
    sigaddset(&s.set_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &s.set_, nullptr);
    return s;
  }
  // Blocks until SIGTERM, SIGINT or SIGHUP arrives; returns which.
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
