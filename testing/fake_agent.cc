#include "testing/fake_agent.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"

namespace fleet::testing {
namespace {

// The port's state after `command`: UP, seeing the expected peer of a retrain.
v1::LinkState LinkAfter(const v1::Command& command) {
  v1::LinkState link;
  link.set_status(v1::LINK_STATUS_UP);
  if (command.has_retrain()) {
    const v1::RetrainPort& retrain = command.retrain();
    link.set_onic_serial(retrain.onic_serial());
    link.set_port(retrain.port());
    if (retrain.has_expected_peer()) {
      link.set_peer_seen(
          absl::StrCat(retrain.expected_peer().onic_serial(), "/", retrain.expected_peer().port()));
    }
  } else if (command.has_read_port()) {
    link.set_onic_serial(command.read_port().onic_serial());
    link.set_port(command.read_port().port());
  }
  return link;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FakeAgent>> FakeAgent::Connect(
    const std::string& target, const std::string& host, const std::vector<std::string>& serials) {
  std::unique_ptr<FakeAgent> agent(new FakeAgent());
  agent->stub_ =
      v1::AgentService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  agent->stream_ = agent->stub_->Connect(&agent->context_);
  v1::AgentMessage hello;
  v1::RegisterAgent* reg = hello.mutable_register_();
  reg->set_host(host);
  reg->set_backend("emulated");
  for (const std::string& serial : serials) reg->add_onics()->set_serial(serial);
  v1::ControllerMessage answer;
  if (!agent->stream_->Write(hello) || !agent->stream_->Read(&answer) || !answer.has_registered()) {
    return absl::UnavailableError(absl::StrCat("fake agent ", host, ": not registered"));
  }
  agent->reader_ = std::thread([a = agent.get()] { a->Answer(); });
  return agent;
}

FakeAgent::~FakeAgent() {
  context_.TryCancel();
  if (reader_.joinable()) reader_.join();
}

std::vector<v1::Command> FakeAgent::commands() const {
  absl::MutexLock lock(&mu_);
  return commands_;
}

void FakeAgent::Answer() {
  v1::ControllerMessage message;
  while (stream_->Read(&message)) {
    if (!message.has_command()) continue;
    {
      absl::MutexLock lock(&mu_);
      commands_.push_back(message.command());
    }
    v1::AgentMessage reply;
    v1::CommandResult* result = reply.mutable_result();
    result->set_command_id(message.command().id());
    *result->mutable_link() = LinkAfter(message.command());
    if (!stream_->Write(reply)) break;
  }
  (void)stream_->Finish();
}

}  // namespace fleet::testing
