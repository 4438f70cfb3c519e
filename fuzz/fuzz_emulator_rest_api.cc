// libFuzzer target: polatis-emu's HTTP resources (RestApi::Handle, the entry its HTTP server
// calls for every request) against a real SwitchModel. Whatever a client sends must be
// answered with an HTTP status and, when the body is JSON, valid JSON; it must never crash,
// throw out of Handle or leave the model holding an impossible state.
//
// Input: requests separated by a line "%%". Each request is a line "METHOD TARGET [AUTH]",
// then its body. TARGET is the URL path (as the server hands it over, decoded) with an
// optional "?QUERY"; AUTH is the raw Authorization header ("-" for none), the emulator's own
// credentials when absent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/log.h"
#include "nlohmann/json.hpp"
#include "switch_adapters/polatis/emulator/rest_api.h"
#include "switch_adapters/polatis/emulator/switch_model.h"
#include "testing/fake_clock.h"

namespace {

using fleet::polatis_emu::HttpRequest;
using fleet::polatis_emu::HttpResponse;
using fleet::polatis_emu::Light;
using fleet::polatis_emu::SwitchModel;

// More requests add little but time: the model's state is reached in a few.
constexpr size_t kMaxRequests = 32;

void Check(bool invariant) {
  if (!invariant) std::abort();
}

// A trunk's far end is this same model: light loops back through it, so the hop limit is
// exercised too, without a socket.
class LoopbackLight : public fleet::polatis_emu::RemoteLight {
 public:
  absl::StatusOr<Light> Fetch(const std::string& from, int egress, int hops) override {
    return model->LightAt(egress, hops);
  }
  const SwitchModel* model = nullptr;
};

HttpRequest ParseRequest(absl::string_view text) {
  HttpRequest request;
  const size_t newline = text.find('\n');
  const absl::string_view head = text.substr(0, newline);
  if (newline != absl::string_view::npos) request.body = std::string(text.substr(newline + 1));
  std::vector<absl::string_view> words = absl::StrSplit(head, absl::MaxSplits(' ', 2));
  request.method = std::string(words[0]);
  const absl::string_view target = words.size() > 1 ? words[1] : "/";
  const size_t question = target.find('?');
  request.path = std::string(target.substr(0, question));
  if (question != absl::string_view::npos) request.query = std::string(target.substr(question + 1));
  if (words.size() > 2) {
    if (words[2] != "-") request.authorization = std::string(words[2]);
  } else {
    request.authorization = "Basic " + absl::Base64Escape("admin:root");
  }
  return request;
}

void CheckResponse(const HttpResponse& response) {
  Check(response.status >= 100 && response.status <= 599);
  if (!response.body.empty() && response.content_type.find("json") != std::string::npos) {
    Check(nlohmann::json::accept(response.body));
  }
}

// One ingress per egress and the reverse, every port on its side of the switch.
void CheckModel(const SwitchModel& model) {
  std::set<int> egresses;
  int last_ingress = 0;
  for (const fleet::polatis_emu::CrossConnect& x : model.CrossConnects()) {
    Check(x.ingress > last_ingress && model.size().IsIngress(x.ingress));
    Check(model.size().IsEgress(x.egress) && egresses.insert(x.egress).second);
    last_ingress = x.ingress;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Trunk problems are logged as warnings on every change; they are expected here.
  fleet::SetMinLogLevel(fleet::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  fleet::testing::FakeClock clock;
  LoopbackLight remote;
  fleet::polatis_emu::SwitchModelOptions model_options;  // 384x384, as polatis-emu starts.
  absl::StatusOr<std::unique_ptr<SwitchModel>> model =
      SwitchModel::Create(model_options, &clock, &remote);
  Check(model.ok());
  remote.model = model->get();
  fleet::polatis_emu::RestApiOptions api_options;
  api_options.identity = fleet::polatis_emu::MakeSwitchIdentity(model_options.size, "fuzz");
  // Waiting for settling or injected latency moves the fake clock instead of sleeping.
  fleet::polatis_emu::RestApi api(api_options, model->get(), &clock,
                                  [&clock](absl::Duration d) { clock.Advance(d); });
  // A long poll would wait in real time for a change no other thread makes: answered at
  // once, as when the server stops.
  api.Stop();

  size_t handled = 0;
  for (absl::string_view text : absl::StrSplit(input, "\n%%\n")) {
    if (++handled > kMaxRequests) break;
    const HttpResponse response = api.Handle(ParseRequest(text));
    CheckResponse(response);
    CheckModel(**model);
  }
  return 0;
}
