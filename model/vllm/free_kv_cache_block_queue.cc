#include "model/vllm/free_kv_cache_block_queue.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

FreeKVCacheBlockQueue::FreeKVCacheBlockQueue(int num_blocks)
    : num_blocks_(num_blocks),
      head_(num_blocks),
      tail_(num_blocks + 1),
      links_(static_cast<size_t>(num_blocks) + 2),
      num_free_blocks_(num_blocks) {
  KVTWIN_CHECK_GE(num_blocks, 0);
  BlockId prev = head_;
  for (BlockId b = 0; b < num_blocks; ++b) {
    link(prev).next = b;
    link(b).prev = prev;
    prev = b;
  }
  link(prev).next = tail_;
  link(tail_).prev = prev;
}

BlockId FreeKVCacheBlockQueue::popleft() {
  KVTWIN_CHECK(num_free_blocks_ > 0) << "No free blocks available";
  BlockId first = link(head_).next;
  BlockId second = link(first).next;
  link(head_).next = second;
  link(second).prev = head_;
  link(first) = Link{};
  --num_free_blocks_;
  return first;
}

void FreeKVCacheBlockQueue::popleft_n(int n, std::vector<BlockId>* out) {
  if (n == 0) return;
  KVTWIN_CHECK(n > 0 && n <= num_free_blocks_)
      << "popleft_n(" << n << ") with " << num_free_blocks_ << " free blocks";
  num_free_blocks_ -= n;
  size_t first = out->size();
  out->resize(first + static_cast<size_t>(n));
  BlockId* dst = out->data() + first;
  BlockId curr = link(head_).next;
  for (int i = 0; i < n; ++i) {
    dst[i] = curr;
    Link& l = link(curr);
    curr = l.next;
    l = Link{};
  }
  link(head_).next = curr;
  link(curr).prev = head_;
}

void FreeKVCacheBlockQueue::remove(BlockId b) {
  KVTWIN_CHECK(b >= 0 && b < num_blocks_ && contains(b))
      << "remove() called on block " << b << " which is not in the free queue";
  Link& l = link(b);
  link(l.prev).next = l.next;
  link(l.next).prev = l.prev;
  l = Link{};
  --num_free_blocks_;
}

void FreeKVCacheBlockQueue::link_after(BlockId prev, BlockId b) {
  KVTWIN_CHECK(b >= 0 && b < num_blocks_ && !contains(b))
      << "block " << b << " is already in the free queue";
  link(prev).next = b;
  link(b).prev = prev;
}

void FreeKVCacheBlockQueue::append(BlockId b) {
  BlockId last = link(tail_).prev;
  link_after(last, b);
  link(b).next = tail_;
  link(tail_).prev = b;
  ++num_free_blocks_;
}

void FreeKVCacheBlockQueue::append_n(std::span<const BlockId> blocks) {
  if (blocks.empty()) return;
  BlockId last = link(tail_).prev;
  for (BlockId b : blocks) {
    link_after(last, b);
    last = b;
  }
  link(last).next = tail_;
  link(tail_).prev = last;
  num_free_blocks_ += static_cast<int>(blocks.size());
}

std::vector<BlockId> FreeKVCacheBlockQueue::get_all_free_blocks() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_blocks_));
  for (BlockId b = link(head_).next; b != tail_; b = link(b).next) out.push_back(b);
  return out;
}

void FreeKVCacheBlockQueue::check_invariants() const {
  std::vector<bool> seen(static_cast<size_t>(num_blocks_), false);
  int count = 0;
  BlockId prev = head_;
  for (BlockId b = link(head_).next; b != tail_; b = link(b).next) {
    KVTWIN_CHECK(b >= 0 && b < num_blocks_) << "free queue links to invalid index " << b;
    KVTWIN_CHECK(!seen[static_cast<size_t>(b)]) << "block " << b << " twice in the free queue";
    seen[static_cast<size_t>(b)] = true;
    KVTWIN_CHECK_EQ(link(b).prev, prev) << "broken prev link at block " << b;
    prev = b;
    ++count;
    KVTWIN_CHECK_LE(count, num_blocks_) << "free queue cycle";
  }
  KVTWIN_CHECK_EQ(link(tail_).prev, prev) << "broken tail link";
  KVTWIN_CHECK_EQ(count, num_free_blocks_) << "num_free_blocks out of sync";
  for (BlockId b = 0; b < num_blocks_; ++b) {
    bool linked = link(b).prev != kNoBlock;
    KVTWIN_CHECK_EQ(linked, seen[static_cast<size_t>(b)]) << "stale links on block " << b;
    KVTWIN_CHECK_EQ(link(b).next != kNoBlock, linked) << "half-linked block " << b;
  }
}

}  // namespace kvtwin::model::vllm
