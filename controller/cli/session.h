// What every fleetctl verb works with: the connection to fleetd (the three service stubs over
// one channel, over plaintext the caller's principal in each RPC's metadata, deadlines), where
// to write, and the exit codes.
//
// The stubs are StubInterfaces so tests can hand in stubs on an in-process server or mocks;
// only fleetctl_main.cc builds the real channel.
//
// Exit codes: kExitOk; kExitFailed when the server (or an inventory file) refused, with
// `error: <CODE_NAME>: <message>` on the error stream; kExitUsage for a malformed command
// line, with the problem and a pointer to --help.
#ifndef FLEET_CONTROLLER_CLI_SESSION_H_
#define FLEET_CONTROLLER_CLI_SESSION_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/cli/client_config.h"
#include "controller/cli/output.h"
#include "fleet/v1/admin.grpc.pb.h"
#include "fleet/v1/inventory.grpc.pb.h"
#include "fleet/v1/topology.grpc.pb.h"

namespace fleet::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// The metadata key every RPC carries the caller in (see fleet/v1/common.proto).
inline constexpr char kPrincipalMetadataKey[] = "x-fleet-principal";

struct ServerStubs {
  std::unique_ptr<v1::InventoryService::StubInterface> inventory;
  std::unique_ptr<v1::TopologyService::StubInterface> topology;
  std::unique_ptr<v1::AdminService::StubInterface> admin;
};

// Stubs for all three services over one channel.
ServerStubs NewServerStubs(const std::shared_ptr<grpc::ChannelInterface>& channel);

// Ctrl-C and SIGTERM for the verbs that run until interrupted (`get --watch`,
// `events --follow`). main() calls Stop() when such a signal arrives; a verb following a
// stream registers the stream's context meanwhile, so Stop() cancels the stream and the verb
// ends cleanly, flushing what it printed, with exit 0. Thread-safe.
class StopSignal {
 public:
  // Cancels the followed stream, if any, and returns whether there was one; when there was
  // none the caller should let the signal end the process as it normally would.
  bool Stop();
  bool stopped() const;

  // While one lives, Stop() cancels `context`; if Stop() came first, cancels it at once.
  class Following {
   public:
    Following(StopSignal* signal, grpc::ClientContext* context);  // `signal` may be null.
    ~Following();
    Following(const Following&) = delete;
    Following& operator=(const Following&) = delete;

   private:
    StopSignal* signal_;
  };

 private:
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* following_ ABSL_GUARDED_BY(mu_) = nullptr;  // Not owned.
};

// What a verb works with. Not owning: everything outlives the verb call.
struct Session {
  ServerStubs* server = nullptr;  // Null for the verbs that never dial (Verb::dials false).
  OutputFormat format = OutputFormat::kTable;
  // Deadline of each RPC; for a --wait, of the whole command.
  absl::Duration timeout = absl::Seconds(10);
  // Sent as x-fleet-principal over plaintext; empty over TLS, where fleetd takes the identity
  // from the client certificate, so none is sent.
  std::string principal;
  // Over plaintext: what asked for it (`--insecure`, `FLEET_INSECURE`, a context's
  // `insecure: true`), for the hint when the server turns out to serve TLS; "" over TLS.
  std::string plaintext_by;
  const Clock* clock = nullptr;  // For ages.
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  bool color = false;          // Colour state words in tables (--color, or a terminal).
  StopSignal* stop = nullptr;  // May be null: nothing stops a follow but the server.
  // For the config verbs: the client config file (client_config.h; "" when there is none) and
  // what this line's --server, --ca, --cert, --key and --insecure said.
  std::string config_file;
  ConnectionFlags line;

  // Runs one RPC with the deadline and principal set: `rpc(context)` calls the stub.
  grpc::Status Call(const std::function<grpc::Status(grpc::ClientContext*)>& rpc) const;
  // For a stream, which has no per-RPC deadline of its own: sets the principal, and the
  // deadline unless it is absl::InfiniteFuture().
  void Prepare(grpc::ClientContext* context, absl::Time deadline) const;
  // Prints `error: <CODE_NAME>: <message>` and returns kExitFailed. Over plaintext, an
  // UNAVAILABLE that says the server closed the connection gets the likely cause added: the
  // server speaks TLS (gRPC says only `Socket closed` when a TLS server hangs up on a
  // plaintext client).
  int Failed(const grpc::Status& status) const;
};

// Ends a stream the client no longer wants: cancels it and reads what is in flight, so that
// Finish() does not wait for the server.
template <typename Message>
void AbandonStream(grpc::ClientContext& context,
                   const std::unique_ptr<grpc::ClientReaderInterface<Message>>& reader) {
  context.TryCancel();
  Message unused;
  while (reader->Read(&unused)) {
  }
  reader->Finish();
}

// A WatchEvents stream with no deadline (a follow runs until the server ends it or the user
// interrupts), which the session's StopSignal can end.
class EventStream {
 public:
  EventStream(const Session& s, const v1::WatchEventsRequest& request);

  bool Read(v1::Event* event) { return reader_->Read(event); }
  // For a verb that gives up before the stream ends.
  void Abandon() { AbandonStream(context_, reader_); }
  // After Read returned false: kExitOk when the StopSignal or the server ended the stream
  // cleanly, else kExitFailed with the server's error.
  int Finish();

 private:
  const Session& session_;
  grpc::ClientContext context_;
  StopSignal::Following following_;
  std::unique_ptr<grpc::ClientReaderInterface<v1::Event>> reader_;
};

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_SESSION_H_
