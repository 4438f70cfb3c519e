#include "switch_adapters/polatis/emulator/tl1_session.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace fleet::polatis_emu {
namespace {

// The first port of `range`, walked in its direction, outside [low, high].
std::optional<int> FirstOutside(const PortRange& range, int low, int high) {
  auto outside = [&](int port) { return port < low || port > high; };
  if (outside(range.first)) return range.first;
  if (range.first <= range.last) {
    if (range.last > high) return high + 1;
  } else if (range.last < low) {
    return low - 1;
  }
  return std::nullopt;
}

std::vector<int> Deduplicated(const std::vector<int>& ports) {
  std::vector<int> out;
  std::set<int> seen;
  for (int port : ports) {
    if (seen.insert(port).second) out.push_back(port);
  }
  return out;
}

}  // namespace

Tl1Session::Tl1Session(const Tl1SessionOptions& options, SwitchModel* model, const Clock* clock,
                       Waiter wait)
    : options_(options), model_(model), clock_(clock), wait_(std::move(wait)) {}

Tl1Session::Reply Tl1Session::Ok(std::vector<std::string> data) {
  Reply reply;
  reply.data = std::move(data);
  return reply;
}

Tl1Session::Reply Tl1Session::Deny(absl::string_view code, absl::string_view text) {
  Reply reply;
  reply.code = std::string(code);
  reply.text = std::string(text);
  return reply;
}

Tl1Session::Reply Tl1Session::DenyFor(const absl::Status& status) {
  // The model words its errors as the switch does; only the code needs choosing here.
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return Deny("IDNV", status.message());
    default:  // in use, injected bulk failure, state file unwritable
      return Deny("SROF", status.message());
  }
}

const Tl1Session::Verb* Tl1Session::FindVerb(absl::string_view verb) {
  static const auto* const kVerbs = new std::map<std::string, Verb, std::less<>>{
      {"ENT-PATCH", {&Tl1Session::EnterPatch, {}}},
      {"DLT-PATCH", {&Tl1Session::DeletePatch, {}}},
      {"RTRV-PATCH", {&Tl1Session::RetrievePatch, {}}},
      {"RTRV-EQPT", {&Tl1Session::RetrieveEquipment, {"PARAMETER"}}},
      {"RTRV-NETYPE", {&Tl1Session::RetrieveNeType, {}}},
      {"RTRV-INV", {&Tl1Session::RetrieveInventory, {}}},
      {"OPR-PORT-SHUTTER", {&Tl1Session::CloseShutters, {}}},
      {"RLS-PORT-SHUTTER", {&Tl1Session::OpenShutters, {}}},
      {"RTRV-PORT-SHUTTER", {&Tl1Session::RetrieveShutters, {}}},
      {"RTRV-PORT-POWER", {&Tl1Session::RetrievePower, {}}},
      {"RTRV-ALM-ALL", {&Tl1Session::RetrieveAlarms, {}}},
  };
  auto it = kVerbs->find(verb);
  return it == kVerbs->end() ? nullptr : &it->second;
}

std::string Tl1Session::Handle(absl::string_view text) {
  model_->CountTl1Command();
  Tl1ParseResult parsed = ParseTl1Command(text);
  Reply reply;
  std::string ctag = parsed.ctag;
  if (!parsed.command) {
    reply =
        Deny("IICT", absl::StrCat("Parse error at offset ", parsed.error_offset, " in command"));
  } else {
    ctag = parsed.command->ctag();
    reply = Execute(*parsed.command);
  }
  // The real switch answers after moving the beams; the emulator after they have settled.
  if (const absl::Duration left = reply.settled_at - clock_->Now(); left > absl::ZeroDuration()) {
    wait_(left);
  }
  if (const absl::Duration latency = model_->faults().latency; latency > absl::ZeroDuration()) {
    wait_(latency);
  }
  const absl::Time now = clock_->Now();
  if (reply.code.empty()) return Tl1Completed(options_.sid, now, ctag, reply.data);
  return Tl1Denied(options_.sid, now, ctag, reply.code, reply.text);
}

Tl1Session::Reply Tl1Session::Execute(const Tl1Command& command) {
  const absl::Time now = clock_->Now();
  if (command.verb == "ACT-USER") return Login(command, now);
  // Checked before the verb is looked up, so a peer that has not logged in learns nothing.
  if (!LoggedIn(now)) return Deny("PICC", "Not logged in");
  last_activity_ = now;
  if (command.verb == "CANC-USER") {
    logged_in_ = false;
    return Ok();
  }
  const Verb* verb = FindVerb(command.verb);
  if (verb == nullptr) return Deny("ICNV", absl::StrCat("Command not valid: ", command.verb));
  if (std::optional<Reply> bad = CheckParameters(command, verb->keys)) return *bad;
  if (model_->TakeDenial()) return Deny("SROF", "Injected fault");
  return (this->*(verb->handler))(command);
}

Tl1Session::Reply Tl1Session::Login(const Tl1Command& command, absl::Time now) {
  // ACT-USER::user:ctag::password; the password is the first payload block.
  for (size_t i = kGeneralBlock; i < command.blocks.size(); ++i) {
    if (i != kFirstPayloadBlock && !command.blocks[i].empty()) {
      return Deny("IPNV",
                  absl::StrCat("Unexpected parameter ", command.blocks[i], " in block ", i));
    }
  }
  if (command.aid() != options_.user || command.block(kFirstPayloadBlock) != options_.password) {
    return Deny("PICC", "Permission denied");
  }
  logged_in_ = true;
  login_epoch_ = model_->session_epoch();
  last_activity_ = now;
  return Ok();
}

bool Tl1Session::LoggedIn(absl::Time now) {
  if (!logged_in_) return false;
  const bool expired_by_fault = login_epoch_ != model_->session_epoch();
  const bool idle_too_long = options_.session_timeout > absl::ZeroDuration() &&
                             now - last_activity_ >= options_.session_timeout;
  if (expired_by_fault || idle_too_long) logged_in_ = false;
  return logged_in_;
}

std::optional<Tl1Session::Reply> Tl1Session::CheckParameters(
    const Tl1Command& command, const std::vector<std::string>& keys) const {
  for (size_t i = kGeneralBlock; i < command.blocks.size(); ++i) {
    for (absl::string_view item : absl::StrSplit(command.blocks[i], ',')) {
      if (item.empty()) continue;
      const size_t eq = item.find('=');
      const std::string key =
          absl::AsciiStrToUpper(eq == absl::string_view::npos ? item : item.substr(0, eq));
      if (eq == absl::string_view::npos || std::find(keys.begin(), keys.end(), key) == keys.end()) {
        return Deny("IPNV", absl::StrCat("Unexpected parameter ", key, " in block ", i));
      }
    }
  }
  return std::nullopt;
}

std::optional<Tl1Session::Reply> Tl1Session::CheckRange(const PortList& list, int low,
                                                        int high) const {
  if (list.all) return Deny("IDNV", "Invalid OXC port: ALL");
  for (const PortRange& range : list.ranges) {
    if (std::optional<int> bad = FirstOutside(range, low, high)) {
      return Deny("IDNV", absl::StrCat("Invalid OXC port: ", *bad));
    }
  }
  return std::nullopt;
}

std::optional<Tl1Session::Reply> Tl1Session::AidPortList(const Tl1Command& command, AidPorts use,
                                                         std::vector<int>* ports) const {
  const SwitchSize& size = model_->size();
  PortList list{.all = true, .ranges = {}};
  if (command.aid().empty()) {
    if (use == AidPorts::kRequired) return Deny("IIAC", "Empty parameters");
  } else {
    PortListParseResult parsed = ParsePortList(command.aid());
    if (!parsed.list) {
      return Deny("IICT",
                  absl::StrCat("Parse error at offset ",
                               command.offsets[kAidBlock] + parsed.error_offset, " in command"));
    }
    list = std::move(*parsed.list);
  }
  if (list.all) list = PortList{.all = false, .ranges = {{1, size.ports()}}};
  if (std::optional<Reply> bad = CheckRange(list, 1, size.ports())) return bad;
  *ports = ExpandPortList(list);
  return std::nullopt;
}

// --- Verbs --------------------------------------------------------------------------------

Tl1Session::Reply Tl1Session::EnterPatch(const Tl1Command& command) {
  const std::string& aid = command.aid();
  const size_t comma = aid.find(',');
  const absl::string_view ingress_text =
      absl::string_view(aid).substr(0, comma == std::string::npos ? aid.size() : comma);
  const absl::string_view egress_text =
      comma == std::string::npos ? absl::string_view() : absl::string_view(aid).substr(comma + 1);
  if (ingress_text.empty() || egress_text.empty()) return Deny("IIAC", "Empty parameters");

  auto parse = [&](absl::string_view text, size_t offset, PortList* list) -> std::optional<Reply> {
    PortListParseResult parsed = ParsePortList(text);
    if (!parsed.list) {
      return Deny("IICT", absl::StrCat("Parse error at offset ",
                                       command.offsets[kAidBlock] + offset + parsed.error_offset,
                                       " in command"));
    }
    *list = std::move(*parsed.list);
    return std::nullopt;
  };
  PortList ingress, egress;
  if (std::optional<Reply> bad = parse(ingress_text, 0, &ingress)) return *bad;
  if (std::optional<Reply> bad = parse(egress_text, comma + 1, &egress)) return *bad;
  if (ingress.all || egress.all) return Deny("IDNV", "Invalid OXC port: ALL");
  if (PortCount(ingress) != PortCount(egress)) return Deny("IIAC", "Mismatched port lists");
  const SwitchSize& size = model_->size();
  if (std::optional<Reply> bad = CheckRange(ingress, 1, size.ingress)) return *bad;
  if (std::optional<Reply> bad = CheckRange(egress, size.ingress + 1, size.ports())) return *bad;

  const std::vector<int> ingress_ports = ExpandPortList(ingress);
  const std::vector<int> egress_ports = ExpandPortList(egress);
  std::vector<CrossConnect> pairs;
  pairs.reserve(ingress_ports.size());
  for (size_t i = 0; i < ingress_ports.size(); ++i) {
    pairs.push_back({ingress_ports[i], egress_ports[i]});
  }
  absl::StatusOr<ChangeResult> result = model_->Connect(pairs, ConnectMode::kRefuseInUse);
  if (!result.ok()) return DenyFor(result.status());
  Reply reply = Ok();
  reply.settled_at = result->settled_at;
  return reply;
}

Tl1Session::Reply Tl1Session::DeletePatch(const Tl1Command& command) {
  absl::StatusOr<ChangeResult> result;
  if (absl::EqualsIgnoreCase(command.aid(), "ALL")) {
    result = model_->DisconnectAll();
  } else {
    std::vector<int> ports;
    if (std::optional<Reply> bad = AidPortList(command, AidPorts::kRequired, &ports)) return *bad;
    result = model_->Disconnect(ports);
  }
  return result.ok() ? Ok() : DenyFor(result.status());
}

Tl1Session::Reply Tl1Session::RetrievePatch(const Tl1Command& command) {
  std::vector<int> ports;
  if (std::optional<Reply> bad = AidPortList(command, AidPorts::kAllWhenEmpty, &ports)) {
    return *bad;
  }
  const std::set<int> wanted(ports.begin(), ports.end());
  std::vector<std::string> data;
  for (const CrossConnect& patch : model_->CrossConnects()) {
    if (wanted.contains(patch.ingress) || wanted.contains(patch.egress)) {
      data.push_back(absl::StrCat(patch.ingress, ",", patch.egress));
    }
  }
  return Ok(std::move(data));
}

Tl1Session::Reply Tl1Session::RetrieveEquipment(const Tl1Command& command) {
  if (!absl::EqualsIgnoreCase(command.aid(), "SYSTEM")) {
    return Deny("IIAC", absl::StrCat("Invalid AID: ", command.aid()));
  }
  // CheckParameters let through only PARAMETER=...; SIZE is the one the emulator knows.
  for (size_t i = kGeneralBlock; i < command.blocks.size(); ++i) {
    for (absl::string_view item : absl::StrSplit(command.blocks[i], ',', absl::SkipEmpty())) {
      const absl::string_view value = item.substr(item.find('=') + 1);
      if (!absl::EqualsIgnoreCase(value, "SIZE")) {
        return Deny("IDNV", absl::StrCat("Invalid parameter value: ", value));
      }
    }
  }
  return Ok({absl::StrCat("SYSTEM:SIZE=", model_->size().ToString())});
}

Tl1Session::Reply Tl1Session::RetrieveNeType(const Tl1Command& command) {
  if (!command.aid().empty()) return Deny("IIAC", absl::StrCat("Invalid AID: ", command.aid()));
  return Ok({absl::StrCat("POLATIS,", options_.identity.model_name, ",OCS,",
                          options_.identity.software_version)});
}

Tl1Session::Reply Tl1Session::RetrieveInventory(const Tl1Command& command) {
  if (!command.aid().empty() && !absl::EqualsIgnoreCase(command.aid(), "OCS")) {
    return Deny("IIAC", absl::StrCat("Invalid AID: ", command.aid()));
  }
  return Ok({absl::StrCat("OCS:SN=", options_.identity.serial_number)});
}

Tl1Session::Reply Tl1Session::CloseShutters(const Tl1Command& command) {
  return SetShutters(command, /*open=*/false);
}

Tl1Session::Reply Tl1Session::OpenShutters(const Tl1Command& command) {
  return SetShutters(command, /*open=*/true);
}

Tl1Session::Reply Tl1Session::SetShutters(const Tl1Command& command, bool open) {
  std::vector<int> ports;
  if (std::optional<Reply> bad = AidPortList(command, AidPorts::kRequired, &ports)) return *bad;
  std::vector<std::pair<int, bool>> changes;
  changes.reserve(ports.size());
  for (int port : ports) changes.emplace_back(port, open);
  absl::Status status = model_->SetShutters(changes);
  return status.ok() ? Ok() : DenyFor(status);
}

Tl1Session::Reply Tl1Session::RetrieveShutters(const Tl1Command& command) {
  std::vector<int> ports;
  if (std::optional<Reply> bad = AidPortList(command, AidPorts::kAllWhenEmpty, &ports)) {
    return *bad;
  }
  std::vector<std::string> data;
  for (const PortReading& reading : model_->ReadPorts(Deduplicated(ports), /*power=*/false)) {
    data.push_back(absl::StrCat(reading.port, ":", reading.shutter_open ? "OPEN" : "CLOSED"));
  }
  return Ok(std::move(data));
}

Tl1Session::Reply Tl1Session::RetrievePower(const Tl1Command& command) {
  std::vector<int> ports;
  if (std::optional<Reply> bad = AidPortList(command, AidPorts::kAllWhenEmpty, &ports)) {
    return *bad;
  }
  std::vector<std::string> data;
  for (const PortReading& reading : model_->ReadPorts(Deduplicated(ports))) {
    data.push_back(absl::StrFormat("%d:%.2f", reading.port, reading.power_dbm));
  }
  return Ok(std::move(data));
}

Tl1Session::Reply Tl1Session::RetrieveAlarms(const Tl1Command& command) {
  std::vector<int> ports;
  if (std::optional<Reply> bad = AidPortList(command, AidPorts::kAllWhenEmpty, &ports)) {
    return *bad;
  }
  const std::set<int> wanted(ports.begin(), ports.end());
  std::vector<std::string> data;
  for (const Alarm& alarm : model_->Alarms()) {
    if (!wanted.contains(alarm.port)) continue;
    data.push_back(alarm.kind == Alarm::Kind::kPortFailed
                       ? absl::StrCat(alarm.port, ":MJ,PORT-FAILED,SA")
                       : absl::StrCat(alarm.port, ":MN,LOW-POWER,NSA"));
  }
  return Ok(std::move(data));
}

}  // namespace fleet::polatis_emu
