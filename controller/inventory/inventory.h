// The inventory file: parsing, whole-site validation and planning an apply.
//
// File format (YAML; docs/inventory.md is the reference):
//
//   site: fleet-gen1
//   switches:
//     - id: ocs1
//       model: ocs-7000-384x384         # informational
//       size: 384x384                 # ingress 1..384, egress 385..768
//       address: 192.0.2.10
//       protocol: tl1                 # tl1 | rest
//       port: 3082                    # optional; 0 or absent = the protocol's default
//       credentials: /etc/fleet/credentials/ocs1   # a file reference, never the secret
//       cluster: gen1
//       trunk_reserved: ["289-384", "673-768"]     # ports or ranges kept for trunks/WAN
//       ca_bundle: /etc/fleet/ocs1-ca.pem   # rest only: CA of its HTTPS certificate
//       insecure_http: false                # rest only: plain HTTP (labs, the emulator)
//   hosts:
//     - {name: server1, address: 192.0.2.21, cluster: gen1}
//   devices:
//     - id: server1-cpu0
//       kind: cpu                     # cpu | gpu | nvme | fpga | other
//       host: server1                 # required for cpu; pooled devices use chassis
//       model: xeon-28c
//       onics:
//         - id: s1c0-n0
//           serial: FLT-S1C0-0
//           pcie: "0000:17:00.0"
//           ports:                    # exactly two: port 1 then port 2
//             - {tx: ocs1/1, rx: ocs1/385}
//             - {tx: ocs1/2, rx: ocs1/386}
//   trunks:
//     - {id: ocs1-ocs2-01, from: ocs1/673, to: ocs2/289}   # from an egress to an ingress
#ifndef FLEET_CONTROLLER_INVENTORY_INVENTORY_H_
#define FLEET_CONTROLLER_INVENTORY_INVENTORY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "controller/store/inventory_store.h"
#include "fleet/v1/inventory.pb.h"

namespace fleet::inventory {

// A switch has at most this many ingress and as many egress ports. Every port is a row in the
// store and an entry in every snapshot, so a size is bounded before anything is planned (the
// largest switches today are 384x384); the switch emulator takes sides up to the same bound.
inline constexpr uint32_t kMaxSwitchSide = 4096;

// Parses an inventory file's text. Syntax errors, unknown keys, wrong types and malformed
// port references are all reported together as one INVALID_ARGUMENT, one problem per line,
// each prefixed "FILE:LINE: ". Cross-object rules are checked by ValidateInventory.
absl::StatusOr<v1::Inventory> ParseInventoryYaml(absl::string_view text,
                                                 absl::string_view file_name);

// Ascending ports as an inventory file writes ranges: {1, 2, 3, 7, 9, 10} -> "1-3, 7, 9-10".
std::string PortRanges(const std::vector<uint32_t>& ports);

// Reads and parses a file; NOT_FOUND / PERMISSION_DENIED name the path.
absl::StatusOr<v1::Inventory> ReadInventoryFile(const std::string& path);

// Checks a whole site against the rules of the fiber plant: unique ids and serials, switch
// sides of 1..kMaxSwitchSide ports, every reference resolves, every O-NIC has exactly ports 1
// and 2, tx fibers enter ingress ports and rx fibers leave egress ports, every port is inside
// its switch, no switch port holds two fibers, O-NIC fibers avoid trunk-reserved ports, trunks
// run from an egress to another switch's ingress on reserved ports. Returns every problem
// found, each naming the object, the value and the rule; empty when the site is valid.
std::vector<std::string> ValidateInventory(const v1::Inventory& site);

// Plans applying `incoming` on top of `stored`: objects are matched by id and replace the
// stored ones; nothing is deleted. Validates the merged site (and duplicates within
// `incoming`); INVALID_ARGUMENT listing every problem if it fails. The result holds only
// the objects that are new or differ, so re-applying the same inventory writes nothing.
// `merged` (optional) receives the site as the write would leave it.
absl::StatusOr<store::InventoryWrite> PlanApply(const v1::Inventory& stored,
                                                const v1::Inventory& incoming,
                                                v1::Inventory* merged = nullptr);

struct ApplyOptions {
  bool dry_run = false;  // Check everything, report what would change, write nothing.
  bool force = false;    // Repoint a switch that holds circuits (ApplyInventoryRequest.force).
};

// What InventoryApplier::ApplyFile did.
struct FileApplied {
  // True: the store's record showed this very file applied onto the inventory still stored,
  // so it was not read and `response` is empty. False: it was read and applied.
  bool skipped = false;
  v1::ApplyInventoryResponse response = {};
};

// Applies inventories to a store: load what is stored, plan, write. Applies are serialized
// so two concurrent applies cannot both validate against the same stored state. Used by
// InventoryService.ApplyInventory and by `fleetd --inventory FILE` at start.
class InventoryApplier {
 public:
  explicit InventoryApplier(store::InventoryStore* store) : store_(store) {}

  // `fleetd --inventory FILE` at start: Apply(file, {.force = true}) unless applying it again
  // would change nothing, which the store's record (AppliedInventoryFile) says when it names
  // this very build of fleetd (its build ID), the SHA-256 of the file's bytes and the SHA-256
  // of the stored inventory in the form a file sets (drain, health and allocations left out),
  // and all three are still so. Parsing a 64-switch site's file is most of a start; hashing
  // it and the stored inventory is a sixth of that. After each apply that succeeds, records
  // the file and the site the apply planned. Errors are Apply's, ReadInventoryFile's and the
  // store's, each naming the path; a record that cannot be read or written only costs the
  // next start a parse (logged).
  absl::StatusOr<FileApplied> ApplyFile(const std::string& path, const std::string& principal);

  // INVALID_ARGUMENT listing every problem, or FAILED_PRECONDITION from the store for a
  // change under a live circuit (a rewired port, a repointed switch without `force`);
  // nothing is written in either case. The answer lists each change, field by field. With
  // `dry_run`, meets the same checks, reports what would change and writes nothing.
  absl::StatusOr<v1::ApplyInventoryResponse> Apply(const v1::Inventory& incoming,
                                                   const ApplyOptions& options,
                                                   const std::string& principal);

 private:
  // Apply; `merged` (optional) receives the site the apply planned (PlanApply).
  absl::StatusOr<v1::ApplyInventoryResponse> ApplyLocked(const v1::Inventory& incoming,
                                                         const ApplyOptions& options,
                                                         const std::string& principal,
                                                         v1::Inventory* merged = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The part of ApplyFile's record that needs no read of the store: this build and the SHA-256
  // of the file's bytes. Empty for an executable without a build ID (nothing is recorded).
  static std::string RecordHead(const std::string& file_sha256);
  // The whole record: `head` and the SHA-256 of `inventory` in the form a file sets.
  static std::string RecordOf(const std::string& head, const v1::Inventory& inventory);

  absl::Mutex mu_;
  store::InventoryStore* const store_;  // Not owned.
};

}  // namespace fleet::inventory

#endif  // FLEET_CONTROLLER_INVENTORY_INVENTORY_H_
