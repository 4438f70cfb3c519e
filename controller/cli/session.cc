#include "controller/cli/session.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"

namespace fleet::cli {

bool StopSignal::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  if (following_ == nullptr) return false;
  following_->TryCancel();
  return true;
}

bool StopSignal::stopped() const {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

StopSignal::Following::Following(StopSignal* signal, grpc::ClientContext* context)
    : signal_(signal) {
  if (signal_ == nullptr) return;
  absl::MutexLock lock(&signal_->mu_);
  signal_->following_ = context;
  // A context cancelled before its call starts cancels the call as it starts.
  if (signal_->stopped_) context->TryCancel();
}

StopSignal::Following::~Following() {
  if (signal_ == nullptr) return;
  absl::MutexLock lock(&signal_->mu_);
  signal_->following_ = nullptr;
}

ServerStubs NewServerStubs(const std::shared_ptr<grpc::ChannelInterface>& channel) {
  return {v1::InventoryService::NewStub(channel), v1::TopologyService::NewStub(channel),
          v1::AdminService::NewStub(channel)};
}

grpc::Status Session::Call(const std::function<grpc::Status(grpc::ClientContext*)>& rpc) const {
  grpc::ClientContext context;
  Prepare(&context, absl::Now() + timeout);
  return rpc(&context);
}

void Session::Prepare(grpc::ClientContext* context, absl::Time deadline) const {
  if (deadline != absl::InfiniteFuture()) context->set_deadline(absl::ToChronoTime(deadline));
  if (!principal.empty()) context->AddMetadata(kPrincipalMetadataKey, principal);
}

int Session::Failed(const grpc::Status& status) const {
  *err << "error: " << absl::StatusCodeToString(FromGrpcStatus(status).code()) << ": "
       << status.error_message();
  if (!plaintext_by.empty() && status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      absl::StrContains(status.error_message(), "Socket closed")) {
    *err << ": this fleetd serves TLS; drop " << plaintext_by;
  }
  *err << "\n";
  return kExitFailed;
}

EventStream::EventStream(const Session& s, const v1::WatchEventsRequest& request)
    : session_(s), following_(s.stop, &context_) {
  s.Prepare(&context_, absl::InfiniteFuture());
  reader_ = s.server->admin->WatchEvents(&context_, request);
}

int EventStream::Finish() {
  grpc::Status status = reader_->Finish();
  if (session_.stop != nullptr && session_.stop->stopped()) return kExitOk;
  if (!status.ok()) return session_.Failed(status);
  return kExitOk;
}

}  // namespace fleet::cli
