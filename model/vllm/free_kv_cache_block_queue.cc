#include "model/vllm/free_kv_cache_block_queue.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

FreeKVCacheBlockQueue::FreeKVCacheBlockQueue(int num_blocks)
    : num_blocks_(num_blocks), pos_(static_cast<size_t>(num_blocks)), num_free_blocks_(num_blocks) {
  KVTWIN_CHECK_GE(num_blocks, 0);
  size_t capacity = 16;
  while (capacity < 2 * static_cast<size_t>(num_blocks)) capacity *= 2;
  ring_.assign(capacity, kNoBlock);
  mask_ = capacity - 1;
  for (BlockId b = 0; b < num_blocks; ++b) {
    ring_[static_cast<size_t>(b)] = b;
    pos_[static_cast<size_t>(b)] = b;
  }
  tail_ = static_cast<uint64_t>(num_blocks);
}

BlockId FreeKVCacheBlockQueue::popleft() {
  KVTWIN_CHECK(num_free_blocks_ > 0) << "No free blocks available";
  skip_holes();
  BlockId b = at(head_);
  at(head_++) = kNoBlock;
  pos_[static_cast<size_t>(b)] = kNoBlock;
  --num_free_blocks_;
  return b;
}

void FreeKVCacheBlockQueue::popleft_n(int n, std::vector<BlockId>* out) {
  if (n == 0) return;
  KVTWIN_CHECK(n > 0 && n <= num_free_blocks_)
      << "popleft_n(" << n << ") with " << num_free_blocks_ << " free blocks";
  num_free_blocks_ -= n;
  size_t first = out->size();
  out->resize(first + static_cast<size_t>(n));
  BlockId* dst = out->data() + first;
  for (int i = 0; i < n;) {
    BlockId& e = at(head_++);
    if (e == kNoBlock) continue;  // a hole left by remove()
    dst[i++] = e;
    pos_[static_cast<size_t>(e)] = kNoBlock;
    e = kNoBlock;
  }
}

void FreeKVCacheBlockQueue::remove(BlockId b) {
  KVTWIN_CHECK(b >= 0 && b < num_blocks_ && contains(b))
      << "remove() called on block " << b << " which is not in the free queue";
  BlockId& p = pos_[static_cast<size_t>(b)];
  ring_[static_cast<size_t>(p)] = kNoBlock;
  p = kNoBlock;
  --num_free_blocks_;
}

void FreeKVCacheBlockQueue::compact() {
  scratch_.clear();
  for (uint64_t p = head_; p != tail_; ++p) {
    BlockId& e = at(p);
    if (e != kNoBlock) scratch_.push_back(e);
    e = kNoBlock;
  }
  for (size_t i = 0; i < scratch_.size(); ++i) {
    ring_[i] = scratch_[i];
    pos_[static_cast<size_t>(scratch_[i])] = static_cast<BlockId>(i);
  }
  head_ = 0;
  tail_ = scratch_.size();
}

void FreeKVCacheBlockQueue::append(BlockId b) {
  append_n({&b, 1});
}

void FreeKVCacheBlockQueue::append_n(std::span<const BlockId> blocks) {
  for (BlockId b : blocks) {
    KVTWIN_CHECK(b >= 0 && b < num_blocks_ && !contains(b))
        << "block " << b << " is already in the free queue";
    if (tail_ - head_ == ring_.size()) compact();
    at(tail_) = b;
    pos_[static_cast<size_t>(b)] = static_cast<BlockId>(tail_ & mask_);
    ++tail_;
    ++num_free_blocks_;
  }
}

std::vector<BlockId> FreeKVCacheBlockQueue::get_all_free_blocks() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_blocks_));
  for (uint64_t p = head_; p != tail_; ++p)
    if (at(p) != kNoBlock) out.push_back(at(p));
  return out;
}

void FreeKVCacheBlockQueue::check_invariants() const {
  KVTWIN_CHECK_LE(tail_ - head_, ring_.size()) << "ring overrun";
  std::vector<bool> seen(static_cast<size_t>(num_blocks_), false);
  int count = 0;
  for (uint64_t p = head_; p != tail_; ++p) {
    BlockId b = at(p);
    if (b == kNoBlock) continue;
    KVTWIN_CHECK(b >= 0 && b < num_blocks_) << "free queue holds invalid index " << b;
    KVTWIN_CHECK(!seen[static_cast<size_t>(b)]) << "block " << b << " twice in the free queue";
    seen[static_cast<size_t>(b)] = true;
    KVTWIN_CHECK_EQ(static_cast<uint64_t>(pos_[static_cast<size_t>(b)]), p & mask_)
        << "stale position of block " << b;
    ++count;
  }
  KVTWIN_CHECK_EQ(count, num_free_blocks_) << "num_free_blocks out of sync";
  for (uint64_t p = tail_; p != head_ + ring_.size(); ++p)
    KVTWIN_CHECK_EQ(at(p), kNoBlock) << "entry outside [head, tail)";
  for (BlockId b = 0; b < num_blocks_; ++b)
    KVTWIN_CHECK_EQ(contains(b), seen[static_cast<size_t>(b)]) << "stale position of block " << b;
}

}  // namespace kvtwin::model::vllm
