#include "testing/fake_inventory_service.h"

#include <cstdint>

#include "common/proto_time.h"

namespace fleet::testing {
namespace {

// The caller as every RPC carries it (see fleet/v1/common.proto).
std::string Principal(const grpc::ServerContext* context) {
  auto it = context->client_metadata().find("x-fleet-principal");
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

// server1's agent, connected; server2's, gone for three hours with two mismatches.
v1::ListAgentsResponse CannedAgents(absl::Time now) {
  v1::ListAgentsResponse response;
  v1::Agent* agent1 = response.add_agents();
  agent1->set_host("server1");
  agent1->set_backend("emulated");
  agent1->set_software_version("0.2.0");
  agent1->add_capabilities("armed-retrain");
  agent1->add_onic_serials("FLT-S1C0-N0");
  agent1->add_onic_serials("FLT-G3-0");
  agent1->set_connected(true);
  *agent1->mutable_connected_since() = ToProtoTime(now - absl::Minutes(5));
  *agent1->mutable_last_heartbeat() = ToProtoTime(now - absl::Seconds(2));

  v1::Agent* agent2 = response.add_agents();
  agent2->set_host("server2");
  agent2->set_backend("pcie-sysfs");
  agent2->set_software_version("0.1.9");
  agent2->add_onic_serials("FLT-S2C0-N0");
  agent2->set_connected(false);
  *agent2->mutable_connected_since() = ToProtoTime(now - absl::Hours(30));
  *agent2->mutable_last_heartbeat() = ToProtoTime(now - absl::Hours(3));
  agent2->add_inventory_mismatches("onic FLT-S2C0-N1 is in the inventory, not on the host");
  agent2->add_inventory_mismatches("onic FLT-ZZ-9 is on the host, not in the inventory");
  return response;
}

// Switch ocs1, host server1, GPU gpu3 and its O-NIC gpu3-n0.
v1::Inventory CannedSite() {
  v1::Inventory site;
  v1::Switch* sw = site.add_switches();
  sw->set_id("ocs1");
  sw->set_model("polatis-7000-384x384");
  sw->set_ingress_ports(384);
  sw->set_egress_ports(384);
  sw->set_address("192.0.2.10");
  sw->set_protocol(v1::SWITCH_PROTOCOL_TL1);
  sw->set_cluster("gen1");
  sw->add_trunk_reserved_ports(289);
  sw->set_credentials_ref("/etc/fleet/credentials/ocs1.yaml");
  sw->set_credentials_file("/etc/fleet/switch-credentials.yaml");

  v1::Host* host = site.add_hosts();
  host->set_name("server1");
  host->set_address("192.0.2.21");
  host->set_cluster("gen1");
  host->set_admin_state(v1::ADMIN_STATE_ENABLED);

  v1::Device* gpu = site.add_devices();
  gpu->set_id("gpu3");
  gpu->set_kind(v1::DEVICE_KIND_GPU);
  gpu->set_chassis("jbog1");
  gpu->add_onics("gpu3-n0");
  gpu->set_admin_state(v1::ADMIN_STATE_ENABLED);
  gpu->add_allocations("a1");

  v1::Device* cpu = site.add_devices();
  cpu->set_id("server1-cpu0");
  cpu->set_kind(v1::DEVICE_KIND_CPU);
  cpu->set_host("server1");
  cpu->set_admin_state(v1::ADMIN_STATE_ENABLED);
  cpu->add_allocations("a1");

  v1::Onic* onic = site.add_onics();
  onic->set_id("gpu3-n0");
  onic->set_device("gpu3");
  onic->set_serial("FLT-G3-0");
  onic->set_pcie_address("0000:17:00.0");
  *onic->add_ports() = MakeOnicPort(1, 3, 387);
  *onic->add_ports() = MakeOnicPort(2, 4, 388);
  onic->set_admin_state(v1::ADMIN_STATE_ENABLED);
  onic->add_allocations("a1");
  return site;
}

// Circuit c1 of allocation a1: s1c0-n0/1 → gpu3-n0/1 through ocs1:1→387.
v1::ListCircuitsResponse CannedCircuits() {
  v1::ListCircuitsResponse response;
  v1::Circuit* circuit = response.add_circuits();
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
  return response;
}

// Port ocs1/1, wired to s1c0-n0/1 and carrying a1's c1; port ocs1/5, drained for a fiber swap
// and reading too little light.
v1::ListPortsResponse CannedPorts() {
  v1::ListPortsResponse response;
  v1::SwitchPort* port = response.add_ports();
  port->mutable_ref()->set_switch_id("ocs1");
  port->mutable_ref()->set_port(1);
  port->set_direction(v1::PORT_DIRECTION_INGRESS);
  port->set_admin_state(v1::ADMIN_STATE_ENABLED);
  port->set_oper_state(v1::OPER_STATE_UP);
  port->set_reservation(v1::PORT_RESERVATION_NONE);
  port->mutable_wiring()->mutable_onic_port()->set_onic("s1c0-n0");
  port->mutable_wiring()->mutable_onic_port()->set_port(1);
  port->set_circuit_id("c1");
  port->set_allocation_id("a1");
  v1::SwitchPort* drained = response.add_ports();
  drained->mutable_ref()->set_switch_id("ocs1");
  drained->mutable_ref()->set_port(5);
  drained->set_direction(v1::PORT_DIRECTION_INGRESS);
  drained->set_admin_state(v1::ADMIN_STATE_DRAINED);
  drained->set_admin_reason("fiber swap");
  drained->set_oper_state(v1::OPER_STATE_DEGRADED);
  drained->set_oper_reason("-31.20 dBm, below -20.00 dBm");
  drained->set_reservation(v1::PORT_RESERVATION_NONE);
  return response;
}

// The object of `objects` whose `key` is `wanted`, into `out`; NOT_FOUND naming `kind` if none.
template <typename T>
grpc::Status CopyFound(const google::protobuf::RepeatedPtrField<T>& objects,
                       const std::string& (T::*key)() const, const std::string& wanted,
                       const std::string& kind, T* out) {
  for (const T& object : objects) {
    if ((object.*key)() == wanted) {
      *out = object;
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND, kind + " " + wanted + " not found");
}

}  // namespace

FakeInventoryService::FakeInventoryService(absl::Time now) {
  absl::MutexLock lock(&mu_);
  agents_ = CannedAgents(now);
  site_ = CannedSite();
  circuits_ = CannedCircuits();
  ports_ = CannedPorts();
}

grpc::Status FakeInventoryService::ListSwitches(grpc::ServerContext* context,
                                                const v1::ListSwitchesRequest*,
                                                v1::ListSwitchesResponse* response) {
  absl::MutexLock lock(&mu_);
  principal_ = Principal(context);
  *response->mutable_switches() = site_.switches();
  return grpc::Status::OK;
}

grpc::Status FakeInventoryService::GetSwitch(grpc::ServerContext*,
                                             const v1::GetSwitchRequest* request,
                                             v1::Switch* response) {
  absl::MutexLock lock(&mu_);
  return CopyFound(site_.switches(), &v1::Switch::id, request->id(), "switch", response);
}

grpc::Status FakeInventoryService::ListPorts(grpc::ServerContext*,
                                             const v1::ListPortsRequest* request,
                                             v1::ListPortsResponse* response) {
  absl::MutexLock lock(&mu_);
  last_port_filter_ = request->switch_id();
  *response = ports_;
  return grpc::Status::OK;
}

grpc::Status FakeInventoryService::ListHosts(grpc::ServerContext*, const v1::ListHostsRequest*,
                                             v1::ListHostsResponse* response) {
  absl::MutexLock lock(&mu_);
  *response->mutable_hosts() = site_.hosts();
  return grpc::Status::OK;
}

grpc::Status FakeInventoryService::GetHost(grpc::ServerContext*, const v1::GetHostRequest* request,
                                           v1::Host* response) {
  absl::MutexLock lock(&mu_);
  return CopyFound(site_.hosts(), &v1::Host::name, request->name(), "host", response);
}

grpc::Status FakeInventoryService::ListDevices(grpc::ServerContext*,
                                               const v1::ListDevicesRequest* request,
                                               v1::ListDevicesResponse* response) {
  absl::MutexLock lock(&mu_);
  for (const v1::Device& device : site_.devices()) {
    if (request->kind() != v1::DEVICE_KIND_UNSPECIFIED && device.kind() != request->kind()) {
      continue;
    }
    if (!request->host().empty() && device.host() != request->host()) continue;
    *response->add_devices() = device;
  }
  return grpc::Status::OK;
}

grpc::Status FakeInventoryService::GetDevice(grpc::ServerContext*,
                                             const v1::GetDeviceRequest* request,
                                             v1::Device* response) {
  absl::MutexLock lock(&mu_);
  return CopyFound(site_.devices(), &v1::Device::id, request->id(), "device", response);
}

grpc::Status FakeInventoryService::GetOnic(grpc::ServerContext*, const v1::GetOnicRequest* request,
                                           v1::Onic* response) {
  absl::MutexLock lock(&mu_);
  return CopyFound(site_.onics(), &v1::Onic::id, request->id(), "onic", response);
}

grpc::Status FakeInventoryService::ListOnics(grpc::ServerContext*, const v1::ListOnicsRequest*,
                                             v1::ListOnicsResponse* response) {
  absl::MutexLock lock(&mu_);
  *response->mutable_onics() = site_.onics();
  return grpc::Status::OK;
}

grpc::Status FakeInventoryService::ListCircuits(grpc::ServerContext*,
                                                const v1::ListCircuitsRequest*,
                                                v1::ListCircuitsResponse* response) {
  absl::MutexLock lock(&mu_);
  *response = circuits_;
  return grpc::Status::OK;
}

grpc::Status FakeInventoryService::ApplyInventory(grpc::ServerContext*,
                                                  const v1::ApplyInventoryRequest* request,
                                                  v1::ApplyInventoryResponse* response) {
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

grpc::Status FakeInventoryService::ListAgents(grpc::ServerContext*, const v1::ListAgentsRequest*,
                                              v1::ListAgentsResponse* response) {
  absl::MutexLock lock(&mu_);
  if (agents_unimplemented_) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no agent registry");
  }
  *response = agents_;
  return grpc::Status::OK;
}

grpc::Status FakeInventoryService::DeleteObject(grpc::ServerContext*,
                                                const v1::DeleteObjectRequest* request,
                                                v1::DeleteObjectResponse* response) {
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

std::string FakeInventoryService::principal() {
  absl::MutexLock lock(&mu_);
  return principal_;
}

std::string FakeInventoryService::last_port_filter() {
  absl::MutexLock lock(&mu_);
  return last_port_filter_;
}

v1::ApplyInventoryRequest FakeInventoryService::applied() {
  absl::MutexLock lock(&mu_);
  return applied_;
}

void FakeInventoryService::set_agents_unimplemented() {
  absl::MutexLock lock(&mu_);
  agents_unimplemented_ = true;
}

}  // namespace fleet::testing
