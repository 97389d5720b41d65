#include "sim/hw/page_cache.h"

#include <algorithm>

namespace kvtwin::sim::hw {

bool PageCache::touch(std::string_view key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  lru_.splice(lru_.end(), lru_, it->second);
  return true;
}

void PageCache::insert(std::string_view key, uint64_t bytes) {
  erase(key);  // a rewrite replaces the file's pages
  if (bytes > capacity_) return;
  while (used_ + bytes > capacity_) {
    used_ -= lru_.front().bytes;
    index_.erase(lru_.front().key);
    lru_.pop_front();
  }
  lru_.push_back(File{std::string(key), bytes});
  index_.emplace(lru_.back().key, std::prev(lru_.end()));
  used_ += bytes;
  peak_ = std::max(peak_, used_);
}

void PageCache::erase(std::string_view key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  used_ -= it->second->bytes;
  lru_.erase(it->second);
  index_.erase(it);
}

}  // namespace kvtwin::sim::hw
