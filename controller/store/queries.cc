#include "controller/store/queries.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fleet::store {

absl::Status RunWith(Database& db, absl::string_view sql, const std::string& arg) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(sql));
  return stmt.Bind(1, arg).Run();
}

absl::Status RequireExists(Database& db, absl::string_view sql, const std::string& kind,
                           const std::string& name) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(sql));
  ASSIGN_OR_RETURN(bool row, stmt.Bind(1, name).Step());
  if (!row) return absl::NotFoundError(absl::StrCat(kind, " ", name, " not found"));
  return absl::OkStatus();
}

absl::Status RefuseIfAny(Database& db, absl::string_view sql, const std::string& arg,
                         const std::string& before, const std::string& after,
                         absl::StatusCode code) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(sql));
  ASSIGN_OR_RETURN(bool row, stmt.Bind(1, arg).Step());
  if (!row) return absl::OkStatus();
  return absl::Status(code, absl::StrCat(before, stmt.Text(0), after));
}

absl::StatusOr<std::vector<v1::CrossConnect>> SelectCrossConnects(Database& db,
                                                                  absl::string_view sql,
                                                                  const std::string& arg) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(sql));
  stmt.Bind(1, arg);
  std::vector<v1::CrossConnect> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    v1::CrossConnect& x = out.emplace_back();
    x.set_switch_id(stmt.Text(0));
    x.set_ingress(static_cast<uint32_t>(stmt.Int(1)));
    x.set_egress(static_cast<uint32_t>(stmt.Int(2)));
  }
  return out;
}

absl::StatusOr<uint64_t> NewestEventSequence(Database& db) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare("SELECT COALESCE(MAX(sequence), 0) FROM events"));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::InternalError("reading the newest event sequence returned no row");
  return static_cast<uint64_t>(stmt.Int(0));
}

}  // namespace fleet::store
