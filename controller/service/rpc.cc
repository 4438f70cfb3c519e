#include "controller/service/rpc.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace fleet::service {

grpc::Status RequireName(const std::string& value, absl::string_view field) {
  if (!value.empty()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat(field, " is empty"));
}

grpc::Status Durable(store::StorageControl& store, grpc::Status answer, bool dry_run) {
  if (dry_run) return answer;
  if (absl::Status synced = store.Sync(); !synced.ok()) {
    FLEET_LOG(ERROR) << "a change is committed but not durable: " << synced;
    if (answer.ok()) {
      return ToGrpcStatus(absl::Status(
          synced.code(),
          absl::StrCat("the change is stored but could not be made durable: ", synced.message())));
    }
  }
  return answer;
}

}  // namespace fleet::service
