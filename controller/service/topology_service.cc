#include "controller/service/topology_service.h"

#include "common/grpc_status.h"
#include "common/proto_time.h"
#include "controller/service/allocation_watch.h"
#include "controller/service/caller.h"
#include "controller/service/rpc.h"
#include "scheduler/limits.h"

namespace fleet::service {

grpc::ServerUnaryReactor* TopologyServiceImpl::RequestTopology(
    grpc::CallbackServerContext* context, const v1::RequestTopologyRequest* request,
    v1::RequestTopologyResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Durable(
        *store_,
        Assign(engine_->RequestTopology(*request, Caller(*context, "RequestTopology")), response),
        request->dry_run());
  });
}

grpc::ServerUnaryReactor* TopologyServiceImpl::GetAllocation(
    grpc::CallbackServerContext* context, const v1::GetAllocationRequest* request,
    v1::Allocation* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
    return Assign(engine_->GetAllocation(request->id(), Caller(*context, "GetAllocation")),
                  response);
  });
}

grpc::ServerUnaryReactor* TopologyServiceImpl::ListAllocations(
    grpc::CallbackServerContext* context, const v1::ListAllocationsRequest* request,
    v1::ListAllocationsResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Fill(engine_->ListAllocations(*request, Caller(*context, "ListAllocations")),
                response->mutable_allocations());
  });
}

grpc::ServerWriteReactor<v1::WatchAllocationResponse>* TopologyServiceImpl::WatchAllocation(
    grpc::CallbackServerContext* context, const v1::WatchAllocationRequest* request) {
  using Response = v1::WatchAllocationResponse;
  auto watch = std::make_shared<AllocationWatch>(store_, store_, request->id(), request->tenant());
  // The tenancy check reads the store, so it is the watch's first step, on the hub's thread,
  // not on one of gRPC's few callback threads.
  return watches_->Open<Response>(
      [this, watch, id = request->id(), tenant = request->tenant(),
       caller = Caller(*context, "WatchAllocation"),
       checked = false](uint64_t upto, std::vector<Response>* out) mutable -> WatchStep {
        if (!checked) {
          if (absl::Status s = engine_->CheckWatch(id, tenant, caller); !s.ok()) {
            return {0, ToGrpcStatus(s)};
          }
          checked = true;
        }
        std::vector<v1::Allocation> changed;
        WatchStep step = watch->Step(upto, &changed);
        for (v1::Allocation& a : changed) *out->emplace_back().mutable_allocation() = std::move(a);
        return step;
      });
}

grpc::ServerUnaryReactor* TopologyServiceImpl::ReleaseTopology(
    grpc::CallbackServerContext* context, const v1::ReleaseTopologyRequest* request,
    v1::ReleaseTopologyResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
    return Durable(*store_, Assign(engine_->ReleaseTopology(request->id(),
                                                            Caller(*context, "ReleaseTopology")),
                                   response->mutable_allocation()));
  });
}

grpc::ServerUnaryReactor* TopologyServiceImpl::KeepAlive(grpc::CallbackServerContext* context,
                                                         const v1::KeepAliveRequest* request,
                                                         v1::KeepAliveResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
    absl::StatusOr<absl::Time> expires =
        engine_->KeepAlive(request->id(), Caller(*context, "KeepAlive"));
    if (!expires.ok()) return ToGrpcStatus(expires.status());
    *response->mutable_lease_expires() = ToProtoTime(*expires);
    return Durable(*store_, grpc::Status::OK);
  });
}

grpc::ServerUnaryReactor* TopologyServiceImpl::ActivatePhase(
    grpc::CallbackServerContext* context, const v1::ActivatePhaseRequest* request,
    v1::ActivatePhaseResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
    if (grpc::Status s = RequireName(request->phase(), "phase"); !s.ok()) return s;
    grpc::Status answer =
        Assign(engine_->ActivatePhase(*request, Caller(*context, "ActivatePhase")), response);
    // A switch that sends the switch nothing and starts no transaction (a prepared phase, or
    // the active one again) leaves the fabric as it was: were the stored active phase lost with
    // the host's power, the job would find the same circuits up and trained, and activating
    // its phase again is again a state change. So the job does not wait for the disk
    // (docs/engine.md). A switch whose phases differ in no path still starts a transaction
    // (PROGRAMMING), which syncs before it acts; it is answered once durable as before.
    if (answer.ok() && response->plan().remove().empty() && response->plan().add().empty() &&
        response->allocation().state() != v1::ALLOCATION_STATE_PROGRAMMING) {
      return answer;
    }
    return Durable(*store_, answer);
  });
}

grpc::ServerUnaryReactor* TopologyServiceImpl::DetachDevices(
    grpc::CallbackServerContext* context, const v1::DetachDevicesRequest* request,
    v1::DetachDevicesResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
    return Durable(
        *store_,
        Assign(engine_->DetachDevices(*request, Caller(*context, "DetachDevices")), response),
        request->dry_run());
  });
}

grpc::ServerUnaryReactor* TopologyServiceImpl::GetRanks(grpc::CallbackServerContext* context,
                                                        const v1::GetRanksRequest* request,
                                                        v1::GetRanksResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (grpc::Status s = RequireName(request->id(), "id"); !s.ok()) return s;
    if (absl::Status s = scheduler::CheckName("phase", request->phase()); !s.ok()) {
      return ToGrpcStatus(s);
    }
    return Assign(engine_->GetRanks(*request, Caller(*context, "GetRanks")), response);
  });
}

grpc::ServerUnaryReactor* TopologyServiceImpl::GetFabric(grpc::CallbackServerContext* context,
                                                         const v1::GetFabricRequest* request,
                                                         v1::GetFabricResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Assign(engine_->GetFabric(*request, Caller(*context, "GetFabric")), response);
  });
}

}  // namespace fleet::service
