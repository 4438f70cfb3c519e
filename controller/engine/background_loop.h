// A thread that runs a pass every `tick`, or sooner when woken, until stopped.
#ifndef FLEET_CONTROLLER_ENGINE_BACKGROUND_LOOP_H_
#define FLEET_CONTROLLER_ENGINE_BACKGROUND_LOOP_H_

#include <algorithm>
#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/thread_name.h"

namespace fleet::engine {

class BackgroundLoop {
 public:
  BackgroundLoop() = default;
  ~BackgroundLoop() { Stop(); }
  BackgroundLoop(const BackgroundLoop&) = delete;
  BackgroundLoop& operator=(const BackgroundLoop&) = delete;

  // Starts the thread: it waits a tick (or a Wake), then runs `pass`, and again. With
  // `until_next`, a wait is no longer than what it returns (asked before each wait, without
  // the loop's lock), so a pass runs when something falls due rather than at the next tick.
  void Start(absl::Duration tick, std::function<void()> pass,
             std::function<absl::Duration()> until_next = nullptr) {
    thread_ = std::thread([this, tick, pass = std::move(pass), until_next = std::move(until_next)] {
      NameThisThread("fleet-loop");
      while (true) {
        const absl::Duration wait =
            until_next ? std::clamp(until_next(), absl::ZeroDuration(), tick) : tick;
        {
          absl::MutexLock lock(&mu_);
          if (!stopping_) wake_.WaitWithTimeout(&mu_, wait);
          if (stopping_) return;
        }
        pass();
      }
    });
  }
  // Ends the wait for the next pass now (a wake while a pass runs is not kept).
  void Wake() {
    absl::MutexLock lock(&mu_);
    wake_.SignalAll();
  }
  // Stops the loop after the pass it is running, and joins it.
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      wake_.SignalAll();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  absl::Mutex mu_;
  absl::CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_BACKGROUND_LOOP_H_
