#include "controller/cli/health_verbs.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/cli/object_text.h"
#include "controller/cli/output.h"
#include "controller/cli/printing.h"
#include "fleet/v1/names.h"

namespace fleet::cli {
namespace {

// What a what-if can fail.
constexpr KindName kFailureKinds[] = {
    {"ports", "port"}, {"onics", "onic"}, {"devices", "device"}, {"switches", "switch"}};

int RunWhatIf(const Session& s, const Positional& p) {
  if (p.size() != 3 || p[0] != "fail") {
    return UsageError(*s.err, "what-if",
                      absl::StrCat("what-if needs: fail KIND NAME (", Singulars(kFailureKinds),
                                   "), got ", p.empty() ? "nothing" : Joined(p)));
  }
  return WhatIfFail(s, p[1], p[2]);
}

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

int WhatIfFail(const Session& s, const std::string& kind, const std::string& name) {
  v1::WhatIfFailRequest request;
  v1::FailureTarget& target = *request.mutable_target();
  const absl::string_view singular = Singular(kFailureKinds, kind);
  if (singular.empty()) {
    return UsageError(*s.err, "what-if",
                      absl::StrCat("unknown kind '", kind, "'; kinds: ", Singulars(kFailureKinds)));
  }
  if (singular == "port") {
    if (!ParseSwitchPort(name, target.mutable_switch_port())) {
      return UsageError(*s.err, "what-if",
                        absl::StrCat("a port is SWITCH/PORT, such as ocs1/5; got '", name, "'"));
    }
  } else if (singular == "onic") {
    target.set_onic(name);
  } else if (singular == "device") {
    target.set_device(name);
  } else {
    target.set_switch_id(name);
  }
  v1::WhatIfFailResponse response;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->admin->WhatIfFail(c, request, &response); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  *s.out << "what if " << singular << " " << name << " failed (a dry run: nothing was touched)\n";
  if (response.allocations().empty()) {
    *s.out << "no allocation would be hurt\n";
    return kExitOk;
  }
  Table table({"allocation", "tenant", "members-hurt", "circuits-hurt", "heals", "outcome"});
  for (const v1::HurtAllocation& h : response.allocations()) {
    table.AddRow({h.id(), h.tenant(), absl::StrJoin(h.members_hurt(), ","),
                  absl::StrCat(h.circuits_hurt_size()), h.heals() ? "yes" : "no", h.outcome()});
  }
  *s.out << table.Render();
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

Verb WhatIfVerb() {
  return {"what-if",
          "fleetctl what-if fail (port SWITCH/PORT | onic ID | device ID | switch ID) [flags]",
          "Show what a failure would hurt and how it would heal",
          absl::StrCat(
              "A dry run of a failure: nothing is stored or sent to a switch or an agent. Lists\n"
              "each allocation with a circuit on the part (members and circuits hurt) and\n"
              "whether its failure policy would heal it: which spare would replace which\n"
              "member, or why it would stay DEGRADED.\n\nKinds: ",
              Singulars(kFailureKinds)),
          WithoutFlags(RunWhatIf),
          {"fail"}};
}

}  // namespace fleet::cli
