#include "controller/store/pruning.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fleet::store {
namespace {

// Rows older than this (microseconds since the epoch) are past `limits.max_age`; with no age
// limit, none is.
int64_t AgeCutMicros(const RetentionLimits& limits, absl::Time now) {
  if (limits.max_age <= absl::ZeroDuration()) return std::numeric_limits<int64_t>::min();
  return absl::ToUnixMicros(now - limits.max_age);
}

absl::StatusOr<int64_t> One(Database& db, absl::string_view sql) {
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(sql));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::InternalError(absl::StrCat(sql, " returned no row"));
  return stmt.Int(0);
}

}  // namespace

absl::StatusOr<int64_t> PruneEventBatch(Database& db, const RetentionLimits& limits, absl::Time now,
                                        int max_rows) {
  if (max_rows < 1) return int64_t{0};
  ASSIGN_OR_RETURN(const int64_t newest, One(db, "SELECT COALESCE(MAX(sequence), 0) FROM events"));
  if (newest == 0) return int64_t{0};
  // Sequences have no gaps (AUTOINCREMENT, and a rolled-back append takes its number back),
  // so the newest `max_count` events are those from newest - max_count + 1 on.
  const int64_t count_cut = limits.max_count > 0 ? newest - limits.max_count + 1 : 0;
  const int64_t age_cut = AgeCutMicros(limits, now);
  // The oldest events of the log, walked while each is past retention: the log is cut from
  // its oldest end only, so an event a clock step back made look older than one before it
  // waits for that one.
  int64_t below = 0;
  {
    ASSIGN_OR_RETURN(Statement oldest,
                     db.Prepare("SELECT sequence, time_us FROM events WHERE sequence < ?1 "
                                "ORDER BY sequence LIMIT ?2"));
    oldest.Bind(1, newest).Bind(2, int64_t{max_rows});
    while (true) {
      ASSIGN_OR_RETURN(bool row, oldest.Step());
      if (!row) break;
      const int64_t sequence = oldest.Int(0);
      if (sequence >= count_cut && oldest.Int(1) >= age_cut) break;
      below = sequence + 1;
    }
  }
  if (below == 0) return int64_t{0};
  // The cut-off first: the trigger on `events` refuses any deletion at or above it.
  ASSIGN_OR_RETURN(Statement raise, db.Prepare("UPDATE event_retention SET prune_below = ?1 "
                                               "WHERE id = 1 AND prune_below < ?1"));
  RETURN_IF_ERROR(raise.Bind(1, below).Run());
  ASSIGN_OR_RETURN(Statement prune, db.Prepare("DELETE FROM events WHERE sequence < ?1"));
  RETURN_IF_ERROR(prune.Bind(1, below).Run());
  return db.Changes();
}

absl::StatusOr<int64_t> PruneAllocationBatch(Database& db, const RetentionLimits& limits,
                                             absl::Time now, int max_rows) {
  if (max_rows < 1) return int64_t{0};
  int64_t excess = 0;  // Ended allocations beyond the count kept, oldest first.
  if (limits.max_count > 0) {
    ASSIGN_OR_RETURN(const int64_t ended, One(db,
                                              "SELECT COUNT(*) FROM allocations "
                                              "WHERE state IN ('released', 'failed')"));
    excess = std::max<int64_t>(0, ended - limits.max_count);
  }
  const int64_t age_cut = AgeCutMicros(limits, now);
  if (excess == 0 && limits.max_age <= absl::ZeroDuration()) return int64_t{0};
  // Oldest end first. One that still holds circuits or pending removals is state, not
  // history: the switch may hold its cross-connects, and the engine clears them.
  std::vector<std::string> doomed;
  {
    ASSIGN_OR_RETURN(Statement oldest, db.Prepare(R"sql(
      SELECT id, updated_us FROM allocations a
      WHERE state IN ('released', 'failed')
        AND NOT EXISTS (SELECT 1 FROM circuits c WHERE c.allocation_id = a.id)
        AND NOT EXISTS (SELECT 1 FROM pending_removals p WHERE p.allocation_id = a.id)
      ORDER BY updated_us, id LIMIT ?1)sql"));
    oldest.Bind(1, int64_t{max_rows});
    while (true) {
      ASSIGN_OR_RETURN(bool row, oldest.Step());
      if (!row) break;
      if (static_cast<int64_t>(doomed.size()) >= excess && oldest.Int(1) >= age_cut) break;
      doomed.push_back(oldest.Text(0));
    }
  }
  ASSIGN_OR_RETURN(Statement prune, db.Prepare("DELETE FROM allocations WHERE id = ?1 "
                                               "AND state IN ('released', 'failed')"));
  int64_t pruned = 0;
  for (const std::string& id : doomed) {
    RETURN_IF_ERROR(prune.Bind(1, id).Run());
    pruned += db.Changes();
    prune.Reset();
  }
  return pruned;
}

}  // namespace fleet::store
