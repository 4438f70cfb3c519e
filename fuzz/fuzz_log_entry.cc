// libFuzzer target: a replicated log entry as a follower applies it (ApplyLogEntry,
// controller/store/changesets.h), to a store at the current schema. Any bytes must be applied
// or refused with a message, never crash or hang; a refused entry leaves the store's position
// where it was, and an applied one moves it in the same transaction.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/strings/string_view.h"
#include "controller/store/changesets.h"
#include "controller/store/migrations.h"
#include "controller/store/sqlite.h"

namespace {

void Check(bool invariant) {
  if (!invariant) std::abort();
}

// One store for the run: entries that apply accumulate, as on a follower.
fleet::store::Database& Store() {
  static fleet::store::Database* db = [] {
    absl::StatusOr<std::unique_ptr<fleet::store::Database>> opened =
        fleet::store::Database::Open(":memory:");
    Check(opened.ok() && fleet::store::Migrate(**opened, fleet::store::Migrations()).ok());
    return opened->release();
  }();
  return *db;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fleet::store::Database& db = Store();
  absl::StatusOr<uint64_t> before = fleet::store::AppliedEntry(db);
  Check(before.ok());
  absl::Status applied =
      fleet::store::ApplyLogEntry(db, absl::string_view(reinterpret_cast<const char*>(data), size),
                                  [&] { return fleet::store::SetAppliedEntry(db, *before + 1); });
  Check(applied.ok() || !applied.message().empty());
  absl::StatusOr<uint64_t> after = fleet::store::AppliedEntry(db);
  Check(after.ok() && *after == (applied.ok() ? *before + 1 : *before));
  return 0;
}
