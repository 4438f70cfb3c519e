// fleetctl: the operators' command line for fleetd. The only place that reads argv and the
// environment and opens the gRPC channel; everything else is in commands.cc.
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/base/clock.h"
#include "controller/cli/commands.h"

namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  fleet::SystemClock clock;
  fleet::cli::Environment env;
  env.default_server = EnvOr("FLEET_SERVER", "localhost:50051");
  env.principal = absl::StrCat("operator:", EnvOr("USER", "unknown"));
  env.clock = &clock;

  auto connect = [](const std::string& address) {
    return fleet::cli::NewServerStubs(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  };
  return fleet::cli::RunFleetctl(std::vector<std::string>(argv + 1, argv + argc), env, connect,
                                 std::cout, std::cerr);
}
