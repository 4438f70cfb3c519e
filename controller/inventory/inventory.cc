#include "controller/inventory/inventory.h"

#include <yaml-cpp/yaml.h>

#include "common/wording.h"
#include "common/yaml_text.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/build_id.h"
#include "common/hex_id.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "controller/inventory/field_diff.h"
#include "fleet/v1/names.h"

namespace fleet::inventory {
namespace {

// ---------------------------------------------------------------------------------------
// Parsing. Each reader records problems and carries on, so one pass lists them all.

class Parser {
 public:
  explicit Parser(absl::string_view file_name) : file_(file_name) {}

  void Problem(const YAML::Node& node, absl::string_view what) {
    problems_.push_back(absl::StrCat(file_, ":", node.Mark().line + 1, ": ", what));
  }
  const std::vector<std::string>& problems() const { return problems_; }

  // "device gpu1" when the mapping has its id, else just "device": names the object in
  // problems found before its id is read.
  static std::string Label(const YAML::Node& node, absl::string_view kind, const char* id_key) {
    if (node.IsMap() && node[id_key] && node[id_key].IsScalar()) {
      return absl::StrCat(kind, " ", node[id_key].Scalar());
    }
    return std::string(kind);
  }

  // Checks `node` is a map whose keys are all in `allowed`.
  bool ExpectMap(const YAML::Node& node, absl::string_view what,
                 const std::set<std::string>& allowed) {
    if (!node.IsMap()) {
      Problem(node, absl::StrCat(what, " must be a mapping"));
      return false;
    }
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      if (!allowed.contains(key)) {
        Problem(entry.first, absl::StrCat(what, ": unknown key '", key,
                                          "'; expected one of: ", absl::StrJoin(allowed, ", ")));
      }
    }
    return true;
  }

  std::string String(const YAML::Node& map, const std::string& key, absl::string_view what,
                     bool required) {
    const YAML::Node node = map[key];
    if (!node) {
      if (required) Problem(map, absl::StrCat(what, ": missing '", key, "'"));
      return "";
    }
    if (!node.IsScalar()) {
      Problem(node, absl::StrCat(what, ": '", key, "' must be a single value"));
      return "";
    }
    return node.Scalar();
  }

  uint32_t Number(const YAML::Node& map, const std::string& key, absl::string_view what) {
    const std::string text = String(map, key, what, false);
    if (text.empty()) return 0;
    uint32_t value = 0;
    if (!absl::SimpleAtoi(text, &value)) {
      Problem(map[key],
              absl::StrCat(what, ": '", key, "' must be a whole number, not '", text, "'"));
    }
    return value;
  }

  // true or false (absent is false).
  bool Bool(const YAML::Node& map, const std::string& key, absl::string_view what) {
    const std::string text = String(map, key, what, false);
    if (text == "true") return true;
    if (!text.empty() && text != "false") {
      Problem(map[key],
              absl::StrCat(what, ": '", key, "' must be true or false, not '", text, "'"));
    }
    return false;
  }

  // "ocs1/17" → {ocs1, 17}.
  bool PortRef(const YAML::Node& map, const std::string& key, absl::string_view what,
               v1::SwitchPortRef* out) {
    const std::string text = String(map, key, what, true);
    if (text.empty()) return false;
    std::vector<std::string> parts = absl::StrSplit(text, '/');
    uint32_t port = 0;
    if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &port)) {
      Problem(map[key], absl::StrCat(what, ": '", key,
                                     "' must be SWITCH/PORT (e.g. ocs1/17), not '", text, "'"));
      return false;
    }
    out->set_switch_id(parts[0]);
    out->set_port(port);
    return true;
  }

  template <typename E>
  E Enum(const YAML::Node& map, const std::string& key, absl::string_view what) {
    const std::string text = String(map, key, what, true);
    if (text.empty()) return static_cast<E>(0);
    std::optional<E> value = v1::Parse<E>(text);
    if (!value) {
      Problem(map[key], absl::StrCat(what, ": '", key, "' is '", text,
                                     "'; expected one of: ", absl::StrJoin(v1::Names<E>(), ", ")));
      return static_cast<E>(0);
    }
    return *value;
  }

  // A sequence at `key` (absent is empty).
  YAML::Node List(const YAML::Node& map, const std::string& key, absl::string_view what) {
    const YAML::Node node = map[key];
    if (!node || node.IsNull()) return YAML::Node(YAML::NodeType::Sequence);
    if (!node.IsSequence()) {
      Problem(node, absl::StrCat(what, ": '", key, "' must be a list"));
      return YAML::Node(YAML::NodeType::Sequence);
    }
    return node;
  }

  void ParseSwitch(const YAML::Node& node, v1::Switch* s) {
    if (!ExpectMap(node, Label(node, "switch", "id"),
                   {"id", "model", "size", "address", "protocol", "port", "credentials", "cluster",
                    "trunk_reserved", "ca_bundle", "insecure_http"})) {
      return;
    }
    s->set_id(String(node, "id", "switch", true));
    const std::string what = absl::StrCat("switch ", s->id());
    s->set_model(String(node, "model", what, true));
    const std::string size = String(node, "size", what, true);
    if (!size.empty()) {
      std::vector<std::string> nm = absl::StrSplit(size, 'x');
      uint32_t n = 0, m = 0;
      if (nm.size() != 2 || !absl::SimpleAtoi(nm[0], &n) || !absl::SimpleAtoi(nm[1], &m) ||
          n == 0 || m == 0 || n > kMaxSwitchSide || m > kMaxSwitchSide) {
        Problem(node["size"], absl::StrCat(what, ": size must be NxM with 0 < N, M <= ",
                                           kMaxSwitchSide, " (e.g. 384x384), not '", size, "'"));
        n = m = 0;
      }
      s->set_ingress_ports(n);
      s->set_egress_ports(m);
    }
    s->set_address(String(node, "address", what, true));
    s->set_protocol(Enum<v1::SwitchProtocol>(node, "protocol", what));
    s->set_management_port(Number(node, "port", what));
    s->set_credentials_ref(String(node, "credentials", what, false));
    s->set_cluster(String(node, "cluster", what, false));
    s->set_ca_bundle(String(node, "ca_bundle", what, false));
    s->set_insecure_http(Bool(node, "insecure_http", what));
    // Ranges are expanded only inside a switch of a valid size (a bad size is reported
    // already): a range is bounded by the switch, never by what the file says.
    const uint32_t total = s->ingress_ports() + s->egress_ports();
    std::set<uint32_t> reserved;
    for (const YAML::Node& range : List(node, "trunk_reserved", what)) {
      const std::string text = range.IsScalar() ? range.Scalar() : "";
      std::vector<std::string> ends = absl::StrSplit(text, '-');
      uint32_t lo = 0, hi = 0;
      bool ok = !text.empty() && ends.size() <= 2 && absl::SimpleAtoi(ends[0], &lo) &&
                absl::SimpleAtoi(ends.back(), &hi) && lo > 0 && lo <= hi;
      if (!ok) {
        Problem(range, absl::StrCat(what, ": trunk_reserved entry '", text,
                                    "' must be a port or a range LOW-HIGH"));
        continue;
      }
      if (total == 0) continue;
      if (hi > total) {
        Problem(range, absl::StrCat(what, ": trunk_reserved entry '", text,
                                    "' is outside the switch (ports 1..", total, ")"));
        continue;
      }
      for (uint32_t p = lo; p <= hi; ++p) reserved.insert(p);
    }
    for (uint32_t p : reserved) s->add_trunk_reserved_ports(p);
  }

  void ParseHost(const YAML::Node& node, v1::Host* h) {
    if (!ExpectMap(node, Label(node, "host", "name"), {"name", "address", "cluster"})) return;
    h->set_name(String(node, "name", "host", true));
    const std::string what = absl::StrCat("host ", h->name());
    h->set_address(String(node, "address", what, false));
    h->set_cluster(String(node, "cluster", what, false));
  }

  void ParseOnic(const YAML::Node& node, const std::string& device, v1::Onic* o) {
    const std::string owner = absl::StrCat("device ", device, " onic");
    if (!ExpectMap(node, Label(node, owner, "id"), {"id", "serial", "pcie", "ports"})) return;
    o->set_id(String(node, "id", owner, true));
    o->set_device(device);
    const std::string what = absl::StrCat("onic ", o->id());
    o->set_serial(String(node, "serial", what, true));
    o->set_pcie_address(String(node, "pcie", what, false));
    uint32_t index = 0;
    for (const YAML::Node& port : List(node, "ports", what)) {
      ++index;
      const std::string port_what = absl::StrCat(what, " port ", index);
      if (!ExpectMap(port, port_what, {"tx", "rx"})) continue;
      v1::OnicPort* p = o->add_ports();
      p->set_index(index);
      PortRef(port, "tx", port_what, p->mutable_tx());
      PortRef(port, "rx", port_what, p->mutable_rx());
    }
  }

  void ParseDevice(const YAML::Node& node, v1::Inventory* inventory) {
    if (!ExpectMap(node, Label(node, "device", "id"),
                   {"id", "kind", "host", "chassis", "model", "spare", "pcie", "onics"}))
      return;
    v1::Device* d = inventory->add_devices();
    d->set_id(String(node, "id", "device", true));
    const std::string what = absl::StrCat("device ", d->id());
    d->set_kind(Enum<v1::DeviceKind>(node, "kind", what));
    d->set_host(String(node, "host", what, false));
    d->set_chassis(String(node, "chassis", what, false));
    d->set_model(String(node, "model", what, false));
    d->set_spare(Bool(node, "spare", what));
    if (node["pcie"]) {
      v1::PcieIdentity pcie;
      ParsePcie(node["pcie"], what, &pcie);
      // Kept only when it says something, as the store gives it back.
      if (pcie.ByteSizeLong() > 0) *d->mutable_pcie() = pcie;
    }
    for (const YAML::Node& onic : List(node, "onics", what)) {
      ParseOnic(onic, d->id(), inventory->add_onics());
    }
  }

  // pcie: {vendor: 10de, device: 2330, dsn: 48-b0-2d-03-00-a1-b2-c3}, each optional, in hex.
  void ParsePcie(const YAML::Node& node, const std::string& device, v1::PcieIdentity* out) {
    const std::string what = absl::StrCat(device, " pcie");
    if (!ExpectMap(node, what, {"vendor", "device", "dsn"})) return;
    auto hex = [&](const std::string& key, int bits) -> uint64_t {
      const std::string text = String(node, key, what, false);
      if (text.empty()) return 0;
      absl::StatusOr<uint64_t> value = ParseHexId(text, bits, absl::StrCat(what, ": '", key, "'"));
      if (!value.ok()) {
        Problem(node[key], value.status().message());
        return 0;
      }
      return *value;
    };
    out->set_vendor(static_cast<uint32_t>(hex("vendor", 16)));
    out->set_device(static_cast<uint32_t>(hex("device", 16)));
    out->set_dsn(hex("dsn", 64));
  }

  void ParseTrunk(const YAML::Node& node, v1::Trunk* t) {
    if (!ExpectMap(node, Label(node, "trunk", "id"), {"id", "from", "to"})) return;
    t->set_id(String(node, "id", "trunk", true));
    const std::string what = absl::StrCat("trunk ", t->id());
    PortRef(node, "from", what, t->mutable_from());
    PortRef(node, "to", what, t->mutable_to());
  }

  void ParseSite(const YAML::Node& root, v1::Inventory* inventory) {
    if (!ExpectMap(root, "inventory", {"site", "switches", "hosts", "devices", "trunks"})) return;
    inventory->set_site(String(root, "site", "inventory", false));
    for (const YAML::Node& n : List(root, "switches", "inventory")) {
      ParseSwitch(n, inventory->add_switches());
    }
    for (const YAML::Node& n : List(root, "hosts", "inventory"))
      ParseHost(n, inventory->add_hosts());
    for (const YAML::Node& n : List(root, "devices", "inventory")) ParseDevice(n, inventory);
    for (const YAML::Node& n : List(root, "trunks", "inventory"))
      ParseTrunk(n, inventory->add_trunks());
  }

 private:
  std::string file_;
  std::vector<std::string> problems_;
};

// ---------------------------------------------------------------------------------------
// Validation over a whole site.

class Validator {
 public:
  explicit Validator(const v1::Inventory& site) : site_(site) {}

  std::vector<std::string> Run() {
    CheckSwitches();
    CheckHosts();
    CheckDevices();
    CheckOnics();
    CheckTrunks();
    return std::move(problems_);
  }

 private:
  template <typename... Args>
  void Problem(const Args&... args) {
    problems_.push_back(absl::StrCat(args...));
  }

  // Records `id` for `kind`; reports an empty or duplicate id.
  bool Unique(std::set<std::string>& seen, absl::string_view kind, const std::string& id) {
    if (id.empty()) {
      Problem(kind, " with an empty id");
      return false;
    }
    if (!seen.insert(id).second) {
      Problem("duplicate ", kind, " id '", id, "'");
      return false;
    }
    return true;
  }

  void CheckSwitches() {
    for (const v1::Switch& s : site_.switches()) {
      if (!Unique(switch_ids_, "switch", s.id())) continue;
      switches_[s.id()] = &s;
      if (s.ingress_ports() == 0 || s.egress_ports() == 0 || s.ingress_ports() > kMaxSwitchSide ||
          s.egress_ports() > kMaxSwitchSide) {
        Problem("switch ", s.id(), ": size ", s.ingress_ports(), "x", s.egress_ports(),
                " must be NxM with 0 < N, M <= ", kMaxSwitchSide);
      }
      if (s.protocol() == v1::SWITCH_PROTOCOL_UNSPECIFIED) {
        Problem("switch ", s.id(), ": protocol must be one of: ",
                absl::StrJoin(v1::Names<v1::SwitchProtocol>(), ", "));
      }
      if (s.address().empty()) Problem("switch ", s.id(), ": address is empty");
      // TLS settings of the REST transport; TL1 is plain TCP whatever they say.
      if (s.protocol() != v1::SWITCH_PROTOCOL_REST) {
        if (!s.ca_bundle().empty()) {
          Problem("switch ", s.id(), ": ca_bundle '", s.ca_bundle(),
                  "' is for protocol rest only, not ", v1::Name(s.protocol()));
        }
        if (s.insecure_http()) {
          Problem("switch ", s.id(), ": insecure_http true is for protocol rest only, not ",
                  v1::Name(s.protocol()));
        }
      } else if (s.insecure_http() && !s.ca_bundle().empty()) {
        Problem("switch ", s.id(), ": ca_bundle '", s.ca_bundle(),
                "' is unused with insecure_http true (plain HTTP); drop one of them");
      }
      if (s.management_port() > 65535) {
        Problem("switch ", s.id(), ": management port ", s.management_port(), " is above 65535");
      }
      const uint64_t total = uint64_t{s.ingress_ports()} + s.egress_ports();
      for (uint32_t p : s.trunk_reserved_ports()) {
        if (p == 0 || p > total) {
          Problem("switch ", s.id(), ": trunk-reserved port ", p, " is outside the switch (1..",
                  total, ")");
          break;
        }
      }
    }
  }

  void CheckHosts() {
    for (const v1::Host& h : site_.hosts()) Unique(host_ids_, "host", h.name());
  }

  void CheckDevices() {
    for (const v1::Device& d : site_.devices()) {
      if (!Unique(device_ids_, "device", d.id())) continue;
      if (d.kind() == v1::DEVICE_KIND_UNSPECIFIED) {
        Problem("device ", d.id(),
                ": kind must be one of: ", absl::StrJoin(v1::Names<v1::DeviceKind>(), ", "));
      }
      if (!d.host().empty() && !host_ids_.contains(d.host())) {
        Problem("device ", d.id(), ": host '", d.host(), "' is not in the inventory");
      }
      if (d.kind() == v1::DEVICE_KIND_CPU && d.host().empty()) {
        Problem("device ", d.id(), ": a cpu must name the host it belongs to");
      }
      if (d.pcie().vendor() > 0xffff || d.pcie().device() > 0xffff) {
        Problem("device ", d.id(), ": pcie vendor 0x", absl::Hex(d.pcie().vendor()), " / device 0x",
                absl::Hex(d.pcie().device()), " is more than 16 bits");
      }
      if (d.kind() == v1::DEVICE_KIND_CPU && d.pcie().ByteSizeLong() > 0) {
        Problem("device ", d.id(),
                ": a cpu has no pcie identity (it is what a host's agent "
                "checks of a pooled device attached to it)");
      }
    }
  }

  // Checks one fiber end and claims its switch port. `want` is the direction the fiber
  // needs: tx fibers and trunk arrivals enter ingress ports, rx fibers and trunk departures
  // leave egress ports.
  void ClaimPort(const v1::SwitchPortRef& ref, v1::PortDirection want, const std::string& owner,
                 bool trunk) {
    auto it = switches_.find(ref.switch_id());
    if (it == switches_.end()) {
      Problem(owner, ": switch '", ref.switch_id(), "' is not in the inventory");
      return;
    }
    const v1::Switch& s = *it->second;
    const uint64_t total = uint64_t{s.ingress_ports()} + s.egress_ports();
    if (ref.port() == 0 || ref.port() > total) {
      Problem(owner, ": port ", v1::PortName(ref), " is outside switch ", s.id(), " (ports 1..",
              total, ")");
      return;
    }
    const bool is_ingress = ref.port() <= s.ingress_ports();
    if (want == v1::PORT_DIRECTION_INGRESS && !is_ingress) {
      Problem(owner, ": ", v1::PortName(ref), " is an egress port; it must be an ingress port (1..",
              s.ingress_ports(), ")");
    } else if (want == v1::PORT_DIRECTION_EGRESS && is_ingress) {
      Problem(owner, ": ", v1::PortName(ref), " is an ingress port; it must be an egress port (",
              s.ingress_ports() + 1, "..", total, ")");
    }
    const bool reserved = std::binary_search(s.trunk_reserved_ports().begin(),
                                             s.trunk_reserved_ports().end(), ref.port());
    if (trunk && !reserved) {
      Problem(owner, ": ", v1::PortName(ref), " is not reserved for trunks (add it to ", s.id(),
              "'s trunk_reserved)");
    } else if (!trunk && reserved) {
      Problem(owner, ": ", v1::PortName(ref),
              " is reserved for trunks; O-NIC fibers cannot use it");
    }
    auto [claim, fresh] = wired_.emplace(v1::PortName(ref), owner);
    if (!fresh)
      Problem("switch port ", v1::PortName(ref), " is wired twice: ", claim->second, " and ",
              owner);
  }

  void CheckOnics() {
    std::set<std::string> serials;
    for (const v1::Onic& o : site_.onics()) {
      if (!Unique(onic_ids_, "onic", o.id())) continue;
      if (!device_ids_.contains(o.device())) {
        Problem("onic ", o.id(), ": device '", o.device(), "' is not in the inventory");
      }
      if (o.serial().empty()) {
        Problem("onic ", o.id(), ": serial is empty");
      } else if (!serials.insert(o.serial()).second) {
        Problem("onic ", o.id(), ": duplicate serial '", o.serial(), "'");
      }
      if (o.ports_size() != 2) {
        Problem("onic ", o.id(), ": has ", Counted(o.ports_size(), "port"),
                "; every O-NIC has exactly two (port 1 and port 2)");
      }
      for (const v1::OnicPort& p : o.ports()) {
        if (p.index() != 1 && p.index() != 2) continue;  // Reported by the count above.
        const std::string owner = absl::StrCat("onic ", o.id(), " port ", p.index());
        ClaimPort(p.tx(), v1::PORT_DIRECTION_INGRESS, absl::StrCat(owner, " tx"), false);
        ClaimPort(p.rx(), v1::PORT_DIRECTION_EGRESS, absl::StrCat(owner, " rx"), false);
      }
    }
  }

  void CheckTrunks() {
    std::set<std::string> ids;
    for (const v1::Trunk& t : site_.trunks()) {
      if (!Unique(ids, "trunk", t.id())) continue;
      if (t.from().switch_id() == t.to().switch_id()) {
        Problem("trunk ", t.id(), ": runs from switch ", t.from().switch_id(),
                " to itself; a trunk joins two switches");
      }
      ClaimPort(t.from(), v1::PORT_DIRECTION_EGRESS, absl::StrCat("trunk ", t.id(), " from"), true);
      ClaimPort(t.to(), v1::PORT_DIRECTION_INGRESS, absl::StrCat("trunk ", t.id(), " to"), true);
    }
  }

  const v1::Inventory& site_;
  std::vector<std::string> problems_;
  std::set<std::string> switch_ids_, host_ids_, device_ids_, onic_ids_;
  std::map<std::string, const v1::Switch*> switches_;
  std::map<std::string, std::string> wired_;  // "switch/port" → what holds it
};

// ---------------------------------------------------------------------------------------
// Planning an apply.

// The parts of an object an inventory file sets; state and derived fields are cleared.
v1::Device FileForm(v1::Device d) {
  d.clear_onics();
  d.clear_admin_state();
  d.clear_health();
  d.clear_health_reason();
  d.clear_health_changed();
  d.clear_allocations();
  if (d.pcie().ByteSizeLong() == 0) d.clear_pcie();  // As the store gives it back.
  return d;
}
v1::Onic FileForm(v1::Onic o) {
  o.clear_admin_state();
  o.clear_admin_reason();
  o.clear_host();
  o.clear_allocations();
  for (v1::OnicPort& p : *o.mutable_ports()) {
    p.clear_admin_state();
    p.clear_oper_state();
  }
  return o;
}
v1::Host FileForm(v1::Host h) {
  h.clear_admin_state();
  h.clear_admin_reason();
  return h;
}
v1::Switch FileForm(v1::Switch s) {
  // Reserved ports are a set: sorted and unique whatever order a client sent.
  std::sort(s.mutable_trunk_reserved_ports()->begin(), s.mutable_trunk_reserved_ports()->end());
  auto& ports = *s.mutable_trunk_reserved_ports();
  ports.Truncate(static_cast<int>(std::unique(ports.begin(), ports.end()) - ports.begin()));
  s.clear_credentials_file();
  return s;
}
v1::Trunk FileForm(v1::Trunk t) { return t; }

const std::string& Key(const v1::Switch& s) { return s.id(); }
const std::string& Key(const v1::Host& h) { return h.name(); }
const std::string& Key(const v1::Device& d) { return d.id(); }
const std::string& Key(const v1::Onic& o) { return o.id(); }
const std::string& Key(const v1::Trunk& t) { return t.id(); }

// Merges one kind: stored objects, each replaced by the incoming one of the same key, then
// incoming ones that are new. Records what is created or updated into `write`.
template <typename T>
void MergeKind(const google::protobuf::RepeatedPtrField<T>& stored,
               const google::protobuf::RepeatedPtrField<T>& incoming, absl::string_view kind,
               google::protobuf::RepeatedPtrField<T>* merged,
               google::protobuf::RepeatedPtrField<T>* changed, store::InventoryWrite* write) {
  std::map<std::string, const T*> by_key;
  for (const T& in : incoming) by_key.emplace(Key(in), &in);  // First wins; duplicates reported.
  std::set<std::string> seen;
  for (const T& have : stored) {
    auto it = by_key.find(Key(have));
    if (it == by_key.end()) {
      *merged->Add() = have;
      continue;
    }
    seen.insert(Key(have));
    const T want = FileForm(*it->second);
    *merged->Add() = want;
    if (want.SerializeAsString() != FileForm(have).SerializeAsString()) {
      *changed->Add() = want;
      const std::string what = absl::StrCat(kind, " ", Key(want));
      write->updated.push_back(what);
      v1::ObjectChange& change = write->diff.emplace_back();
      change.set_kind(std::string(kind));
      change.set_id(Key(want));
      std::vector<v1::FieldChange> fields = DiffFields(FileForm(have), want);
      write->changed_fields[what] = DescribeFieldChanges(fields);
      std::vector<v1::FieldChange> connection;
      for (const v1::FieldChange& f : fields) {
        if (kind == "switch" && IsSwitchConnectionField(f.field())) connection.push_back(f);
      }
      if (!connection.empty())
        write->repointed_switches[Key(want)] = DescribeFieldChanges(connection);
      for (v1::FieldChange& f : fields) *change.add_fields() = std::move(f);
    }
  }
  for (const T& in : incoming) {
    if (seen.contains(Key(in))) continue;
    seen.insert(Key(in));
    *merged->Add() = FileForm(in);
    *changed->Add() = FileForm(in);
    write->created.push_back(absl::StrCat(kind, " ", Key(in)));
    v1::ObjectChange& change = write->diff.emplace_back();
    change.set_kind(std::string(kind));
    change.set_id(Key(in));
    change.set_created(true);
  }
}

// Duplicate ids within the incoming file would otherwise be hidden by the merge.
template <typename T>
void DuplicatesIn(const google::protobuf::RepeatedPtrField<T>& incoming, absl::string_view kind,
                  std::vector<std::string>* problems) {
  std::set<std::string> seen;
  for (const T& in : incoming) {
    if (!Key(in).empty() && !seen.insert(Key(in)).second) {
      problems->push_back(absl::StrCat("duplicate ", kind, " id '", Key(in), "'"));
    }
  }
}

absl::Status Invalid(const std::vector<std::string>& problems) {
  return absl::InvalidArgumentError(absl::StrCat(
      "inventory rejected, nothing stored (", problems.size(),
      problems.size() == 1 ? " problem" : " problems", "):\n  ", absl::StrJoin(problems, "\n  ")));
}

}  // namespace

absl::StatusOr<v1::Inventory> ParseInventoryYaml(absl::string_view text,
                                                 absl::string_view file_name) {
  absl::StatusOr<YAML::Node> loaded = LoadYaml(text, file_name);
  if (!loaded.ok()) return loaded.status();
  YAML::Node root = *loaded;
  Parser parser(file_name);
  v1::Inventory inventory;
  try {
    if (!root || root.IsNull()) {
      return absl::InvalidArgumentError(absl::StrCat(file_name, ": the file is empty"));
    }
    parser.ParseSite(root, &inventory);
  } catch (const YAML::Exception& e) {
    parser.Problem(root, e.what());
  }
  if (!parser.problems().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": ", parser.problems().size(),
                                                   " problem(s):\n  ",
                                                   absl::StrJoin(parser.problems(), "\n  ")));
  }
  return inventory;
}

std::string PortRanges(const std::vector<uint32_t>& ports) {
  std::vector<std::string> ranges;
  for (size_t i = 0; i < ports.size();) {
    size_t j = i;
    while (j + 1 < ports.size() && ports[j + 1] == ports[j] + 1) ++j;
    ranges.push_back(i == j ? absl::StrCat(ports[i]) : absl::StrCat(ports[i], "-", ports[j]));
    i = j + 1;
  }
  return absl::StrJoin(ranges, ", ");
}

absl::StatusOr<v1::Inventory> ReadInventoryFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, "inventory file");
  if (!text.ok()) return text.status();
  return ParseInventoryYaml(*text, path);
}

std::vector<std::string> ValidateInventory(const v1::Inventory& site) {
  return Validator(site).Run();
}

absl::StatusOr<store::InventoryWrite> PlanApply(const v1::Inventory& stored,
                                                const v1::Inventory& incoming,
                                                v1::Inventory* merged_out) {
  std::vector<std::string> problems;
  DuplicatesIn(incoming.switches(), "switch", &problems);
  DuplicatesIn(incoming.hosts(), "host", &problems);
  DuplicatesIn(incoming.devices(), "device", &problems);
  DuplicatesIn(incoming.onics(), "onic", &problems);
  DuplicatesIn(incoming.trunks(), "trunk", &problems);

  store::InventoryWrite write;
  v1::Inventory merged;
  v1::Inventory& changed = write.objects;
  merged.set_site(incoming.site().empty() ? stored.site() : incoming.site());
  MergeKind(stored.switches(), incoming.switches(), "switch", merged.mutable_switches(),
            changed.mutable_switches(), &write);
  MergeKind(stored.hosts(), incoming.hosts(), "host", merged.mutable_hosts(),
            changed.mutable_hosts(), &write);
  MergeKind(stored.devices(), incoming.devices(), "device", merged.mutable_devices(),
            changed.mutable_devices(), &write);
  MergeKind(stored.onics(), incoming.onics(), "onic", merged.mutable_onics(),
            changed.mutable_onics(), &write);
  MergeKind(stored.trunks(), incoming.trunks(), "trunk", merged.mutable_trunks(),
            changed.mutable_trunks(), &write);

  std::vector<std::string> site_problems = ValidateInventory(merged);
  // The merged view repeats a within-file duplicate only once; keep each message once.
  for (std::string& p : site_problems) {
    if (std::find(problems.begin(), problems.end(), p) == problems.end()) {
      problems.push_back(std::move(p));
    }
  }
  if (!problems.empty()) return Invalid(problems);
  if (merged_out != nullptr) *merged_out = std::move(merged);
  return write;
}

absl::StatusOr<v1::ApplyInventoryResponse> InventoryApplier::Apply(const v1::Inventory& incoming,
                                                                   const ApplyOptions& options,
                                                                   const std::string& principal) {
  absl::MutexLock lock(&mu_);
  return ApplyLocked(incoming, options, principal);
}

absl::StatusOr<FileApplied> InventoryApplier::ApplyFile(const std::string& path,
                                                        const std::string& principal) {
  ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path, "inventory file"));
  const std::string head = RecordHead(Sha256Hex(text));
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::string> recorded = store_->AppliedInventoryFile();
  if (!recorded.ok()) {
    FLEET_LOG(WARNING) << "inventory " << path << ": applying it in full, the record of the last "
                       << "one applied is unreadable: " << recorded.status();
  } else if (!head.empty() && absl::StartsWith(*recorded, head + "; ")) {
    // The same build and the same file: only then is the stored inventory worth reading.
    absl::StatusOr<v1::Inventory> stored = store_->LoadInventory();
    if (!stored.ok()) {
      return absl::Status(stored.status().code(),
                          absl::StrCat(path, ": ", stored.status().message()));
    }
    if (RecordOf(head, *stored) == *recorded) return FileApplied{.skipped = true};
  }
  ASSIGN_OR_RETURN(const v1::Inventory incoming, ParseInventoryYaml(text, path));
  // The record is of what this apply planned on and wrote, not of a read after it: an object
  // deleted over the API meanwhile then makes the next start's store differ from it.
  v1::Inventory merged;
  absl::StatusOr<v1::ApplyInventoryResponse> response =
      ApplyLocked(incoming, {.force = true}, principal, &merged);
  if (!response.ok()) {
    return absl::Status(response.status().code(),
                        absl::StrCat(path, ": ", response.status().message()));
  }
  if (head.empty()) {
    FLEET_LOG(WARNING) << "inventory " << path << ": applied, but not recorded: this fleetd has "
                       << "no build ID, so every start parses it";
  } else if (absl::Status kept = store_->RecordAppliedInventoryFile(RecordOf(head, merged));
             !kept.ok()) {
    FLEET_LOG(WARNING) << "inventory " << path << ": applied, but not recorded (the next start "
                       << "parses it again): " << kept;
  }
  return FileApplied{.skipped = false, .response = *std::move(response)};
}

std::string InventoryApplier::RecordHead(const std::string& file_sha256) {
  // Only valid for the build that wrote it: another may read the same file into other
  // objects, or find a stored inventory invalid that this one took.
  static const std::string* const build = new std::string(ExecutableBuildId());
  if (build->empty()) return "";
  return absl::StrCat("fleetd ", kVersion, " build ", *build, "; file sha256 ", file_sha256);
}

std::string InventoryApplier::RecordOf(const std::string& head, const v1::Inventory& inventory) {
  // Each object as a file sets it, by id, its length first so that no two inventories give
  // the same bytes.
  std::string bytes;
  auto add = [&bytes](const auto& objects) {
    std::vector<std::pair<std::string, std::string>> by_key;
    for (const auto& object : objects) {
      by_key.emplace_back(Key(object), FileForm(object).SerializeAsString());
    }
    std::sort(by_key.begin(), by_key.end());
    for (const auto& [key, one] : by_key) absl::StrAppend(&bytes, one.size(), ":", one);
    absl::StrAppend(&bytes, ";");
  };
  add(inventory.switches());
  add(inventory.hosts());
  add(inventory.devices());
  add(inventory.onics());
  add(inventory.trunks());
  return absl::StrCat(head, "; inventory sha256 ", Sha256Hex(bytes));
}

absl::StatusOr<v1::ApplyInventoryResponse> InventoryApplier::ApplyLocked(
    const v1::Inventory& incoming, const ApplyOptions& options, const std::string& principal,
    v1::Inventory* merged) {
  absl::StatusOr<v1::Inventory> stored = store_->LoadInventory();
  if (!stored.ok()) return stored.status();
  absl::StatusOr<store::InventoryWrite> write = PlanApply(*stored, incoming, merged);
  if (!write.ok()) return write.status();
  v1::ApplyInventoryResponse response;
  response.set_created(static_cast<uint32_t>(write->created.size()));
  response.set_updated(static_cast<uint32_t>(write->updated.size()));
  const int64_t total = int64_t{incoming.switches_size()} + incoming.hosts_size() +
                        incoming.devices_size() + incoming.onics_size() + incoming.trunks_size();
  const int64_t changed = static_cast<int64_t>(write->created.size() + write->updated.size());
  response.set_unchanged(static_cast<uint32_t>(std::max<int64_t>(0, total - changed)));
  for (const std::string& what : write->created) response.add_changes("created " + what);
  for (const std::string& what : write->updated) {
    response.add_changes(absl::StrCat("updated ", what, ": ", write->changed_fields[what]));
  }
  for (v1::ObjectChange& change : write->diff) *response.add_diff() = std::move(change);
  if (write->created.empty() && write->updated.empty()) return response;
  write->force = options.force;
  write->dry_run = options.dry_run;
  if (absl::Status s = store_->WriteInventory(*write, principal); !s.ok()) return s;
  return response;
}

}  // namespace fleet::inventory
