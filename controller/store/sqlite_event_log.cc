// The SQLite implementation of EventLog (controller/store/event_log.h).
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "controller/store/queries.h"
#include "controller/store/sqlite_aggregates.h"

namespace fleet::store {
namespace {

class SqliteEventLog final : public EventLog {
 public:
  explicit SqliteEventLog(StoreConnection& connection) : connection_(connection) {}

  absl::Status AppendEvent(const v1::Event& event) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Transaction txn, connection_.Begin());
    RETURN_IF_ERROR(connection_.AppendEvent(event.kind(), event.object_kind(), event.object_id(),
                                            event.severity(), event.message(), event.principal()));
    if (event.object_kind() == "allocation" && !event.object_id().empty()) {
      // Its commit carries the allocation, as every allocation commit does, when it exists.
      RETURN_IF_ERROR(connection_.KeepImage(event.object_id()).status());
    }
    return connection_.Commit(txn);
  }

  absl::StatusOr<std::vector<v1::Event>> ListEvents(const EventFilter& filter) override {
    absl::MutexLock lock(&connection_.mu());
    ASSIGN_OR_RETURN(Statement stmt, connection_.db().Prepare(R"sql(
      SELECT sequence, time_us, principal, kind, object_kind, object_id, severity, message
      FROM events
      WHERE sequence > ?1 AND (?2 = '' OR object_kind = ?2) AND (?3 = '' OR object_id = ?3)
      ORDER BY sequence LIMIT ?4)sql"));
    stmt.Bind(1, static_cast<int64_t>(filter.after_sequence))
        .Bind(2, filter.object_kind)
        .Bind(3, filter.object_id)
        .Bind(4, static_cast<int64_t>(filter.limit == 0 ? 1000 : filter.limit));
    std::vector<v1::Event> events;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      v1::Event& e = events.emplace_back();
      e.set_sequence(static_cast<uint64_t>(stmt.Int(0)));
      *e.mutable_time() = ToProtoTime(absl::FromUnixMicros(stmt.Int(1)));
      e.set_principal(stmt.Text(2));
      e.set_kind(stmt.Text(3));
      e.set_object_kind(stmt.Text(4));
      e.set_object_id(stmt.Text(5));
      e.set_severity(ParseColumn<v1::EventSeverity>(stmt.Text(6)));
      e.set_message(stmt.Text(7));
    }
    return events;
  }

 private:
  StoreConnection& connection_;
};

}  // namespace

std::unique_ptr<EventLog> NewSqliteEventLog(StoreConnection& connection) {
  return std::make_unique<SqliteEventLog>(connection);
}

}  // namespace fleet::store
