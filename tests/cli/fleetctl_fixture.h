// The fixture of fleetctl's end-to-end tests: fleetctl's command line in, RPCs over a real
// channel to in-process fakes of the three services, text and exit code out.
#ifndef FLEET_TESTS_CLI_FLEETCTL_FIXTURE_H_
#define FLEET_TESTS_CLI_FLEETCTL_FIXTURE_H_

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/grpc_tls.h"
#include "controller/cli/commands.h"
#include "testing/fake_admin_service.h"
#include "testing/fake_clock.h"
#include "testing/fake_inventory_service.h"
#include "testing/fake_topology_service.h"

namespace fleet::cli {

// Parses fleetctl's JSON output back into `message`; false (with the reason logged) if not.
bool ParsesAs(const std::string& json, google::protobuf::Message* message);

class FleetctlTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Runs a command line; the connector opens a real channel to whatever --server says.
  int Run(std::vector<std::string> args);

  // Named by this process: ctest runs each test as its own process, in parallel, and a file
  // shared between them would be rewritten under another test's feet.
  std::string WriteFile(const std::string& name, const std::string& text);

  // Runs a command line on its own thread, for verbs that follow a stream the test feeds;
  // join the thread before reading the output or the exit code.
  std::thread RunInBackground(std::vector<std::string> args, int* exit_code);

  std::string out() const { return out_.str(); }
  std::string err() const { return err_.str(); }

  fleet::testing::FakeClock clock_;
  StopSignal stop_;
  fleet::testing::FakeInventoryService inventory_{clock_.Now()};
  fleet::testing::FakeTopologyService topology_{clock_.Now()};
  fleet::testing::FakeAdminService admin_{clock_.Now()};
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  Environment env_;
  std::string connected_to_;
  ClientTlsFiles connected_with_;
  std::ostringstream out_;
  std::ostringstream err_;
  std::string files_dir_;  // where WriteFile writes; made on first use
};

}  // namespace fleet::cli

#endif  // FLEET_TESTS_CLI_FLEETCTL_FIXTURE_H_
