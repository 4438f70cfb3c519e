#include "switch_adapters/optical_switch.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace fleet::switch_adapters {
namespace {

std::string Text(const CrossConnect& x) { return absl::StrCat(x.ingress, "->", x.egress); }

}  // namespace

absl::Status ValidateBatch(const CrossConnectBatch& batch, uint32_t ingress_ports,
                           uint32_t egress_ports) {
  std::vector<std::string> problems;
  const uint32_t total = ingress_ports + egress_ports;
  auto check = [&](const CrossConnect& x, absl::string_view what) {
    if (x.ingress == 0 || x.ingress > ingress_ports) {
      problems.push_back(absl::StrCat(what, " ", Text(x), ": ingress ", x.ingress,
                                      " is not an ingress port (1..", ingress_ports, ")"));
    }
    if (x.egress <= ingress_ports || x.egress > total) {
      problems.push_back(absl::StrCat(what, " ", Text(x), ": egress ", x.egress,
                                      " is not an egress port (", ingress_ports + 1, "..", total,
                                      ")"));
    }
  };
  std::set<uint32_t> add_ports, remove_ports;
  for (const CrossConnect& x : batch.remove) {
    check(x, "remove");
    if (!remove_ports.insert(x.ingress).second || !remove_ports.insert(x.egress).second) {
      problems.push_back(absl::StrCat("remove ", Text(x), ": a port appears in two removes"));
    }
  }
  for (const CrossConnect& x : batch.add) {
    check(x, "add");
    if (!add_ports.insert(x.ingress).second || !add_ports.insert(x.egress).second) {
      problems.push_back(absl::StrCat("add ", Text(x), ": a port appears in two adds"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
}

absl::StatusOr<CrossConnectBatch> PlanBatch(const CrossConnectBatch& batch,
                                            const std::vector<CrossConnect>& current) {
  std::map<uint32_t, uint32_t> by_ingress, by_egress;
  for (const CrossConnect& x : current) {
    by_ingress[x.ingress] = x.egress;
    by_egress[x.egress] = x.ingress;
  }
  std::vector<std::string> problems;
  CrossConnectBatch plan;
  for (const CrossConnect& x : batch.remove) {
    auto it = by_ingress.find(x.ingress);
    if (it == by_ingress.end()) continue;  // Already gone.
    if (it->second != x.egress) {
      problems.push_back(absl::StrCat("remove ", Text(x), ": ingress ", x.ingress, " goes to ",
                                      it->second, ", not ", x.egress));
      continue;
    }
    plan.remove.push_back(x);
    by_ingress.erase(x.ingress);
    by_egress.erase(x.egress);
  }
  for (const CrossConnect& x : batch.add) {
    auto in = by_ingress.find(x.ingress);
    if (in != by_ingress.end() && in->second == x.egress) continue;  // Already there.
    if (in != by_ingress.end()) {
      problems.push_back(absl::StrCat("add ", Text(x), ": ingress ", x.ingress, " is in use by ",
                                      x.ingress, "->", in->second));
    }
    auto out = by_egress.find(x.egress);
    if (out != by_egress.end()) {
      problems.push_back(absl::StrCat("add ", Text(x), ": egress ", x.egress, " is in use by ",
                                      out->second, "->", x.egress));
    }
    if (in == by_ingress.end() && out == by_egress.end()) plan.add.push_back(x);
  }
  if (!problems.empty()) return absl::FailedPreconditionError(absl::StrJoin(problems, "; "));
  return plan;
}

absl::Status VerifyBatch(const CrossConnectBatch& batch,
                         const std::vector<CrossConnect>& observed) {
  std::map<uint32_t, uint32_t> by_ingress;
  for (const CrossConnect& x : observed) by_ingress[x.ingress] = x.egress;
  std::vector<std::string> problems;
  for (const CrossConnect& x : batch.add) {
    auto it = by_ingress.find(x.ingress);
    if (it == by_ingress.end()) {
      problems.push_back(absl::StrCat(Text(x), " is missing"));
    } else if (it->second != x.egress) {
      problems.push_back(absl::StrCat(Text(x), " goes to ", it->second, " instead"));
    }
  }
  std::set<CrossConnect> added(batch.add.begin(), batch.add.end());
  for (const CrossConnect& x : batch.remove) {
    auto it = by_ingress.find(x.ingress);
    if (it != by_ingress.end() && it->second == x.egress && !added.contains(x)) {
      problems.push_back(absl::StrCat(Text(x), " is still there"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("read-back differs from the batch: ", absl::StrJoin(problems, "; ")));
}

absl::Status RunApply(const CrossConnectBatch& batch, uint32_t ingress_ports, uint32_t egress_ports,
                      const BatchDriver& driver, ApplyResult& result) {
  if (absl::Status s = ValidateBatch(batch, ingress_ports, egress_ports); !s.ok()) return s;
  absl::StatusOr<std::vector<CrossConnect>> before = driver.read();
  if (!before.ok()) return before.status();
  absl::StatusOr<CrossConnectBatch> plan = PlanBatch(batch, *before);
  if (!plan.ok()) {
    result.observed = *before;
    return plan.status();
  }
  absl::Status sent = absl::OkStatus();
  if (!plan->remove.empty()) sent = driver.remove(plan->remove);
  if (sent.ok() && !plan->add.empty()) sent = driver.add(plan->add);
  const absl::Time verify_start = absl::Now();
  absl::StatusOr<std::vector<CrossConnect>> after = driver.read();
  if (after.ok()) {
    std::sort(after->begin(), after->end());
    result.observed = *after;
    for (const CrossConnect& x : plan->remove) {
      if (!std::binary_search(after->begin(), after->end(), x)) result.removed.push_back(x);
    }
    for (const CrossConnect& x : plan->add) {
      if (std::binary_search(after->begin(), after->end(), x)) result.added.push_back(x);
    }
  }
  if (!sent.ok()) return sent;
  if (!after.ok()) return after.status();
  absl::Status verified = VerifyBatch(batch, *after);
  result.verify_time = absl::Now() - verify_start;
  return verified;
}

}  // namespace fleet::switch_adapters
