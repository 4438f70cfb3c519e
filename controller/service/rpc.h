// What every fleet.v1 service does to answer an RPC: convert absl::Status to grpc::Status in
// one place (ToGrpcStatus), check required names, and make a change durable before answering
// it.
#ifndef FLEET_CONTROLLER_SERVICE_RPC_H_
#define FLEET_CONTROLLER_SERVICE_RPC_H_

#include <google/protobuf/repeated_ptr_field.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/grpc_status.h"
#include "controller/engine/engine.h"
#include "controller/store/storage_control.h"

namespace fleet::service {

// Copies a StatusOr<vector<T>> into a repeated field, or returns the error.
template <typename T>
grpc::Status Fill(absl::StatusOr<std::vector<T>> items,
                  google::protobuf::RepeatedPtrField<T>* out) {
  if (!items.ok()) return ToGrpcStatus(items.status());
  for (T& item : *items) *out->Add() = std::move(item);
  return grpc::Status::OK;
}

// Moves a StatusOr<T> into `out`, or returns the error.
template <typename T>
grpc::Status Assign(absl::StatusOr<T> item, T* out) {
  if (!item.ok()) return ToGrpcStatus(item.status());
  *out = std::move(*item);
  return grpc::Status::OK;
}

// INVALID_ARGUMENT "FIELD is empty" when `value` is.
grpc::Status RequireName(const std::string& value, absl::string_view field);

// A change is answered only once what it committed is durable (Store::Sync), so what a
// client was told is done survives a power loss of the host, not only a crash of fleetd. A
// refusal is synced too: a change may have committed part of its work before it failed. A
// dry run commits nothing and is not synced; a phase switch that changes no circuit and
// starts no transaction is not either (TopologyServiceImpl::ActivatePhase).
grpc::Status Durable(store::StorageControl& store, grpc::Status answer, bool dry_run = false);

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_RPC_H_
