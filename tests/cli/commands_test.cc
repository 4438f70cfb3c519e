// fleetctl's verbs run end to end: command line in, RPCs over a real channel to in-process
// fakes of the three services, text and exit code out.
#include "controller/cli/commands.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "absl/synchronization/mutex.h"
#include "controller/base/clock.h"

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

google::protobuf::Timestamp At(absl::Time time) {
  google::protobuf::Timestamp t;
  t.set_seconds(absl::ToUnixSeconds(time));
  return t;
}

// Parses fleetctl's JSON output back into `message`; false (with the reason logged) if not.
bool ParsesAs(const std::string& json, google::protobuf::Message* message) {
  auto status = google::protobuf::util::JsonStringToMessage(json, message);
  if (!status.ok()) ADD_FAILURE() << status.ToString() << "\n" << json;
  return status.ok();
}

std::string Principal(const grpc::ServerContext* context) {
  auto it = context->client_metadata().find(kPrincipalMetadataKey);
  if (it == context->client_metadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}

v1::OnicPort MakeOnicPort(uint32_t index, uint32_t tx, uint32_t rx) {
  v1::OnicPort port;
  port.set_index(index);
  port.mutable_tx()->set_switch_id("ocs1");
  port.mutable_tx()->set_port(tx);
  port.mutable_rx()->set_switch_id("ocs1");
  port.mutable_rx()->set_port(rx);
  port.set_admin_state(v1::ADMIN_STATE_ENABLED);
  port.set_oper_state(v1::OPER_STATE_UP);
  return port;
}

// A small stateful inventory: lists and gets read `site_`, deletes remove from it. `now` is
// the test clock's time, for the agents' timestamps.
class FakeInventory final : public v1::InventoryService::Service {
 public:
  explicit FakeInventory(absl::Time now) {
    v1::Agent* agent1 = agents_.add_agents();
    agent1->set_host("server1");
    agent1->set_backend("emulated");
    agent1->set_software_version("0.2.0");
    agent1->add_onic_serials("FLT-S1C0-N0");
    agent1->add_onic_serials("FLT-G3-0");
    agent1->set_connected(true);
    *agent1->mutable_connected_since() = At(now - absl::Minutes(5));
    *agent1->mutable_last_heartbeat() = At(now - absl::Seconds(2));

    v1::Agent* agent2 = agents_.add_agents();
    agent2->set_host("server2");
    agent2->set_backend("pcie-sysfs");
    agent2->set_software_version("0.1.9");
    agent2->add_onic_serials("FLT-S2C0-N0");
    agent2->set_connected(false);
    *agent2->mutable_connected_since() = At(now - absl::Hours(30));
    *agent2->mutable_last_heartbeat() = At(now - absl::Hours(3));
    agent2->add_inventory_mismatches("onic FLT-S2C0-N1 is in the inventory, not on the host");
    agent2->add_inventory_mismatches("onic FLT-ZZ-9 is on the host, not in the inventory");

    v1::Switch* sw = site_.add_switches();
    sw->set_id("ocs1");
    sw->set_model("polatis-7000-384x384");
    sw->set_ingress_ports(384);
    sw->set_egress_ports(384);
    sw->set_address("192.0.2.10");
    sw->set_protocol(v1::SWITCH_PROTOCOL_TL1);
    sw->set_cluster("gen1");
    sw->add_trunk_reserved_ports(289);

    v1::Host* host = site_.add_hosts();
    host->set_name("server1");
    host->set_address("192.0.2.21");
    host->set_cluster("gen1");
    host->set_admin_state(v1::ADMIN_STATE_ENABLED);

    v1::Device* gpu = site_.add_devices();
    gpu->set_id("gpu3");
    gpu->set_kind(v1::DEVICE_KIND_GPU);
    gpu->set_chassis("jbog1");
    gpu->add_onics("gpu3-n0");
    gpu->set_admin_state(v1::ADMIN_STATE_ENABLED);

    v1::Onic* onic = site_.add_onics();
    onic->set_id("gpu3-n0");
    onic->set_device("gpu3");
    onic->set_serial("FLT-G3-0");
    onic->set_pcie_address("0000:17:00.0");
    *onic->add_ports() = MakeOnicPort(1, 3, 387);
    *onic->add_ports() = MakeOnicPort(2, 4, 388);
    onic->set_admin_state(v1::ADMIN_STATE_ENABLED);

    v1::Circuit* circuit = circuits_.add_circuits();
    circuit->set_id("c1");
    circuit->set_allocation_id("a1");
    circuit->mutable_source()->set_onic("s1c0-n0");
    circuit->mutable_source()->set_port(1);
    circuit->mutable_destination()->set_onic("gpu3-n0");
    circuit->mutable_destination()->set_port(1);
    v1::CrossConnect* xc = circuit->add_cross_connects();
    xc->set_switch_id("ocs1");
    xc->set_ingress(1);
    xc->set_egress(387);
    circuit->set_state(v1::CIRCUIT_STATE_ACTIVE);

    v1::SwitchPort* port = ports_.add_ports();
    port->mutable_ref()->set_switch_id("ocs1");
    port->mutable_ref()->set_port(1);
    port->set_direction(v1::PORT_DIRECTION_INGRESS);
    port->set_admin_state(v1::ADMIN_STATE_ENABLED);
    port->set_oper_state(v1::OPER_STATE_UP);
    port->set_reservation(v1::PORT_RESERVATION_NONE);
    port->mutable_wiring()->mutable_onic_port()->set_onic("s1c0-n0");
    port->mutable_wiring()->mutable_onic_port()->set_port(1);
    port->set_circuit_id("c1");
  }

  grpc::Status ListSwitches(grpc::ServerContext* context, const v1::ListSwitchesRequest*,
                            v1::ListSwitchesResponse* response) override {
    absl::MutexLock lock(&mu_);
    principal_ = Principal(context);
    *response->mutable_switches() = site_.switches();
    return grpc::Status::OK;
  }

  grpc::Status GetSwitch(grpc::ServerContext*, const v1::GetSwitchRequest* request,
                         v1::Switch* response) override {
    absl::MutexLock lock(&mu_);
    for (const v1::Switch& sw : site_.switches()) {
      if (sw.id() == request->id()) {
        *response = sw;
        return grpc::Status::OK;
      }
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "switch " + request->id() + " not found");
  }

  grpc::Status ListPorts(grpc::ServerContext*, const v1::ListPortsRequest* request,
                         v1::ListPortsResponse* response) override {
    absl::MutexLock lock(&mu_);
    last_port_filter_ = request->switch_id();
    *response = ports_;
    return grpc::Status::OK;
  }

  grpc::Status ListHosts(grpc::ServerContext*, const v1::ListHostsRequest*,
                         v1::ListHostsResponse* response) override {
    absl::MutexLock lock(&mu_);
    *response->mutable_hosts() = site_.hosts();
    return grpc::Status::OK;
  }

  grpc::Status GetHost(grpc::ServerContext*, const v1::GetHostRequest* request,
                       v1::Host* response) override {
    absl::MutexLock lock(&mu_);
    for (const v1::Host& host : site_.hosts()) {
      if (host.name() == request->name()) {
        *response = host;
        return grpc::Status::OK;
      }
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "host " + request->name() + " not found");
  }

  grpc::Status ListDevices(grpc::ServerContext*, const v1::ListDevicesRequest* request,
                           v1::ListDevicesResponse* response) override {
    absl::MutexLock lock(&mu_);
    for (const v1::Device& device : site_.devices()) {
      if (request->kind() != v1::DEVICE_KIND_UNSPECIFIED && device.kind() != request->kind()) {
        continue;
      }
      *response->add_devices() = device;
    }
    return grpc::Status::OK;
  }

  grpc::Status GetOnic(grpc::ServerContext*, const v1::GetOnicRequest* request,
                       v1::Onic* response) override {
    absl::MutexLock lock(&mu_);
    for (const v1::Onic& onic : site_.onics()) {
      if (onic.id() == request->id()) {
        *response = onic;
        return grpc::Status::OK;
      }
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "onic " + request->id() + " not found");
  }

  grpc::Status ListOnics(grpc::ServerContext*, const v1::ListOnicsRequest*,
                         v1::ListOnicsResponse* response) override {
    absl::MutexLock lock(&mu_);
    *response->mutable_onics() = site_.onics();
    return grpc::Status::OK;
  }

  grpc::Status ListCircuits(grpc::ServerContext*, const v1::ListCircuitsRequest*,
                            v1::ListCircuitsResponse* response) override {
    absl::MutexLock lock(&mu_);
    *response = circuits_;
    return grpc::Status::OK;
  }

  grpc::Status ApplyInventory(grpc::ServerContext*, const v1::ApplyInventoryRequest* request,
                              v1::ApplyInventoryResponse* response) override {
    absl::MutexLock lock(&mu_);
    applied_ = *request;
    // Switches only, which is all the tests apply: new ids are created, known ones unchanged.
    for (const v1::Switch& incoming : request->inventory().switches()) {
      bool known = false;
      for (const v1::Switch& sw : site_.switches()) known = known || sw.id() == incoming.id();
      if (known) {
        response->set_unchanged(response->unchanged() + 1);
      } else {
        response->set_created(response->created() + 1);
        response->add_changes("created switch " + incoming.id());
        if (!request->dry_run()) *site_.add_switches() = incoming;
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status ListAgents(grpc::ServerContext*, const v1::ListAgentsRequest*,
                          v1::ListAgentsResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (agents_unimplemented_) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no agent registry");
    }
    *response = agents_;
    return grpc::Status::OK;
  }

  grpc::Status DeleteObject(grpc::ServerContext*, const v1::DeleteObjectRequest* request,
                            v1::DeleteObjectResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (request->kind() == "host" && request->name() == "server1") {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "host server1 still has devices:\n  server1-cpu0\ndelete them first");
    }
    if (request->kind() == "device" && request->name() == "gpu3") {
      site_.clear_devices();
      site_.clear_onics();
      response->add_deleted("device gpu3");
      response->add_deleted("onic gpu3-n0");
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        request->kind() + " " + request->name() + " not found");
  }

  std::string principal() {
    absl::MutexLock lock(&mu_);
    return principal_;
  }
  std::string last_port_filter() {
    absl::MutexLock lock(&mu_);
    return last_port_filter_;
  }
  v1::ApplyInventoryRequest applied() {
    absl::MutexLock lock(&mu_);
    return applied_;
  }
  // As a fleetd without an agent registry answers.
  void set_agents_unimplemented() {
    absl::MutexLock lock(&mu_);
    agents_unimplemented_ = true;
  }

 private:
  absl::Mutex mu_;
  v1::Inventory site_ ABSL_GUARDED_BY(mu_);
  v1::ListPortsResponse ports_ ABSL_GUARDED_BY(mu_);
  v1::ListCircuitsResponse circuits_ ABSL_GUARDED_BY(mu_);
  std::string principal_ ABSL_GUARDED_BY(mu_);
  std::string last_port_filter_ ABSL_GUARDED_BY(mu_);
  v1::ApplyInventoryRequest applied_ ABSL_GUARDED_BY(mu_);
  v1::ListAgentsResponse agents_ ABSL_GUARDED_BY(mu_);
  bool agents_unimplemented_ ABSL_GUARDED_BY(mu_) = false;
};

class FakeTopology final : public v1::TopologyService::Service {
 public:
  explicit FakeTopology(absl::Time created) {
    v1::Allocation* a = allocations_.add_allocations();
    a->set_id("a1");
    a->set_tenant("tenant-a");
    a->set_name("train");
    a->set_state(v1::ALLOCATION_STATE_READY);
    a->add_members("server1-cpu0");
    a->add_members("gpu3");
    a->mutable_created()->set_seconds(absl::ToUnixSeconds(created));
  }

  grpc::Status ListAllocations(grpc::ServerContext*, const v1::ListAllocationsRequest* request,
                               v1::ListAllocationsResponse* response) override {
    for (const v1::Allocation& a : allocations_.allocations()) {
      if (request->tenant().empty() || a.tenant() == request->tenant()) {
        *response->add_allocations() = a;
      }
    }
    return grpc::Status::OK;
  }

 private:
  v1::ListAllocationsResponse allocations_;  // Read-only after construction.
};

// s1c0-n0's ports as its agent would report them: port 1 up, port 2 dark.
v1::LinkState CannedLink(uint32_t port) {
  v1::LinkState state;
  state.set_onic_serial("FLT-S1C0-N0");
  state.set_port(port);
  if (port == 1) {
    state.set_status(v1::LINK_STATUS_UP);
    state.set_rx_power_dbm(-1.5);
    state.set_tx_power_dbm(0.8);
    state.set_peer_seen("FLT-GPU1-N0/1");
    state.set_link_speed_mts(16000);
    state.set_link_width(16);
  } else {
    state.set_status(v1::LINK_STATUS_DOWN);
    state.set_rx_power_dbm(-99.99);
    state.set_tx_power_dbm(0.5);
    state.set_detail("no light");
  }
  return state;
}

// Link operations know s1c0-n0; gpu3-n0's agent is away; any other O-NIC is unknown.
grpc::Status CheckLinkOnic(const std::string& onic) {
  if (onic == "s1c0-n0") return grpc::Status::OK;
  if (onic == "gpu3-n0") {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "agent on host jbog1 is not connected");
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND, "onic " + onic + " not found");
}

class FakeAdmin final : public v1::AdminService::Service {
 public:
  grpc::Status RetrainLink(grpc::ServerContext*, const v1::RetrainLinkRequest* request,
                           v1::LinkState* response) override {
    {
      absl::MutexLock lock(&mu_);
      retrains_.push_back(*request);
    }
    grpc::Status status = CheckLinkOnic(request->onic());
    if (status.ok()) *response = CannedLink(request->port());
    return status;
  }

  grpc::Status GetLinkStatus(grpc::ServerContext*, const v1::GetLinkStatusRequest* request,
                             v1::GetLinkStatusResponse* response) override {
    grpc::Status status = CheckLinkOnic(request->onic());
    if (!status.ok()) return status;
    *response->add_ports() = CannedLink(1);
    *response->add_ports() = CannedLink(2);
    return grpc::Status::OK;
  }

  std::vector<v1::RetrainLinkRequest> retrains() {
    absl::MutexLock lock(&mu_);
    return retrains_;
  }

  grpc::Status Health(grpc::ServerContext*, const v1::HealthRequest*,
                      v1::HealthResponse* response) override {
    response->set_overall(v1::ComponentHealth::STATE_DEGRADED);
    response->set_version("0.1.0-test");
    v1::ComponentHealth* store = response->add_components();
    store->set_name("store");
    store->set_state(v1::ComponentHealth::STATE_OK);
    v1::ComponentHealth* sw = response->add_components();
    sw->set_name("switch/ocs1");
    sw->set_state(v1::ComponentHealth::STATE_DOWN);
    sw->set_detail("connection refused");
    return grpc::Status::OK;
  }

 private:
  absl::Mutex mu_;
  std::vector<v1::RetrainLinkRequest> retrains_ ABSL_GUARDED_BY(mu_);
};

class FleetctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
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
    env_.clock = &clock_;
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  // Runs a command line; the connector opens a real channel to whatever --server says.
  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    auto connect = [this](const std::string& address) {
      connected_to_ = address;
      return NewServerStubs(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    };
    return RunFleetctl(args, env_, connect, out_, err_);
  }

  std::string out() const { return out_.str(); }
  std::string err() const { return err_.str(); }

  FakeClock clock_;
  FakeInventory inventory_{clock_.Now()};
  FakeTopology topology_{clock_.Now() - absl::Minutes(3)};
  FakeAdmin admin_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  Environment env_;
  std::string connected_to_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(FleetctlTest, GetSwitchesPrintsTable) {
  EXPECT_EQ(Run({"get", "switches"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "ID    MODEL                 SIZE     ADDRESS     PROTOCOL  CLUSTER  RESERVED\n"
            "ocs1  polatis-7000-384x384  384x384  192.0.2.10  tl1       gen1     1\n");
  EXPECT_EQ(err(), "");
}

TEST_F(FleetctlTest, GetAcceptsSingularKind) {
  EXPECT_EQ(Run({"get", "switch"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("ocs1"));
}

TEST_F(FleetctlTest, SendsOperatorPrincipal) {
  ASSERT_EQ(Run({"get", "switches"}), kExitOk) << err();
  EXPECT_EQ(inventory_.principal(), "operator:tester");
}

TEST_F(FleetctlTest, GetSwitchesJsonPrintsTheListResponse) {
  EXPECT_EQ(Run({"get", "switches", "-o", "json"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("{\n \"switches\": [\n"));
  EXPECT_THAT(out(), HasSubstr("\"ingress_ports\": 384"));
  EXPECT_THAT(out(), HasSubstr("\"protocol\": \"SWITCH_PROTOCOL_TL1\""));
}

TEST_F(FleetctlTest, GetSwitchesYamlPrintsBlockYaml) {
  EXPECT_EQ(Run({"get", "switches", "--output=yaml"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("switches:\n  - id: ocs1\n"));
  EXPECT_THAT(out(), HasSubstr("    protocol: SWITCH_PROTOCOL_TL1\n"));
}

TEST_F(FleetctlTest, GlobalFlagsAreAcceptedBeforeTheVerb) {
  EXPECT_EQ(Run({"--server", address_, "-o", "json", "get", "switches"}), kExitOk) << err();
  EXPECT_EQ(connected_to_, address_);
  EXPECT_THAT(out(), HasSubstr("\"switches\""));
}

TEST_F(FleetctlTest, GetPortsPassesSwitchFilterAndShowsWiring) {
  EXPECT_EQ(Run({"get", "ports", "--switch", "ocs1"}), kExitOk) << err();
  EXPECT_EQ(inventory_.last_port_filter(), "ocs1");
  EXPECT_EQ(out(),
            "SWITCH  PORT  DIR      ADMIN    OPER  RESERVED  WIRED-TO           CIRCUIT\n"
            "ocs1    1     ingress  enabled  up    -         onic s1c0-n0/1 tx  c1\n");
}

TEST_F(FleetctlTest, GetDevicesFiltersByKind) {
  EXPECT_EQ(Run({"get", "devices", "--kind", "gpu"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "ID    KIND  HOST  CHASSIS  MODEL  ONICS  ADMIN\n"
            "gpu3  gpu   -     jbog1    -      1      enabled\n");
  EXPECT_EQ(Run({"get", "devices", "--kind", "cpu"}), kExitOk) << err();
  EXPECT_EQ(out(), "");
  EXPECT_EQ(err(), "no devices found\n");
}

TEST_F(FleetctlTest, GetDevicesRejectsUnknownDeviceKind) {
  EXPECT_EQ(Run({"get", "devices", "--kind", "tpu"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown device kind 'tpu'; kinds: cpu, gpu, nvme, fpga, other"));
}

TEST_F(FleetctlTest, GetCircuitsShowsCrossConnects) {
  EXPECT_EQ(Run({"get", "circuits"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "ID  ALLOCATION  SOURCE     DESTINATION  CROSS-CONNECTS  STATE   PHASE\n"
            "c1  a1          s1c0-n0/1  gpu3-n0/1    ocs1:1→387      active  -\n");
}

TEST_F(FleetctlTest, GetAllocationsShowsAgeFromTheClock) {
  EXPECT_EQ(Run({"get", "allocations", "--tenant", "tenant-a"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "ID  TENANT    NAME   STATE  MEMBERS  CIRCUITS  PHASE  AGE\n"
            "a1  tenant-a  train  ready  2        0         -      3m\n");
}

TEST_F(FleetctlTest, GetUnknownKindIsUsageError) {
  EXPECT_EQ(Run({"get", "switchs"}), kExitUsage);
  EXPECT_EQ(out(), "");
  EXPECT_THAT(err(), HasSubstr("error: unknown kind 'switchs'; kinds: switches, ports, hosts, "
                               "agents, devices, onics, trunks, circuits, allocations, events\n"));
  EXPECT_THAT(err(), HasSubstr("fleetctl get --help"));
}

TEST_F(FleetctlTest, GetRejectsFilterTheKindDoesNotTake) {
  EXPECT_EQ(Run({"get", "switches", "--host", "server1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--host does not apply to switches"));
}

TEST_F(FleetctlTest, UnknownOutputFormatIsUsageError) {
  EXPECT_EQ(Run({"get", "switches", "-o", "xml"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown output format 'xml'; formats: table, json, yaml"));
}

TEST_F(FleetctlTest, UnknownFlagIsUsageError) {
  EXPECT_EQ(Run({"get", "switches", "--colour"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown flag --colour"));
}

TEST_F(FleetctlTest, DescribeMissingSwitchIsNotFound) {
  EXPECT_EQ(Run({"describe", "switch", "ocs9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: switch ocs9 not found\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTest, DescribeSwitchSummarisesItsPorts) {
  EXPECT_EQ(Run({"describe", "switch", "ocs1"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Size:             384x384 (ingress 1-384, egress 385-768)\n"));
  EXPECT_THAT(out(), HasSubstr("Trunk reserved:   289\n"));
  EXPECT_THAT(out(), HasSubstr("In circuits:      1: 1\n"));
}

TEST_F(FleetctlTest, DescribeOnicShowsPortsFibersAndCircuits) {
  EXPECT_EQ(Run({"describe", "onic", "gpu3-n0"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Serial:  FLT-G3-0\n"));
  EXPECT_THAT(out(), HasSubstr("  port 1  tx ocs1/3  rx ocs1/387  admin enabled  oper up\n"));
  EXPECT_THAT(out(), HasSubstr("Circuits:\n  c1  s1c0-n0/1 → gpu3-n0/1  via ocs1:1→387  active\n"));
}

TEST_F(FleetctlTest, DescribeJsonPrintsTheObjectOnly) {
  EXPECT_EQ(Run({"describe", "onic", "gpu3-n0", "-o", "json"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("{\n \"id\": \"gpu3-n0\",\n"));
}

TEST_F(FleetctlTest, DescribeNeedsKindAndName) {
  EXPECT_EQ(Run({"describe", "switch"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("describe needs KIND and NAME, got 'switch'"));
}

TEST_F(FleetctlTest, DeleteRefusedPrintsCodeAndWholeMessage) {
  EXPECT_EQ(Run({"delete", "host", "server1"}), kExitFailed);
  EXPECT_EQ(err(),
            "error: FAILED_PRECONDITION: host server1 still has devices:\n"
            "  server1-cpu0\n"
            "delete them first\n");
}

TEST_F(FleetctlTest, DeletePrintsEachDeletedObjectOnce) {
  EXPECT_EQ(Run({"delete", "devices", "gpu3"}), kExitOk) << err();
  EXPECT_EQ(out(), "deleted device gpu3\ndeleted onic gpu3-n0\n");
  EXPECT_EQ(Run({"get", "devices"}), kExitOk);
  EXPECT_EQ(err(), "no devices found\n");
}

TEST_F(FleetctlTest, DeleteUnknownKindIsUsageError) {
  EXPECT_EQ(Run({"delete", "circuit", "c1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown kind 'circuit'; kinds: switch, host, device, onic, trunk"));
}

TEST_F(FleetctlTest, GetAgentsPrintsTable) {
  EXPECT_EQ(Run({"get", "agents"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "HOST     CONNECTED  BACKEND     VERSION  ONICS  LAST-HEARTBEAT  MISMATCHES\n"
            "server1  yes        emulated    0.2.0    2      2s              -\n"
            "server2  no         pcie-sysfs  0.1.9    1      3h              2\n");
  EXPECT_EQ(err(), "");
}

TEST_F(FleetctlTest, GetAgentsJsonParsesBackToTheListResponse) {
  EXPECT_EQ(Run({"get", "agent", "-o", "json"}), kExitOk) << err();
  v1::ListAgentsResponse parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  ASSERT_EQ(parsed.agents_size(), 2);
  EXPECT_EQ(parsed.agents(0).host(), "server1");
  EXPECT_TRUE(parsed.agents(0).connected());
  EXPECT_EQ(parsed.agents(0).onic_serials_size(), 2);
  EXPECT_EQ(parsed.agents(1).inventory_mismatches_size(), 2);
  EXPECT_EQ(parsed.agents(1).last_heartbeat().seconds(),
            absl::ToUnixSeconds(clock_.Now() - absl::Hours(3)));
}

TEST_F(FleetctlTest, GetAgentsWithoutAgentRegistryFails) {
  inventory_.set_agents_unimplemented();
  EXPECT_EQ(Run({"get", "agents"}), kExitFailed);
  EXPECT_EQ(err(), "error: UNIMPLEMENTED: no agent registry\n");
}

TEST_F(FleetctlTest, DescribeAgentShowsEachMismatchOnItsOwnLine) {
  EXPECT_EQ(Run({"describe", "agent", "server2"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "Host:            server2\n"
            "Connected:       no\n"
            "Last heartbeat:  2023-11-14T19:13:20Z (3h ago)\n"
            "Backend:         pcie-sysfs\n"
            "Version:         0.1.9\n"
            "O-NIC serials:\n"
            "  FLT-S2C0-N0\n"
            "Inventory mismatches:\n"
            "  onic FLT-S2C0-N1 is in the inventory, not on the host\n"
            "  onic FLT-ZZ-9 is on the host, not in the inventory\n");
}

TEST_F(FleetctlTest, DescribeConnectedAgentShowsSince) {
  EXPECT_EQ(Run({"describe", "agent", "server1"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Connected:             yes\n"
                               "Connected since:       2023-11-14T22:08:20Z (5m ago)\n"));
  EXPECT_THAT(out(), HasSubstr("O-NIC serials:\n  FLT-S1C0-N0\n  FLT-G3-0\n"));
  EXPECT_THAT(out(), HasSubstr("Inventory mismatches:  (none)\n"));
}

TEST_F(FleetctlTest, DescribeAgentJsonPrintsTheAgent) {
  EXPECT_EQ(Run({"describe", "agent", "server2", "-o", "json"}), kExitOk) << err();
  v1::Agent parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_EQ(parsed.host(), "server2");
  EXPECT_EQ(parsed.backend(), "pcie-sysfs");
}

TEST_F(FleetctlTest, DescribeAbsentAgentIsNotFound) {
  EXPECT_EQ(Run({"describe", "agent", "server9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: agent server9 has never connected\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTest, DescribeHostShowsItsAgent) {
  EXPECT_EQ(Run({"describe", "host", "server1"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Agent:    connected since 2023-11-14T22:08:20Z; emulated backend, "
                               "version 0.2.0\n"));
}

TEST_F(FleetctlTest, DescribeHostWithoutAgentRegistryStillWorks) {
  inventory_.set_agents_unimplemented();
  EXPECT_EQ(Run({"describe", "host", "server1"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("Agent:    never registered\n"));
  EXPECT_THAT(out(), HasSubstr("Devices:\n  gpu3  gpu"));
}

TEST_F(FleetctlTest, LinkRetrainPrintsTheUpLinkInOneLine) {
  EXPECT_EQ(Run({"link", "retrain", "s1c0-n0", "1"}), kExitOk) << err();
  EXPECT_EQ(out(), "s1c0-n0 port 1: up (16000 MT/s x16, rx -1.50 dBm, peer FLT-GPU1-N0/1)\n");
  std::vector<v1::RetrainLinkRequest> retrains = admin_.retrains();
  ASSERT_EQ(retrains.size(), 1u);
  EXPECT_EQ(retrains[0].onic(), "s1c0-n0");
  EXPECT_EQ(retrains[0].port(), 1u);
}

TEST_F(FleetctlTest, LinkRetrainShowsWhyALinkIsNotUp) {
  EXPECT_EQ(Run({"link", "retrain", "s1c0-n0", "2"}), kExitOk) << err();
  EXPECT_EQ(out(), "s1c0-n0 port 2: down: no light\n");
  ASSERT_EQ(admin_.retrains().size(), 1u);
  EXPECT_EQ(admin_.retrains()[0].port(), 2u);
}

TEST_F(FleetctlTest, LinkRetrainJsonParsesBackToTheLinkState) {
  EXPECT_EQ(Run({"link", "retrain", "s1c0-n0", "1", "-o", "json"}), kExitOk) << err();
  v1::LinkState parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_EQ(parsed.status(), v1::LINK_STATUS_UP);
  EXPECT_EQ(parsed.link_width(), 16u);
  EXPECT_DOUBLE_EQ(parsed.rx_power_dbm(), -1.5);
  EXPECT_EQ(parsed.peer_seen(), "FLT-GPU1-N0/1");
}

TEST_F(FleetctlTest, LinkRetrainRejectsPortOtherThanOneOrTwo) {
  for (const char* port : {"0", "3", "12", "one", "1x"}) {
    EXPECT_EQ(Run({"link", "retrain", "s1c0-n0", port}), kExitUsage) << port;
    EXPECT_THAT(err(), HasSubstr(std::string("error: PORT must be 1 or 2, got '") + port + "'"));
    EXPECT_THAT(err(), HasSubstr("fleetctl link --help"));
    EXPECT_EQ(out(), "");
  }
  EXPECT_TRUE(admin_.retrains().empty());
}

TEST_F(FleetctlTest, LinkRetrainServerErrorExitsOne) {
  EXPECT_EQ(Run({"link", "retrain", "gpu3-n0", "1"}), kExitFailed);
  EXPECT_EQ(err(), "error: UNAVAILABLE: agent on host jbog1 is not connected\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTest, LinkRetrainNeedsOnicAndPort) {
  EXPECT_EQ(Run({"link", "retrain", "s1c0-n0"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("link retrain needs ONIC and PORT, got 'retrain s1c0-n0'"));
  EXPECT_TRUE(admin_.retrains().empty());
}

TEST_F(FleetctlTest, LinkStatusPrintsBothPorts) {
  EXPECT_EQ(Run({"link", "status", "s1c0-n0"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "PORT  STATUS  SPEED       WIDTH  RX-DBM  TX-DBM  PEER           DETAIL\n"
            "1     up      16000 MT/s  x16    -1.50   0.80    FLT-GPU1-N0/1  -\n"
            "2     down    -           -      -       0.50    -              no light\n");
}

TEST_F(FleetctlTest, LinkStatusJsonAndYamlPrintTheResponse) {
  EXPECT_EQ(Run({"link", "status", "s1c0-n0", "-o", "json"}), kExitOk) << err();
  v1::GetLinkStatusResponse parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  ASSERT_EQ(parsed.ports_size(), 2);
  EXPECT_EQ(parsed.ports(1).status(), v1::LINK_STATUS_DOWN);
  EXPECT_EQ(parsed.ports(1).detail(), "no light");
  EXPECT_EQ(Run({"link", "status", "s1c0-n0", "-o", "yaml"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("ports:\n  - onic_serial: FLT-S1C0-N0\n"));
  EXPECT_THAT(out(), HasSubstr("status: LINK_STATUS_DOWN\n"));
}

TEST_F(FleetctlTest, LinkStatusUnknownOnicExitsOne) {
  EXPECT_EQ(Run({"link", "status", "s9c9-n9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: onic s9c9-n9 not found\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTest, LinkNeedsAKnownSubcommand) {
  EXPECT_EQ(Run({"link"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("link needs a subcommand: retrain ONIC PORT, or status ONIC"));
  EXPECT_EQ(Run({"link", "reset", "s1c0-n0"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown link subcommand 'reset'; subcommands: retrain, status"));
  EXPECT_EQ(Run({"link", "status"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("link status needs one ONIC, got 'status'"));
}

TEST_F(FleetctlTest, LinkHelpShowsBothSubcommands) {
  EXPECT_EQ(Run({"link", "--help"}), kExitOk);
  EXPECT_THAT(out(),
              StartsWith("Usage: fleetctl link (retrain ONIC PORT | status ONIC) [flags]\n"));
  EXPECT_THAT(out(), HasSubstr("  retrain ONIC PORT  Retrain one port (1 or 2)"));
  EXPECT_THAT(out(), HasSubstr("  status ONIC        Show both ports"));
  std::string link_help = out();
  EXPECT_EQ(Run({"link", "retrain", "--help"}), kExitOk);
  EXPECT_EQ(out(), link_help);
  EXPECT_EQ(Run({"help", "link"}), kExitOk);
  EXPECT_EQ(out(), link_help);
  EXPECT_TRUE(connected_to_.empty());
  EXPECT_TRUE(admin_.retrains().empty());
}

TEST_F(FleetctlTest, GetAndDescribeHelpMentionAgents) {
  EXPECT_EQ(Run({"get", "--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("\n  agents  "));
  EXPECT_EQ(Run({"describe", "--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("Kinds: switch, host, agent, device, onic, allocation"));
}

class FleetctlApplyTest : public FleetctlTest {
 protected:
  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = ::testing::TempDir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(FleetctlApplyTest, SendsTheParsedFileAndPrintsCountsAndChanges) {
  std::string path =
      WriteFile("site.yaml",
                "site: test\n"
                "switches:\n"
                "  - {id: ocs1, model: m, size: 384x384, address: a, protocol: tl1}\n"
                "  - {id: ocs2, model: m, size: 8x8, address: b, protocol: rest}\n");
  EXPECT_EQ(Run({"apply", "-f", path, "--dry-run"}), kExitOk) << err();
  EXPECT_TRUE(inventory_.applied().dry_run());
  EXPECT_EQ(inventory_.applied().inventory().switches_size(), 2);
  EXPECT_EQ(out(),
            "dry run: nothing was stored\n"
            "created 1, updated 0, unchanged 1\n"
            "created switch ocs2\n");
}

TEST_F(FleetctlApplyTest, MissingFileFailsWithoutCallingTheServer) {
  std::string path = ::testing::TempDir() + "/no-such-inventory.yaml";
  EXPECT_EQ(Run({"apply", "-f", path}), kExitFailed);
  EXPECT_THAT(err(), StartsWith("error: NOT_FOUND: "));
  EXPECT_THAT(err(), HasSubstr(path));
  EXPECT_EQ(inventory_.applied().inventory().switches_size(), 0);
}

TEST_F(FleetctlApplyTest, MalformedFileIsInvalidArgument) {
  std::string path = WriteFile("bad.yaml", "switches: [\n");
  EXPECT_EQ(Run({"apply", "-f", path}), kExitFailed);
  EXPECT_THAT(err(), StartsWith("error: INVALID_ARGUMENT: "));
}

TEST_F(FleetctlApplyTest, NeedsAFile) {
  EXPECT_EQ(Run({"apply"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("apply needs -f FILE"));
}

TEST_F(FleetctlTest, HealthPrintsComponentsAndOverall) {
  EXPECT_EQ(Run({"health"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "COMPONENT    STATE  DETAIL\n"
            "store        ok     -\n"
            "switch/ocs1  down   connection refused\n"
            "overall: degraded\n");
}

TEST_F(FleetctlTest, VersionPrintsClientAndServer) {
  EXPECT_EQ(Run({"version"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("fleetctl "));
  EXPECT_THAT(out(), HasSubstr("\nserver 0.1.0-test\n"));
}

TEST_F(FleetctlTest, VersionWithUnreachableServerStillExitsZero) {
  std::string nowhere = "unix:" + ::testing::TempDir() + "/no-fleetd.sock";
  EXPECT_EQ(Run({"version", "--server", nowhere}), kExitOk);
  EXPECT_THAT(out(), StartsWith("fleetctl "));
  EXPECT_THAT(out(), HasSubstr("server: unreachable (UNAVAILABLE: "));
}

TEST_F(FleetctlTest, UnreachableServerFailsOtherVerbs) {
  std::string nowhere = "unix:" + ::testing::TempDir() + "/no-fleetd.sock";
  EXPECT_EQ(Run({"get", "hosts", "--server", nowhere}), kExitFailed);
  EXPECT_THAT(err(), StartsWith("error: UNAVAILABLE: "));
}

TEST_F(FleetctlTest, HelpListsEveryVerb) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, std::vector<std::string>{"help"}}) {
    EXPECT_EQ(Run(args), kExitOk);
    for (const char* verb :
         {"get", "describe", "apply", "delete", "link", "health", "version", "help"}) {
      EXPECT_THAT(out(), HasSubstr(std::string("\n  ") + verb + " ")) << verb;
    }
    EXPECT_THAT(out(), HasSubstr("--server"));
    EXPECT_TRUE(connected_to_.empty());
  }
}

TEST_F(FleetctlTest, VerbHelpShowsUsageKindsAndFlags) {
  EXPECT_EQ(Run({"get", "--help"}), kExitOk);
  EXPECT_THAT(out(), StartsWith("Usage: fleetctl get KIND [flags]\n"));
  EXPECT_THAT(out(), HasSubstr("  devices       --host, --kind"));
  EXPECT_THAT(out(), HasSubstr("--switch VALUE"));
  EXPECT_THAT(out(), HasSubstr("--timeout VALUE"));
  std::string get_help = out();
  EXPECT_EQ(Run({"help", "get"}), kExitOk);
  EXPECT_EQ(out(), get_help);
}

TEST_F(FleetctlTest, UnknownVerbIsUsageError) {
  EXPECT_EQ(Run({"gett", "switches"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown command 'gett'; commands: get, describe"));
  EXPECT_THAT(err(), HasSubstr("fleetctl --help"));
}

TEST_F(FleetctlTest, MissingVerbIsUsageError) {
  EXPECT_EQ(Run({}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("missing command"));
}

}  // namespace
}  // namespace fleet::cli
