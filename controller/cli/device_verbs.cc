#include "controller/cli/device_verbs.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/cli/printing.h"
#include "fleet/v1/names.h"

namespace fleet::cli {
namespace {

const std::vector<std::string>& DeviceSubcommands() {
  static const auto* words = new std::vector<std::string>{"fail", "heal"};
  return *words;
}

void DeclareDeviceFlags(FlagTable& f, DeviceHealthArgs& a) {
  f.String("reason", &a.reason, "why, recorded with the health and in the event log");
}

int RunDevice(const Session& s, const DeviceHealthArgs& flags, const Positional& p) {
  if (p.empty() || (p[0] != "fail" && p[0] != "heal")) {
    return UsageError(*s.err, "device",
                      p.empty() ? std::string("device needs a subcommand: fail ID or heal ID")
                                : absl::StrCat("unknown device subcommand '", p[0],
                                               "'; subcommands: fail, heal"));
  }
  if (p.size() != 2) {
    return UsageError(*s.err, "device",
                      absl::StrCat("device ", p[0], " needs one device ID, got ", Joined(p)));
  }
  DeviceHealthArgs args = flags;
  args.id = p[1];
  args.failed = p[0] == "fail";
  if (args.failed && args.reason.empty()) {
    return UsageError(*s.err, "device", "device fail needs --reason: say what is wrong with it");
  }
  return SetDeviceHealth(s, args);
}

}  // namespace

int SetDeviceHealth(const Session& s, const DeviceHealthArgs& args) {
  v1::SetDeviceHealthRequest request;
  request.set_device(args.id);
  request.set_health(args.failed ? v1::DEVICE_HEALTH_FAILED : v1::DEVICE_HEALTH_HEALTHY);
  request.set_reason(args.reason);
  v1::Device response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->admin->SetDeviceHealth(c, request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  *s.out << "device " << response.id() << " " << v1::Name(response.health())
         << (response.health_reason().empty() ? "" : absl::StrCat(": ", response.health_reason()))
         << "\n";
  return kExitOk;
}

Verb DeviceVerb() {
  return {"device",
          "fleetctl device (fail ID --reason TEXT | heal ID [--reason TEXT]) [flags]",
          "Mark a device failed, or healthy again",
          "Record an operator's word on a device's health.\n\n"
          "  fail ID --reason TEXT  No new circuit uses it; allocations using it turn DEGRADED\n"
          "                         at once and, where their failure policy says replace,\n"
          "                         get a spare in its place.\n"
          "  heal ID                Healthy again: clears failed, and fleetd's suspect (set\n"
          "                         after repeated failed retrains).\n\n"
          "'fleetctl get devices' shows each device's health and whether it is a spare.",
          WithFlags<DeviceHealthArgs>(DeclareDeviceFlags, RunDevice),
          DeviceSubcommands()};
}

}  // namespace fleet::cli
