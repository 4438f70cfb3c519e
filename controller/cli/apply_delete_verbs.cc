#include "controller/cli/apply_delete_verbs.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/grpc_status.h"
#include "controller/cli/printing.h"
#include "controller/inventory/inventory.h"

namespace fleet::cli {
namespace {

// The kinds DeleteObject accepts (see DeleteObjectRequest).
constexpr KindName kDeleteKinds[] = {{"switches", "switch"},
                                     {"hosts", "host"},
                                     {"devices", "device"},
                                     {"onics", "onic"},
                                     {"trunks", "trunk"}};

void DeclareApplyFlags(FlagTable& f, ApplyArgs& a) {
  f.File("file,f", &a.file, "the inventory file (YAML)");
  f.Bool("dry-run", &a.dry_run, "validate and report what would change; store nothing");
}

int RunApply(const Session& s, const ApplyArgs& args, const Positional& p) {
  if (!p.empty()) {
    return UsageError(*s.err, "apply",
                      absl::StrCat("unexpected argument ", Joined(p), "; the file goes after -f"));
  }
  if (args.file.empty()) return UsageError(*s.err, "apply", "apply needs -f FILE");
  return Apply(s, args);
}

int RunDelete(const Session& s, const Positional& p) {
  if (p.size() != 2) {
    return UsageError(
        *s.err, "delete",
        absl::StrCat("delete needs KIND and NAME, got ", p.empty() ? "nothing" : Joined(p)));
  }
  return Delete(s, p[0], p[1]);
}

}  // namespace

int Apply(const Session& s, const ApplyArgs& args) {
  absl::StatusOr<v1::Inventory> inventory = inventory::ReadInventoryFile(args.file);
  if (!inventory.ok()) return s.Failed(ToGrpcStatus(inventory.status()));

  v1::ApplyInventoryRequest request;
  *request.mutable_inventory() = *std::move(inventory);
  request.set_dry_run(args.dry_run);
  v1::ApplyInventoryResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->inventory->ApplyInventory(c, request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);

  if (args.dry_run) *s.out << "dry run: nothing was stored\n";
  *s.out << "created " << response.created() << ", updated " << response.updated() << ", unchanged "
         << response.unchanged() << "\n";
  for (const std::string& change : response.changes()) *s.out << change << "\n";
  return kExitOk;
}

int Delete(const Session& s, const std::string& kind, const std::string& name) {
  absl::string_view singular = Singular(kDeleteKinds, kind);
  if (singular.empty()) {
    return UsageError(*s.err, "delete",
                      absl::StrCat("unknown kind '", kind, "'; kinds: ", Singulars(kDeleteKinds)));
  }
  v1::DeleteObjectRequest request;
  request.set_kind(std::string(singular));
  request.set_name(name);
  v1::DeleteObjectResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->inventory->DeleteObject(c, request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);

  // `deleted` lists what went with the object; the server may or may not name the object
  // itself, so it is printed first and not repeated.
  const std::string object = absl::StrCat(singular, " ", name);
  *s.out << "deleted " << object << "\n";
  for (const std::string& line : response.deleted()) {
    absl::string_view what = absl::StripPrefix(line, "deleted ");
    if (what != object) *s.out << "deleted " << what << "\n";
  }
  return kExitOk;
}

Verb ApplyVerb() {
  return {"apply",
          "fleetctl apply -f FILE [--dry-run] [flags]",
          "Create or update the inventory from a file",
          "Read an inventory file (see docs/inventory.md), then create what is new and\n"
          "update what changed, in one transaction. Nothing is deleted. Prints the counts\n"
          "and one line per change.",
          WithFlags<ApplyArgs>(DeclareApplyFlags, RunApply),
          {}};
}

Verb DeleteVerb() {
  return {
      "delete",
      "fleetctl delete KIND NAME [flags]",
      "Delete one inventory object",
      absl::StrCat("Delete one object and what belongs only to it (a device's O-NICs and their\n"
                   "fibers). Refused while it is in use.\n\nKinds: ",
                   Singulars(kDeleteKinds)),
      WithoutFlags(RunDelete),
      SingularWords(kDeleteKinds)};
}

}  // namespace fleet::cli
