#include "controller/cli/dot.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/wording.h"
#include "fleet/v1/names.h"

namespace fleet::cli {
namespace {

// Colours told apart in print and by most colour-blind readers; red is kept for DEGRADED.
constexpr const char* kPalette[] = {"#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
                                    "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f"};
constexpr char kDegraded[] = "#d62728";

std::string Quoted(absl::string_view text) {
  return absl::StrCat(
      "\"", absl::StrReplaceAll(text, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}}), "\"");
}

std::string Html(absl::string_view text) {
  return absl::StrReplaceAll(text,
                             {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

std::string OnicNode(absl::string_view onic) { return Quoted(absl::StrCat("onic:", onic)); }
std::string SwitchAnchor(absl::string_view sw) { return Quoted(absl::StrCat("switch:", sw)); }
std::string SwitchCluster(absl::string_view sw) { return absl::StrCat("cluster_switch_", sw); }

std::string CircuitLabel(const v1::Circuit& c) {
  std::vector<std::string> hops;
  for (int i = 0; i < c.cross_connects_size(); ++i) {
    const v1::CrossConnect& xc = c.cross_connects(i);
    hops.push_back(absl::StrCat(xc.switch_id(), " ", xc.ingress(), "→", xc.egress()));
    if (i < c.trunks_size()) hops.push_back(absl::StrCat("trunk ", c.trunks(i)));
  }
  std::string label = absl::StrJoin(hops, "\n");
  if (c.state() == v1::CIRCUIT_STATE_DEGRADED) absl::StrAppend(&label, "\nDEGRADED");
  return label;
}

// Style and colour by state; `colour` is the circuit's allocation's or phase's.
std::string CircuitAttributes(const v1::Circuit& c, const std::string& colour) {
  std::string style = "solid";
  std::string pen = "1.2";
  std::string drawn = colour;
  switch (c.state()) {
    case v1::CIRCUIT_STATE_ACTIVE:
      break;
    case v1::CIRCUIT_STATE_DEGRADED:
      drawn = kDegraded;
      pen = "2.5";
      break;
    case v1::CIRCUIT_STATE_INACTIVE:
      style = "dotted";
      break;
    default:  // PLANNED, PROGRAMMED, REMOVING: not (yet, or any more) carrying traffic.
      style = "dashed";
      break;
  }
  return absl::StrCat("color=", Quoted(drawn), ", fontcolor=", Quoted(drawn), ", style=", style,
                      ", penwidth=", pen, ", label=", Quoted(CircuitLabel(c)), ", tooltip=",
                      Quoted(absl::StrCat(c.id(), " ", v1::Name(c.state()),
                                          c.reason().empty() ? "" : ": " + c.reason())));
}

class Picture {
 public:
  Picture(const DotSite& site, std::string title) : site_(site), title_(std::move(title)) {
    for (const v1::Device& d : site.devices) devices_[d.id()] = &d;
  }

  // Draws `onics` (all of the site's when `only` is null) inside their switches and devices.
  void Onics(const std::set<std::string>* only) {
    // switch → group (host or chassis) → device → O-NICs.
    std::map<std::string,
             std::map<std::string, std::map<std::string, std::vector<const v1::Onic*>>>>
        placed;
    for (const v1::Onic& o : site_.onics) {
      if (only != nullptr && !only->contains(o.id())) continue;
      drawn_.insert(o.id());
      const std::string sw = o.ports().empty() ? "" : o.ports(0).tx().switch_id();
      const v1::Device* d = devices_.contains(o.device()) ? devices_.at(o.device()) : nullptr;
      const std::string group = d == nullptr            ? ""
                                : !d->host().empty()    ? d->host()
                                : !d->chassis().empty() ? d->chassis()
                                                        : "";
      placed[sw][group][o.device()].push_back(&o);
    }
    std::map<std::string, const v1::Switch*> switches;
    for (const v1::Switch& s : site_.switches) switches[s.id()] = &s;
    for (const auto& [sw, groups] : placed) {
      if (sw.empty()) {
        for (const auto& [group, devices] : groups) Devices(devices, "  ");
        continue;
      }
      OpenSwitch(sw, switches.contains(sw) ? switches.at(sw) : nullptr);
      for (const auto& [group, devices] : groups) {
        if (group.empty()) {
          Devices(devices, "    ");
          continue;
        }
        absl::StrAppend(
            &body_, "    subgraph ", Quoted(absl::StrCat("cluster_group_", ++clusters_)),
            " {\n      label=", Quoted(group), "; style=\"rounded,dashed\"; color=\"#999999\";\n");
        Devices(devices, "      ");
        absl::StrAppend(&body_, "    }\n");
      }
      absl::StrAppend(&body_, "  }\n");
      opened_.insert(sw);
    }
  }

  // The switches in `ids` not drawn yet, empty; trunk ends need them.
  void EmptySwitches(const std::set<std::string>& ids) {
    std::map<std::string, const v1::Switch*> switches;
    for (const v1::Switch& s : site_.switches) switches[s.id()] = &s;
    for (const std::string& sw : ids) {
      if (opened_.contains(sw)) continue;
      OpenSwitch(sw, switches.contains(sw) ? switches.at(sw) : nullptr);
      absl::StrAppend(&body_, "  }\n");
      opened_.insert(sw);
    }
  }

  // One edge per direction between two drawn switches, labelled with the trunks' count.
  void Trunks() {
    std::map<std::pair<std::string, std::string>, int> count;
    std::set<std::string> ends;
    for (const v1::Trunk& t : site_.trunks) {
      ++count[{t.from().switch_id(), t.to().switch_id()}];
      ends.insert(t.from().switch_id());
      ends.insert(t.to().switch_id());
    }
    EmptySwitches(ends);
    for (const auto& [pair, n] : count) {
      absl::StrAppend(&body_, "  ", SwitchAnchor(pair.first), " -> ", SwitchAnchor(pair.second),
                      " [ltail=", Quoted(SwitchCluster(pair.first)),
                      ", lhead=", Quoted(SwitchCluster(pair.second)),
                      ", label=", Quoted(absl::StrCat(n, n == 1 ? " trunk" : " trunks")),
                      ", color=\"#555555\", penwidth=3, arrowsize=0.6];\n");
    }
  }

  void Circuit(const v1::Circuit& c, const std::string& colour) {
    for (const std::string& onic : {c.source().onic(), c.destination().onic()}) {
      if (!drawn_.contains(onic)) {
        drawn_.insert(onic);
        absl::StrAppend(&body_, "  ", OnicNode(onic), " [label=", Quoted(onic), "];\n");
      }
    }
    absl::StrAppend(&body_, "  ", OnicNode(c.source().onic()), " -> ",
                    OnicNode(c.destination().onic()),
                    " [taillabel=", Quoted(absl::StrCat(c.source().port())),
                    ", headlabel=", Quoted(absl::StrCat(c.destination().port())), ", ",
                    CircuitAttributes(c, colour), "];\n");
  }

  // A legend of (colour, text) under the title.
  void Legend(std::vector<std::pair<std::string, std::string>> entries) {
    legend_ = std::move(entries);
  }

  std::string Text() const {
    std::string label = absl::StrCat("<<table border=\"0\" cellspacing=\"2\"><tr><td><b>",
                                     Html(title_), "</b></td></tr>");
    for (const auto& [colour, text] : legend_) {
      absl::StrAppend(&label, "<tr><td align=\"left\"><font color=\"", colour, "\">━━ ", Html(text),
                      "</font></td></tr>");
    }
    absl::StrAppend(&label, "</table>>");
    return absl::StrCat(
        "digraph fleet {\n"
        "  graph [rankdir=LR, compound=true, newrank=true, fontname=\"Helvetica\", labelloc=t, "
        "label=",
        label,
        "];\n"
        "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#f4f4f4\", "
        "fontname=\"Helvetica\", fontsize=10];\n"
        "  edge [fontname=\"Helvetica\", fontsize=8, arrowsize=0.7];\n",
        body_, "}\n");
  }

 private:
  void OpenSwitch(const std::string& sw, const v1::Switch* s) {
    std::string label = sw;
    if (s != nullptr && !s->model().empty()) absl::StrAppend(&label, "\n", s->model());
    absl::StrAppend(
        &body_, "  subgraph ", Quoted(SwitchCluster(sw)), " {\n    label=", Quoted(label),
        "; style=\"rounded,bold\"; color=\"#333333\"; fontname=\"Helvetica-Bold\";\n    ",
        SwitchAnchor(sw), " [shape=point, style=invis, width=0];\n");
  }

  void Devices(const std::map<std::string, std::vector<const v1::Onic*>>& devices,
               const std::string& indent) {
    for (const auto& [device, onics] : devices) {
      const v1::Device* d = devices_.contains(device) ? devices_.at(device) : nullptr;
      std::string label = device;
      if (d != nullptr) absl::StrAppend(&label, " (", v1::Name(d->kind()), ")");
      absl::StrAppend(&body_, indent, "subgraph ",
                      Quoted(absl::StrCat("cluster_device_", ++clusters_)), " {\n", indent,
                      "  label=", Quoted(label),
                      "; style=\"rounded,filled\"; fillcolor=\"#fbfbfb\"; color=\"#bbbbbb\";\n");
      for (const v1::Onic* o : onics) {
        absl::StrAppend(&body_, indent, "  ", OnicNode(o->id()), " [label=", Quoted(o->id()),
                        "];\n");
      }
      absl::StrAppend(&body_, indent, "}\n");
    }
  }

  const DotSite& site_;
  const std::string title_;
  std::map<std::string, const v1::Device*> devices_;
  std::set<std::string> drawn_;
  std::set<std::string> opened_;
  std::vector<std::pair<std::string, std::string>> legend_;
  // Group and device clusters are numbered: ids may hold any character, and Graphviz merges
  // subgraphs of the same name.
  int clusters_ = 0;
  std::string body_;
};

std::string Colour(size_t i) { return kPalette[i % std::size(kPalette)]; }

}  // namespace

std::string SiteDot(const DotSite& site, const std::vector<v1::Circuit>& circuits) {
  Picture picture(
      site, absl::StrCat("FLEET site: ", Counted(site.switches.size(), "switch", "switches"), ", ",
                         Counted(circuits.size(), "circuit")));
  picture.Onics(nullptr);
  std::set<std::string> switches;
  for (const v1::Switch& s : site.switches) switches.insert(s.id());
  picture.EmptySwitches(switches);
  picture.Trunks();
  std::map<std::string, std::string> colours;  // Allocation → colour, in order of first circuit.
  std::vector<std::pair<std::string, std::string>> legend;
  for (const v1::Circuit& c : circuits) {
    const std::string owner =
        c.manual() || c.allocation_id().empty() ? "manual" : c.allocation_id();
    auto [it, added] =
        colours.try_emplace(owner, owner == "manual" ? "#000000" : Colour(colours.size()));
    if (added) legend.emplace_back(it->second, owner);
    picture.Circuit(c, it->second);
  }
  picture.Legend(std::move(legend));
  return picture.Text();
}

std::string AllocationDot(const DotSite& site, const v1::Allocation& allocation) {
  const v1::Allocation& a = allocation;
  std::set<std::string> members(a.members().begin(), a.members().end());
  std::set<std::string> onics;
  for (const v1::Onic& o : site.onics) {
    if (members.contains(o.device())) onics.insert(o.id());
  }
  std::string title = absl::StrCat("allocation ", a.id(), a.name().empty() ? "" : " " + a.name(),
                                   " (", a.tenant(), "): ", v1::Name(a.state()));
  Picture picture(site, std::move(title));
  picture.Onics(&onics);
  std::vector<std::pair<std::string, std::string>> legend;
  std::map<std::string, std::string> colours;  // Phase → colour.
  if (a.phases().empty()) {
    colours[""] = Colour(0);
  } else {
    for (int i = 0; i < a.phases_size(); ++i) {
      colours[a.phases(i)] = Colour(static_cast<size_t>(i));
      legend.emplace_back(
          Colour(static_cast<size_t>(i)),
          absl::StrCat("phase ", a.phases(i), a.phases(i) == a.active_phase() ? " (active)" : ""));
    }
  }
  for (const v1::Circuit& c : a.circuits()) {
    auto it = colours.find(c.phase());
    picture.Circuit(c, it == colours.end() ? Colour(0) : it->second);
  }
  picture.Legend(std::move(legend));
  return picture.Text();
}

}  // namespace fleet::cli
