// Where a replicated store's changes go before they commit (docs/ha.md): the leader's store
// hands each write's changes, as a log entry (changesets.h, EncodeLogEntry: its schema
// version and changeset), to its commit log, which makes them durable beyond this machine
// (the replicated log on etcd) before the write commits.
#ifndef FLEET_CONTROLLER_STORE_COMMIT_LOG_H_
#define FLEET_CONTROLLER_STORE_COMMIT_LOG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace fleet::store {

class CommitLog {
 public:
  virtual ~CommitLog() = default;

  // Called by StoreConnection::Commit under the store's connection lock, after the commit
  // point passed and just before SQLite's COMMIT, with a write's entry (its changeset never
  // empty) and the entry's number: one more than the store's position (AppliedEntry). OK means the
  // change is durable in the log as that entry: the store records its new position in the same
  // transaction and commits. An error rolls the write back and is its caller's answer. An
  // implementation that cannot tell whether the entry went in must not answer until it can,
  // or else must close this replica's commit point first: an entry answered as failed that
  // is in the log after all is applied by every replica, this one included, only once it
  // catches up from the log.
  virtual absl::Status Append(uint64_t entry, const std::string& bytes) = 0;
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_COMMIT_LOG_H_
