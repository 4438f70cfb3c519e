// Small queries and conversions the parts of the SQLite store share. Each runs on the caller's
// connection, inside the caller's transaction when there is one.
#ifndef FLEET_CONTROLLER_STORE_QUERIES_H_
#define FLEET_CONTROLLER_STORE_QUERIES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "controller/store/sqlite.h"
#include "fleet/v1/names.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::store {

// An enum stored in its text form; 0 (unspecified) for a text it does not know.
template <typename E>
E ParseColumn(const std::string& text) {
  return v1::Parse<E>(text).value_or(static_cast<E>(0));
}

// Runs `sql` with `arg` bound to ?1.
absl::Status RunWith(Database& db, absl::string_view sql, const std::string& arg);

// NOT_FOUND "`kind` `name` not found" unless `sql`, with `name` bound to ?1, returns a row.
absl::Status RequireExists(Database& db, absl::string_view sql, const std::string& kind,
                           const std::string& name);

// Runs `sql` with `arg`; if it returns a row, fails with `before` + first column + `after`.
absl::Status RefuseIfAny(Database& db, absl::string_view sql, const std::string& arg,
                         const std::string& before, const std::string& after,
                         absl::StatusCode code = absl::StatusCode::kFailedPrecondition);

// The (switch_id, ingress, egress) rows `sql` selects with `arg` bound to ?1.
absl::StatusOr<std::vector<v1::CrossConnect>> SelectCrossConnects(Database& db,
                                                                  absl::string_view sql,
                                                                  const std::string& arg);

// The sequence of the newest event in `db`, 0 when the log is empty.
absl::StatusOr<uint64_t> NewestEventSequence(Database& db);

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_QUERIES_H_
