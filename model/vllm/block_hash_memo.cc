#include "model/vllm/block_hash_memo.h"

#include <sys/mman.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "model/check.h"

namespace kvtwin::model::vllm {

void BlockHashMemo::FreeBytes::operator()(uint8_t* p) const {
  std::free(p);
}

BlockHashMemo::BlockHashMemo(size_t memory_bytes, int block_size) : block_size_(block_size) {
  KVTWIN_CHECK(block_size > 0) << "block size " << block_size;
  stride_ = (sizeof(Entry) + sizeof(int32_t) * static_cast<size_t>(block_size) + 7) / 8 * 8;
  // Ring slots plus two index slots per ring slot.
  size_t per_slot = stride_ + 2 * sizeof(IndexSlot);
  size_t capacity = 1;
  while (capacity * 2 * per_slot <= memory_bytes && capacity < (size_t{1} << 30)) capacity *= 2;
  if (memory_bytes == 0 || capacity < 1024) return;  // too small to be worth it
  capacity_ = static_cast<uint32_t>(capacity);
  // 2 MiB alignment lets the OS back the ring with huge pages (a performance hint only).
  constexpr size_t kHugePage = size_t{2} << 20;
  size_t bytes = (capacity * stride_ + kHugePage - 1) / kHugePage * kHugePage;
  ring_.reset(static_cast<uint8_t*>(std::aligned_alloc(kHugePage, bytes)));
  KVTWIN_CHECK(ring_ != nullptr) << "cannot allocate the block-hash memo";
#ifdef MADV_HUGEPAGE
  madvise(ring_.get(), bytes, MADV_HUGEPAGE);
#endif
  for (uint32_t i = 0; i < capacity_; ++i) new (entry(i)) Entry{};
  index_.resize(2 * capacity);
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
  // 1. The chain continues in the next ring slot.
  if (*slot != kNoSlot) {
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
  if (ix.slot != 0 && ix.tag == tag) {
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
  *slot = s;
  return h;
}

}  // namespace kvtwin::model::vllm
