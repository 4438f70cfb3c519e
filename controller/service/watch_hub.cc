#include "controller/service/watch_hub.h"

#include "absl/container/flat_hash_set.h"
#include "common/thread_name.h"

namespace fleet::service {

WatchHub::WatchHub(store::CommitFeed* feed) : feed_(feed) {}

WatchHub::~WatchHub() { Stop(); }

void WatchHub::Start() {
  feed_->SetCommitListener([this] { Wake(); });
  thread_ = std::thread([this] {
    NameThisThread("fleet-watches");
    Run();
  });
}

void WatchHub::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  feed_->SetCommitListener(nullptr);
  if (thread_.joinable()) thread_.join();
  std::vector<std::shared_ptr<Stream>> streams;
  {
    absl::MutexLock lock(&mu_);
    streams.swap(streams_);
  }
  for (const std::shared_ptr<Stream>& s : streams) {
    s->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "fleetd is stopping"));
  }
}

size_t WatchHub::open_streams() {
  absl::MutexLock lock(&mu_);
  return streams_.size();
}

void WatchHub::Add(std::shared_ptr<Stream> stream) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      streams_.push_back(std::move(stream));
      woken_ = true;
      return;
    }
  }
  stream->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "fleetd is stopping"));
}

void WatchHub::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

void WatchHub::Run() {
  while (true) {
    std::vector<std::shared_ptr<Stream>> streams;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WatchHub* hub)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(hub->mu_) { return hub->woken_ || hub->stopping_; },
          this));
      if (stopping_) return;
      woken_ = false;
      streams = streams_;
    }
    // Read after the flag is cleared: a commit after this read wakes the thread again.
    const uint64_t upto = feed_->LastEventSequence();
    bool behind = false;
    absl::flat_hash_set<const Stream*> ended;
    for (const std::shared_ptr<Stream>& s : streams) {
      switch (s->Step(upto)) {
        case Stream::Stepped::kIdle:
          break;
        case Stream::Stepped::kBehind:
          behind = true;
          break;
        case Stream::Stepped::kEnded:
          ended.insert(s.get());
          break;
      }
    }
    absl::MutexLock lock(&mu_);
    if (behind) woken_ = true;
    std::erase_if(streams_,
                  [&](const std::shared_ptr<Stream>& s) { return ended.contains(s.get()); });
    // `streams` lets go after the lock: the last reference to an ended stream frees it.
  }
}

}  // namespace fleet::service
