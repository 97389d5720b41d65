#include "model/vllm/free_kv_cache_block_queue.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

FreeKVCacheBlockQueue::FreeKVCacheBlockQueue(int num_blocks)
    : num_blocks_(num_blocks),
      head_(num_blocks),
      tail_(num_blocks + 1),
      prev_(static_cast<size_t>(num_blocks) + 2, kNoBlock),
      next_(static_cast<size_t>(num_blocks) + 2, kNoBlock),
      num_free_blocks_(num_blocks) {
  KVTWIN_CHECK_GE(num_blocks, 0);
  BlockId prev = head_;
  for (BlockId b = 0; b < num_blocks; ++b) {
    next_[static_cast<size_t>(prev)] = b;
    prev_[static_cast<size_t>(b)] = prev;
    prev = b;
  }
  next_[static_cast<size_t>(prev)] = tail_;
  prev_[static_cast<size_t>(tail_)] = prev;
}

BlockId FreeKVCacheBlockQueue::popleft() {
  KVTWIN_CHECK(num_free_blocks_ > 0) << "No free blocks available";
  BlockId first = next_[static_cast<size_t>(head_)];
  BlockId second = next_[static_cast<size_t>(first)];
  next_[static_cast<size_t>(head_)] = second;
  prev_[static_cast<size_t>(second)] = head_;
  prev_[static_cast<size_t>(first)] = next_[static_cast<size_t>(first)] = kNoBlock;
  --num_free_blocks_;
  return first;
}

void FreeKVCacheBlockQueue::popleft_n(int n, std::vector<BlockId>* out) {
  if (n == 0) return;
  KVTWIN_CHECK(n > 0 && n <= num_free_blocks_)
      << "popleft_n(" << n << ") with " << num_free_blocks_ << " free blocks";
  num_free_blocks_ -= n;
  BlockId curr = next_[static_cast<size_t>(head_)];
  for (int i = 0; i < n; ++i) {
    out->push_back(curr);
    BlockId next = next_[static_cast<size_t>(curr)];
    prev_[static_cast<size_t>(curr)] = next_[static_cast<size_t>(curr)] = kNoBlock;
    curr = next;
  }
  next_[static_cast<size_t>(head_)] = curr;
  prev_[static_cast<size_t>(curr)] = head_;
}

void FreeKVCacheBlockQueue::remove(BlockId b) {
  KVTWIN_CHECK(b >= 0 && b < num_blocks_ && contains(b))
      << "remove() called on block " << b << " which is not in the free queue";
  BlockId prev = prev_[static_cast<size_t>(b)];
  BlockId next = next_[static_cast<size_t>(b)];
  next_[static_cast<size_t>(prev)] = next;
  prev_[static_cast<size_t>(next)] = prev;
  prev_[static_cast<size_t>(b)] = next_[static_cast<size_t>(b)] = kNoBlock;
  --num_free_blocks_;
}

void FreeKVCacheBlockQueue::link_after(BlockId prev, BlockId b) {
  KVTWIN_CHECK(b >= 0 && b < num_blocks_ && !contains(b))
      << "block " << b << " is already in the free queue";
  next_[static_cast<size_t>(prev)] = b;
  prev_[static_cast<size_t>(b)] = prev;
}

void FreeKVCacheBlockQueue::append(BlockId b) {
  BlockId last = prev_[static_cast<size_t>(tail_)];
  link_after(last, b);
  next_[static_cast<size_t>(b)] = tail_;
  prev_[static_cast<size_t>(tail_)] = b;
  ++num_free_blocks_;
}

void FreeKVCacheBlockQueue::append_n(std::span<const BlockId> blocks) {
  if (blocks.empty()) return;
  BlockId last = prev_[static_cast<size_t>(tail_)];
  for (BlockId b : blocks) {
    link_after(last, b);
    last = b;
  }
  next_[static_cast<size_t>(last)] = tail_;
  prev_[static_cast<size_t>(tail_)] = last;
  num_free_blocks_ += static_cast<int>(blocks.size());
}

std::vector<BlockId> FreeKVCacheBlockQueue::get_all_free_blocks() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_blocks_));
  for (BlockId b = next_[static_cast<size_t>(head_)]; b != tail_; b = next_[static_cast<size_t>(b)])
    out.push_back(b);
  return out;
}

void FreeKVCacheBlockQueue::check_invariants() const {
  std::vector<bool> seen(static_cast<size_t>(num_blocks_), false);
  int count = 0;
  BlockId prev = head_;
  for (BlockId b = next_[static_cast<size_t>(head_)]; b != tail_;
       b = next_[static_cast<size_t>(b)]) {
    KVTWIN_CHECK(b >= 0 && b < num_blocks_) << "free queue links to invalid index " << b;
    KVTWIN_CHECK(!seen[static_cast<size_t>(b)]) << "block " << b << " twice in the free queue";
    seen[static_cast<size_t>(b)] = true;
    KVTWIN_CHECK_EQ(prev_[static_cast<size_t>(b)], prev) << "broken prev link at block " << b;
    prev = b;
    ++count;
    KVTWIN_CHECK_LE(count, num_blocks_) << "free queue cycle";
  }
  KVTWIN_CHECK_EQ(prev_[static_cast<size_t>(tail_)], prev) << "broken tail link";
  KVTWIN_CHECK_EQ(count, num_free_blocks_) << "num_free_blocks out of sync";
  for (BlockId b = 0; b < num_blocks_; ++b) {
    bool linked = prev_[static_cast<size_t>(b)] != kNoBlock;
    KVTWIN_CHECK_EQ(linked, seen[static_cast<size_t>(b)]) << "stale links on block " << b;
    KVTWIN_CHECK_EQ(next_[static_cast<size_t>(b)] != kNoBlock, linked) << "half-linked block " << b;
  }
}

}  // namespace kvtwin::model::vllm
