#include "controller/commit_point/commit_point.h"

#include <utility>

namespace fleet {

absl::string_view EffectName(Effect effect) {
  switch (effect) {
    case Effect::kStoreWrite:
      return "store write";
    case Effect::kSwitchCommand:
      return "switch command";
    case Effect::kAgentCommand:
      return "agent command";
  }
  return "unknown";
}

void CommitPoint::SetFence(Fence fence) {
  auto installed = fence ? std::make_shared<const Fence>(std::move(fence)) : nullptr;
  absl::MutexLock lock(&mu_);
  fence_ = std::move(installed);
}

absl::Status CommitPoint::Pass(Effect effect) const {
  std::shared_ptr<const Fence> fence;
  {
    absl::ReaderMutexLock lock(&mu_);
    fence = fence_;
  }
  if (fence == nullptr) return absl::OkStatus();
  return (*fence)(effect);
}

}  // namespace fleet
