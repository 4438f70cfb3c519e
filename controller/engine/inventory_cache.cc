#include "controller/engine/inventory_cache.h"

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fleet::engine {

absl::StatusOr<std::shared_ptr<const CachedInventory>> InventoryCache::Current() {
  // The version is read before the inventory: a change committed meanwhile bumps it again,
  // and the next call reads again.
  uint64_t version = store_->InventoryVersion();
  {
    absl::MutexLock lock(&mu_);
    auto settled = [this, version]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !reading_ || (current_ != nullptr && current_->version >= version);
    };
    mu_.Await(absl::Condition(&settled));
    if (current_ != nullptr && current_->version >= version) return current_;
    reading_ = true;
  }
  // Changes committed while this caller waited are in the read too: callers that saw them
  // take it rather than read once more each.
  version = std::max(version, store_->InventoryVersion());
  absl::StatusOr<std::shared_ptr<const CachedInventory>> read;
  {
    // In one step with the read's end, so that no waiter sees it ended and not kept. A read
    // that failed is not kept: each waiter then reads for itself.
    absl::Cleanup done = [&] {
      absl::MutexLock lock(&mu_);
      reading_ = false;
      if (read.ok() && (current_ == nullptr || current_->version <= version)) current_ = *read;
    };
    read = Read(version);
  }
  return read;
}

absl::StatusOr<std::shared_ptr<const CachedInventory>> InventoryCache::Read(uint64_t version) {
  auto inventory = std::make_shared<CachedInventory>();
  inventory->version = version;
  ASSIGN_OR_RETURN(inventory->site, store_->LoadInventory());
  ASSIGN_OR_RETURN(inventory->ports, store_->ListPorts(""));
  for (const v1::Onic& o : inventory->site.onics()) {
    inventory->serials[o.id()] = o.serial();
    inventory->device_of[o.id()] = o.device();
  }
  for (int i = 0; i < inventory->site.devices_size(); ++i) {
    inventory->device_index[inventory->site.devices(i).id()] = i;
  }
  inventory->usability =
      scheduler::FabricSnapshot::Build(inventory->site, inventory->ports, {}, {});
  return std::shared_ptr<const CachedInventory>(std::move(inventory));
}

const v1::Device* CachedInventory::FindDevice(const std::string& id) const {
  auto it = device_index.find(id);
  return it == device_index.end() ? nullptr : &site.devices(it->second);
}

const std::string& CachedInventory::DeviceOf(const std::string& onic) const {
  static const std::string* const kNone = new std::string();
  auto it = device_of.find(onic);
  return it == device_of.end() ? *kNone : it->second;
}

absl::StatusOr<std::string> InventoryCache::SerialOf(const std::string& onic) {
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, Current());
  auto it = inventory->serials.find(onic);
  if (it == inventory->serials.end())
    return absl::NotFoundError(absl::StrCat("onic ", onic, " not found"));
  return it->second;
}

}  // namespace fleet::engine
