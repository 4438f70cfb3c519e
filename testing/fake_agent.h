// An O-NIC agent for tests of fleetd's side: it connects over a real AgentService stream,
// registers its O-NICs, and answers every command at once with the port UP (seeing the
// expected peer, when one is given). It keeps the commands it was sent.
#ifndef FLEET_TESTING_FAKE_AGENT_H_
#define FLEET_TESTING_FAKE_AGENT_H_

#include <grpcpp/client_context.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "fleet/v1/agent.grpc.pb.h"

namespace fleet::testing {

class FakeAgent {
 public:
  // Connects to fleetd at `target` (host:port) as agent `host` owning the O-NICs `serials`;
  // returns once fleetd has answered the registration.
  static absl::StatusOr<std::unique_ptr<FakeAgent>> Connect(
      const std::string& target, const std::string& host, const std::vector<std::string>& serials);
  ~FakeAgent();  // Ends the stream.

  // The commands received so far, in order.
  std::vector<v1::Command> commands() const;

 private:
  FakeAgent() = default;
  void Answer();  // Runs on `reader_` until the stream ends.

  std::unique_ptr<v1::AgentService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>> stream_;
  std::thread reader_;
  mutable absl::Mutex mu_;
  std::vector<v1::Command> commands_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::testing

#endif  // FLEET_TESTING_FAKE_AGENT_H_
