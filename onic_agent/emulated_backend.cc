#include "onic_agent/emulated_backend.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/http_client.h"
#include "common/log.h"
#include "fleet/v1/names.h"

namespace fleet::onic_agent {
namespace {

constexpr double kNoLight = -99.99;

// Reads and writes light over HTTP on pooled keep-alive connections, so the monitor's reads
// every interval do not open a TCP connection (and an emulator thread) each. Light reads of
// ports retraining in parallel are gathered into shared requests (ReadLight).
class HttpLightSimulator : public LightSimulator {
 public:
  explicit HttpLightSimulator(std::string address) : base_("http://" + std::move(address)) {}
  ~HttpLightSimulator() override {
    {
      absl::MutexLock lock(&mirror_mu_);
      stopping_ = true;
      mirror_changed_.SignalAll();
    }
    if (mirror_client_ != nullptr) mirror_client_->Abort();  // Ends a waiting long poll.
    if (mirror_thread_.joinable()) mirror_thread_.join();
  }

  // One long poll at a time (GET /sim/v1/light?egress=...&after=G): the simulator answers
  // when its light generation moves or a cross-connect settles, and the copy is replaced.
  void Mirror(const std::vector<uint32_t>& egresses) override {
    if (egresses.empty() || mirror_thread_.joinable()) return;
    CurlHttpClientOptions options;
    options.base_url = base_;
    options.content_type = "application/json";
    options.request_timeout = kMirrorWait + absl::Seconds(5);
    mirror_client_ = NewCurlHttpClient(options);
    mirror_thread_ = std::thread([this, egresses] { MirrorLoop(egresses); });
  }

  std::optional<Light> Mirrored(uint32_t egress) override {
    absl::MutexLock lock(&mirror_mu_);
    auto it = mirror_.find(egress);
    if (it == mirror_.end()) return std::nullopt;
    return it->second;
  }

  uint64_t MirrorVersion() override {
    absl::MutexLock lock(&mirror_mu_);
    return mirror_version_;
  }

  uint64_t AwaitMirrorChange(uint64_t seen, absl::Time until) override {
    absl::MutexLock lock(&mirror_mu_);
    while (!stopping_ && mirror_version_ == seen && absl::Now() < until) {
      mirror_changed_.WaitWithDeadline(&mirror_mu_, until);
    }
    return mirror_version_;
  }

  absl::Status PutSignal(uint32_t ingress, const std::string& name, double power_dbm) override {
    nlohmann::json body = {{"name", name}, {"power_dbm", power_dbm}};
    return Request("PUT", absl::StrCat("/sim/v1/signals/", ingress), body.dump()).status();
  }

  // Reads that arrive together are gathered: while one request is out, the egresses asked
  // for meanwhile wait and go as the next one (GET /sim/v1/light?egress=A,B,...), so ports
  // that finish training together cost one or two round trips, not one each.
  absl::StatusOr<Light> ReadLight(uint32_t egress) override {
    auto read = std::make_shared<PendingRead>();
    read->egress = egress;
    read_mu_.Lock();
    waiting_.push_back(read);
    while (!read->done) {
      if (reading_) {
        read_changed_.Wait(&read_mu_);
        continue;
      }
      reading_ = true;  // This thread sends everything waiting now.
      std::vector<std::shared_ptr<PendingRead>> batch;
      batch.swap(waiting_);
      read_mu_.Unlock();
      Fetch(batch);
      read_mu_.Lock();
      for (const std::shared_ptr<PendingRead>& r : batch) r->done = true;
      reading_ = false;
      read_changed_.SignalAll();
    }
    read_mu_.Unlock();
    return read->light;
  }

 private:
  struct PendingRead {
    uint32_t egress = 0;
    bool done = false;
    absl::StatusOr<Light> light;
  };

  // One request for every read of `batch`; each gets its light, or the request's error.
  void Fetch(const std::vector<std::shared_ptr<PendingRead>>& batch) {
    std::vector<std::string> egresses;
    for (const std::shared_ptr<PendingRead>& r : batch) egresses.push_back(absl::StrCat(r->egress));
    auto fail = [&](const absl::Status& status) {
      for (const std::shared_ptr<PendingRead>& r : batch) r->light = status;
    };
    absl::StatusOr<std::string> reply =
        Request("GET", absl::StrCat("/sim/v1/light?egress=", absl::StrJoin(egresses, ",")), "");
    if (!reply.ok()) return fail(reply.status());
    nlohmann::json parsed = nlohmann::json::parse(*reply, nullptr, false);
    if (!parsed.is_object() || !parsed["lights"].is_array() ||
        parsed["lights"].size() != batch.size()) {
      return fail(
          absl::InternalError(absl::StrCat("simulator answered light with '", *reply, "'")));
    }
    for (size_t i = 0; i < batch.size(); ++i) batch[i]->light = ParseLight(parsed["lights"][i]);
  }

  // One entry of a /sim/v1/light answer; `since_us`, when the simulator knows since when the
  // light has been there (not for light over a trunk).
  static Light ParseLight(const nlohmann::json& entry) {
    Light light;
    if (entry.contains("signal") && entry["signal"].is_string()) light.signal = entry["signal"];
    light.power_dbm = entry.value("power_dbm", kNoLight);
    if (entry.contains("since_us") && entry["since_us"].is_number_integer()) {
      light.since = absl::FromUnixMicros(entry["since_us"].get<int64_t>());
    }
    return light;
  }

  // How long one long poll waits for a change before it is asked again.
  static constexpr absl::Duration kMirrorWait = absl::Seconds(10);

  void MirrorLoop(const std::vector<uint32_t>& egresses) {
    const std::string list = absl::StrJoin(egresses, ",");
    bool copied = false;  // `generation` is that of the copy held.
    uint64_t generation = 0;
    while (true) {
      {
        absl::MutexLock lock(&mirror_mu_);
        if (stopping_) return;
      }
      std::string path = absl::StrCat("/sim/v1/light?egress=", list);
      if (copied) {
        absl::StrAppend(&path, "&after=", generation,
                        "&wait_ms=", absl::ToInt64Milliseconds(kMirrorWait));
      }
      absl::StatusOr<HttpResponse> reply = mirror_client_->Send("GET", path, "");
      nlohmann::json parsed;
      if (reply.ok() && reply->status == 200) {
        parsed = nlohmann::json::parse(reply->body, nullptr, false);
      }
      const absl::Time now = absl::Now();
      absl::MutexLock lock(&mirror_mu_);
      if (!parsed.is_object() || !parsed["lights"].is_array() ||
          parsed["lights"].size() != egresses.size() || !parsed["generation"].is_number()) {
        // No copy is better than a stale one: reads ask the simulator until this recovers.
        if (copied) {
          mirror_.clear();
          ++mirror_version_;
          mirror_changed_.SignalAll();
        }
        copied = false;
        if (!stopping_) mirror_changed_.WaitWithTimeout(&mirror_mu_, absl::Milliseconds(200));
        continue;
      }
      generation = parsed["generation"].get<uint64_t>();
      copied = true;
      for (size_t i = 0; i < egresses.size(); ++i) {
        const nlohmann::json& entry = parsed["lights"][i];
        if (entry.value("via_trunk", false)) {
          mirror_.erase(egresses[i]);
          continue;
        }
        Light light = ParseLight(entry);
        // Without the simulator's word, the receiver has seen this light since the answer
        // that first showed it.
        if (light.since == absl::InfinitePast()) {
          light.since = now;
          if (auto held = mirror_.find(egresses[i]); held != mirror_.end() &&
                                                     held->second.signal == light.signal &&
                                                     held->second.power_dbm == light.power_dbm) {
            light.since = held->second.since;
          }
        }
        mirror_[egresses[i]] = std::move(light);
      }
      ++mirror_version_;
      mirror_changed_.SignalAll();
    }
  }

  // Idle connections kept: each holds one of the emulator's server threads while it waits, so
  // an agent keeps a few, not one per port.
  static constexpr size_t kIdleConnections = 4;

  absl::StatusOr<std::string> Request(const std::string& method, const std::string& path,
                                      const std::string& body) {
    std::unique_ptr<HttpClient> client;
    {
      absl::MutexLock lock(&mu_);
      if (!idle_.empty()) {
        client = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (client == nullptr) {
      CurlHttpClientOptions options;
      options.base_url = base_;
      options.content_type = "application/json";
      options.request_timeout = absl::Seconds(5);
      client = NewCurlHttpClient(options);
    }
    absl::StatusOr<HttpResponse> reply = client->Send(method, path, body);
    if (reply.ok()) {
      absl::MutexLock lock(&mu_);
      if (idle_.size() < kIdleConnections) idle_.push_back(std::move(client));
    }
    if (!reply.ok()) {
      return absl::UnavailableError(
          absl::StrCat("optical simulator at ", base_, ": ", reply.status().message()));
    }
    if (reply->status >= 300) {
      return absl::UnavailableError(absl::StrCat("optical simulator ", method, " ", path, ": HTTP ",
                                                 reply->status, " ", reply->body));
    }
    return std::move(reply->body);
  }

  const std::string base_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<HttpClient>> idle_ ABSL_GUARDED_BY(mu_);
  absl::Mutex read_mu_;
  absl::CondVar read_changed_;
  bool reading_ ABSL_GUARDED_BY(read_mu_) = false;  // A thread is sending a gathered read.
  std::vector<std::shared_ptr<PendingRead>> waiting_ ABSL_GUARDED_BY(read_mu_);

  std::unique_ptr<HttpClient> mirror_client_;  // The long poll's own connection.
  std::thread mirror_thread_;
  absl::Mutex mirror_mu_;
  absl::CondVar mirror_changed_;  // An update of the copy, or stopping.
  bool stopping_ ABSL_GUARDED_BY(mirror_mu_) = false;
  std::map<uint32_t, Light> mirror_ ABSL_GUARDED_BY(mirror_mu_);  // By egress.
  uint64_t mirror_version_ ABSL_GUARDED_BY(mirror_mu_) = 0;       // Updates of mirror_.
};

}  // namespace

std::unique_ptr<LightSimulator> NewHttpLightSimulator(const std::string& address) {
  return std::make_unique<HttpLightSimulator>(address);
}

EmulatedBackend::EmulatedBackend(Options options, std::unique_ptr<LightSimulator> simulator)
    : options_(std::move(options)), simulator_(std::move(simulator)) {}

absl::StatusOr<std::unique_ptr<EmulatedBackend>> EmulatedBackend::Create(
    Options options, std::unique_ptr<LightSimulator> simulator) {
  std::unique_ptr<EmulatedBackend> backend(
      new EmulatedBackend(std::move(options), std::move(simulator)));
  std::vector<uint32_t> receivers;
  for (const OnicConfig& onic : backend->options_.onics) {
    for (uint32_t port : {1u, 2u}) {
      absl::Status lit =
          backend->simulator_->PutSignal(onic.tx_ingress[port - 1], v1::PortName(onic.serial, port),
                                         backend->options_.launch_power_dbm);
      if (!lit.ok()) return lit;
      receivers.push_back(onic.rx_egress[port - 1]);
    }
  }
  backend->simulator_->Mirror(receivers);
  return backend;
}

absl::StatusOr<const EmulatedBackend::OnicConfig*> EmulatedBackend::Find(const std::string& serial,
                                                                         uint32_t port) const {
  for (const OnicConfig& onic : options_.onics) {
    if (onic.serial != serial) continue;
    if (port != 1 && port != 2) {
      return absl::NotFoundError(absl::StrCat("O-NIC ", serial, " has no port ", port));
    }
    return &onic;
  }
  return absl::NotFoundError(absl::StrCat("no O-NIC with serial ", serial, " on this host"));
}

void EmulatedBackend::SetStatus(const std::string& serial, uint32_t port, v1::LinkStatus status,
                                const std::string& detail) {
  absl::MutexLock lock(&mu_);
  status_[{serial, port}] = {status, detail};
}

v1::LinkState EmulatedBackend::Observe(const OnicConfig& onic, uint32_t port,
                                       const LightSimulator::Light* known) {
  v1::LinkState link;
  link.set_onic_serial(onic.serial);
  link.set_port(port);
  link.set_tx_power_dbm(options_.launch_power_dbm);
  link.set_rx_power_dbm(kNoLight);
  std::pair<v1::LinkStatus, std::string> last = {v1::LINK_STATUS_DOWN, "not trained yet"};
  {
    absl::MutexLock lock(&mu_);
    if (auto it = status_.find({onic.serial, port}); it != status_.end()) last = it->second;
  }
  link.set_status(last.first);
  link.set_detail(last.second);
  absl::StatusOr<LightSimulator::Light> light =
      known != nullptr ? absl::StatusOr<LightSimulator::Light>(*known)
                       : simulator_->ReadLight(onic.rx_egress[port - 1]);
  if (!light.ok()) {
    link.set_detail(std::string(light.status().message()));
    return link;
  }
  link.set_rx_power_dbm(light->power_dbm);
  link.set_peer_seen(light->signal);
  if (link.status() == v1::LINK_STATUS_UP) {
    // An up link whose light is gone (or too weak) is down, whatever the last retrain said.
    if (light->signal.empty()) {
      link.set_status(v1::LINK_STATUS_DOWN);
      link.set_detail("no light");
    } else if (light->power_dbm < options_.min_rx_power_dbm) {
      link.set_status(v1::LINK_STATUS_DOWN);
      link.set_detail(absl::StrCat("rx power ", light->power_dbm, " dBm below ",
                                   options_.min_rx_power_dbm, " dBm"));
    } else {
      link.set_link_speed_mts(16000);  // The emulated O-NIC: PCIe 4.0, 16 lanes.
      link.set_link_width(16);
    }
  }
  return link;
}

absl::StatusOr<std::vector<v1::AgentOnic>> EmulatedBackend::Discover() {
  std::vector<v1::AgentOnic> out;
  for (const OnicConfig& onic : options_.onics) {
    v1::AgentOnic& o = out.emplace_back();
    o.set_serial(onic.serial);
    o.set_pcie_address(onic.pcie_address);
    for (uint32_t port : {1u, 2u}) *o.add_ports() = Observe(onic, port);
  }
  return out;
}

CommandOutcome EmulatedBackend::Quiesce(const std::string& serial, uint32_t port,
                                        absl::Time deadline) {
  absl::StatusOr<const OnicConfig*> onic = Find(serial, port);
  if (!onic.ok()) return {onic.status(), {}};
  SetStatus(serial, port, v1::LINK_STATUS_QUIESCED, "quiesced for a circuit change");
  {
    absl::MutexLock lock(&mu_);
    training_since_.erase({serial, port});  // Out of service: no training goes on.
  }
  // A quiesced port carries nothing: no light reading, which would cost the simulator a round
  // trip per port while the controller waits to program the switch.
  v1::LinkState link;
  link.set_onic_serial(serial);
  link.set_port(port);
  link.set_status(v1::LINK_STATUS_QUIESCED);
  link.set_detail("quiesced for a circuit change");
  link.set_tx_power_dbm(options_.launch_power_dbm);
  link.set_rx_power_dbm(kNoLight);
  return {absl::OkStatus(), link};
}

CommandOutcome EmulatedBackend::Retrain(const std::string& serial, uint32_t port,
                                        const v1::PeerIdentity& expected, absl::Time deadline) {
  absl::StatusOr<const OnicConfig*> onic = Find(serial, port);
  if (!onic.ok()) return {onic.status(), {}};
  SetStatus(serial, port, v1::LINK_STATUS_TRAINING, "training");
  const std::string want =
      expected.onic_serial().empty() ? "" : v1::PortName(expected.onic_serial(), expected.port());
  // Training takes its simulated time, from now or, for an armed port, from its light's
  // arrival; then the light must be there, from the right peer.
  absl::Time began = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    if (auto armed = training_since_.find({serial, port}); armed != training_since_.end()) {
      began = std::min(began, armed->second);
      training_since_.erase(armed);
    }
  }
  const absl::Time trained = began + options_.training_time;
  absl::SleepFor(std::min(trained, deadline) - absl::Now());
  // The receiver's own reading first: when it shows the expected peer at usable power the
  // link has trained, without asking the simulator. Anything else is asked, since the copy
  // may not have caught up with the switch yet.
  if (std::optional<LightSimulator::Light> seen =
          simulator_->Mirrored((*onic)->rx_egress[port - 1]);
      seen && Usable(*seen, want)) {
    SetStatus(serial, port, v1::LINK_STATUS_UP, absl::StrCat("trained with ", seen->signal));
    return {absl::OkStatus(), Observe(**onic, port, &*seen)};
  }
  const absl::Time give_up = std::min(deadline, trained + options_.light_wait);
  std::string problem = "no light";
  while (true) {
    absl::StatusOr<LightSimulator::Light> light =
        simulator_->ReadLight((*onic)->rx_egress[port - 1]);
    if (!light.ok()) {
      problem = std::string(light.status().message());
    } else if (light->signal.empty()) {
      problem = "no light";
    } else if (!want.empty() && light->signal != want) {
      const std::string detail =
          absl::StrCat("wiring error: saw ", light->signal, ", expected ", want);
      SetStatus(serial, port, v1::LINK_STATUS_DOWN, detail);
      return {absl::FailedPreconditionError(detail), Observe(**onic, port, &*light)};
    } else if (light->power_dbm < options_.min_rx_power_dbm) {
      problem = absl::StrCat("rx power ", light->power_dbm, " dBm from ", light->signal,
                             " is below ", options_.min_rx_power_dbm, " dBm");
    } else {
      SetStatus(serial, port, v1::LINK_STATUS_UP, absl::StrCat("trained with ", light->signal));
      return {absl::OkStatus(), Observe(**onic, port, &*light)};
    }
    if (absl::Now() >= give_up) break;
    absl::SleepFor(std::min(options_.poll_interval, give_up - absl::Now()));
  }
  SetStatus(serial, port, v1::LINK_STATUS_DOWN, problem);
  absl::Status status = absl::Now() >= deadline
                            ? absl::DeadlineExceededError(absl::StrCat(
                                  "retrain of ", v1::PortName(serial, port), ": ", problem))
                            : absl::UnavailableError(absl::StrCat(
                                  "retrain of ", v1::PortName(serial, port), ": ", problem));
  return {status, Observe(**onic, port)};
}

bool EmulatedBackend::Usable(const LightSimulator::Light& light, const std::string& want) const {
  return !light.signal.empty() && (want.empty() || light.signal == want) &&
         light.power_dbm >= options_.min_rx_power_dbm;
}

absl::StatusOr<absl::Time> EmulatedBackend::AwaitLight(const std::string& serial, uint32_t port,
                                                       const v1::PeerIdentity& expected,
                                                       absl::Time until,
                                                       const std::atomic<bool>& cancelled) {
  absl::StatusOr<const OnicConfig*> onic = Find(serial, port);
  if (!onic.ok()) return onic.status();
  const absl::Time armed = absl::Now();
  const uint32_t egress = (*onic)->rx_egress[port - 1];
  const std::string want =
      expected.onic_serial().empty() ? "" : v1::PortName(expected.onic_serial(), expected.port());
  // Another peer's light (the circuit this port had before) is waited past, not a failure:
  // the switch may not have moved yet. The retrain that follows judges what is there.
  uint64_t version = simulator_->MirrorVersion();
  while (true) {
    if (cancelled.load()) {
      return absl::CancelledError(absl::StrCat(
          v1::PortName(serial, port), ": stopped waiting for light; the port was quiesced"));
    }
    std::optional<LightSimulator::Light> light = simulator_->Mirrored(egress);
    const bool mirrored = light.has_value();
    if (!mirrored) {
      absl::StatusOr<LightSimulator::Light> read = simulator_->ReadLight(egress);
      if (read.ok()) light = *read;
    }
    const absl::Time now = absl::Now();
    if (light && Usable(*light, want)) {
      // The port began training when the copy first showed the light (light already there
      // when armed: at arming), not when this thread got to run: an armed receiver trains on
      // signal detect. Light read from the simulator arrived by now.
      const absl::Time arrived =
          light->since == absl::InfinitePast() ? now : std::min(std::max(light->since, armed), now);
      absl::MutexLock lock(&mu_);
      training_since_[{serial, port}] = arrived;
      return arrived;
    }
    if (now >= until) {
      return absl::DeadlineExceededError(
          absl::StrCat(v1::PortName(serial, port), ": no usable light from ",
                       want.empty() ? "a peer" : want, " by the end of the wait"));
    }
    // The copy wakes this at once when it changes; a cancel is seen within a poll interval.
    const absl::Time wake = std::min(until, now + options_.poll_interval);
    if (mirrored) {
      version = simulator_->AwaitMirrorChange(version, wake);
    } else {
      absl::SleepFor(wake - now);
      version = simulator_->MirrorVersion();
    }
  }
}

CommandOutcome EmulatedBackend::ReadPort(const std::string& serial, uint32_t port) {
  absl::StatusOr<const OnicConfig*> onic = Find(serial, port);
  if (!onic.ok()) return {onic.status(), {}};
  return {absl::OkStatus(), Observe(**onic, port)};
}

absl::Status EmulatedBackend::Blink(const std::string& serial, absl::Duration duration) {
  absl::StatusOr<const OnicConfig*> onic = Find(serial, 1);
  if (!onic.ok()) return onic.status();
  // The emulated O-NIC has no LED: the blink is logged where a technician would look.
  FLEET_LOG(INFO) << "O-NIC " << serial << ": identify LED blinking for "
                  << absl::FormatDuration(duration);
  return absl::OkStatus();
}

}  // namespace fleet::onic_agent
