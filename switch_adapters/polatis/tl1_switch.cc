// OpticalSwitch over TL1.
#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "switch_adapters/polatis/polatis_switch.h"
#include "switch_adapters/polatis/tl1_session.h"

namespace fleet::polatis {
namespace {

using switch_adapters::ApplyResult;
using switch_adapters::CrossConnect;
using switch_adapters::CrossConnectBatch;
using switch_adapters::PortPower;
using switch_adapters::PortState;
using switch_adapters::PortStatus;
using switch_adapters::SwitchIdentity;

// "1&2&3&7" → "1&&3&7": runs of consecutive ports as ranges, order kept, so that an
// ingress list and an egress list still pair up element by element.
std::string PortList(const std::vector<uint32_t>& ports) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ports.size();) {
    size_t j = i;
    while (j + 1 < ports.size() && ports[j + 1] == ports[j] + 1) ++j;
    parts.push_back(j > i + 1 ? absl::StrCat(ports[i], "&&", ports[j]) : absl::StrCat(ports[i]));
    if (j == i + 1) parts.push_back(absl::StrCat(ports[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, "&");
}

class Tl1Switch : public switch_adapters::OpticalSwitch {
 public:
  Tl1Switch(const PolatisSwitchOptions& options, std::unique_ptr<StreamDialer> dialer)
      : options_(options),
        session_(Tl1SessionOptions{options.name, options.host,
                                   options.port == 0 ? uint16_t{3082} : options.port,
                                   options.credentials.user, options.credentials.password,
                                   options.connect_timeout, options.command_timeout},
                 std::move(dialer)) {}

  absl::StatusOr<SwitchIdentity> Identity() override {
    absl::MutexLock lock(&mu_);
    return IdentityLocked();
  }

  absl::StatusOr<std::vector<CrossConnect>> ReadCrossConnects() override {
    absl::MutexLock lock(&mu_);
    return ReadLocked();
  }

  absl::StatusOr<std::vector<PortState>> ReadPorts() override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(SwitchIdentity id, IdentityLocked());
    const uint32_t total = id.ingress_ports + id.egress_ports;
    ASSIGN_OR_RETURN(Tl1Response shutters,
                     session_.Execute("RTRV-PORT-SHUTTER", absl::StrCat("1&&", total)));
    std::map<uint32_t, PortStatus> status;
    for (const std::string& line : shutters.data) {
      std::optional<std::pair<uint32_t, std::string>> v = ParsePortValueLine(line);
      if (!v) return Malformed("RTRV-PORT-SHUTTER", line);
      status[v->first] = v->second == "CLOSED" ? PortStatus::kDisabled : PortStatus::kEnabled;
    }
    ASSIGN_OR_RETURN(Tl1Response alarms, session_.Execute("RTRV-ALM-ALL", "ALL"));
    for (const std::string& line : alarms.data) {
      std::optional<std::pair<uint32_t, std::string>> v = ParsePortValueLine(line);
      if (v && absl::StrContains(v->second, "PORT-FAILED")) status[v->first] = PortStatus::kFailed;
    }
    std::vector<PortState> out;
    for (uint32_t p = 1; p <= total; ++p) {
      auto it = status.find(p);
      out.push_back({p, it == status.end() ? PortStatus::kEnabled : it->second});
    }
    return out;
  }

  absl::StatusOr<std::vector<PortPower>> ReadPower(const std::vector<uint32_t>& ports) override {
    absl::MutexLock lock(&mu_);
    std::string aid;
    if (ports.empty()) {
      ASSIGN_OR_RETURN(SwitchIdentity id, IdentityLocked());
      aid = absl::StrCat("1&&", id.ingress_ports + id.egress_ports);
    } else {
      std::vector<uint32_t> sorted = ports;
      std::sort(sorted.begin(), sorted.end());
      aid = PortList(sorted);
    }
    ASSIGN_OR_RETURN(Tl1Response response, session_.Execute("RTRV-PORT-POWER", aid));
    std::vector<PortPower> out;
    for (const std::string& line : response.data) {
      std::optional<std::pair<uint32_t, std::string>> v = ParsePortValueLine(line);
      double dbm = 0;
      if (!v || !absl::SimpleAtod(v->second, &dbm)) return Malformed("RTRV-PORT-POWER", line);
      out.push_back({v->first, dbm});
    }
    std::sort(out.begin(), out.end(),
              [](const PortPower& a, const PortPower& b) { return a.port < b.port; });
    return out;
  }

  absl::Status SetShutters(const std::vector<uint32_t>& ports, bool open) override {
    absl::MutexLock lock(&mu_);
    if (ports.empty()) return absl::OkStatus();
    std::vector<uint32_t> sorted = ports;
    std::sort(sorted.begin(), sorted.end());
    return session_
        .ExecuteChange(options_.before_change, open ? "RLS-PORT-SHUTTER" : "OPR-PORT-SHUTTER",
                       PortList(sorted))
        .status();
  }

  ApplyResult Apply(const CrossConnectBatch& batch) override {
    absl::MutexLock lock(&mu_);
    ApplyResult result;
    const int commands_before = session_.commands_sent();
    result.status = ApplyLocked(batch, result);
    result.commands = session_.commands_sent() - commands_before;
    return result;
  }

 private:
  absl::Status Malformed(absl::string_view verb, absl::string_view line) const {
    return absl::InternalError(absl::StrCat("switch ", options_.name, ": cannot read ", verb,
                                            " answer line '", line, "'"));
  }

  absl::StatusOr<SwitchIdentity> IdentityLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (identity_) return *identity_;
    SwitchIdentity id;
    ASSIGN_OR_RETURN(Tl1Response size, session_.Execute("RTRV-EQPT", "SYSTEM", "::PARAMETER=SIZE"));
    for (const std::string& line : size.data) {
      size_t at = line.find("SIZE=");
      if (at == std::string::npos) continue;
      std::vector<std::string> nm = absl::StrSplit(line.substr(at + 5), 'x');
      if (nm.size() != 2 || !absl::SimpleAtoi(nm[0], &id.ingress_ports) ||
          !absl::SimpleAtoi(nm[1], &id.egress_ports)) {
        return Malformed("RTRV-EQPT", line);
      }
    }
    if (id.ingress_ports == 0) return Malformed("RTRV-EQPT", absl::StrJoin(size.data, " "));
    ASSIGN_OR_RETURN(Tl1Response netype, session_.Execute("RTRV-NETYPE", ""));
    if (!netype.data.empty()) {
      std::vector<std::string> fields = absl::StrSplit(netype.data[0], ',');
      if (fields.size() > 0) id.vendor = fields[0];
      if (fields.size() > 1) id.model = fields[1];
      if (fields.size() > 3) id.software_version = fields[3];
    }
    ASSIGN_OR_RETURN(Tl1Response inventory, session_.Execute("RTRV-INV", "OCS"));
    for (const std::string& line : inventory.data) {
      size_t at = line.find("SN=");
      if (at != std::string::npos) id.serial = line.substr(at + 3, line.find(',', at) - at - 3);
    }
    identity_ = id;
    return id;
  }

  absl::StatusOr<std::vector<CrossConnect>> ReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(Tl1Response response, session_.Execute("RTRV-PATCH", ""));
    std::vector<CrossConnect> out;
    for (const std::string& line : response.data) {
      std::optional<std::pair<uint32_t, uint32_t>> patch = ParsePatchLine(line);
      if (!patch) return Malformed("RTRV-PATCH", line);
      out.push_back({patch->first, patch->second});
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  absl::Status Connect(const std::vector<CrossConnect>& adds) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<uint32_t> ingress, egress;
    for (const CrossConnect& x : adds) {
      ingress.push_back(x.ingress);
      egress.push_back(x.egress);
    }
    return session_
        .ExecuteChange(options_.before_change, "ENT-PATCH",
                       absl::StrCat(PortList(ingress), ",", PortList(egress)))
        .status();
  }

  absl::Status Disconnect(const std::vector<CrossConnect>& removes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<uint32_t> ingress;
    for (const CrossConnect& x : removes) ingress.push_back(x.ingress);
    return session_.ExecuteChange(options_.before_change, "DLT-PATCH", PortList(ingress)).status();
  }

  absl::Status ApplyLocked(const CrossConnectBatch& batch, ApplyResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(SwitchIdentity id, IdentityLocked());
    // One command per batch side, or one per cross-connect when not in bulk mode.
    auto each = [this](auto send) {
      return [this, send](const std::vector<CrossConnect>& xs) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        if (options_.bulk) return (this->*send)(xs);
        for (const CrossConnect& x : xs) RETURN_IF_ERROR((this->*send)({x}));
        return absl::OkStatus();
      };
    };
    switch_adapters::BatchDriver driver{[this]()
                                            ABSL_NO_THREAD_SAFETY_ANALYSIS { return ReadLocked(); },
                                        each(&Tl1Switch::Disconnect), each(&Tl1Switch::Connect)};
    return switch_adapters::RunApply(batch, id.ingress_ports, id.egress_ports, driver, result);
  }

  const PolatisSwitchOptions options_;
  absl::Mutex mu_;
  Tl1Session session_ ABSL_GUARDED_BY(mu_);
  std::optional<SwitchIdentity> identity_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<switch_adapters::OpticalSwitch> NewTl1Switch(const PolatisSwitchOptions& options,
                                                             std::unique_ptr<StreamDialer> dialer) {
  return std::make_unique<Tl1Switch>(options, std::move(dialer));
}

}  // namespace fleet::polatis
