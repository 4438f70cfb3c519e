#include "controller/service/admin_service.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/wording.h"
#include "controller/agent_registry/retrain_command.h"
#include "controller/service/caller.h"
#include "controller/service/event_follow.h"
#include "controller/service/event_visibility.h"
#include "controller/service/rpc.h"

namespace fleet::service {
namespace {

// How long Health waits for a switch's answer: well inside a caller's usual deadline, so
// the rest of the report comes back whatever one switch does.
constexpr absl::Duration kSwitchProbeTimeout = absl::Seconds(2);

}  // namespace

grpc::ServerUnaryReactor* AdminServiceImpl::Health(grpc::CallbackServerContext* context,
                                                   const v1::HealthRequest*,
                                                   v1::HealthResponse* response) {
  auto answer = [=, this]() -> grpc::Status {
    response->set_version(version_);
    v1::ComponentHealth* store = response->add_components();
    store->set_name("store");
    // A read through the store proves the database answers.
    absl::StatusOr<std::vector<v1::Switch>> switches = store_->ListSwitches();
    if (switches.ok()) {
      store->set_state(v1::ComponentHealth::STATE_OK);
      store->set_detail(
          absl::StrCat(Counted(switches->size(), "switch", "switches"), " in inventory"));
    } else {
      store->set_state(v1::ComponentHealth::STATE_DOWN);
      store->set_detail(std::string(switches.status().message()));
    }
    // Each switch is read live, all at once: reachable, logged in, and the size inventory
    // expects. One that does not answer in time is reported unreachable, not waited for.
    if (switches.ok()) {
      const std::vector<switch_registry::SwitchRegistry::Probe> probes =
          switches_->ProbeSwitches(*switches, kSwitchProbeTimeout);
      for (size_t i = 0; i < switches->size(); ++i) {
        const v1::Switch& sw = (*switches)[i];
        const switch_registry::SwitchRegistry::Probe& probe = probes[i];
        v1::ComponentHealth* c = response->add_components();
        c->set_name(absl::StrCat("switch/", sw.id()));
        if (probe.status.ok()) {
          c->set_state(v1::ComponentHealth::STATE_OK);
          c->set_detail(probe.description);
        } else {
          c->set_state(probe.status.code() == absl::StatusCode::kFailedPrecondition &&
                               !probe.description.empty()
                           ? v1::ComponentHealth::STATE_DEGRADED
                           : v1::ComponentHealth::STATE_DOWN);
          c->set_detail(std::string(probe.status.message()));
        }
      }
    }
    if (components_) {
      for (v1::ComponentHealth& c : components_()) *response->add_components() = std::move(c);
    }
    v1::ComponentHealth::State overall = v1::ComponentHealth::STATE_OK;
    for (const v1::ComponentHealth& c : response->components())
      overall = std::max(overall, c.state());
    response->set_overall(overall);
    return grpc::Status::OK;
  };
  // Not held to the caller's position: a replica's health is how an operator learns it lags.
  return rpcs_->Serve(context, std::move(answer), RpcExecutor::Freshness::kAsHeld);
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListEvents(grpc::CallbackServerContext* context,
                                                       const v1::ListEventsRequest* request,
                                                       v1::ListEventsResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    absl::StatusOr<EventVisibility> visibility =
        EventVisibility::For(Caller(*context, "ListEvents"), *store_, request->object_kind());
    if (!visibility.ok()) return ToGrpcStatus(visibility.status());
    store::EventFilter filter;
    filter.after_sequence = request->after_sequence();
    const uint32_t limit =
        request->limit() == 0 ? 1000 : std::min<uint32_t>(request->limit(), 10000);
    filter.limit = limit;
    filter.object_kind = visibility->object_kind();
    filter.object_id = request->object_id();
    // A job's events are among everyone's: read on until the page is full, the log ends, or a
    // bounded number of events was read (the page is then short; the next starts after it).
    for (uint32_t read = 0; read < 100 * limit;) {
      absl::StatusOr<std::vector<v1::Event>> page = store_->ListEvents(filter);
      if (!page.ok()) return ToGrpcStatus(page.status());
      for (v1::Event& e : *page) {
        if (visibility->Visible(e)) *response->add_events() = std::move(e);
        if (response->events_size() == static_cast<int>(limit)) return grpc::Status::OK;
      }
      if (page->size() < filter.limit) break;
      read += page->size();
      filter.after_sequence = page->back().sequence();
    }
    return grpc::Status::OK;
  });
}

absl::StatusOr<v1::LinkState> AdminServiceImpl::LinkCommand(grpc::ServerContextBase* context,
                                                            const std::string& onic_id,
                                                            v1::Command command) {
  if (agents_ == nullptr) return absl::UnavailableError("this fleetd has no agent registry");
  absl::StatusOr<v1::Onic> onic = store_->GetOnic(onic_id);
  if (!onic.ok()) return onic.status();
  // The caller's deadline bounds the command, at most 30 s.
  absl::StatusOr<v1::CommandResult> result = agents_->SendCommand(
      onic->serial(), std::move(command), CommandDeadline(*context, absl::Seconds(30)));
  if (!result.ok()) return result.status();
  if (result->code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(result->code()),
                        absl::StrCat("O-NIC ", onic_id, ": ", result->message()));
  }
  return result->link();
}

grpc::ServerUnaryReactor* AdminServiceImpl::RetrainLink(grpc::CallbackServerContext* context,
                                                        const v1::RetrainLinkRequest* request,
                                                        v1::LinkState* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    if (request->port() != 1 && request->port() != 2) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("port must be 1 or 2, not ", request->port()));
    }
    absl::StatusOr<v1::Onic> onic = store_->GetOnic(request->onic());
    if (!onic.ok()) return ToGrpcStatus(onic.status());
    // The expected peer is the source of the desired circuit arriving on this port's rx.
    std::optional<agent_registry::ExpectedPeer> expected;
    absl::StatusOr<std::vector<v1::Circuit>> circuits = store_->ListCircuits({});
    if (!circuits.ok()) return ToGrpcStatus(circuits.status());
    for (const v1::Circuit& c : *circuits) {
      if (c.state() == v1::CIRCUIT_STATE_INACTIVE || c.destination().onic() != request->onic() ||
          c.destination().port() != request->port()) {
        continue;
      }
      absl::StatusOr<v1::Onic> peer = store_->GetOnic(c.source().onic());
      if (!peer.ok()) return ToGrpcStatus(peer.status());
      absl::StatusOr<v1::Device> here = store_->GetDevice(onic->device());
      if (!here.ok()) return ToGrpcStatus(here.status());
      absl::StatusOr<v1::Device> there = store_->GetDevice(peer->device());
      if (!there.ok()) return ToGrpcStatus(there.status());
      expected = agent_registry::ExpectedPeer{peer->serial(), c.source().port(),
                                              agent_registry::EnumeratedBehind(*here, *there)};
    }
    return Assign(
        LinkCommand(context, request->onic(),
                    agent_registry::RetrainCommand(onic->serial(), request->port(), expected)),
        response);
  });
}

grpc::ServerUnaryReactor* AdminServiceImpl::GetLinkStatus(grpc::CallbackServerContext* context,
                                                          const v1::GetLinkStatusRequest* request,
                                                          v1::GetLinkStatusResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    absl::StatusOr<v1::Onic> onic = store_->GetOnic(request->onic());
    if (!onic.ok()) return ToGrpcStatus(onic.status());
    for (uint32_t port : {1u, 2u}) {
      v1::Command command;
      command.mutable_read_port()->set_onic_serial(onic->serial());
      command.mutable_read_port()->set_port(port);
      absl::StatusOr<v1::LinkState> link =
          LinkCommand(context, request->onic(), std::move(command));
      if (!link.ok()) return ToGrpcStatus(link.status());
      *response->add_ports() = std::move(*link);
    }
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Drain(grpc::CallbackServerContext* context,
                                                  const v1::DrainRequest* request,
                                                  v1::DrainResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Durable(*store_, Assign(engine_->Drain(*request, Caller(*context, "Drain")), response));
  });
}

grpc::ServerUnaryReactor* AdminServiceImpl::ReplaceMember(grpc::CallbackServerContext* context,
                                                          const v1::ReplaceMemberRequest* request,
                                                          v1::ReplaceMemberResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Durable(
        *store_,
        Assign(engine_->ReplaceMember(*request, Caller(*context, "ReplaceMember")), response),
        request->dry_run());
  });
}

grpc::ServerUnaryReactor* AdminServiceImpl::SetDeviceHealth(
    grpc::CallbackServerContext* context, const v1::SetDeviceHealthRequest* request,
    v1::Device* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Durable(
        *store_,
        Assign(engine_->SetDeviceHealth(*request, Caller(*context, "SetDeviceHealth")), response));
  });
}

grpc::ServerUnaryReactor* AdminServiceImpl::WhatIfFail(grpc::CallbackServerContext* context,
                                                       const v1::WhatIfFailRequest* request,
                                                       v1::WhatIfFailResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Assign(engine_->WhatIfFail(*request, Caller(*context, "WhatIfFail")), response);
  });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Undrain(grpc::CallbackServerContext* context,
                                                    const v1::UndrainRequest* request,
                                                    v1::UndrainResponse*) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Durable(*store_, ToGrpcStatus(engine_->Undrain(*request, Caller(*context, "Undrain"))));
  });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Reconcile(grpc::CallbackServerContext* context,
                                                      const v1::ReconcileRequest* request,
                                                      v1::ReconcileResponse* response) {
  return rpcs_->Serve(context, [=, this]() -> grpc::Status {
    return Durable(*store_,
                   Assign(engine_->Reconcile(*request, Caller(*context, "Reconcile")), response),
                   request->dry_run());
  });
}

grpc::ServerWriteReactor<v1::Event>* AdminServiceImpl::WatchEvents(
    grpc::CallbackServerContext* context, const v1::WatchEventsRequest* request) {
  absl::StatusOr<EventVisibility> visibility =
      EventVisibility::For(Caller(*context, "WatchEvents"), *store_, request->object_kind());
  if (!visibility.ok()) return WatchHub::Refuse<v1::Event>(ToGrpcStatus(visibility.status()));
  std::string kind = visibility->object_kind();  // Before `visibility` moves into the filter.
  return watches_->Open<v1::Event>(
      FollowEvents(store_, request->after_sequence(), std::move(kind), request->object_id(),
                   [visibility = *std::move(visibility)](const v1::Event& e) mutable {
                     return visibility.Visible(e);
                   }));
}

}  // namespace fleet::service
