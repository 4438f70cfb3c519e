#include "switch_adapters/polatis/emulator/switch_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "nlohmann/json.hpp"

namespace fleet::polatis_emu {
namespace {

constexpr int kMaxSide = 4096;
constexpr char kStateFormat[] = "polatis-emu-state/1";

// Readings carry two decimals, like the switch's OPM; below the floor nothing is measurable.
double RoundPower(double dbm) {
  double rounded = std::round(dbm * 100.0) / 100.0;
  if (rounded <= kNoLightDbm) return kNoLightDbm;
  return rounded == 0.0 ? 0.0 : rounded;  // never "-0.00"
}

absl::Status InvalidPort(int64_t port) {
  return absl::InvalidArgumentError(absl::StrCat("Invalid OXC port: ", port));
}

absl::Status PortInUse(int port) {
  return absl::FailedPreconditionError(absl::StrCat("Port in use: ", port));
}

// "HOST:PORT" with a host name or IPv4 address and a numeric port: what goes between
// "http://" and the path of a URL, and nothing that could change the URL's meaning there.
bool IsHostPort(absl::string_view address) {
  const size_t colon = address.find(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  for (char c : address.substr(0, colon)) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '-') return false;
  }
  const absl::string_view digits = address.substr(colon + 1);
  if (digits.empty() || digits.size() > 5) return false;
  for (char c : digits) {
    if (!absl::ascii_isdigit(c)) return false;  // SimpleAtoi alone would take "+80" or " 80"
  }
  int port = 0;
  return absl::SimpleAtoi(digits, &port) && port >= 1 && port <= 65535;
}

std::string Describe(const Trunk& trunk) {
  return absl::StrCat("trunk from ", trunk.from, " egress ", trunk.egress, " into ingress ",
                      trunk.ingress);
}

}  // namespace

std::string SwitchSize::ToString() const { return absl::StrCat(ingress, "x", egress); }

absl::StatusOr<SwitchSize> ParseSwitchSize(absl::string_view text) {
  std::vector<absl::string_view> sides = absl::StrSplit(absl::AsciiStrToLower(text), 'x');
  SwitchSize size;
  if (sides.size() != 2 || !absl::SimpleAtoi(sides[0], &size.ingress) ||
      !absl::SimpleAtoi(sides[1], &size.egress) || size.ingress < 1 || size.egress < 1 ||
      size.ingress > kMaxSide || size.egress > kMaxSide) {
    return absl::InvalidArgumentError(
        absl::StrCat("switch size '", text, "' must be NxM with N and M between 1 and ", kMaxSide));
  }
  return size;
}

SwitchIdentity MakeSwitchIdentity(const SwitchSize& size, absl::string_view sid) {
  // FNV-1a: a stable serial per SID, so two emulators started with different --sid differ.
  uint32_t hash = 2166136261u;
  for (unsigned char c : sid) {
    hash ^= c;
    hash *= 16777619u;
  }
  return SwitchIdentity{
      .manufacturer = "Polatis",
      .model_name = absl::StrCat("N-VST-", size.ToString(), "-EMU"),
      .serial_number = absl::StrFormat("EMU%08X", hash),
      .software_version = "7.4.0-EMU",
  };
}

absl::string_view PortStatusName(PortStatus status) {
  switch (status) {
    case PortStatus::kEnabled:
      return "ENABLED";
    case PortStatus::kDisabled:
      return "DISABLED";
    case PortStatus::kFailed:
      return "FAILED";
  }
  return "UNKNOWN";
}

absl::StatusOr<std::unique_ptr<SwitchModel>> SwitchModel::Create(const SwitchModelOptions& options,
                                                                 const Clock* clock,
                                                                 RemoteLight* remote_light) {
  if (options.size.ingress < 1 || options.size.egress < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("switch size ", options.size.ToString(), " has an empty side"));
  }
  if (options.switch_time < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("switch time must not be negative");
  }
  if (!std::isfinite(options.insertion_loss_db) || options.insertion_loss_db < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("insertion loss ", options.insertion_loss_db, " dB must be >= 0"));
  }
  std::unique_ptr<SwitchModel> model(new SwitchModel(options, clock, remote_light));
  if (!options.state_file.empty()) {
    absl::MutexLock lock(&model->mu_);
    if (absl::Status s = model->LoadState(); !s.ok()) return s;
    if (absl::Status s = model->SaveState(model->config_); !s.ok()) return s;
    model->counters_.cross_connects = static_cast<int64_t>(model->config_.by_ingress.size());
  }
  return model;
}

absl::Status SwitchModel::CheckPort(int64_t port) const {
  return options_.size.IsPort(port) ? absl::OkStatus() : InvalidPort(port);
}

absl::Status SwitchModel::CheckIngress(int port) const {
  if (options_.size.IsIngress(port)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("port ", port, " is not an ingress port (1..", options_.size.ingress, ")"));
}

// --- State file ------------------------------------------------------------------------

absl::Status SwitchModel::LoadState() {
  const std::string& path = options_.state_file;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return absl::OkStatus();  // first start
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::DataLossError(absl::StrCat("cannot read state file ", path));

  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("state file ", path, ": ", why));
  };
  Config config;
  // nlohmann reports type and key errors by exception; they stay inside this function.
  try {
    nlohmann::json json = nlohmann::json::parse(text.str());
    if (!json.is_object()) return bad("not a JSON object");
    if (json.value("format", "") != kStateFormat) {
      return bad(absl::StrCat("format is not ", kStateFormat));
    }
    const std::string size = json.value("size", "");
    if (size != options_.size.ToString()) {
      return absl::FailedPreconditionError(absl::StrCat("state file ", path, " is for a ", size,
                                                        " switch, not ", options_.size.ToString()));
    }
    if (!json.at("cross_connects").is_array() || !json.at("closed_shutters").is_array()) {
      return bad("cross_connects and closed_shutters must be arrays");
    }
    for (const nlohmann::json& pair : json.at("cross_connects")) {
      const int64_t ingress = pair.at("ingress").get<int64_t>();
      const int64_t egress = pair.at("egress").get<int64_t>();
      if (!options_.size.IsIngress(ingress) || !options_.size.IsEgress(egress) ||
          config.by_ingress.contains(static_cast<int>(ingress)) ||
          config.by_egress.contains(static_cast<int>(egress))) {
        return bad(absl::StrCat("cross-connect ", ingress, ",", egress, " is invalid"));
      }
      Apply(config, {static_cast<int>(ingress), static_cast<int>(egress)}, absl::InfinitePast());
    }
    for (const nlohmann::json& port : json.at("closed_shutters")) {
      if (!options_.size.IsPort(port.get<int64_t>())) {
        return bad(absl::StrCat("closed shutter on invalid port ", port.dump()));
      }
      config.closed_shutters.insert(port.get<int>());
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  }
  config_ = std::move(config);
  FLEET_LOG(INFO) << "restored " << config_.by_ingress.size() << " cross-connects and "
                  << config_.closed_shutters.size() << " closed shutters from " << path;
  return absl::OkStatus();
}

absl::Status SwitchModel::SaveState(const Config& config) const {
  if (options_.state_file.empty()) return absl::OkStatus();
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& [ingress, patch] : config.by_ingress) {
    pairs.push_back({{"ingress", ingress}, {"egress", patch.egress}});
  }
  nlohmann::json json = {{"format", kStateFormat},
                         {"size", options_.size.ToString()},
                         {"cross_connects", pairs},
                         {"closed_shutters", config.closed_shutters}};
  // Written next to the target and renamed over it, so a reader (or a restart after a
  // kill) sees the old file or the new one, never half of one. No fsync: the file has to
  // survive the emulator being killed, not the machine losing power.
  const std::string temp = options_.state_file + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << json.dump(1) << "\n";
    out.close();
    if (!out) {
      return absl::InternalError(absl::StrCat("cannot write state file ", temp));
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, options_.state_file, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", temp, " to ", options_.state_file, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status SwitchModel::Commit(Config next, int changed) {
  if (changed == 0 && next.closed_shutters == config_.closed_shutters) return absl::OkStatus();
  if (absl::Status s = SaveState(next); !s.ok()) {
    FLEET_LOG(ERROR) << "change refused: " << s.message();
    return s;
  }
  std::set<int> moved;  // Egresses whose cross-connect or a shutter on the path changed.
  for (const Config* c : {&config_, &next}) {
    for (const auto& [egress, ingress] : c->by_egress) {
      const Config& other = c == &config_ ? next : config_;
      auto there = other.by_egress.find(egress);
      if (there == other.by_egress.end() || there->second != ingress) moved.insert(egress);
    }
  }
  std::set<int> shutters;
  std::set_symmetric_difference(config_.closed_shutters.begin(), config_.closed_shutters.end(),
                                next.closed_shutters.begin(), next.closed_shutters.end(),
                                std::inserter(shutters, shutters.end()));
  for (int port : shutters) {
    for (const Config* c : {&config_, &next}) moved.merge(EgressesOf(*c, port));
  }
  config_ = std::move(next);
  const absl::Time now = clock_->Now();
  for (int egress : moved) {
    auto ingress = config_.by_egress.find(egress);
    if (ingress == config_.by_egress.end()) continue;
    const absl::Time settled_at = config_.by_ingress.at(ingress->second).settled_at;
    if (settled_at > now) settling_.emplace(settled_at, egress);
  }
  LightChangedLocked(moved);
  counters_.cross_connects_changed += changed;
  counters_.cross_connects = static_cast<int64_t>(config_.by_ingress.size());
  changes_.push_back({now, ChangeOrigin::Current(), changed, !shutters.empty()});
  if (changes_.size() > kChangesKept) changes_.pop_front();
  return absl::OkStatus();
}

std::vector<ChangeRecord> SwitchModel::Changes() const {
  absl::MutexLock lock(&mu_);
  return std::vector<ChangeRecord>(changes_.begin(), changes_.end());
}

namespace {
thread_local std::string current_origin;
}  // namespace

ChangeOrigin::ChangeOrigin(std::string origin) : previous_(std::move(current_origin)) {
  current_origin = std::move(origin);
}

ChangeOrigin::~ChangeOrigin() { current_origin = std::move(previous_); }

const std::string& ChangeOrigin::Current() { return current_origin; }

// --- Cross-connects ----------------------------------------------------------------------

int SwitchModel::Apply(Config& config, const CrossConnect& pair, absl::Time settled_at) {
  auto current = config.by_ingress.find(pair.ingress);
  if (current != config.by_ingress.end() && current->second.egress == pair.egress) return 0;
  int changed = 0;
  if (current != config.by_ingress.end()) {
    config.by_egress.erase(current->second.egress);
    config.by_ingress.erase(current);
    ++changed;
  }
  if (auto holder = config.by_egress.find(pair.egress); holder != config.by_egress.end()) {
    config.by_ingress.erase(holder->second);
    config.by_egress.erase(holder);
    ++changed;
  }
  config.by_ingress[pair.ingress] = Patch{pair.egress, settled_at};
  config.by_egress[pair.egress] = pair.ingress;
  return changed + 1;
}

absl::StatusOr<ChangeResult> SwitchModel::Connect(const std::vector<CrossConnect>& pairs,
                                                  ConnectMode mode) {
  absl::MutexLock lock(&mu_);
  // Checks run over the whole batch before anything changes: all-or-nothing.
  for (const CrossConnect& pair : pairs) {
    if (!options_.size.IsIngress(pair.ingress)) return InvalidPort(pair.ingress);
    if (!options_.size.IsEgress(pair.egress)) return InvalidPort(pair.egress);
  }
  std::set<int> batch_ingress, batch_egress;
  for (const CrossConnect& pair : pairs) {
    if (!batch_ingress.insert(pair.ingress).second) return PortInUse(pair.ingress);
    if (!batch_egress.insert(pair.egress).second) return PortInUse(pair.egress);
  }
  for (const CrossConnect& pair : pairs) {
    auto current = config_.by_ingress.find(pair.ingress);
    auto holder = config_.by_egress.find(pair.egress);
    const bool egress_taken = holder != config_.by_egress.end() && holder->second != pair.ingress;
    if (mode == ConnectMode::kRefuseInUse) {
      if (current != config_.by_ingress.end() && current->second.egress != pair.egress) {
        return PortInUse(pair.ingress);
      }
      if (egress_taken) return PortInUse(pair.egress);
    } else if (egress_taken && !batch_ingress.contains(holder->second)) {
      return PortInUse(pair.egress);
    }
  }

  const absl::Time settled_at = clock_->Now() + options_.switch_time;
  size_t count = pairs.size();
  std::optional<int64_t> fail_after;
  if (pairs.size() > 1 && faults_.fail_bulk_after.has_value()) {
    fail_after = faults_.fail_bulk_after;
    faults_.fail_bulk_after.reset();  // one-shot: the next bulk command only
    count = static_cast<size_t>(std::min<int64_t>(*fail_after, count));
  }
  ChangeResult result;
  Config next = config_;
  for (size_t i = 0; i < count; ++i) {
    if (!config_.by_ingress.contains(pairs[i].ingress)) ++result.created;
    int changed = Apply(next, pairs[i], settled_at);
    result.changed += changed;
    if (changed > 0) result.settled_at = settled_at;
  }
  if (absl::Status s = Commit(std::move(next), result.changed); !s.ok()) return s;
  if (fail_after.has_value()) {
    return absl::AbortedError(absl::StrCat("Operation failed after ", count, " of ", pairs.size()));
  }
  return result;
}

absl::StatusOr<ChangeResult> SwitchModel::Disconnect(const std::vector<int>& ports) {
  absl::MutexLock lock(&mu_);
  for (int port : ports) {
    if (absl::Status s = CheckPort(port); !s.ok()) return s;
  }
  ChangeResult result;
  Config next = config_;
  for (int port : ports) {
    int ingress = port;
    if (options_.size.IsEgress(port)) {
      auto holder = next.by_egress.find(port);
      if (holder == next.by_egress.end()) continue;
      ingress = holder->second;
    }
    auto patch = next.by_ingress.find(ingress);
    if (patch == next.by_ingress.end()) continue;
    next.by_egress.erase(patch->second.egress);
    next.by_ingress.erase(patch);
    ++result.changed;
  }
  if (absl::Status s = Commit(std::move(next), result.changed); !s.ok()) return s;
  return result;
}

absl::StatusOr<ChangeResult> SwitchModel::DisconnectAll() {
  absl::MutexLock lock(&mu_);
  ChangeResult result;
  Config next = config_;
  result.changed = static_cast<int>(next.by_ingress.size());
  next.by_ingress.clear();
  next.by_egress.clear();
  if (absl::Status s = Commit(std::move(next), result.changed); !s.ok()) return s;
  return result;
}

std::vector<CrossConnect> SwitchModel::CrossConnects() const {
  absl::MutexLock lock(&mu_);
  std::vector<CrossConnect> out;
  out.reserve(config_.by_ingress.size());
  for (const auto& [ingress, patch] : config_.by_ingress) out.push_back({ingress, patch.egress});
  return out;
}

std::optional<int> SwitchModel::EgressOf(int ingress) const {
  absl::MutexLock lock(&mu_);
  auto it = config_.by_ingress.find(ingress);
  if (it == config_.by_ingress.end()) return std::nullopt;
  return it->second.egress;
}

// --- Shutters and readings ---------------------------------------------------------------

absl::Status SwitchModel::SetShutters(const std::vector<std::pair<int, bool>>& ports) {
  absl::MutexLock lock(&mu_);
  for (const auto& [port, open] : ports) {
    if (absl::Status s = CheckPort(port); !s.ok()) return s;
  }
  Config next = config_;
  for (const auto& [port, open] : ports) {
    if (open) {
      next.closed_shutters.erase(port);
    } else {
      next.closed_shutters.insert(port);
    }
  }
  return Commit(std::move(next), 0);
}

double SwitchModel::DropOf(int port) const {
  auto it = power_drops_.find(port);
  return it == power_drops_.end() ? 0.0 : it->second;
}

bool SwitchModel::CarriesLightLocked(int ingress, int egress, absl::Time now) const {
  return now >= config_.by_ingress.at(ingress).settled_at &&
         !config_.closed_shutters.contains(ingress) && !config_.closed_shutters.contains(egress) &&
         !failed_ports_.contains(ingress) && !failed_ports_.contains(egress);
}

Light SwitchModel::LightLocked(int egress, absl::Time now) const {
  auto holder = config_.by_egress.find(egress);
  if (holder == config_.by_egress.end()) return Light{};
  const int ingress = holder->second;
  auto signal = signals_.find(ingress);
  if (signal == signals_.end() || !CarriesLightLocked(ingress, egress, now)) return Light{};
  return Light{signal->second.name,
               RoundPower(signal->second.launch_dbm - options_.insertion_loss_db - DropOf(ingress) -
                          DropOf(egress))};
}

double SwitchModel::PowerLocked(int port, absl::Time now) const {
  if (options_.size.IsEgress(port)) return LightLocked(port, now).power_dbm;
  // An ingress monitor reads the light entering the fiber, ahead of the shutter; a FAILED
  // port gives no reading.
  auto signal = signals_.find(port);
  if (signal == signals_.end() || failed_ports_.contains(port)) return kNoLightDbm;
  return RoundPower(signal->second.launch_dbm - DropOf(port));
}

PortReading SwitchModel::ReadLocked(int port, absl::Time now, bool power) const {
  PortReading reading;
  reading.port = port;
  reading.shutter_open = !config_.closed_shutters.contains(port);
  reading.status = failed_ports_.contains(port) ? PortStatus::kFailed
                   : reading.shutter_open       ? PortStatus::kEnabled
                                                : PortStatus::kDisabled;
  if (power) reading.power_dbm = PowerLocked(port, now);
  return reading;
}

std::vector<PortReading> SwitchModel::ReadPorts(const std::vector<int>& ports, bool power) const {
  const absl::Time now = clock_->Now();
  // Readings whose light comes over a trunk: asked of the far emulator once the mutex is let go.
  struct Remote {
    size_t reading;
    Trunk trunk;
    double loss_db;
  };
  std::vector<Remote> remote;
  std::vector<PortReading> out;
  out.reserve(ports.size());
  {
    absl::MutexLock lock(&mu_);
    for (int port : ports) {
      if (!options_.size.IsPort(port)) continue;
      out.push_back(ReadLocked(port, now, power));
      if (!power) continue;
      if (options_.size.IsEgress(port)) {
        LightSource source = SourceLocked(port, now);
        if (!source.local) remote.push_back({out.size() - 1, source.trunk, source.loss_db});
      } else if (auto feed = trunks_.find(port);
                 feed != trunks_.end() && !failed_ports_.contains(port)) {
        // An ingress monitor reads ahead of the shutter, as for a local signal.
        remote.push_back(
            {out.size() - 1, feed->second.trunk, feed->second.trunk.loss_db + DropOf(port)});
      }
    }
  }
  std::set<std::string> silent;  // Far emulators that did not answer during this read.
  const absl::Time give_up = absl::Now() + kTrunkReadBudget;  // Real time, as fetches take.
  for (const Remote& r : remote) {
    if (silent.contains(r.trunk.from) || absl::Now() > give_up) continue;
    bool answered = true;
    out[r.reading].power_dbm = OverTrunk(r.trunk, 0, r.loss_db, &answered).power_dbm;
    if (!answered) silent.insert(r.trunk.from);
  }
  return out;
}

std::vector<PortReading> SwitchModel::ReadAllPorts(bool power) const {
  std::vector<int> ports(static_cast<size_t>(options_.size.ports()));
  for (size_t i = 0; i < ports.size(); ++i) ports[i] = static_cast<int>(i) + 1;
  return ReadPorts(ports, power);
}

// --- Light --------------------------------------------------------------------------------

absl::Status SwitchModel::SetSignal(int ingress, std::string name, double launch_dbm) {
  if (absl::Status s = CheckIngress(ingress); !s.ok()) return s;
  if (!std::isfinite(launch_dbm)) {
    return absl::InvalidArgumentError("power_dbm must be a finite number");
  }
  absl::MutexLock lock(&mu_);
  if (auto feed = trunks_.find(ingress); feed != trunks_.end()) {
    const Trunk& trunk = feed->second.trunk;
    return absl::FailedPreconditionError(
        absl::StrCat("ingress ", ingress, " is fed by a trunk from ", trunk.from, " egress ",
                     trunk.egress, "; remove the trunk before lighting a signal on it"));
  }
  signals_[ingress] = Signal{std::move(name), launch_dbm};
  LightChangedLocked(EgressesOf(config_, ingress));
  return absl::OkStatus();
}

absl::Status SwitchModel::ClearSignal(int ingress) {
  if (absl::Status s = CheckIngress(ingress); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (signals_.erase(ingress) > 0) LightChangedLocked(EgressesOf(config_, ingress));
  return absl::OkStatus();
}

absl::Status SwitchModel::SetTrunk(Trunk trunk) {
  if (absl::Status s = CheckIngress(trunk.ingress); !s.ok()) return s;
  if (!IsHostPort(trunk.from)) {
    return absl::InvalidArgumentError(
        absl::StrCat("from '", trunk.from,
                     "' must be HOST:PORT, the far emulator's REST address with a numeric port "
                     "1..65535"));
  }
  if (trunk.egress < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("egress ", trunk.egress, " must be a positive integer (a far egress port)"));
  }
  if (!std::isfinite(trunk.loss_db) || trunk.loss_db < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss_db ", trunk.loss_db, " must be a finite number >= 0"));
  }
  if (remote_light_ == nullptr) {
    return absl::FailedPreconditionError(
        "this switch model was given no way to fetch light from another emulator, so it takes "
        "no trunks");
  }
  absl::MutexLock lock(&mu_);
  if (auto signal = signals_.find(trunk.ingress); signal != signals_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ingress ", trunk.ingress, " carries the local signal '", signal->second.name,
                     "'; delete it before feeding the port by a trunk"));
  }
  const int ingress = trunk.ingress;
  trunks_[ingress] = TrunkFeed{std::move(trunk), ""};
  LightChangedLocked(EgressesOf(config_, ingress));
  return absl::OkStatus();
}

absl::Status SwitchModel::ClearTrunk(int ingress) {
  if (absl::Status s = CheckIngress(ingress); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (trunks_.erase(ingress) > 0) LightChangedLocked(EgressesOf(config_, ingress));
  return absl::OkStatus();
}

std::vector<Trunk> SwitchModel::Trunks() const {
  absl::MutexLock lock(&mu_);
  std::vector<Trunk> out;
  out.reserve(trunks_.size());
  for (const auto& [ingress, feed] : trunks_) out.push_back(feed.trunk);
  return out;
}

SwitchModel::LightSource SwitchModel::SourceLocked(int egress, absl::Time now) const {
  LightSource source;
  auto holder = config_.by_egress.find(egress);
  auto feed = holder == config_.by_egress.end() ? trunks_.end() : trunks_.find(holder->second);
  if (feed == trunks_.end()) {
    source.local = LightLocked(egress, now);
    return source;
  }
  const int ingress = holder->second;
  if (!CarriesLightLocked(ingress, egress, now)) {
    source.local = Light{};
    return source;
  }
  source.trunk = feed->second.trunk;
  source.loss_db =
      source.trunk.loss_db + options_.insertion_loss_db + DropOf(ingress) + DropOf(egress);
  return source;
}

SwitchModel::TrunkFeed* SwitchModel::FeedLocked(const Trunk& trunk) const {
  auto feed = trunks_.find(trunk.ingress);
  if (feed == trunks_.end() || !(feed->second.trunk == trunk)) return nullptr;
  return &feed->second;
}

void SwitchModel::NoteFarAnswer(const Trunk& trunk, const absl::Status& answer) const {
  const std::string problem(answer.message());
  absl::MutexLock lock(&mu_);
  TrunkFeed* feed = FeedLocked(trunk);
  if (feed == nullptr || feed->problem == problem) return;
  if (problem.empty()) {
    FLEET_LOG(INFO) << Describe(trunk) << " answers again";
  } else {
    FLEET_LOG(WARNING) << Describe(trunk) << " brings no light: " << problem;
  }
  feed->problem = problem;
}

void SwitchModel::NoteHopLimit(const Trunk& trunk, int hops) const {
  absl::MutexLock lock(&mu_);
  TrunkFeed* feed = FeedLocked(trunk);
  if (feed == nullptr || feed->hop_limit_logged) return;
  FLEET_LOG(WARNING) << Describe(trunk) << " brings no light: light that has crossed " << hops
                     << " trunks would cross more than " << kMaxTrunkHops
                     << " (a loop of trunks and cross-connects?)";
  feed->hop_limit_logged = true;
}

absl::StatusOr<Light> SwitchModel::LightAt(int egress, int hops) const {
  if (!options_.size.IsEgress(egress)) {
    return absl::InvalidArgumentError(absl::StrCat("port ", egress, " is not an egress port (",
                                                   options_.size.ingress + 1, "..",
                                                   options_.size.ports(), ")"));
  }
  if (hops < 0) {
    return absl::InvalidArgumentError(absl::StrCat("hops ", hops, " must be >= 0"));
  }
  const absl::Time now = clock_->Now();
  LightSource source;
  {
    absl::MutexLock lock(&mu_);
    source = SourceLocked(egress, now);
    if (source.local) {
      CountSettledLocked(now);
      source.local->since = everything_changed_at_;
      if (auto it = egress_changed_at_.find(egress); it != egress_changed_at_.end()) {
        source.local->since = std::max(source.local->since, it->second);
      }
    }
  }
  if (source.local) return *source.local;
  // The far emulator may be slow or may ask this one back (a loop of trunks): the mutex is
  // not held from here on.
  return OverTrunk(source.trunk, hops, source.loss_db);
}

Light SwitchModel::OverTrunk(const Trunk& trunk, int hops, double loss_db, bool* answered) const {
  if (hops + 1 > kMaxTrunkHops) {
    NoteHopLimit(trunk, hops);
    return Light{std::nullopt, kNoLightDbm, /*via_trunk=*/true};
  }
  absl::StatusOr<Light> far = remote_light_->Fetch(trunk.from, trunk.egress, hops + 1);
  NoteFarAnswer(trunk, far.status());
  // A refusal (a far egress that is not one, say) is an answer: only silence counts.
  if (answered != nullptr) {
    *answered = !absl::IsUnavailable(far.status()) && !absl::IsDeadlineExceeded(far.status());
  }
  if (!far.ok() || !far->signal) return Light{std::nullopt, kNoLightDbm, /*via_trunk=*/true};
  return Light{far->signal, RoundPower(far->power_dbm - loss_db), /*via_trunk=*/true};
}

// --- Port faults ----------------------------------------------------------------------------

absl::Status SwitchModel::SetPortFailed(int port, bool failed) {
  if (absl::Status s = CheckPort(port); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (failed) {
    failed_ports_.insert(port);
  } else {
    failed_ports_.erase(port);
  }
  LightChangedLocked(EgressesOf(config_, port));
  return absl::OkStatus();
}

absl::Status SwitchModel::SetPowerDrop(int port, double drop_db) {
  if (absl::Status s = CheckPort(port); !s.ok()) return s;
  if (!std::isfinite(drop_db) || drop_db < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("power_drop_db ", drop_db, " must be a number >= 0"));
  }
  absl::MutexLock lock(&mu_);
  if (drop_db == 0) {
    power_drops_.erase(port);
  } else {
    power_drops_[port] = drop_db;
  }
  LightChangedLocked(EgressesOf(config_, port));
  return absl::OkStatus();
}

std::vector<Alarm> SwitchModel::Alarms() const {
  absl::MutexLock lock(&mu_);
  std::set<int> ports(failed_ports_.begin(), failed_ports_.end());
  for (const auto& [port, drop] : power_drops_) ports.insert(port);
  std::vector<Alarm> out;
  for (int port : ports) {
    if (failed_ports_.contains(port)) out.push_back({port, Alarm::Kind::kPortFailed});
    if (power_drops_.contains(port)) out.push_back({port, Alarm::Kind::kLowPower});
  }
  return out;
}

// --- Faults and counters --------------------------------------------------------------------

FaultSettings SwitchModel::UpdateFaults(const FaultUpdate& update) {
  absl::MutexLock lock(&mu_);
  if (update.deny_next) faults_.deny_next = *update.deny_next;
  if (update.latency) faults_.latency = *update.latency;
  if (update.fail_bulk_after) faults_.fail_bulk_after = *update.fail_bulk_after;
  if (update.expire_sessions) ++session_epoch_;
  return faults_;
}

FaultSettings SwitchModel::faults() const {
  absl::MutexLock lock(&mu_);
  return faults_;
}

bool SwitchModel::TakeDenial() {
  absl::MutexLock lock(&mu_);
  if (faults_.deny_next <= 0) return false;
  --faults_.deny_next;
  return true;
}

void SwitchModel::ClearFaults() {
  absl::MutexLock lock(&mu_);
  faults_ = FaultSettings{};
  failed_ports_.clear();
  power_drops_.clear();
  LightChangedLocked(std::nullopt);
}

std::set<int> SwitchModel::EgressesOf(const Config& config, int port) const {
  if (options_.size.IsEgress(port)) return {port};
  auto patch = config.by_ingress.find(port);
  if (patch == config.by_ingress.end()) return {};
  return {patch->second.egress};
}

void SwitchModel::LightChangedLocked(const std::optional<std::set<int>>& egresses) {
  const absl::Time now = clock_->Now();
  // Settles before now come first: counted later, they would date this change back to them.
  CountSettledLocked(now);
  ++light_generation_;
  if (!egresses) {
    everything_changed_ = light_generation_;
    everything_changed_at_ = now;
  } else {
    for (int egress : *egresses) {
      egress_changed_[egress] = light_generation_;
      egress_changed_at_[egress] = now;
    }
  }
  for (const auto& [id, listener] : light_listeners_) listener(egresses);
}

void SwitchModel::CountSettledLocked(absl::Time now) const {
  // Light listeners are not told: a waiting reader wakes at NextSettle by itself.
  while (!settling_.empty() && settling_.begin()->first <= now) {
    const auto& [settled_at, egress] = *settling_.begin();
    egress_changed_[egress] = ++light_generation_;
    egress_changed_at_[egress] = settled_at;
    settling_.erase(settling_.begin());
  }
}

uint64_t SwitchModel::light_generation() const {
  absl::MutexLock lock(&mu_);
  CountSettledLocked(clock_->Now());
  return light_generation_;
}

uint64_t SwitchModel::LightGenerationOf(const std::vector<int>& egresses) const {
  absl::MutexLock lock(&mu_);
  CountSettledLocked(clock_->Now());
  uint64_t last = everything_changed_;
  for (int egress : egresses) {
    if (auto it = egress_changed_.find(egress); it != egress_changed_.end()) {
      last = std::max(last, it->second);
    }
  }
  return last;
}

absl::Time SwitchModel::NextSettle(absl::Time now, const std::vector<int>& egresses) const {
  absl::MutexLock lock(&mu_);
  absl::Time next = absl::InfiniteFuture();
  for (int egress : egresses) {
    auto ingress = config_.by_egress.find(egress);
    if (ingress == config_.by_egress.end()) continue;
    const absl::Time settled_at = config_.by_ingress.at(ingress->second).settled_at;
    if (settled_at > now) next = std::min(next, settled_at);
  }
  return next;
}

int SwitchModel::AddLightListener(LightListener listener) {
  absl::MutexLock lock(&mu_);
  const int id = next_listener_++;
  light_listeners_[id] = std::move(listener);
  return id;
}

void SwitchModel::RemoveLightListener(int id) {
  absl::MutexLock lock(&mu_);
  light_listeners_.erase(id);
}

uint64_t SwitchModel::session_epoch() const {
  absl::MutexLock lock(&mu_);
  return session_epoch_;
}

void SwitchModel::CountTl1Command() {
  absl::MutexLock lock(&mu_);
  ++counters_.tl1_commands;
  ++counters_.commands;
}

void SwitchModel::CountRestRequest() {
  absl::MutexLock lock(&mu_);
  ++counters_.rest_requests;
  ++counters_.commands;
}

void SwitchModel::CountSimRequest() {
  absl::MutexLock lock(&mu_);
  ++counters_.sim_requests;
}

void SwitchModel::SessionOpened() {
  absl::MutexLock lock(&mu_);
  ++counters_.sessions;
}

void SwitchModel::SessionClosed() {
  absl::MutexLock lock(&mu_);
  --counters_.sessions;
}

Counters SwitchModel::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

}  // namespace fleet::polatis_emu
