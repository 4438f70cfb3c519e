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
  f.Bool("dry-run", &a.dry_run,
         "validate, check what the apply would be refused for, and report what would change "
         "field by field; store nothing");
  f.Bool("force", &a.force,
         "change how fleetd reaches a switch (address, port, protocol, credentials) even while "
         "it holds circuits");
}

struct DiffArgs {
  std::string file;
};

void DeclareDiffFlags(FlagTable& f, DiffArgs& a) {
  f.File("file,f", &a.file, "the inventory file (YAML)");
}

int RunDiff(const Session& s, const DiffArgs& args, const Positional& p) {
  if (!p.empty()) {
    return UsageError(*s.err, "diff",
                      absl::StrCat("unexpected argument ", Joined(p), "; the file goes after -f"));
  }
  if (args.file.empty()) return UsageError(*s.err, "diff", "diff needs -f FILE");
  return Diff(s, args.file);
}

// ApplyInventory of `file` as `request` says, into `response`.
grpc::Status CallApply(const Session& s, const std::string& file, v1::ApplyInventoryRequest request,
                       v1::ApplyInventoryResponse* response) {
  absl::StatusOr<v1::Inventory> inventory = inventory::ReadInventoryFile(file);
  if (!inventory.ok()) return ToGrpcStatus(inventory.status());
  *request.mutable_inventory() = *std::move(inventory);
  return s.Call([&](grpc::ClientContext* c) {
    return s.server->inventory->ApplyInventory(c, request, response);
  });
}

// One block per object: "~ switch ocs1" and a line per field, or "+ onic s9-n0".
void PrintDiff(std::ostream& out, const v1::ApplyInventoryResponse& response) {
  for (const v1::ObjectChange& change : response.diff()) {
    out << (change.created() ? "+ " : "~ ") << change.kind() << " " << change.id() << "\n";
    for (const v1::FieldChange& f : change.fields()) {
      out << "    " << f.field() << ": " << f.from() << " -> " << f.to() << "\n";
    }
  }
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
  v1::ApplyInventoryRequest request;
  request.set_dry_run(args.dry_run);
  request.set_force(args.force);
  v1::ApplyInventoryResponse response;
  grpc::Status status = CallApply(s, args.file, request, &response);
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);

  if (args.dry_run) *s.out << "dry run: nothing was stored\n";
  *s.out << "created " << response.created() << ", updated " << response.updated() << ", unchanged "
         << response.unchanged() << "\n";
  for (const std::string& change : response.changes()) *s.out << change << "\n";
  return kExitOk;
}

int Diff(const Session& s, const std::string& file) {
  // The changes themselves (as if forced), then whether a plain apply would take them.
  v1::ApplyInventoryRequest request;
  request.set_dry_run(true);
  request.set_force(true);
  v1::ApplyInventoryResponse response;
  grpc::Status status = CallApply(s, file, request, &response);
  if (!status.ok()) {
    s.Failed(status);
    return kExitDiffFailed;
  }
  request.set_force(false);
  v1::ApplyInventoryResponse unforced;
  const grpc::Status plain = CallApply(s, file, request, &unforced);
  if (s.format != OutputFormat::kTable) {
    PrintMessage(s, response);
  } else {
    PrintDiff(*s.out, response);
    *s.out << response.created() << " to create, " << response.updated() << " to update, "
           << response.unchanged() << " unchanged\n";
  }
  if (plain.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
      plain.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    *s.err << "fleetctl apply -f " << file << " would be refused: " << plain.error_message()
           << "\n";
  } else if (!plain.ok()) {
    *s.err << "could not tell whether fleetctl apply -f " << file
           << " would be taken: " << plain.error_message() << "\n";
  }
  return response.diff_size() == 0 ? kExitOk : kExitDiffers;
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
          "and one line per change, with the fields an update changes. Changing how fleetd\n"
          "reaches a switch (address, port, protocol, credentials, ca_bundle, insecure_http)\n"
          "is refused while the switch holds circuits, unless --force. `fleetctl diff -f FILE`\n"
          "shows beforehand what an apply would change.",
          WithFlags<ApplyArgs>(DeclareApplyFlags, RunApply),
          {}};
}

Verb DiffVerb() {
  return {"diff",
          "fleetctl diff -f FILE [flags]",
          "Show what applying an inventory file would change",
          "Compare an inventory file with what fleetd holds, field by field, without storing\n"
          "anything: `~ switch ocs1` and `    address: 127.0.0.1 -> 192.0.2.10` for an update,\n"
          "`+ onic s9-n0` for a new object. Says on stderr when `fleetctl apply` of the file\n"
          "would be refused (a switch holding circuits repointed, a port in a circuit\n"
          "rewired), and why.\n\n"
          "Exit status: 0 nothing would change, 1 something would (whether or not apply\n"
          "would take it), 2 a malformed command line, 3 the diff itself failed (the file\n"
          "does not parse, fleetd refused or could not be reached).",
          WithFlags<DiffArgs>(DeclareDiffFlags, RunDiff),
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
