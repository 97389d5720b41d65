#include "model/vllm/block_hash_memo.h"

#include <sys/mman.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "model/check.h"

namespace kvtwin::model::vllm {

void BlockHashMemo::ZeroedBytes::map(size_t bytes) {
  KVTWIN_CHECK(map_ == nullptr) << "mapped twice";
  constexpr size_t kHugePage = size_t{2} << 20;
  map_bytes_ = bytes + kHugePage;
  map_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  KVTWIN_CHECK(map_ != MAP_FAILED) << "cannot map " << map_bytes_ << " bytes for the memo";
  uintptr_t at = (reinterpret_cast<uintptr_t>(map_) + kHugePage - 1) / kHugePage * kHugePage;
  data_ = reinterpret_cast<uint8_t*>(at);
#ifdef MADV_HUGEPAGE
  size_t aligned = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned <= map_bytes_ - (at - reinterpret_cast<uintptr_t>(map_)))
    madvise(data_, aligned, MADV_HUGEPAGE);
#endif
}

BlockHashMemo::ZeroedBytes::~ZeroedBytes() {
  if (map_ != nullptr) munmap(map_, map_bytes_);
}

BlockHashMemo::BlockHashMemo(size_t memory_bytes, int block_size) : block_size_(block_size) {
  KVTWIN_CHECK(block_size > 0) << "block size " << block_size;
  static_assert(std::is_trivially_copyable_v<Entry> && std::is_trivially_copyable_v<IndexSlot>);
  stride_ = (sizeof(Entry) + sizeof(int32_t) * static_cast<size_t>(block_size) + 7) / 8 * 8;
  // Ring slots plus two index slots per ring slot.
  size_t per_slot = stride_ + 2 * sizeof(IndexSlot);
  size_t capacity = 1;
  while (capacity * 2 * per_slot <= memory_bytes && capacity < (size_t{1} << 30)) capacity *= 2;
  if (memory_bytes == 0 || capacity < 1024) return;  // too small to be worth it
  capacity_ = static_cast<uint32_t>(capacity);
  // Zero bytes are empty entries and index slots: no initialisation pass over the memory.
  ring_.map(capacity * stride_);
  index_bytes_.map(2 * capacity * sizeof(IndexSlot));
  index_ = reinterpret_cast<IndexSlot*>(index_bytes_.get());
  index_mask_ = 2 * capacity - 1;
}

uint32_t BlockHashMemo::intern(const ExtraKeys* extra_keys) {
  if (extra_keys == nullptr) return 0;
  extra_scratch_.clear();
  for (const ExtraKey& k : *extra_keys) {
    uint32_t n = static_cast<uint32_t>(k.value.size());
    extra_scratch_.push_back(k.is_bytes ? 'b' : 's');
    extra_scratch_.append(reinterpret_cast<const char*>(&n), sizeof n);
    extra_scratch_ += k.value;
  }
  auto it = extra_ids_.find(extra_scratch_);
  if (it != extra_ids_.end()) return it->second;
  if (extra_ids_.size() >= kMaxExtraKeyTuples) return kNoSlot;
  uint32_t id = static_cast<uint32_t>(extra_ids_.size()) + 1;
  extra_ids_.emplace(extra_scratch_, id);
  return id;
}

bool BlockHashMemo::matches(const Entry& e, const BlockHash& parent,
                            std::span<const TokenId> tokens, uint32_t extra_id) const {
  if (e.hash.empty() || e.extra_id != extra_id || !(e.parent == parent)) return false;
  const int32_t* stored = tokens_of(const_cast<Entry*>(&e));
  bool same = true;
  for (size_t i = 0; i < tokens.size(); ++i) same &= stored[i] == tokens[i];
  return same;
}

BlockHash BlockHashMemo::hash(BlockHasher& hasher, const BlockHash& parent,
                              std::span<const TokenId> tokens, const ExtraKeys* extra_keys,
                              uint32_t* slot) {
  uint32_t extra_id =
      enabled() && tokens.size() == static_cast<size_t>(block_size_) ? intern(extra_keys) : kNoSlot;
  if (extra_id == kNoSlot) {
    *slot = kNoSlot;
    return hasher.hash_block_tokens(parent, tokens, extra_keys);
  }
  // After a miss the chain is new content: no lookup (see the header).
  const bool after_miss = *slot != kNoSlot && (*slot & kMissBit) != 0;
  // 1. The chain continues in the next ring slot.
  if (*slot != kNoSlot && !after_miss) {
    uint32_t next = (*slot + 1) & (capacity_ - 1);
    const Entry* e = entry(next);
    if (matches(*e, parent, tokens, extra_id)) {
      ++hits_;
      *slot = next;
      return e->hash;
    }
  }
  // 2. A junction: the index.
  uint64_t fp = XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(),
                                     parent.low64() ^ (uint64_t{extra_id} << 40));
  IndexSlot& ix = index_[fp & index_mask_];
  uint32_t tag = static_cast<uint32_t>(fp >> 32);
  if (!after_miss && ix.slot != 0 && ix.tag == tag) {
    const Entry* e = entry(ix.slot - 1);
    if (matches(*e, parent, tokens, extra_id)) {
      ++hits_;
      *slot = ix.slot - 1;
      return e->hash;
    }
  }
  // 3. A miss: hash, and append to the ring (int32 tokens only).
  ++misses_;
  BlockHash h = hasher.hash_block_tokens(parent, tokens, extra_keys);
  for (TokenId t : tokens) {
    if (t < INT32_MIN || t > INT32_MAX) {
      *slot = kNoSlot;
      return h;
    }
  }
  uint32_t s = static_cast<uint32_t>(next_++ & (capacity_ - 1));
  Entry* e = entry(s);
  e->parent = parent;
  e->hash = h;
  e->extra_id = extra_id;
  int32_t* stored = tokens_of(e);
  for (size_t i = 0; i < tokens.size(); ++i) stored[i] = static_cast<int32_t>(tokens[i]);
  ix = IndexSlot{tag, s + 1};
  *slot = s | kMissBit;
  return h;
}

}  // namespace kvtwin::model::vllm
