// Numbered schema migrations. The database's `PRAGMA user_version` is the number of the
// last migration applied. Migrations are append-only: a released one is never edited.
#ifndef FLEET_CONTROLLER_STORE_MIGRATIONS_H_
#define FLEET_CONTROLLER_STORE_MIGRATIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "controller/store/sqlite.h"

namespace fleet::store {

struct Migration {
  int version;
  std::string name;
  std::string sql;
};

// The project's migrations, in order; versions are 1, 2, 3, ….
const std::vector<Migration>& Migrations();

// Applies every migration newer than the database's version, each in its own transaction.
// A database from a newer fleetd (version above the last known migration) is refused with
// FAILED_PRECONDITION and left untouched.
absl::Status Migrate(Database& db, const std::vector<Migration>& migrations);

absl::StatusOr<int> SchemaVersion(Database& db);

// FAILED_PRECONDITION, naming both versions, when the database was written by a newer
// fleetd than `migrations` know. Reads only.
absl::Status CheckNotNewer(Database& db, const std::vector<Migration>& migrations);

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_MIGRATIONS_H_
