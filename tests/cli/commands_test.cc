// fleetctl's verbs run end to end: command line in, RPCs over a real channel to in-process
// fakes of the three services, text and exit code out.
#include "controller/cli/commands.h"

#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
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
    agent1->add_capabilities("armed-retrain");
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

// Stream handlers of the fakes wait for news under a lock; a client's cancellation does not
// wake them, so they also look at it this often.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(20);
// How long a test waits for fleetctl to open a stream before it gives up (a bug, not a race).
constexpr absl::Duration kStreamOpenLimit = absl::Seconds(20);

v1::Circuit MakeCircuit(const std::string& id, const std::string& from, const std::string& to,
                        uint32_t ingress, uint32_t egress) {
  v1::Circuit circuit;
  circuit.set_id(id);
  circuit.mutable_source()->set_onic(from);
  circuit.mutable_source()->set_port(1);
  circuit.mutable_destination()->set_onic(to);
  circuit.mutable_destination()->set_port(1);
  v1::CrossConnect* xc = circuit.add_cross_connects();
  xc->set_switch_id("ocs1");
  xc->set_ingress(ingress);
  xc->set_egress(egress);
  return circuit;
}

// A small stateful topology service. Each allocation keeps every version it has had;
// WatchAllocation sends the current one and then each later one, as fleetd's does. Tests move
// allocations through their states with SetState, as the engine would.
class FakeTopology final : public v1::TopologyService::Service {
 public:
  explicit FakeTopology(absl::Time now) : now_(now) {
    v1::Allocation a;
    a.set_id("a1");
    a.set_tenant("tenant-a");
    a.set_name("train");
    a.set_state(v1::ALLOCATION_STATE_READY);
    a.add_members("server1-cpu0");
    a.add_members("gpu3");
    *a.mutable_created() = At(now - absl::Minutes(3));
    *a.mutable_lease_expires() = At(now + absl::Minutes(2));
    history_["a1"].push_back(a);
  }

  // A ring over the template's members, one circuit per member on port 1 of its first O-NIC
  // (named MEMBER-n0). Members named gpu9 do not exist.
  grpc::Status RequestTopology(grpc::ServerContext*, const v1::RequestTopologyRequest* request,
                               v1::RequestTopologyResponse* response) override {
    absl::MutexLock lock(&mu_);
    requests_.push_back(*request);
    const auto& members = request->topology().template_().members().devices();
    v1::Plan* plan = response->mutable_plan();
    for (int i = 0; i < members.size(); ++i) {
      if (members[i] == "gpu9") {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "device gpu9 not found");
      }
      plan->add_members(members[i]);
      const std::string& next = members[(i + 1) % members.size()];
      v1::Circuit circuit = MakeCircuit(absl::StrCat("c", 10 + i), members[i] + "-n0", next + "-n0",
                                        10 + i, 400 + (i + 1) % members.size());
      *plan->add_add() = circuit.cross_connects(0);
      *plan->add_ports_used() = circuit.source();
      *plan->add_circuits() = std::move(circuit);
    }
    if (request->dry_run()) return grpc::Status::OK;

    v1::Allocation a;
    a.set_id(absl::StrCat("a", history_.size() + 1));
    a.set_tenant(request->tenant());
    a.set_name(request->name());
    a.set_state(admit_state_);
    *a.mutable_request() = *request;
    *a.mutable_members() = plan->members();
    for (v1::Circuit circuit : plan->circuits()) {
      circuit.set_allocation_id(a.id());
      circuit.set_state(v1::CIRCUIT_STATE_PLANNED);
      *a.add_circuits() = std::move(circuit);
    }
    *a.mutable_created() = At(now_);
    history_[a.id()].push_back(a);
    *response->mutable_allocation() = std::move(a);
    return grpc::Status::OK;
  }

  grpc::Status GetAllocation(grpc::ServerContext*, const v1::GetAllocationRequest* request,
                             v1::Allocation* response) override {
    absl::MutexLock lock(&mu_);
    auto it = history_.find(request->id());
    if (it == history_.end()) return NotFound(request->id());
    *response = it->second.back();
    return grpc::Status::OK;
  }

  grpc::Status ListAllocations(grpc::ServerContext*, const v1::ListAllocationsRequest* request,
                               v1::ListAllocationsResponse* response) override {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, versions] : history_) {
      const v1::Allocation& a = versions.back();
      if (!request->tenant().empty() && a.tenant() != request->tenant()) continue;
      if (a.state() == v1::ALLOCATION_STATE_RELEASED && !request->include_released()) continue;
      *response->add_allocations() = a;
    }
    return grpc::Status::OK;
  }

  grpc::Status WatchAllocation(grpc::ServerContext* context,
                               const v1::WatchAllocationRequest* request,
                               grpc::ServerWriter<v1::WatchAllocationResponse>* writer) override {
    const std::string id = request->id();
    size_t next = 0;
    {
      absl::MutexLock lock(&mu_);
      auto it = history_.find(id);
      if (it == history_.end()) return NotFound(id);
      next = it->second.size() - 1;  // The current version first.
      ++watches_started_;
    }
    while (true) {
      v1::WatchAllocationResponse update;
      {
        absl::MutexLock lock(&mu_);
        auto news = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return history_[id].size() > next || end_watches_;
        };
        while (!mu_.AwaitWithTimeout(absl::Condition(&news), kCancelPoll)) {
          if (context->IsCancelled()) return grpc::Status::CANCELLED;
        }
        if (history_[id].size() <= next) return grpc::Status::OK;  // EndWatches.
        *update.mutable_allocation() = history_[id][next++];
      }
      if (!writer->Write(update)) return grpc::Status::OK;
    }
  }

  grpc::Status ReleaseTopology(grpc::ServerContext*, const v1::ReleaseTopologyRequest* request,
                               v1::ReleaseTopologyResponse* response) override {
    absl::MutexLock lock(&mu_);
    auto it = history_.find(request->id());
    if (it == history_.end()) return NotFound(request->id());
    v1::Allocation a = it->second.back();
    a.set_state(v1::ALLOCATION_STATE_RELEASING);
    a.clear_reason();
    it->second.push_back(a);
    *response->mutable_allocation() = std::move(a);
    return grpc::Status::OK;
  }

  // Allocation a1 has phases dp (active) and tp; switching removes ocs1:1→401 and adds
  // ocs1:2→402, and leaves a1 PROGRAMMING on the new phase.
  grpc::Status ActivatePhase(grpc::ServerContext*, const v1::ActivatePhaseRequest* request,
                             v1::ActivatePhaseResponse* response) override {
    absl::MutexLock lock(&mu_);
    auto it = history_.find(request->id());
    if (it == history_.end()) return NotFound(request->id());
    if (request->phase() != "dp" && request->phase() != "tp") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("allocation ", request->id(), " has no phase '",
                                       request->phase(), "'; its phases are dp, tp"));
    }
    v1::Allocation a = it->second.back();
    a.clear_phases();
    a.add_phases("dp");
    a.add_phases("tp");
    a.set_active_phase(request->phase());
    a.set_state(v1::ALLOCATION_STATE_PROGRAMMING);
    it->second.push_back(a);
    *response->mutable_plan()->add_remove() = MakeCircuit("c1", "x", "y", 1, 401).cross_connects(0);
    *response->mutable_plan()->add_add() = MakeCircuit("c2", "x", "y", 2, 402).cross_connects(0);
    *response->mutable_allocation() = std::move(a);
    return grpc::Status::OK;
  }

  grpc::Status KeepAlive(grpc::ServerContext*, const v1::KeepAliveRequest* request,
                         v1::KeepAliveResponse* response) override {
    absl::MutexLock lock(&mu_);
    auto it = history_.find(request->id());
    if (it == history_.end()) return NotFound(request->id());
    v1::Allocation a = it->second.back();
    *a.mutable_lease_expires() = At(now_ + absl::Minutes(5));
    it->second.push_back(a);
    *response->mutable_lease_expires() = a.lease_expires();
    return grpc::Status::OK;
  }

  // A new version of allocation `id` in `state`, as the engine records a transition.
  void SetState(const std::string& id, v1::AllocationState state, const std::string& reason = "") {
    absl::MutexLock lock(&mu_);
    v1::Allocation a = history_.at(id).back();
    a.set_state(state);
    a.set_reason(reason);
    history_[id].push_back(std::move(a));
  }
  // The state RequestTopology admits allocations in.
  void set_admit_state(v1::AllocationState state) {
    absl::MutexLock lock(&mu_);
    admit_state_ = state;
  }
  // Open watches end (OK) once they have sent what they have.
  void EndWatches() {
    absl::MutexLock lock(&mu_);
    end_watches_ = true;
  }
  // True once `n` watches have sent (or are sending) their first version.
  bool AwaitWatches(int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return watches_started_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kStreamOpenLimit);
  }
  int watches_started() {
    absl::MutexLock lock(&mu_);
    return watches_started_;
  }
  std::vector<v1::RequestTopologyRequest> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  size_t versions(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return history_.contains(id) ? history_.at(id).size() : 0;
  }

 private:
  static grpc::Status NotFound(const std::string& id) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "allocation " + id + " not found");
  }

  const absl::Time now_;
  absl::Mutex mu_;
  std::map<std::string, std::vector<v1::Allocation>> history_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RequestTopologyRequest> requests_ ABSL_GUARDED_BY(mu_);
  v1::AllocationState admit_state_ ABSL_GUARDED_BY(mu_) = v1::ALLOCATION_STATE_PENDING;
  bool end_watches_ ABSL_GUARDED_BY(mu_) = false;
  int watches_started_ ABSL_GUARDED_BY(mu_) = 0;
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

// What the fake's switch ocs1 holds and what its circuits want, ingress → (egress, circuit).
using CrossConnects = std::map<uint32_t, std::pair<uint32_t, std::string>>;

// Besides links and health: a small event log that ListEvents filters and WatchEvents replays
// and follows; drains by target; and a reconcile of one switch's cross-connects against the
// desired ones that really repairs, adopts and removes.
class FakeAdmin final : public v1::AdminService::Service {
 public:
  explicit FakeAdmin(absl::Time now) : now_(now) {
    AppendEvent("inventory.applied", "inventory", "", "inventory applied: created 59");
    AppendEvent("allocation.state", "allocation", "a1", "allocation a1 is ready");
    AppendEvent("switch.connected", "switch", "ocs1", "switch ocs1 connected over TL1");
    desired_ = {{1, {387, "c1"}}, {3, {388, "c2"}}};
    on_switch_ = {{1, {387, ""}}, {2, {390, ""}}};
  }

  void AppendEvent(const std::string& kind, const std::string& object_kind,
                   const std::string& object_id, const std::string& message) {
    absl::MutexLock lock(&mu_);
    v1::Event event;
    event.set_sequence(events_.size() + 1);
    *event.mutable_time() = At(now_ + absl::Seconds(events_.size()));
    event.set_principal("fleetd");
    event.set_kind(kind);
    event.set_object_kind(object_kind);
    event.set_object_id(object_id);
    event.set_severity(v1::EVENT_SEVERITY_INFO);
    event.set_message(message);
    events_.push_back(std::move(event));
  }

  grpc::Status ListEvents(grpc::ServerContext*, const v1::ListEventsRequest* request,
                          v1::ListEventsResponse* response) override {
    absl::MutexLock lock(&mu_);
    for (const v1::Event& event : events_) {
      if (request->limit() != 0 && response->events_size() >= static_cast<int>(request->limit())) {
        break;
      }
      if (Matches(event, request->after_sequence(), request->object_kind(), request->object_id())) {
        *response->add_events() = event;
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status WatchEvents(grpc::ServerContext* context, const v1::WatchEventsRequest* request,
                           grpc::ServerWriter<v1::Event>* writer) override {
    size_t next = 0;
    {
      absl::MutexLock lock(&mu_);
      ++event_watches_started_;
      last_watch_after_ = request->after_sequence();
    }
    while (true) {
      v1::Event event;
      {
        absl::MutexLock lock(&mu_);
        auto news = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return events_.size() > next || end_event_watches_;
        };
        while (!mu_.AwaitWithTimeout(absl::Condition(&news), kCancelPoll)) {
          if (context->IsCancelled()) return grpc::Status::CANCELLED;
        }
        if (events_.size() <= next) return grpc::Status::OK;  // EndEventWatches.
        event = events_[next++];
      }
      if (!Matches(event, request->after_sequence(), request->object_kind(),
                   request->object_id())) {
        continue;
      }
      if (!writer->Write(event)) return grpc::Status::OK;
    }
  }

  // Open event watches end (OK) once they have sent every event so far.
  void EndEventWatches() {
    absl::MutexLock lock(&mu_);
    end_event_watches_ = true;
  }
  // The after_sequence of the latest event watch.
  uint64_t last_watch_after() {
    absl::MutexLock lock(&mu_);
    return last_watch_after_;
  }
  // True once `n` event watches have started.
  bool AwaitEventWatches(int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return event_watches_started_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kStreamOpenLimit);
  }

  // a1's circuit c1 runs s1c0-n0/1 → gpu3-n0/1 through ocs1/1, on host server1.
  grpc::Status Drain(grpc::ServerContext*, const v1::DrainRequest* request,
                     v1::DrainResponse* response) override {
    absl::MutexLock lock(&mu_);
    drains_.push_back(*request);
    const v1::DrainTarget& t = request->target();
    if (t.has_onic() && t.onic() != "s1c0-n0" && t.onic() != "gpu3-n0") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "onic " + t.onic() + " not found");
    }
    bool used = (t.has_switch_port() && t.switch_port().switch_id() == "ocs1" &&
                 t.switch_port().port() == 1) ||
                t.has_onic() || (t.has_host() && t.host() == "server1");
    if (used) response->add_affected_allocations("a1");
    return grpc::Status::OK;
  }

  grpc::Status Undrain(grpc::ServerContext*, const v1::UndrainRequest* request,
                       v1::UndrainResponse*) override {
    absl::MutexLock lock(&mu_);
    undrains_.push_back(*request);
    return grpc::Status::OK;
  }

  // Replaces gpu3 of a1 by gpu5: one circuit each way off, one each way on.
  grpc::Status ReplaceMember(grpc::ServerContext*, const v1::ReplaceMemberRequest* request,
                             v1::ReplaceMemberResponse* response) override {
    if (request->allocation_id() != "a1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "allocation " + request->allocation_id() + " not found");
    }
    if (request->member() != "gpu3") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "member: allocation a1 has no member " + request->member());
    }
    v1::Allocation& a = *response->mutable_allocation();
    a.set_id("a1");
    a.set_state(request->dry_run() ? v1::ALLOCATION_STATE_READY : v1::ALLOCATION_STATE_PROGRAMMING);
    for (const char* m : {"gpu1", "gpu2", "gpu5", "gpu4"}) response->mutable_plan()->add_members(m);
    for (auto [ingress, egress] : {std::pair{2, 387}, std::pair{3, 386}}) {
      v1::CrossConnect* x = response->mutable_plan()->add_remove();
      x->set_switch_id("ocs1");
      x->set_ingress(ingress);
      x->set_egress(egress);
    }
    for (auto [ingress, egress] : {std::pair{2, 389}, std::pair{5, 386}}) {
      v1::CrossConnect* x = response->mutable_plan()->add_add();
      x->set_switch_id("ocs1");
      x->set_ingress(ingress);
      x->set_egress(egress);
    }
    return grpc::Status::OK;
  }

  // Reconciles the one switch, ocs1: a desired cross-connect missing from it is made again, and
  // one nobody asked for is reported, adopted or removed by the policy (REPORT by default).
  grpc::Status Reconcile(grpc::ServerContext*, const v1::ReconcileRequest* request,
                         v1::ReconcileResponse* response) override {
    absl::MutexLock lock(&mu_);
    reconciles_.push_back(*request);
    if (!request->switch_id().empty() && request->switch_id() != "ocs1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "switch " + request->switch_id() + " not found");
    }
    auto add_drift = [&](v1::Drift::Kind kind, uint32_t ingress, uint32_t egress,
                         const std::string& circuit, const std::string& action) {
      v1::Drift* drift = response->add_drift();
      drift->set_kind(kind);
      drift->mutable_cross_connect()->set_switch_id("ocs1");
      drift->mutable_cross_connect()->set_ingress(ingress);
      drift->mutable_cross_connect()->set_egress(egress);
      drift->set_circuit_id(circuit);
      drift->set_action(action);
    };
    for (const auto& [ingress, want] : CrossConnects(desired_)) {
      if (on_switch_.contains(ingress)) continue;
      add_drift(v1::Drift::KIND_MISSING, ingress, want.first, want.second,
                request->dry_run() ? "reported" : "repaired");
      if (!request->dry_run()) {
        on_switch_[ingress] = want;
        response->set_repaired(response->repaired() + 1);
      }
    }
    for (const auto& [ingress, held] : CrossConnects(on_switch_)) {
      if (desired_.contains(ingress)) continue;
      std::string action = "reported";
      if (!request->dry_run() && request->unknown() == v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT) {
        action = "adopted";
        desired_[ingress] = {held.first, "m1"};
      } else if (!request->dry_run() &&
                 request->unknown() == v1::UNKNOWN_CROSS_CONNECT_POLICY_REMOVE) {
        action = "removed";
        on_switch_.erase(ingress);
      }
      add_drift(v1::Drift::KIND_UNKNOWN, ingress, held.first, "", action);
    }
    return grpc::Status::OK;
  }

  std::vector<v1::DrainRequest> drains() {
    absl::MutexLock lock(&mu_);
    return drains_;
  }
  std::vector<v1::UndrainRequest> undrains() {
    absl::MutexLock lock(&mu_);
    return undrains_;
  }
  std::vector<v1::ReconcileRequest> reconciles() {
    absl::MutexLock lock(&mu_);
    return reconciles_;
  }

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
  static bool Matches(const v1::Event& event, uint64_t after, const std::string& object_kind,
                      const std::string& object_id) {
    return event.sequence() > after &&
           (object_kind.empty() || event.object_kind() == object_kind) &&
           (object_id.empty() || event.object_id() == object_id);
  }

  const absl::Time now_;
  absl::Mutex mu_;
  std::vector<v1::RetrainLinkRequest> retrains_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Event> events_ ABSL_GUARDED_BY(mu_);
  bool end_event_watches_ ABSL_GUARDED_BY(mu_) = false;
  int event_watches_started_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_watch_after_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::DrainRequest> drains_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::UndrainRequest> undrains_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ReconcileRequest> reconciles_ ABSL_GUARDED_BY(mu_);
  CrossConnects desired_ ABSL_GUARDED_BY(mu_);
  CrossConnects on_switch_ ABSL_GUARDED_BY(mu_);
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
    env_.stop = &stop_;
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

  // Named by this process: ctest runs each test as its own process, in parallel, and a file
  // shared between them would be rewritten under another test's feet.
  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = absl::StrCat(::testing::TempDir(), "/fleetctl_test_", getpid(), "_", name);
    std::ofstream(path) << text;
    return path;
  }

  // Runs a command line on its own thread, for verbs that follow a stream the test feeds;
  // join the thread before reading the output or the exit code.
  std::thread RunInBackground(std::vector<std::string> args, int* exit_code) {
    return std::thread([this, args = std::move(args), exit_code] { *exit_code = Run(args); });
  }

  std::string out() const { return out_.str(); }
  std::string err() const { return err_.str(); }

  FakeClock clock_;
  StopSignal stop_;
  FakeInventory inventory_{clock_.Now()};
  FakeTopology topology_{clock_.Now()};
  FakeAdmin admin_{clock_.Now()};
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
            "ID  TENANT    NAME   STATE  MEMBERS  CIRCUITS  AGE  REASON\n"
            "a1  tenant-a  train  ready  2        0         3m   -\n");
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
  for (const char* verb : {"get", "describe", "health", "version", "events", "reconcile"}) {
    EXPECT_EQ(Run({verb, "-o", "xml"}), kExitUsage) << verb;
    EXPECT_THAT(err(), HasSubstr("unknown output format 'xml'; formats: table, json, yaml"));
  }
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
            "Capabilities:    (none)\n"
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
  EXPECT_THAT(out(), HasSubstr("Capabilities:          armed-retrain\n"));
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

class FleetctlApplyTest : public FleetctlTest {};

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
    for (const char* verb : {"get", "describe", "apply", "topology", "delete", "drain", "undrain",
                             "reconcile", "events", "link", "health", "version", "help"}) {
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

// ---------------------------------------------------------------------------------------
// topology

class FleetctlTopologyTest : public FleetctlTest {
 protected:
  void SetUp() override {
    FleetctlTest::SetUp();
    spec_ = WriteFile("ring.yaml",
                      "tenant: team-a\n"
                      "name: ring\n"
                      "lease: 30m\n"
                      "topology:\n"
                      "  template:\n"
                      "    kind: ring-unidirectional\n"
                      "    members: [gpu1, gpu2]\n");
  }

  std::string spec_;
};

// What `topology request` prints for the fake's allocation a2 over gpu1 and gpu2.
std::string RingAllocationText(absl::string_view state, absl::string_view reason = "-",
                               absl::string_view circuit_state = "planned") {
  return absl::StrCat(
      "ID:      a2\n"
      "Tenant:  team-a\n"
      "Name:    ring\n"
      "State:   ",
      state,
      "\n"
      "Reason:  ",
      reason,
      "\n"
      "Members:\n"
      "  gpu1\n"
      "  gpu2\n"
      "Circuits:\n"
      "  c10  gpu1-n0/1 → gpu2-n0/1  via ocs1:10→401  ",
      circuit_state,
      "\n"
      "  c11  gpu2-n0/1 → gpu1-n0/1  via ocs1:11→400  ",
      circuit_state, "\n");
}

TEST_F(FleetctlTopologyTest, RequestPrintsTheAdmittedAllocation) {
  EXPECT_EQ(Run({"topology", "request", "-f", spec_}), kExitOk) << err();
  EXPECT_EQ(out(), RingAllocationText("pending"));
  ASSERT_EQ(topology_.requests().size(), 1u);
  EXPECT_FALSE(topology_.requests()[0].dry_run());
  EXPECT_EQ(topology_.watches_started(), 0);
}

TEST_F(FleetctlTopologyTest, DryRunPrintsThePlanAndStoresNothing) {
  EXPECT_EQ(Run({"topology", "request", "-f", spec_, "--dry-run"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "dry run: nothing was changed\n"
            "members: gpu1, gpu2\n"
            "2 circuits, 2 cross-connects to make, 0 to remove, 2 O-NIC ports\n"
            "SOURCE     DESTINATION  CROSS-CONNECTS\n"
            "gpu1-n0/1  gpu2-n0/1    ocs1:10→401\n"
            "gpu2-n0/1  gpu1-n0/1    ocs1:11→400\n");
  ASSERT_EQ(topology_.requests().size(), 1u);
  EXPECT_TRUE(topology_.requests()[0].dry_run());
  EXPECT_EQ(topology_.versions("a2"), 0u);
}

TEST_F(FleetctlTopologyTest, LeaseComesFromTheFileUnlessTheFlagOverridesIt) {
  ASSERT_EQ(Run({"topology", "request", "-f", spec_, "--dry-run"}), kExitOk) << err();
  ASSERT_EQ(Run({"topology", "request", "-f", spec_, "--dry-run", "--lease", "1h30m"}), kExitOk)
      << err();
  ASSERT_EQ(Run({"topology", "request", "-f", spec_, "--dry-run", "--lease=0"}), kExitOk) << err();
  std::vector<v1::RequestTopologyRequest> requests = topology_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].lease().seconds(), 30 * 60);
  EXPECT_EQ(requests[1].lease().seconds(), 90 * 60);
  EXPECT_EQ(requests[2].lease().seconds(), 0);  // The server's default.
}

TEST_F(FleetctlTopologyTest, MalformedLeaseFlagIsUsageErrorAndSendsNothing) {
  for (const char* lease : {"ten minutes", "10", "-5m"}) {
    EXPECT_EQ(Run({"topology", "request", "-f", spec_, "--lease", lease}), kExitUsage) << lease;
    EXPECT_THAT(err(), HasSubstr(absl::StrCat("error: --lease: '", lease, "'")));
    EXPECT_THAT(err(), HasSubstr("fleetctl topology --help"));
  }
  EXPECT_THAT(err(), HasSubstr("'-5m' is negative"));
  EXPECT_TRUE(topology_.requests().empty());
}

TEST_F(FleetctlTopologyTest, MalformedLeaseInTheFileNamesFileAndLine) {
  std::string path = WriteFile("bad-lease.yaml",
                               "tenant: team-a\n"
                               "lease: soon\n"
                               "topology:\n"
                               "  template: {kind: ring-unidirectional, members: [gpu1, gpu2]}\n");
  EXPECT_EQ(Run({"topology", "request", "-f", path}), kExitFailed);
  EXPECT_EQ(err(), absl::StrCat("error: INVALID_ARGUMENT: ", path,
                                ":2: lease: 'soon' is not a duration such as 90s, 10m or 1h30m\n"));
  EXPECT_TRUE(topology_.requests().empty());
}

TEST_F(FleetctlTopologyTest, RequestRefusedPrintsTheServersError) {
  std::string path = WriteFile("gpu9.yaml",
                               "tenant: team-a\n"
                               "topology:\n"
                               "  template: {kind: ring-unidirectional, members: [gpu1, gpu9]}\n");
  EXPECT_EQ(Run({"topology", "request", "-f", path, "--wait"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: device gpu9 not found\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTopologyTest, WaitPrintsEachStateChangeUntilReady) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "request", "-f", spec_, "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_PROGRAMMING);
  topology_.SetState("a2", v1::ALLOCATION_STATE_TRAINING);
  topology_.SetState("a2", v1::ALLOCATION_STATE_DEGRADED, "link gpu2-n0/1 did not train");
  topology_.SetState("a2", v1::ALLOCATION_STATE_READY);
  // Ready ends the wait although the server keeps the stream open: fleetctl cancels it.
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(out(), absl::StrCat("a2 pending\n"
                                "a2 programming\n"
                                "a2 training\n"
                                "a2 degraded link gpu2-n0/1 did not train\n"
                                "a2 ready\n",
                                RingAllocationText("ready")));
  EXPECT_EQ(err(), "");
}

TEST_F(FleetctlTopologyTest, WaitForFailedExitsOneWithTheReason) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "request", "-f", spec_, "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_PROGRAMMING);
  topology_.SetState("a2", v1::ALLOCATION_STATE_FAILED, "switch ocs1 refused: port 10 is held");
  fleetctl.join();
  EXPECT_EQ(code, kExitFailed);
  EXPECT_EQ(out(), "a2 pending\na2 programming\na2 failed switch ocs1 refused: port 10 is held\n");
  EXPECT_EQ(err(), "error: allocation a2 failed: switch ocs1 refused: port 10 is held\n");
}

TEST_F(FleetctlTopologyTest, WaitForReleasedInsteadOfReadyExitsOne) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "request", "-f", spec_, "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_RELEASED, "lease expired");
  fleetctl.join();
  EXPECT_EQ(code, kExitFailed);
  EXPECT_EQ(err(), "error: allocation a2 was released: lease expired\n");
}

// The one test that waits for real time to pass: --timeout takes whole seconds.
TEST_F(FleetctlTopologyTest, WaitPastTheTimeoutNamesTheLastState) {
  int code = -1;
  std::thread fleetctl =
      RunInBackground({"topology", "request", "-f", spec_, "--wait", "--timeout", "1"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_TRAINING);
  fleetctl.join();
  EXPECT_EQ(code, kExitFailed);
  EXPECT_EQ(out(), "a2 pending\na2 training\n");
  EXPECT_EQ(err(), "error: DEADLINE_EXCEEDED: allocation a2 is still training after 1s\n");
}

TEST_F(FleetctlTopologyTest, WatchEndedByTheServerBeforeAnEndStateExitsOne) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "request", "-f", spec_, "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_PROGRAMMING);
  topology_.EndWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitFailed);
  EXPECT_EQ(err(),
            "error: UNAVAILABLE: the server ended the watch of allocation a2 while it was "
            "programming\n");
}

TEST_F(FleetctlTopologyTest, WaitNeedsNoWatchWhenAdmittedReady) {
  topology_.set_admit_state(v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(Run({"topology", "request", "-f", spec_, "--wait"}), kExitOk) << err();
  EXPECT_EQ(out(), absl::StrCat("a2 ready\n", RingAllocationText("ready")));
  EXPECT_EQ(topology_.watches_started(), 0);
}

TEST_F(FleetctlTopologyTest, WaitWithJsonKeepsStdoutForTheFinalResponse) {
  int code = -1;
  std::thread fleetctl =
      RunInBackground({"topology", "request", "-f", spec_, "--wait", "-o", "json"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a2", v1::ALLOCATION_STATE_READY);
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(err(), "a2 pending\na2 ready\n");
  v1::RequestTopologyResponse parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_EQ(parsed.allocation().id(), "a2");
  EXPECT_EQ(parsed.allocation().state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(parsed.plan().circuits_size(), 2);
}

TEST_F(FleetctlTopologyTest, WaitWithDryRunIsUsageError) {
  EXPECT_EQ(Run({"topology", "request", "-f", spec_, "--dry-run", "--wait"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--wait has nothing to wait for with --dry-run"));
  EXPECT_TRUE(topology_.requests().empty());
}

TEST_F(FleetctlTopologyTest, ReleasePrintsTheResultingState) {
  EXPECT_EQ(Run({"topology", "release", "a1"}), kExitOk) << err();
  EXPECT_EQ(out(), "a1 releasing\n");
  EXPECT_EQ(topology_.watches_started(), 0);
}

TEST_F(FleetctlTopologyTest, ReleaseWaitFollowsUntilReleased) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "release", "a1", "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a1", v1::ALLOCATION_STATE_RELEASED);
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(out(), "a1 releasing\na1 released\n");
}

TEST_F(FleetctlTopologyTest, PhasePrintsTheCrossConnectsThatDiffer) {
  EXPECT_EQ(Run({"topology", "phase", "a1", "tp"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "a1 phase tp: 1 cross-connects removed, 1 added\n"
            "  removed  ocs1:1→401\n"
            "  added    ocs1:2→402\n"
            "a1 programming\n");
  EXPECT_EQ(Run({"topology", "phase", "a1", "pp"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: allocation a1 has no phase 'pp'; its phases are dp, tp\n");
  EXPECT_EQ(Run({"topology", "phase", "a1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology phase needs an ID and a phase NAME, got 'phase a1'"));
}

TEST_F(FleetctlTopologyTest, PhaseWaitFollowsUntilReadyAndShowsThePhases) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"topology", "phase", "a1", "tp", "--wait"}, &code);
  ASSERT_TRUE(topology_.AwaitWatches(1));
  topology_.SetState("a1", v1::ALLOCATION_STATE_TRAINING);
  topology_.SetState("a1", v1::ALLOCATION_STATE_READY);
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("a1 phase tp: 1 cross-connects removed, 1 added\n"));
  EXPECT_THAT(out(), HasSubstr("a1 programming\na1 training\na1 ready\n"));
  EXPECT_THAT(out(), HasSubstr("dp\n"));
  EXPECT_THAT(out(), HasSubstr("tp (active)"));
}

TEST_F(FleetctlTopologyTest, ReleaseOfUnknownAllocationIsNotFound) {
  EXPECT_EQ(Run({"topology", "release", "a9", "--wait"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: allocation a9 not found\n");
  EXPECT_EQ(out(), "");
}

TEST_F(FleetctlTopologyTest, KeepAlivePrintsTheNewExpiry) {
  EXPECT_EQ(Run({"topology", "keepalive", "a1"}), kExitOk) << err();
  EXPECT_EQ(out(), "a1 lease expires 2023-11-14T22:18:20Z (in 5m)\n");
  EXPECT_EQ(Run({"topology", "keepalive", "a1", "-o", "json"}), kExitOk) << err();
  v1::KeepAliveResponse parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_EQ(parsed.lease_expires().seconds(), absl::ToUnixSeconds(clock_.Now() + absl::Minutes(5)));
  EXPECT_EQ(Run({"topology", "keepalive", "a9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: allocation a9 not found\n");
}

TEST_F(FleetctlTopologyTest, SubcommandsAndTheirFlagsAreChecked) {
  EXPECT_EQ(Run({"topology"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology needs a subcommand: request -f FILE, phase ID NAME, "
                               "detach ID DEVICE..., release ID or keepalive ID"));
  EXPECT_EQ(Run({"topology", "renew", "a1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown topology subcommand 'renew'; subcommands: request, "
                               "phase, detach, release, keepalive"));
  EXPECT_EQ(Run({"topology", "detach", "a1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology detach needs an ID and one or more DEVICEs (and no -f "
                               "or --lease), got 'detach a1'"));
  EXPECT_EQ(Run({"topology", "detach", "a1", "gpu1", "--lease", "5m"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology detach needs an ID and one or more DEVICEs"));
  EXPECT_EQ(Run({"topology", "request"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology request needs -f FILE"));
  EXPECT_EQ(Run({"topology", "release"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("topology release needs one ID, got 'release'"));
  EXPECT_EQ(Run({"topology", "release", "a1", "--lease", "5m"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("-f and --lease apply to topology request only, --dry-run to "
                               "request and detach"));
  EXPECT_EQ(Run({"topology", "keepalive", "a1", "--wait"}), kExitUsage);
  EXPECT_THAT(err(),
              HasSubstr("--wait applies to topology request, phase, detach and release only"));
  EXPECT_EQ(topology_.versions("a1"), 1u);  // Nothing reached the server.
  EXPECT_TRUE(topology_.requests().empty());
}

TEST_F(FleetctlTopologyTest, HelpShowsEverySubcommand) {
  EXPECT_EQ(Run({"topology", "--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("  request -f FILE  "));
  EXPECT_THAT(out(), HasSubstr("  phase ID NAME  "));
  EXPECT_THAT(out(), HasSubstr("  release ID  "));
  EXPECT_THAT(out(), HasSubstr("  keepalive ID  "));
  EXPECT_THAT(out(), HasSubstr("--lease VALUE"));
  EXPECT_THAT(out(), HasSubstr("--wait"));
}

// ---------------------------------------------------------------------------------------
// describe allocation

TEST_F(FleetctlTest, DescribeAllocationShowsItsEvents) {
  EXPECT_EQ(Run({"describe", "allocation", "a1"}), kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("ID:             a1\n"
                                "Tenant:         tenant-a\n"
                                "Name:           train\n"
                                "State:          ready\n"
                                "Reason:         -\n"));
  EXPECT_THAT(out(), HasSubstr("Lease expires:  2023-11-14T22:15:20Z (in 2m)\n"));
  EXPECT_THAT(out(), HasSubstr("Members:\n  server1-cpu0\n  gpu3\n"));
  EXPECT_THAT(out(), HasSubstr("Events:\n"
                               "  SEQ  AGE  PRINCIPAL  KIND              "
                               "OBJECT         MESSAGE\n"
                               "  2    0s   fleetd     allocation.state  "
                               "allocation/a1  allocation a1 is ready\n"));
  EXPECT_THAT(out(), Not(HasSubstr("switch ocs1 connected")));
}

TEST_F(FleetctlTest, DescribeAllocationJsonPrintsTheAllocationOnly) {
  EXPECT_EQ(Run({"describe", "allocation", "a1", "-o", "json"}), kExitOk) << err();
  v1::Allocation parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_EQ(parsed.id(), "a1");
  EXPECT_EQ(parsed.members_size(), 2);
  EXPECT_EQ(Run({"describe", "allocation", "a9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: allocation a9 not found\n");
}

// ---------------------------------------------------------------------------------------
// drain, undrain

TEST_F(FleetctlTest, DrainPortSendsTheTargetAndPrintsItsAllocations) {
  EXPECT_EQ(Run({"drain", "port", "ocs1/1", "--reason", "fiber swap"}), kExitOk) << err();
  EXPECT_EQ(out(), "drained port ocs1/1: fiber swap\nallocations still using it: a1\n");
  std::vector<v1::DrainRequest> drains = admin_.drains();
  ASSERT_EQ(drains.size(), 1u);
  EXPECT_EQ(drains[0].target().switch_port().switch_id(), "ocs1");
  EXPECT_EQ(drains[0].target().switch_port().port(), 1u);
  EXPECT_FALSE(drains[0].evict());
  EXPECT_EQ(drains[0].reason(), "fiber swap");
}

TEST_F(FleetctlTest, DrainWithEvictSaysTheAllocationsMoved) {
  EXPECT_EQ(Run({"drain", "onic", "s1c0-n0", "--evict"}), kExitOk) << err();
  EXPECT_EQ(out(), "drained onic s1c0-n0\nallocations failed: a1\n");
  ASSERT_EQ(admin_.drains().size(), 1u);
  EXPECT_EQ(admin_.drains()[0].target().onic(), "s1c0-n0");
  EXPECT_TRUE(admin_.drains()[0].evict());
}

TEST_F(FleetctlTest, DrainOfUnusedHostSaysSo) {
  EXPECT_EQ(Run({"drain", "host", "server2"}), kExitOk) << err();
  EXPECT_EQ(out(), "drained host server2\nno allocation uses it\n");
  EXPECT_EQ(Run({"drain", "host", "server2", "-o", "json"}), kExitOk) << err();
  EXPECT_EQ(out(), "{}\n");
}

TEST_F(FleetctlTest, DrainOfUnknownOnicExitsOne) {
  EXPECT_EQ(Run({"drain", "onic", "s9c9-n9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: onic s9c9-n9 not found\n");
}

TEST_F(FleetctlTest, DrainArgumentsAreChecked) {
  for (const char* port : {"ocs1", "ocs1/", "/5", "ocs1/0", "ocs1/x"}) {
    EXPECT_EQ(Run({"drain", "port", port}), kExitUsage) << port;
    EXPECT_THAT(err(),
                HasSubstr(absl::StrCat("a port is SWITCH/PORT, such as ocs1/5; got '", port, "'")));
  }
  EXPECT_EQ(Run({"drain", "switch", "ocs1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown kind 'switch'; kinds: port, onic, host"));
  EXPECT_EQ(Run({"drain", "port"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("drain needs KIND and NAME"));
  EXPECT_EQ(Run({"undrain", "host", "server1", "--evict"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown flag --evict"));
  EXPECT_TRUE(admin_.drains().empty());
  EXPECT_TRUE(admin_.undrains().empty());
}

TEST_F(FleetctlTest, UndrainSendsTheTarget) {
  EXPECT_EQ(Run({"undrain", "ports", "ocs1/5"}), kExitOk) << err();
  EXPECT_EQ(out(), "undrained port ocs1/5\n");
  ASSERT_EQ(admin_.undrains().size(), 1u);
  EXPECT_EQ(admin_.undrains()[0].target().switch_port().port(), 5u);
}

// ---------------------------------------------------------------------------------------
// reconcile

TEST_F(FleetctlTest, ReconcileDryRunReportsDriftAndChangesNothing) {
  EXPECT_EQ(Run({"reconcile", "--dry-run", "--remove-unknown"}), kExitOk) << err();
  const std::string report =
      "dry run: nothing was changed\n"
      "KIND     SWITCH  INGRESS  EGRESS  CIRCUIT  ACTION\n"
      "missing  ocs1    3        388     c2       reported\n"
      "unknown  ocs1    2        390     -        reported\n"
      "repaired 0, resumed 0 transactions, rolled back 0 transactions\n";
  EXPECT_EQ(out(), report);
  EXPECT_EQ(Run({"reconcile", "--dry-run", "--remove-unknown"}), kExitOk) << err();
  EXPECT_EQ(out(), report);
  ASSERT_EQ(admin_.reconciles().size(), 2u);
  EXPECT_TRUE(admin_.reconciles()[0].dry_run());
  EXPECT_EQ(admin_.reconciles()[0].unknown(), v1::UNKNOWN_CROSS_CONNECT_POLICY_REMOVE);
}

TEST_F(FleetctlTest, ReconcileRepairsAndRemovesThenFindsNoDrift) {
  EXPECT_EQ(Run({"reconcile", "--switch", "ocs1", "--remove-unknown"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "KIND     SWITCH  INGRESS  EGRESS  CIRCUIT  ACTION\n"
            "missing  ocs1    3        388     c2       repaired\n"
            "unknown  ocs1    2        390     -        removed\n"
            "repaired 1, resumed 0 transactions, rolled back 0 transactions\n");
  EXPECT_EQ(Run({"reconcile", "--switch", "ocs1"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "no drift on ocs1\n"
            "repaired 0, resumed 0 transactions, rolled back 0 transactions\n");
  EXPECT_EQ(admin_.reconciles()[1].unknown(), v1::UNKNOWN_CROSS_CONNECT_POLICY_UNSPECIFIED);
}

TEST_F(FleetctlTest, ReconcileAdoptsUnknownAsJson) {
  EXPECT_EQ(Run({"reconcile", "--adopt-unknown", "-o", "json"}), kExitOk) << err();
  v1::ReconcileResponse parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  ASSERT_EQ(parsed.drift_size(), 2);
  EXPECT_EQ(parsed.drift(1).kind(), v1::Drift::KIND_UNKNOWN);
  EXPECT_EQ(parsed.drift(1).action(), "adopted");
  EXPECT_EQ(parsed.repaired(), 1u);
}

TEST_F(FleetctlTest, ReconcileWithBothPoliciesIsUsageError) {
  EXPECT_EQ(Run({"reconcile", "--adopt-unknown", "--remove-unknown"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--adopt-unknown and --remove-unknown exclude each other"));
  EXPECT_THAT(err(), HasSubstr("fleetctl reconcile --help"));
  EXPECT_EQ(Run({"reconcile", "ocs1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unexpected argument 'ocs1'; a switch goes after --switch"));
  EXPECT_TRUE(admin_.reconciles().empty());
}

TEST_F(FleetctlTest, ReconcileOfUnknownSwitchExitsOne) {
  EXPECT_EQ(Run({"reconcile", "--switch", "ocs9"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: switch ocs9 not found\n");
}

// ---------------------------------------------------------------------------------------
// events

TEST_F(FleetctlTest, EventsWithoutFollowIsGetEvents) {
  ASSERT_EQ(Run({"get", "events", "--kind", "allocation", "--object", "a1"}), kExitOk) << err();
  const std::string listed = out();
  EXPECT_THAT(listed, HasSubstr("allocation a1 is ready"));
  EXPECT_THAT(listed, Not(HasSubstr("ocs1")));
  EXPECT_EQ(Run({"events", "--object-kind", "allocation", "--object", "a1"}), kExitOk) << err();
  EXPECT_EQ(out(), listed);
  EXPECT_EQ(Run({"events", "--after", "2"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("switch ocs1 connected"));
  EXPECT_THAT(out(), Not(HasSubstr("allocation a1 is ready")));
}

TEST_F(FleetctlTest, EventsFollowPrintsRowsAsTheyArriveUntilTheStreamEnds) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"events", "--follow", "--after", "1"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  admin_.AppendEvent("allocation.state", "allocation", "a2", "allocation a2 is programming");
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(out(),
            "SEQ     TIME                  PRINCIPAL           KIND                    OBJECT    "
            "                MESSAGE\n"
            "2       2023-11-14T22:13:21Z  fleetd              allocation.state        "
            "allocation/a1             allocation a1 is ready\n"
            "3       2023-11-14T22:13:22Z  fleetd              switch.connected        "
            "switch/ocs1               switch ocs1 connected over TL1\n"
            "4       2023-11-14T22:13:23Z  fleetd              allocation.state        "
            "allocation/a2             allocation a2 is programming\n");
}

TEST_F(FleetctlTest, EventsFollowJsonPrintsOneObjectPerLine) {
  int code = -1;
  std::thread fleetctl =
      RunInBackground({"events", "--follow", "--object-kind", "allocation", "-o", "json"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  admin_.AppendEvent("allocation.state", "allocation", "a2", "allocation a2 is ready");
  admin_.AppendEvent("switch.disconnected", "switch", "ocs1", "switch ocs1 disconnected");
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  std::vector<std::string> lines = absl::StrSplit(out(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << out();
  v1::Event first, second;
  ASSERT_TRUE(ParsesAs(lines[0], &first));
  ASSERT_TRUE(ParsesAs(lines[1], &second));
  EXPECT_EQ(first.object_id(), "a1");
  EXPECT_EQ(second.object_id(), "a2");
  EXPECT_EQ(second.sequence(), 4u);
}

TEST_F(FleetctlTest, EventsRejectsNegativeAfterAndArguments) {
  EXPECT_EQ(Run({"events", "--follow", "--after", "-1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--after must be 0 or more, got -1"));
  EXPECT_THAT(err(), HasSubstr("fleetctl events --help"));
  EXPECT_EQ(Run({"events", "a1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unexpected argument 'a1'"));
}

TEST_F(FleetctlTest, EventsFollowFromUnreachableServerExitsOne) {
  std::string nowhere = "unix:" + ::testing::TempDir() + "/no-fleetd.sock";
  EXPECT_EQ(Run({"events", "--follow", "--server", nowhere}), kExitFailed);
  EXPECT_THAT(err(), StartsWith("error: UNAVAILABLE: "));
  EXPECT_EQ(out(), "");
}

// ---------------------------------------------------------------------------------------
// get --watch

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST_F(FleetctlTest, GetWatchReprintsTheListWhenItChangesUntilTheStreamEnds) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"get", "allocations", "--watch"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  // An event that leaves the list as it was prints nothing; the next one, after a1 degraded,
  // prints the list again.
  admin_.AppendEvent("switch.connected", "switch", "ocs1", "switch ocs1 connected again");
  topology_.SetState("a1", v1::ALLOCATION_STATE_DEGRADED, "link gpu3-n0/1 did not train");
  admin_.AppendEvent("allocation.state", "allocation", "a1", "allocation a1 is degraded");
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(
      out(),
      "# allocations at 2023-11-14T22:13:20Z\n"
      "ID  TENANT    NAME   STATE  MEMBERS  CIRCUITS  AGE  REASON\n"
      "a1  tenant-a  train  ready  2        0         3m   -\n"
      "\n"
      "# allocations at 2023-11-14T22:13:20Z\n"
      "ID  TENANT    NAME   STATE     MEMBERS  CIRCUITS  AGE  REASON\n"
      "a1  tenant-a  train  degraded  2        0         3m   link gpu3-n0/1 did not train\n");
}

TEST_F(FleetctlTest, GetWatchFollowsFromTheNewestEventWithoutReplay) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"get", "hosts", "-w", "-o", "json"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  // The three events recorded before the watch are not replayed: it follows from the newest.
  EXPECT_EQ(admin_.last_watch_after(), 3u);
  std::vector<std::string> lines = Lines(out());
  ASSERT_EQ(lines.size(), 1u) << out();
  v1::ListHostsResponse parsed;
  ASSERT_TRUE(ParsesAs(lines[0], &parsed));
  EXPECT_EQ(parsed.hosts(0).name(), "server1");
}

TEST_F(FleetctlTest, GetWatchJsonPrintsOneListPerLine) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"get", "allocations", "--watch", "-o", "json"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  topology_.SetState("a1", v1::ALLOCATION_STATE_FAILED, "switch ocs1 refused");
  admin_.AppendEvent("allocation.state", "allocation", "a1", "allocation a1 failed");
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  std::vector<std::string> lines = Lines(out());
  ASSERT_EQ(lines.size(), 2u) << out();
  v1::ListAllocationsResponse first, second;
  ASSERT_TRUE(ParsesAs(lines[0], &first));
  ASSERT_TRUE(ParsesAs(lines[1], &second));
  EXPECT_EQ(first.allocations(0).state(), v1::ALLOCATION_STATE_READY);
  EXPECT_EQ(second.allocations(0).state(), v1::ALLOCATION_STATE_FAILED);
  // Raw timestamps stay in the JSON.
  EXPECT_THAT(lines[1], HasSubstr("\"created\":\"2023-11-14T22:10:20Z\""));
}

TEST_F(FleetctlTest, GetWatchEndsCleanlyWhenStopped) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"get", "switches", "--watch"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  EXPECT_TRUE(stop_.Stop());
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(err(), "");
  EXPECT_THAT(out(), StartsWith("# switches at 2023-11-14T22:13:20Z\nID    MODEL"));
  // Nothing left to stop: main() lets the signal end the process.
  EXPECT_FALSE(stop_.Stop());
}

TEST_F(FleetctlTest, EventsFollowEndsCleanlyWhenStopped) {
  int code = -1;
  std::thread fleetctl = RunInBackground({"events", "--follow"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  EXPECT_TRUE(stop_.Stop());
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_EQ(err(), "");
}

TEST_F(FleetctlTest, GetEventsWatchFollowsTheLog) {
  int code = -1;
  std::thread fleetctl =
      RunInBackground({"get", "events", "--watch", "--kind", "allocation"}, &code);
  ASSERT_TRUE(admin_.AwaitEventWatches(1));
  admin_.AppendEvent("allocation.state", "allocation", "a2", "allocation a2 is programming");
  admin_.EndEventWatches();
  fleetctl.join();
  EXPECT_EQ(code, kExitOk) << err();
  EXPECT_THAT(out(), StartsWith("SEQ     TIME "));
  EXPECT_THAT(out(), HasSubstr("allocation a1 is ready"));
  EXPECT_THAT(out(), HasSubstr("allocation a2 is programming"));
  EXPECT_THAT(out(), Not(HasSubstr("ocs1")));
}

TEST_F(FleetctlTest, GetWatchArgumentsAreChecked) {
  EXPECT_EQ(Run({"get", "events", "--watch", "--limit", "5"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("--limit does not apply with --watch"));
  EXPECT_EQ(Run({"get", "widgets", "--watch"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown kind 'widgets'"));
  EXPECT_EQ(Run({"describe", "switch", "ocs1", "--watch"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown flag --watch"));
}

TEST_F(FleetctlTest, GetWatchOfUnreachableServerExitsOne) {
  std::string nowhere = "unix:" + ::testing::TempDir() + "/no-fleetd.sock";
  EXPECT_EQ(Run({"get", "hosts", "--watch", "--server", nowhere, "--timeout", "1"}), kExitFailed);
  EXPECT_THAT(err(), StartsWith("error: UNAVAILABLE: "));
  EXPECT_EQ(out(), "");
}

// ---------------------------------------------------------------------------------------
// Colour

TEST_F(FleetctlTest, ColourOnlyOnATerminalUnlessForced) {
  const std::string green_ready = "\x1b[32mready\x1b[0m";
  // Not a terminal (a pipe, or NO_COLOR): no escape codes at all.
  EXPECT_EQ(Run({"get", "allocations"}), kExitOk) << err();
  EXPECT_THAT(out(), Not(HasSubstr("\x1b")));
  EXPECT_EQ(Run({"get", "allocations", "--color=always"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr(green_ready));

  env_.color_terminal = true;
  EXPECT_EQ(Run({"get", "allocations"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr(green_ready));
  EXPECT_EQ(Run({"get", "allocations", "--color", "never"}), kExitOk) << err();
  EXPECT_THAT(out(), Not(HasSubstr("\x1b")));
  // JSON is for programs: never coloured.
  EXPECT_EQ(Run({"get", "allocations", "-o", "json"}), kExitOk) << err();
  EXPECT_THAT(out(), Not(HasSubstr("\x1b")));
}

TEST_F(FleetctlTest, HealthColoursComponentsAndOverall) {
  EXPECT_EQ(Run({"health", "--color=always"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("store        \x1b[32mok\x1b[0m     -\n"));
  EXPECT_THAT(out(), HasSubstr("switch/ocs1  \x1b[31mdown\x1b[0m   connection refused\n"));
  EXPECT_THAT(out(), HasSubstr("overall: \x1b[33mdegraded\x1b[0m\n"));
}

TEST_F(FleetctlTest, UnknownColorModeIsUsageError) {
  EXPECT_EQ(Run({"get", "switches", "--color=sometimes"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown --color 'sometimes'; accepted: auto, always, never"));
  EXPECT_TRUE(connected_to_.empty());
}

// ---------------------------------------------------------------------------------------
// version -o, completion

TEST_F(FleetctlTest, VersionJsonHasClientAndServer) {
  EXPECT_EQ(Run({"version", "-o", "json"}), kExitOk) << err();
  google::protobuf::Struct parsed;
  ASSERT_TRUE(ParsesAs(out(), &parsed));
  EXPECT_FALSE(parsed.fields().at("client").string_value().empty());
  EXPECT_EQ(parsed.fields().at("server").string_value(), "0.1.0-test");
  EXPECT_EQ(Run({"version", "-o", "yaml"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("server: 0.1.0-test\n"));
}

TEST_F(FleetctlTest, CompletionScriptsOfferTheParsersVerbsKindsAndFlags) {
  const CommandLineSpec spec = FleetctlCommandLine();
  for (const char* shell : {"bash", "zsh"}) {
    ASSERT_EQ(Run({"completion", shell}), kExitOk) << err();
    const std::string script = out();
    for (const VerbSpec& verb : spec.verbs) {
      EXPECT_THAT(script, HasSubstr(verb.name)) << shell;
      for (const FlagSpec& flag : verb.flags) {
        EXPECT_THAT(script, HasSubstr(" --" + flag.name + " ")) << shell << " " << verb.name;
      }
    }
  }
  // The spec is the parser's: every get kind, and each verb's flags as its help shows them.
  const VerbSpec* get = nullptr;
  for (const VerbSpec& verb : spec.verbs) {
    if (verb.name == "get") get = &verb;
  }
  ASSERT_NE(get, nullptr);
  EXPECT_THAT(get->words,
              ::testing::ElementsAre("switches", "ports", "hosts", "agents", "devices", "onics",
                                     "trunks", "circuits", "allocations", "events"));
  ASSERT_EQ(Run({"get", "--help"}), kExitOk);
  const std::string help = out();
  for (const FlagSpec& flag : get->flags) EXPECT_THAT(help, HasSubstr("--" + flag.name));
  for (const VerbSpec& verb : spec.verbs) {
    if (verb.name == "help") continue;
    ASSERT_EQ(Run({verb.name, "--help"}), kExitOk) << verb.name;
  }
}

TEST_F(FleetctlTest, CompletionArgumentsAreChecked) {
  EXPECT_EQ(Run({"completion", "fish"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown shell 'fish'; shells: bash, zsh"));
  EXPECT_EQ(Run({"completion"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("completion needs one shell (bash, zsh), got nothing"));
  EXPECT_EQ(Run({"completion", "bash", "-o", "json"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("-o applies to commands that print objects"));
}

TEST_F(FleetctlTest, AllocationReplacePrintsTheSwapAndTheCrossConnectsThatChange) {
  EXPECT_EQ(Run({"allocation", "replace", "a1", "gpu3"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "a1 member gpu3 replaced: 2 cross-connects removed, 2 added\n"
            "members: gpu1, gpu2, gpu5, gpu4\n"
            "  removed  ocs1:2→387\n"
            "  removed  ocs1:3→386\n"
            "  added    ocs1:2→389\n"
            "  added    ocs1:5→386\n"
            "a1 programming\n");
  EXPECT_EQ(Run({"allocation", "replace", "a1", "gpu3", "--dry-run"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("dry run: a1 member gpu3 replaced"));
  EXPECT_THAT(out(), Not(HasSubstr("a1 ready")));
  EXPECT_EQ(Run({"allocation", "replace", "a1", "gpu7"}), kExitFailed);
  EXPECT_EQ(err(), "error: NOT_FOUND: member: allocation a1 has no member gpu7\n");
  EXPECT_EQ(Run({"allocation", "replace", "a1"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("allocation replace needs an ID and a MEMBER"));
  EXPECT_EQ(Run({"allocation", "swap", "a1", "gpu3"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown allocation subcommand 'swap'"));
  EXPECT_EQ(Run({"allocation", "replace", "a1", "gpu3", "--dry-run", "--wait"}), kExitUsage);
}

}  // namespace
}  // namespace fleet::cli
