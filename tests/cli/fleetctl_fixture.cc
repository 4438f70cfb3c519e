#include "tests/cli/fleetctl_fixture.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/scratch.h"

namespace fleet::cli {

bool ParsesAs(const std::string& json, google::protobuf::Message* message) {
  auto status = google::protobuf::util::JsonStringToMessage(json, message);
  if (!status.ok()) ADD_FAILURE() << status.ToString() << "\n" << json;
  return status.ok();
}

void FleetctlTest::SetUp() {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&inventory_);
  builder.RegisterService(&topology_);
  builder.RegisterService(&admin_);
  server_ = builder.BuildAndStart();
  ASSERT_NE(server_, nullptr);
  ASSERT_GT(port, 0);
  address_ = "127.0.0.1:" + std::to_string(port);
  env_.default_server = address_;
  env_.principal = "operator:tester";
  // The fakes serve plaintext; the tests of TLS and of the config file set their own.
  env_.variables.insecure = "1";
  env_.clock = &clock_;
  env_.stop = &stop_;
}

void FleetctlTest::TearDown() {
  if (server_) server_->Shutdown();
}

int FleetctlTest::Run(std::vector<std::string> args) {
  out_.str("");
  err_.str("");
  auto connect = [this](const std::string& address,
                        const ClientTlsFiles& tls) -> absl::StatusOr<ServerStubs> {
    connected_to_ = address;
    connected_with_ = tls;
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = ClientCredentials(tls);
    if (!credentials.ok()) return credentials.status();
    return NewServerStubs(grpc::CreateChannel(address, *credentials));
  };
  return RunFleetctl(args, env_, connect, out_, err_);
}

std::string FleetctlTest::WriteFile(const std::string& name, const std::string& text) {
  if (files_dir_.empty()) files_dir_ = fleet::testing::FreshDirectory("files");
  std::string path = files_dir_ + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::thread FleetctlTest::RunInBackground(std::vector<std::string> args, int* exit_code) {
  return std::thread([this, args = std::move(args), exit_code] { *exit_code = Run(args); });
}

}  // namespace fleet::cli
