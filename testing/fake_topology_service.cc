#include "testing/fake_topology_service.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "testing/stream_waits.h"

namespace fleet::testing {
namespace {

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

}  // namespace

FakeTopologyService::FakeTopologyService(absl::Time now) : now_(now) {
  v1::Allocation a;
  a.set_id("a1");
  a.set_tenant("tenant-a");
  a.set_name("train");
  a.set_state(v1::ALLOCATION_STATE_READY);
  a.add_members("server1-cpu0");
  a.add_members("gpu3");
  // gpu3 attached to server1, whose CPU the allocation holds too.
  v1::AttachSpec* attach = a.mutable_request()->mutable_topology()->mutable_attach();
  attach->set_host("server1");
  attach->mutable_devices()->add_devices("gpu3");
  *a.mutable_created() = ToProtoTime(now - absl::Minutes(3));
  *a.mutable_lease_expires() = ToProtoTime(now + absl::Minutes(2));
  history_["a1"].push_back(a);
}

grpc::Status FakeTopologyService::RequestTopology(grpc::ServerContext*,
                                                  const v1::RequestTopologyRequest* request,
                                                  v1::RequestTopologyResponse* response) {
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
  *a.mutable_created() = ToProtoTime(now_);
  history_[a.id()].push_back(a);
  *response->mutable_allocation() = std::move(a);
  return grpc::Status::OK;
}

grpc::Status FakeTopologyService::GetAllocation(grpc::ServerContext*,
                                                const v1::GetAllocationRequest* request,
                                                v1::Allocation* response) {
  absl::MutexLock lock(&mu_);
  auto it = history_.find(request->id());
  if (it == history_.end()) return NotFound(request->id());
  *response = it->second.back();
  return grpc::Status::OK;
}

grpc::Status FakeTopologyService::ListAllocations(grpc::ServerContext*,
                                                  const v1::ListAllocationsRequest* request,
                                                  v1::ListAllocationsResponse* response) {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, versions] : history_) {
    const v1::Allocation& a = versions.back();
    if (!request->tenant().empty() && a.tenant() != request->tenant()) continue;
    if (a.state() == v1::ALLOCATION_STATE_RELEASED && !request->include_released()) continue;
    *response->add_allocations() = a;
  }
  ++lists_;
  return grpc::Status::OK;
}

grpc::Status FakeTopologyService::WatchAllocation(
    grpc::ServerContext* context, const v1::WatchAllocationRequest* request,
    grpc::ServerWriter<v1::WatchAllocationResponse>* writer) {
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

grpc::Status FakeTopologyService::ReleaseTopology(grpc::ServerContext*,
                                                  const v1::ReleaseTopologyRequest* request,
                                                  v1::ReleaseTopologyResponse* response) {
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

grpc::Status FakeTopologyService::ActivatePhase(grpc::ServerContext*,
                                                const v1::ActivatePhaseRequest* request,
                                                v1::ActivatePhaseResponse* response) {
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

grpc::Status FakeTopologyService::KeepAlive(grpc::ServerContext*,
                                            const v1::KeepAliveRequest* request,
                                            v1::KeepAliveResponse* response) {
  absl::MutexLock lock(&mu_);
  auto it = history_.find(request->id());
  if (it == history_.end()) return NotFound(request->id());
  v1::Allocation a = it->second.back();
  *a.mutable_lease_expires() = ToProtoTime(now_ + absl::Minutes(5));
  it->second.push_back(a);
  *response->mutable_lease_expires() = a.lease_expires();
  return grpc::Status::OK;
}

void FakeTopologyService::SetState(const std::string& id, v1::AllocationState state,
                                   const std::string& reason) {
  absl::MutexLock lock(&mu_);
  v1::Allocation a = history_.at(id).back();
  a.set_state(state);
  a.set_reason(reason);
  history_[id].push_back(std::move(a));
}

void FakeTopologyService::set_admit_state(v1::AllocationState state) {
  absl::MutexLock lock(&mu_);
  admit_state_ = state;
}

void FakeTopologyService::EndWatches() {
  absl::MutexLock lock(&mu_);
  end_watches_ = true;
}

bool FakeTopologyService::AwaitWatches(int n) {
  absl::MutexLock lock(&mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return watches_started_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), kStreamOpenLimit);
}

bool FakeTopologyService::AwaitLists(int n) {
  absl::MutexLock lock(&mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return lists_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), kStreamOpenLimit);
}

int FakeTopologyService::watches_started() {
  absl::MutexLock lock(&mu_);
  return watches_started_;
}

std::vector<v1::RequestTopologyRequest> FakeTopologyService::requests() {
  absl::MutexLock lock(&mu_);
  return requests_;
}

size_t FakeTopologyService::versions(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return history_.contains(id) ? history_.at(id).size() : 0;
}

grpc::Status FakeTopologyService::NotFound(const std::string& id) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND, "allocation " + id + " not found");
}

}  // namespace fleet::testing
