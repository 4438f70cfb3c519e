// Serves every watch stream (WatchAllocation, WatchEvents) from one thread, as gRPC callback
// streams: an open watch holds no thread, so a thousand jobs waiting for READY cost fleetd a
// thousand small objects, not a thousand threads (with the sync API each held one).
//
// A stream is a Follow function and the messages it has yet to write. The hub's thread wakes
// when the store commits (its commit listener), when a stream opens, is cancelled or has
// written all it was given; it then steps every stream that is idle (nothing left to write)
// and behind the newest committed event. Follow runs only on the hub's thread, so what it
// keeps needs no lock; it appends the messages to send, and the stream writes them one at a
// time on gRPC's threads. A stream is stepped again only once it has written everything: a
// slow client holds at most one step's messages and holds up no other stream. A step that
// reads the database (a watch's first state, a watcher behind the commits the store keeps)
// delays the other streams' steps by that read.
//
// Lifetimes: the hub must outlive the server's Shutdown (which waits for every stream to
// end), and the store must outlive the hub. Thread-safe.
#ifndef FLEET_CONTROLLER_SERVICE_WATCH_HUB_H_
#define FLEET_CONTROLLER_SERVICE_WATCH_HUB_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "controller/store/commit_feed.h"

namespace fleet::service {

// What one step of a follower reached.
struct WatchStep {
  // The committed event sequence it has followed up to: it is stepped again when the store
  // has a newer one.
  uint64_t position = 0;
  // Set when the watch is over: the status the stream ends with, once what it was given is
  // written.
  std::optional<grpc::Status> over;
};

class WatchHub {
 public:
  // `feed` is not owned and must outlive the hub.
  explicit WatchHub(store::CommitFeed* feed);
  ~WatchHub();  // Stops.
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // A follower: called first with its stream just opened, then each time the store has
  // committed past its position; appends what to send to `out`. Runs on the hub's thread.
  template <typename Message>
  using Follow = std::function<WatchStep(uint64_t upto, std::vector<Message>* out)>;

  // Opens a stream for `follow` and returns it for gRPC to drive (from a callback method).
  // After Stop, the stream ends at once, UNAVAILABLE.
  template <typename Message>
  grpc::ServerWriteReactor<Message>* Open(Follow<Message> follow);

  // A stream that ends at once with `status` (a refusal before anything is followed).
  template <typename Message>
  static grpc::ServerWriteReactor<Message>* Refuse(grpc::Status status);

  // Starts the hub's thread and listens to the feed's commits.
  void Start();
  // Ends every stream UNAVAILABLE "fleetd is stopping" once its message being written is,
  // stops the thread and the listening; streams opened after end at once. Idempotent.
  void Stop();

  // How many streams are open (for metrics and tests).
  size_t open_streams();

 private:
  // What the hub needs of a stream, whatever it sends.
  class Stream {
   public:
    virtual ~Stream() = default;
    enum class Stepped { kIdle, kBehind, kEnded };
    // On the hub's thread: steps the stream to `upto` if it is idle and behind. kBehind: still
    // behind `upto` with nothing to write (step it again now); kEnded: forget it.
    virtual Stepped Step(uint64_t upto) = 0;
    // Ends it UNAVAILABLE once its message under way is written.
    virtual void End(grpc::Status status) = 0;
  };
  template <typename Message>
  class StreamOf;

  // Adds `stream`, or ends it when stopped.
  void Add(std::shared_ptr<Stream> stream);
  // Asks the thread for a pass over the streams.
  void Wake();
  void Run();

  store::CommitFeed* const feed_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Started and joined by the caller of Start and Stop.
};

// One watch stream. Owned by itself while gRPC drives it (until OnDone) and by the hub while
// it is followed; the last owner frees it.
template <typename Message>
class WatchHub::StreamOf final : public grpc::ServerWriteReactor<Message>, public WatchHub::Stream {
 public:
  StreamOf(WatchHub* hub, Follow<Message> follow) : hub_(hub), follow_(std::move(follow)) {}

  void Own(std::shared_ptr<StreamOf> self) { self_ = std::move(self); }

  Stepped Step(uint64_t upto) override {
    Action action = Action::kNone;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return Stepped::kEnded;
      if (cancelled_) {
        action = EndLocked(grpc::Status::CANCELLED);
      } else if (writing_ || over_ || (started_ && position_ >= upto)) {
        return Stepped::kIdle;
      }
    }
    if (action != Action::kNone) return Perform(action) ? Stepped::kEnded : Stepped::kIdle;
    // Cancelled since the check above: OnCancel's wake brings another pass, which ends it.
    if (cancelled()) return Stepped::kIdle;
    std::vector<Message> out;
    const WatchStep step = follow_(upto, &out);  // Only this thread touches follow_.
    started_ = true;
    bool behind = false;
    {
      absl::MutexLock lock(&mu_);
      position_ = step.position;
      behind = position_ < upto;
      if (step.over && !over_) over_ = step.over;
      for (Message& m : out) outbox_.push_back(std::move(m));
      action = NextLocked();
    }
    if (Perform(action)) return Stepped::kEnded;
    return behind && action == Action::kNone ? Stepped::kBehind : Stepped::kIdle;
  }

  void End(grpc::Status status) override {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      action = EndLocked(std::move(status));
    }
    Perform(action);
  }

  void OnWriteDone(bool ok) override {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      outbox_.pop_front();
      if (!ok) {  // The client is gone.
        outbox_.clear();
        if (!over_) over_ = grpc::Status::CANCELLED;
      }
      action = NextLocked();
    }
    WatchHub* const hub = hub_;  // Alive: gRPC holds the stream until this returns.
    Perform(action);
    // All written, it may be behind; ended, the hub can forget it.
    if (action != Action::kWrite) hub->Wake();
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    hub_->Wake();
  }

  void OnDone() override { self_.reset(); }

 private:
  // What to do next, decided under mu_ and done after it is let go: gRPC may run a reaction
  // (OnWriteDone, which takes mu_) inside StartWrite or Finish, on the calling thread.
  enum class Action { kNone, kWrite, kFinish };

  bool cancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

  // Claims the next step: writing the front message, or ending once over and all is written.
  // writing_ and finished_ are set here, so only the claimer calls StartWrite or Finish.
  Action NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return Action::kNone;
    if (!outbox_.empty()) {
      writing_ = true;
      return Action::kWrite;
    }
    if (!over_) return Action::kNone;
    finished_ = true;
    return Action::kFinish;
  }

  // Makes the stream end with `status` after the message being written, dropping the rest;
  // an end already decided stands only if nothing it was to follow is dropped (an OK end
  // says the watch is complete).
  Action EndLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return Action::kNone;
    const size_t keep = writing_ ? 1 : 0;
    if (!over_ || outbox_.size() > keep) over_ = std::move(status);
    outbox_.resize(keep);
    return NextLocked();
  }

  // Does what NextLocked claimed; true when the stream ended.
  bool Perform(Action action) {
    switch (action) {
      case Action::kNone:
        return false;
      case Action::kWrite: {
        const Message* front;
        {
          absl::MutexLock lock(&mu_);
          front = &outbox_.front();  // Stays put (a deque's elements do) until written.
        }
        this->StartWrite(front);
        return false;
      }
      case Action::kFinish: {
        grpc::Status status;
        {
          absl::MutexLock lock(&mu_);
          status = *over_;
        }
        this->Finish(status);
        return true;
      }
    }
    return false;
  }

  WatchHub* const hub_;
  const Follow<Message> follow_;
  bool started_ = false;  // Only on the hub's thread.
  absl::Mutex mu_;
  std::deque<Message> outbox_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;    // outbox_.front() is being written.
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // The client went away.
  bool finished_ ABSL_GUARDED_BY(mu_) = false;   // Finish is called (or claimed).
  std::optional<grpc::Status> over_ ABSL_GUARDED_BY(mu_);
  uint64_t position_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<StreamOf> self_;  // Set before gRPC has it; reset by OnDone.
};

template <typename Message>
grpc::ServerWriteReactor<Message>* WatchHub::Open(Follow<Message> follow) {
  auto stream = std::make_shared<StreamOf<Message>>(this, std::move(follow));
  stream->Own(stream);
  grpc::ServerWriteReactor<Message>* reactor = stream.get();
  Add(std::move(stream));
  return reactor;
}

template <typename Message>
grpc::ServerWriteReactor<Message>* WatchHub::Refuse(grpc::Status status) {
  class Refused final : public grpc::ServerWriteReactor<Message> {
   public:
    explicit Refused(grpc::Status status) { this->Finish(std::move(status)); }
    void OnDone() override { delete this; }
  };
  return new Refused(std::move(status));
}

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_WATCH_HUB_H_
