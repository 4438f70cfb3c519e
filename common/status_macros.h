// Early-return helpers for absl::Status / absl::StatusOr<T>. The only macros the project
// uses for error flow.
#ifndef FLEET_COMMON_STATUS_MACROS_H_
#define FLEET_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define FLEET_STATUS_CONCAT_INNER_(a, b) a##b
#define FLEET_STATUS_CONCAT_(a, b) FLEET_STATUS_CONCAT_INNER_(a, b)

// RETURN_IF_ERROR(expr): returns the status of `expr` from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::absl::Status fleet_status_ = (expr);         \
    if (!fleet_status_.ok()) return fleet_status_; \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): evaluates the StatusOr `expr`; on error returns its status,
// otherwise moves the value into `lhs` (which may be a declaration).
#define ASSIGN_OR_RETURN(lhs, expr) \
  FLEET_ASSIGN_OR_RETURN_IMPL_(FLEET_STATUS_CONCAT_(fleet_statusor_, __LINE__), lhs, expr)

#define FLEET_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                 \
  if (!statusor.ok()) return statusor.status();           \
  lhs = std::move(statusor).value()

#endif  // FLEET_COMMON_STATUS_MACROS_H_
