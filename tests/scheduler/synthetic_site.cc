#include "tests/scheduler/synthetic_site.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace fleet::scheduler::testing {
namespace {

class ClusterBuilder {
 public:
  ClusterBuilder(v1::Inventory& site, const ClusterShape& shape) : site_(site), shape_(shape) {
    const int onics = 3 * shape.cpus + shape.gpus + 2 * shape.nvmes + shape.fpgas;
    size_ = std::max(384, 2 * onics);
    v1::Switch* sw = site_.add_switches();
    sw->set_id(Switch());
    sw->set_ingress_ports(size_);
    sw->set_egress_ports(size_);
    sw->set_cluster(shape.prefix.empty() ? "c" : shape.prefix);
  }

  void Build() {
    for (int c = 0; c < shape_.cpus; ++c) {
      const std::string host = absl::StrCat(shape_.prefix, "server", c / 2 + 1);
      if (c % 2 == 0) {
        v1::Host* h = site_.add_hosts();
        h->set_name(host);
        h->set_cluster(site_.switches().rbegin()->cluster());
      }
      Device(absl::StrCat(host, "-cpu", c % 2), v1::DEVICE_KIND_CPU, host, "", 3);
    }
    for (int g = 0; g < shape_.gpus; ++g) {
      Device(absl::StrCat(shape_.prefix, "gpu", g + 1), v1::DEVICE_KIND_GPU, "",
             absl::StrCat(shape_.prefix, "gpu-pool-", g / 8 + 1), 1);
    }
    for (int j = 0; j < shape_.nvmes; ++j) {
      Device(absl::StrCat(shape_.prefix, "nvme", j + 1), v1::DEVICE_KIND_NVME, "",
             absl::StrCat(shape_.prefix, "jbod-", j + 1), 2);
    }
    for (int f = 0; f < shape_.fpgas; ++f) {
      Device(absl::StrCat(shape_.prefix, "fpga", f + 1), v1::DEVICE_KIND_FPGA, "",
             absl::StrCat(shape_.prefix, "fpga-pool"), 1);
    }
  }

 private:
  std::string Switch() const { return shape_.prefix + "ocs"; }

  void Device(const std::string& id, v1::DeviceKind kind, const std::string& host,
              const std::string& chassis, int onics) {
    v1::Device* d = site_.add_devices();
    d->set_id(id);
    d->set_kind(kind);
    d->set_host(host);
    d->set_chassis(chassis);
    for (int n = 0; n < onics; ++n) {
      v1::Onic* o = site_.add_onics();
      o->set_id(absl::StrCat(id, "-n", n));
      o->set_device(id);
      o->set_host(host);
      d->add_onics(o->id());
      for (uint32_t index = 1; index <= 2; ++index) {
        v1::OnicPort* p = o->add_ports();
        p->set_index(index);
        p->mutable_tx()->set_switch_id(Switch());
        p->mutable_tx()->set_port(next_);
        p->mutable_rx()->set_switch_id(Switch());
        p->mutable_rx()->set_port(next_ + size_);
        ++next_;
      }
    }
  }

  v1::Inventory& site_;
  const ClusterShape& shape_;
  int size_ = 384;
  uint32_t next_ = 1;
};

}  // namespace

v1::Inventory SyntheticSite(const std::vector<ClusterShape>& clusters) {
  v1::Inventory site;
  site.set_site("synthetic");
  for (const ClusterShape& shape : clusters) ClusterBuilder(site, shape).Build();
  return site;
}

void AddTrunks(v1::Inventory& site, const std::string& from, const std::string& to, int count) {
  auto size = [&](const std::string& id) -> uint32_t {
    for (const v1::Switch& s : site.switches()) {
      if (s.id() == id) return s.ingress_ports();
    }
    return 0;
  };
  // How many of each switch's top egress / ingress ports trunks use already.
  auto used = [&](const std::string& id, bool egress) {
    uint32_t n = 0;
    for (const v1::Trunk& t : site.trunks()) n += (egress ? t.from() : t.to()).switch_id() == id;
    return n;
  };
  const uint32_t egress_top = 2 * size(from) - used(from, true);
  const uint32_t ingress_top = size(to) - used(to, false);
  for (int k = 0; k < count; ++k) {
    v1::Trunk* t = site.add_trunks();
    t->set_id(absl::StrCat(from, "-", to, "-", k + 1));
    t->mutable_from()->set_switch_id(from);
    t->mutable_from()->set_port(egress_top - k);
    t->mutable_to()->set_switch_id(to);
    t->mutable_to()->set_port(ingress_top - k);
  }
}

std::vector<v1::SwitchPort> AllPorts(const v1::Inventory& site,
                                     const std::set<std::string>& drained,
                                     const std::set<std::string>& failed) {
  std::vector<v1::SwitchPort> out;
  for (const v1::Switch& s : site.switches()) {
    for (uint32_t p = 1; p <= s.ingress_ports() + s.egress_ports(); ++p) {
      const std::string key = absl::StrCat(s.id(), "/", p);
      v1::SwitchPort& port = out.emplace_back();
      port.mutable_ref()->set_switch_id(s.id());
      port.mutable_ref()->set_port(p);
      port.set_admin_state(drained.contains(key) ? v1::ADMIN_STATE_DRAINED
                                                 : v1::ADMIN_STATE_ENABLED);
      if (failed.contains(key)) port.set_oper_state(v1::OPER_STATE_FAILED);
    }
  }
  return out;
}

}  // namespace fleet::scheduler::testing
