#include "controller/etcd/replicated_log.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fleet::etcd {
namespace {

std::string Seq(uint64_t seq) { return absl::StrFormat("%020d", seq); }
std::string Part(size_t part) { return absl::StrFormat("%04d", part); }

etcdserverpb::RequestOp RangeOp(const std::string& key, const std::string& end = "",
                                int64_t limit = 0) {
  etcdserverpb::RequestOp op;
  etcdserverpb::RangeRequest* range = op.mutable_request_range();
  range->set_key(key);
  range->set_range_end(end);
  range->set_limit(limit);
  return op;
}

etcdserverpb::RequestOp PutOp(const std::string& key, const std::string& value) {
  etcdserverpb::RequestOp op;
  op.mutable_request_put()->set_key(key);
  op.mutable_request_put()->set_value(value);
  return op;
}

etcdserverpb::RequestOp DeleteOp(const std::string& key, const std::string& end) {
  etcdserverpb::RequestOp op;
  op.mutable_request_delete_range()->set_key(key);
  op.mutable_request_delete_range()->set_range_end(end);
  return op;
}

etcdserverpb::Compare ValueIs(const std::string& key, const std::string& value) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::VALUE);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_value(value);
  return compare;
}

// A number kept as a key's value; `absent` when the range found no key.
absl::StatusOr<uint64_t> NumberIn(const etcdserverpb::ResponseOp& op, uint64_t absent) {
  const auto& kvs = op.response_range().kvs();
  if (kvs.empty()) return absent;
  uint64_t value = 0;
  if (!absl::SimpleAtoi(kvs[0].value(), &value)) {
    return absl::DataLossError(absl::StrCat("replicated log: key ", kvs[0].key(), " holds '",
                                            kvs[0].value(), "', not a sequence number"));
  }
  return value;
}

// The key's sequence number and part, from ".../<seq>/<part>".
bool ParsePartKey(const std::string& key, size_t prefix_size, uint64_t* seq, size_t* part) {
  if (key.size() != prefix_size + 20 + 1 + 4) return false;
  return absl::SimpleAtoi(key.substr(prefix_size, 20), seq) &&
         absl::SimpleAtoi(key.substr(prefix_size + 21), part);
}

absl::Status NotLeader(const std::string& what) {
  return absl::FailedPreconditionError(
      absl::StrCat("replicated log: ", what, ": refused, this replica does not lead"));
}

}  // namespace

ReplicatedLog::ReplicatedLog(EtcdClient* client, LogOptions options)
    : client_(client), options_(std::move(options)) {}

absl::StatusOr<LogBounds> ReplicatedLog::Bounds() {
  etcdserverpb::TxnRequest txn;
  *txn.add_success() = RangeOp(Key("first"));
  *txn.add_success() = RangeOp(Key("head"));
  *txn.add_success() = RangeOp(Key("snapshot/current"));
  absl::StatusOr<etcdserverpb::TxnResponse> response = client_->Txn(txn);
  if (!response.ok()) return response.status();
  LogBounds bounds;
  absl::StatusOr<uint64_t> first = NumberIn(response->responses(0), 1);
  absl::StatusOr<uint64_t> head = NumberIn(response->responses(1), 0);
  absl::StatusOr<uint64_t> snapshot = NumberIn(response->responses(2), 0);
  for (const auto* n : {&first, &head, &snapshot}) {
    if (!n->ok()) return n->status();
  }
  return LogBounds{*first, *head, *snapshot};
}

absl::Status ReplicatedLog::Append(const etcdserverpb::Compare& fence, uint64_t seq,
                                   const std::string& bytes) {
  if (seq == 0) {
    return absl::InvalidArgumentError("replicated log: Append: seq 0; entries start at 1");
  }
  const std::string entry = Key(absl::StrCat("e/", Seq(seq), "/"));
  const size_t part_bytes = options_.part_bytes;
  const size_t parts = std::max<size_t>(1, (bytes.size() + part_bytes - 1) / part_bytes);
  // Every part is written only while this replica leads and the entry is still the next one,
  // so a committed entry is never touched. The first part's Txn clears whatever else lies
  // under the entry's key (parts of a try by an earlier leader, deposed mid-append), and the
  // last moves the head.
  for (size_t k = 0; k < parts; ++k) {
    etcdserverpb::TxnRequest txn;
    *txn.add_compare() = fence;
    *txn.add_compare() =
        seq == 1 ? CreateRevisionIs(Key("head"), 0) : ValueIs(Key("head"), Seq(seq - 1));
    if (k == 0) *txn.add_success() = DeleteOp(entry + Part(1), PrefixEnd(entry));
    *txn.add_success() = PutOp(entry + Part(k), bytes.substr(k * part_bytes, part_bytes));
    if (k + 1 == parts) *txn.add_success() = PutOp(Key("head"), Seq(seq));
    *txn.add_failure() = RangeOp(Key("head"));
    *txn.add_failure() = RangeOp(entry, PrefixEnd(entry));
    absl::StatusOr<etcdserverpb::TxnResponse> response = client_->Txn(txn);
    if (!response.ok()) return response.status();
    if (!response->succeeded()) return Refused(seq, bytes, *response);
  }
  return absl::OkStatus();
}

absl::Status ReplicatedLog::Refused(uint64_t seq, const std::string& bytes,
                                    const etcdserverpb::TxnResponse& response) {
  absl::StatusOr<uint64_t> head = NumberIn(response.responses(0), 0);
  if (!head.ok()) return head.status();
  if (*head >= seq) {
    // In the log already: by an earlier try of this call whose answer was lost (this replica
    // may have stopped leading since), or by another leader.
    const auto& kvs = response.responses(1).response_range().kvs();
    if (kvs.empty()) {
      return absl::AbortedError(absl::StrCat("replicated log: Append ", seq, ": entry ", seq,
                                             " was trimmed; whether it holds these bytes "
                                             "cannot be told"));
    }
    std::string stored;
    for (const mvccpb::KeyValue& kv : kvs) stored += kv.value();
    if (stored == bytes) return absl::OkStatus();
    return absl::AlreadyExistsError(
        absl::StrCat("replicated log: Append ", seq, ": refused, entry ", seq,
                     " was appended with other bytes (the log's head is ", *head, ")"));
  }
  if (*head + 1 != seq) {
    return absl::FailedPreconditionError(absl::StrCat("replicated log: Append ", seq,
                                                      ": refused, the log's head is ", *head,
                                                      ", so the next entry is ", *head + 1));
  }
  return NotLeader(absl::StrCat("Append ", seq));
}

absl::StatusOr<std::vector<LogEntry>> ReplicatedLog::Read(uint64_t from, size_t max_bytes) {
  from = std::max<uint64_t>(from, 1);
  const size_t prefix_size = Key("e/").size();
  std::vector<LogEntry> entries;
  size_t total = 0;
  // Every part of an entry up to head was written before head moved to it, so the entry being
  // gathered is whole once a key of another entry follows, or the range ends.
  LogEntry gathering;
  size_t next_part = 0;
  // Adds the gathered entry unless it would take a non-empty answer past the budget.
  auto finish_gathering = [&]() -> bool {
    if (!entries.empty() && total + gathering.bytes.size() > max_bytes) return false;
    total += gathering.bytes.size();
    entries.push_back(std::move(gathering));
    gathering = LogEntry{};
    return true;
  };
  std::string start = Key(absl::StrCat("e/", Seq(from), "/"));
  while (true) {
    etcdserverpb::TxnRequest txn;
    *txn.add_success() = RangeOp(Key("first"));
    *txn.add_success() = RangeOp(Key("head"));
    // Parts of several entries at a time: ranges are answered whole, so a bounded count keeps
    // one answer's size bounded (read_round_parts parts of at most part_bytes).
    *txn.add_success() = RangeOp(start, PrefixEnd(Key("e/")), options_.read_round_parts);
    absl::StatusOr<etcdserverpb::TxnResponse> response = client_->Txn(txn);
    if (!response.ok()) return response.status();
    absl::StatusOr<uint64_t> first = NumberIn(response->responses(0), 1);
    absl::StatusOr<uint64_t> head = NumberIn(response->responses(1), 0);
    if (!first.ok()) return first.status();
    if (!head.ok()) return head.status();
    const uint64_t wanted = gathering.seq != 0 ? gathering.seq : from + entries.size();
    if (wanted < *first) {
      if (!entries.empty()) return entries;  // Trimmed meanwhile: these are whole still.
      return absl::OutOfRangeError(absl::StrCat("replicated log: entry ", wanted,
                                                " was trimmed; the first kept is ", *first,
                                                ": catch up from the snapshot"));
    }
    const auto& range = response->responses(2).response_range();
    for (const mvccpb::KeyValue& kv : range.kvs()) {
      uint64_t seq = 0;
      size_t part = 0;
      if (!ParsePartKey(kv.key(), prefix_size, &seq, &part)) {
        return absl::DataLossError(absl::StrCat("replicated log: unexpected key ", kv.key()));
      }
      if (seq != gathering.seq) {
        if (gathering.seq != 0 && (!finish_gathering() || total >= max_bytes)) return entries;
        if (seq > *head) {  // Being appended: not in the log yet.
          if (entries.empty() && from <= *head) {
            return absl::DataLossError(
                absl::StrCat("replicated log: entry ", from, " is missing (head is ", *head, ")"));
          }
          return entries;
        }
        const uint64_t due = from + entries.size();
        if (seq != due || part != 0) {
          return absl::DataLossError(
              absl::StrCat("replicated log: found ", kv.key(), " where entry ", due, " was due"));
        }
        gathering.seq = seq;
        next_part = 0;
      } else if (part != next_part) {
        return absl::DataLossError(absl::StrCat("replicated log: found ", kv.key(), " where part ",
                                                next_part, " of entry ", seq, " was due"));
      }
      gathering.bytes += kv.value();
      ++next_part;
    }
    if (!range.more()) {
      if (gathering.seq != 0) finish_gathering();  // Over the budget: left for the next Read.
      if (entries.empty() && from <= *head) {
        return absl::DataLossError(
            absl::StrCat("replicated log: entry ", from, " is missing (head is ", *head, ")"));
      }
      return entries;
    }
    start = range.kvs(range.kvs_size() - 1).key() + std::string(1, '\0');
  }
}

absl::Status ReplicatedLog::PutSnapshot(const etcdserverpb::Compare& fence,
                                        const Snapshot& snapshot) {
  absl::StatusOr<LogBounds> bounds = Bounds();
  if (!bounds.ok()) return bounds.status();
  if (snapshot.seq == 0 || snapshot.seq > bounds->head) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicated log: PutSnapshot: seq ", snapshot.seq,
                     " is not an entry of the log (its head is ", bounds->head, ")"));
  }
  if (snapshot.seq == bounds->snapshot) {
    // Stored already, by an earlier try whose answer was lost, if the bytes are the same.
    absl::StatusOr<Snapshot> stored = ReadSnapshot();
    if (stored.ok() && stored->seq == snapshot.seq && stored->bytes == snapshot.bytes) {
      return absl::OkStatus();
    }
  }
  if (snapshot.seq <= bounds->snapshot) {
    return absl::FailedPreconditionError(
        absl::StrCat("replicated log: PutSnapshot: seq ", snapshot.seq,
                     " is not newer than the snapshot at ", bounds->snapshot));
  }
  const std::string dir = Key(absl::StrCat("snapshot/", Seq(snapshot.seq), "/"));
  const size_t part_bytes = options_.part_bytes;
  const size_t parts = std::max<size_t>(1, (snapshot.bytes.size() + part_bytes - 1) / part_bytes);
  // Each part only over the snapshot read above. The first clears what an earlier, failed try
  // left under this one's key; the last makes it current and deletes every other snapshot's
  // parts (those of failed tries at other sequence numbers too). "current" sorts after the
  // digits, so the two ranges around this snapshot's parts hold only other snapshots.
  for (size_t k = 0; k < parts; ++k) {
    etcdserverpb::TxnRequest txn;
    *txn.add_compare() = fence;
    *txn.add_compare() = bounds->snapshot == 0
                             ? CreateRevisionIs(Key("snapshot/current"), 0)
                             : ValueIs(Key("snapshot/current"), Seq(bounds->snapshot));
    if (k == 0) *txn.add_success() = DeleteOp(dir + Part(1), PrefixEnd(dir));
    *txn.add_success() = PutOp(dir + Part(k), snapshot.bytes.substr(k * part_bytes, part_bytes));
    if (k + 1 == parts) {
      *txn.add_success() = PutOp(Key("snapshot/current"), Seq(snapshot.seq));
      *txn.add_success() = DeleteOp(Key("snapshot/"), dir);
      *txn.add_success() = DeleteOp(PrefixEnd(dir), Key("snapshot/current"));
    }
    absl::StatusOr<etcdserverpb::TxnResponse> response = client_->Txn(txn);
    if (!response.ok()) return response.status();
    if (!response->succeeded()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "replicated log: PutSnapshot ", snapshot.seq,
          ": refused, this replica does not lead or another snapshot was stored meanwhile"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Snapshot> ReplicatedLog::ReadSnapshot() {
  // A newer snapshot may replace (and delete) the one named between the two reads: read again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<LogBounds> bounds = Bounds();
    if (!bounds.ok()) return bounds.status();
    if (bounds->snapshot == 0) {
      return absl::NotFoundError("replicated log: no snapshot was ever taken");
    }
    const std::string dir = Key(absl::StrCat("snapshot/", Seq(bounds->snapshot), "/"));
    absl::StatusOr<std::vector<mvccpb::KeyValue>> parts = client_->GetPrefix(dir);
    if (!parts.ok()) return parts.status();
    if (parts->empty()) continue;
    Snapshot snapshot{bounds->snapshot, ""};
    for (size_t k = 0; k < parts->size(); ++k) {
      if ((*parts)[k].key() != dir + Part(k)) {
        return absl::DataLossError(
            absl::StrCat("replicated log: snapshot ", bounds->snapshot, " lacks part ", k));
      }
      snapshot.bytes += (*parts)[k].value();
    }
    return snapshot;
  }
  return absl::UnavailableError("replicated log: snapshots replaced faster than one is read");
}

absl::Status ReplicatedLog::Trim(const etcdserverpb::Compare& fence, uint64_t through) {
  absl::StatusOr<LogBounds> bounds = Bounds();
  if (!bounds.ok()) return bounds.status();
  if (through > bounds->snapshot) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replicated log: Trim through ", through, ": refused, past the newest snapshot (",
        bounds->snapshot, "); a reader behind could not catch up"));
  }
  int64_t revision = 0;  // The trim's: etcd's history is compacted up to it.
  if (through < bounds->first) {
    // Trimmed that far already; its compaction may have failed, so it is asked again (a
    // compaction already done is answered OK).
    absl::StatusOr<mvccpb::KeyValue> first = client_->Get(Key("first"));
    if (absl::IsNotFound(first.status())) return absl::OkStatus();  // Never trimmed.
    if (!first.ok()) return first.status();
    revision = first->mod_revision();
  } else {
    etcdserverpb::TxnRequest txn;
    *txn.add_compare() = fence;
    *txn.add_success() = DeleteOp(Key("e/"), Key(absl::StrCat("e/", Seq(through + 1), "/")));
    *txn.add_success() = PutOp(Key("first"), Seq(through + 1));
    absl::StatusOr<etcdserverpb::TxnResponse> response = client_->Txn(txn);
    if (!response.ok()) return response.status();
    if (!response->succeeded()) return NotLeader(absl::StrCat("Trim through ", through));
    revision = response->header().revision();
  }
  absl::Status compacted = client_->Compact(revision);
  if (!compacted.ok()) {
    return absl::Status(compacted.code(), absl::StrCat("replicated log: trimmed through ", through,
                                                       ", but etcd's history was not compacted: ",
                                                       compacted.message()));
  }
  return absl::OkStatus();
}

}  // namespace fleet::etcd
