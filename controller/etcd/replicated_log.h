// The replicated log of fleetd's committed store changes, kept in etcd (docs/ha.md). The
// leader appends one entry per committed store transaction; every replica (the leader after a
// takeover too) reads the entries in order and applies them to its own SQLite. An entry is
// opaque bytes to the log (its writer's schema version and a SQLite session changeset, to the
// store: controller/store/changesets.h).
//
// Layout under the prefix (default "fleet/log/"):
//   head                the sequence number of the last complete entry ("%020d"); absent: 0
//   first               the first sequence number still kept, after a trim; absent: 1
//   e/<seq>/<part>      an entry, in parts of at most part_bytes ("%020d/%04d")
//   snapshot/current    the sequence number the newest snapshot was taken at
//   snapshot/<seq>/<part>  that snapshot's bytes, in parts
//
// Contract:
// - Every write is one etcd Txn that holds only under `fence` (LeaderElection::StillLeading):
//   a replica that no longer leads writes nothing, and is told FAILED_PRECONDITION "does not
//   lead". Every part of an entry is written only while `head` is the entry before it, so an
//   entry in the log is never touched again; the first part's Txn clears what an earlier
//   leader's unfinished try left under the entry's key, and the last part's Txn moves `head`
//   to the entry: two writers can never both append the same sequence number, and a reader
//   never sees a partial entry, a stale part or a gap.
// - Append is safe to repeat: a Txn refused because `head` is already at or past its entry
//   reads back whether that entry holds these bytes (also after this replica stopped
//   leading). Outcomes: OK (in the log, once); FAILED_PRECONDITION (not appended: this
//   replica does not lead, or the entry is past the head); ALREADY_EXISTS (not appended:
//   that sequence number holds other bytes, so the caller is behind the log); ABORTED (the
//   entry was trimmed before it could be compared: only a caller that trimmed past its own
//   unresolved append sees it); or an error of etcd, after which the entry may or may not be
//   in the log (an answer lost after etcd applied it, or a request still in flight). After
//   such an error the caller makes the same call again (same seq, same bytes) until it is
//   answered otherwise, before it appends anything else or treats the change as failed; a
//   caller that gives up must stop leading, and whoever leads next applies what the log holds.
// - Entries are read in order, and a reader that asks for entries already trimmed is told
//   OUT_OF_RANGE naming the first kept: it catches up from the snapshot, then from the entry
//   after it.
// - Trim deletes the entries up to a sequence number (never past the newest snapshot, so a
//   reader can always catch up) and compacts etcd's history up to that point, so etcd's space
//   stays bounded while fleetd runs.
// - Thread-compatible: the leader appends from one thread at a time; readers may read from
//   any thread (reads change nothing).
#ifndef FLEET_CONTROLLER_ETCD_REPLICATED_LOG_H_
#define FLEET_CONTROLLER_ETCD_REPLICATED_LOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/etcd/etcd_client.h"

namespace fleet::etcd {

struct LogEntry {
  uint64_t seq = 0;
  std::string bytes;
};

struct Snapshot {
  uint64_t seq = 0;  // The state after applying every entry up to and including seq.
  std::string bytes;
};

// Where the log stands.
struct LogBounds {
  uint64_t first = 1;     // The first entry still kept.
  uint64_t head = 0;      // The last entry appended (0: none yet).
  uint64_t snapshot = 0;  // The newest snapshot's sequence number (0: none).
};

struct LogOptions {
  std::string prefix = "fleet/log/";
  // Parts stay well under etcd's request limit (1.5 MiB by default), with room for the
  // Txn's compares and keys.
  size_t part_bytes = 1 << 20;
  // Parts read per round trip: bounds one answer to read_round_parts * part_bytes.
  int64_t read_round_parts = 64;
};

class ReplicatedLog {
 public:
  // `client` outlives this.
  explicit ReplicatedLog(EtcdClient* client, LogOptions options = {});

  absl::StatusOr<LogBounds> Bounds();

  // Appends `bytes` as entry `seq`, which must be Bounds().head + 1 when this leader took over
  // and one more than its last append after that. OK once it is in the log, as the contract
  // says. INVALID_ARGUMENT for seq 0.
  absl::Status Append(const etcdserverpb::Compare& fence, uint64_t seq, const std::string& bytes);

  // The complete entries from `from` on, in order, at most `max_bytes` of them in all, but at
  // least one entry, whatever its size, when there is one. Empty when `from` is past the
  // head. OUT_OF_RANGE naming the first kept entry when `from` was trimmed away (entries read
  // before a trim that came between two round trips are returned).
  absl::StatusOr<std::vector<LogEntry>> Read(uint64_t from, size_t max_bytes = 16 << 20);

  // Stores `snapshot` (the state after entry snapshot.seq, which must be in the log or
  // trimmed) as the newest, and deletes every other. OK when that very snapshot is stored
  // already (a try made again); FAILED_PRECONDITION when it is not newer than the newest.
  absl::Status PutSnapshot(const etcdserverpb::Compare& fence, const Snapshot& snapshot);
  // The newest snapshot; NOT_FOUND when none was ever taken.
  absl::StatusOr<Snapshot> ReadSnapshot();

  // Deletes the entries up to and including `through` (at most the newest snapshot's seq:
  // FAILED_PRECONDITION naming both otherwise), then compacts etcd's history to this point.
  // A trim that was done already compacts again (its compaction may have failed).
  absl::Status Trim(const etcdserverpb::Compare& fence, uint64_t through);

 private:
  std::string Key(const std::string& name) const { return options_.prefix + name; }
  // Why a Txn of Append(seq, bytes) was refused, from its failure ranges (head, the entry).
  absl::Status Refused(uint64_t seq, const std::string& bytes,
                       const etcdserverpb::TxnResponse& response);

  EtcdClient* client_;
  const LogOptions options_;
};

}  // namespace fleet::etcd

#endif  // FLEET_CONTROLLER_ETCD_REPLICATED_LOG_H_
