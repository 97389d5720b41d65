// FreeKVCacheBlockQueue against a simple reference (a std::list of the free blocks, head first)
// under random poplefts, popleft_n, removes from anywhere, appends and append_n, with small
// pools so that the ring fills with holes, wraps around and is packed again many times.
// RC_PARAMS=max_success=1000 in CI.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <list>
#include <vector>

#include "model/vllm/free_kv_cache_block_queue.h"

namespace kvtwin::model::vllm {
namespace {

RC_GTEST_PROP(FreeKVCacheBlockQueueProperty, AgreesWithALinkedListReference, ()) {
  const int num_blocks = *rc::gen::inRange(1, 40);
  FreeKVCacheBlockQueue q(num_blocks);
  std::list<BlockId> ref;
  for (BlockId b = 0; b < num_blocks; ++b) ref.push_back(b);
  auto free_block_list = [&] { return std::vector<BlockId>(ref.begin(), ref.end()); };
  // Blocks not in the queue, in the order they left it.
  std::vector<BlockId> taken;
  const int num_ops = *rc::gen::inRange(1, 400);
  for (int i = 0; i < num_ops; ++i) {
    const int kind = *rc::gen::inRange(0, 5);
    if (kind == 0 && !ref.empty()) {  // popleft
      RC_ASSERT(q.popleft() == ref.front());
      taken.push_back(ref.front());
      ref.pop_front();
    } else if (kind == 1 && !ref.empty()) {  // popleft_n
      const int n = *rc::gen::inRange(0, static_cast<int>(ref.size()) + 1);
      std::vector<BlockId> out = {-7};  // appended to, not replaced
      q.popleft_n(n, &out);
      std::vector<BlockId> expected = {-7};
      for (int j = 0; j < n; ++j) {
        expected.push_back(ref.front());
        taken.push_back(ref.front());
        ref.pop_front();
      }
      RC_ASSERT(out == expected);
    } else if (kind == 2 && !ref.empty()) {  // remove from anywhere
      auto it = ref.begin();
      std::advance(it, *rc::gen::inRange(0, static_cast<int>(ref.size())));
      q.remove(*it);
      taken.push_back(*it);
      ref.erase(it);
    } else if (kind == 3 && !taken.empty()) {  // append one
      const size_t j = static_cast<size_t>(*rc::gen::inRange(0, static_cast<int>(taken.size())));
      q.append(taken[j]);
      ref.push_back(taken[j]);
      taken.erase(taken.begin() + static_cast<std::ptrdiff_t>(j));
    } else if (kind == 4 && !taken.empty()) {  // append_n, in a shuffled order
      const int n = *rc::gen::inRange(0, static_cast<int>(taken.size()) + 1);
      std::vector<BlockId> batch(taken.begin(), taken.begin() + n);
      std::reverse(batch.begin(), batch.end());
      q.append_n(batch);
      ref.insert(ref.end(), batch.begin(), batch.end());
      taken.erase(taken.begin(), taken.begin() + n);
    }
    RC_ASSERT(q.num_free_blocks() == static_cast<int>(ref.size()));
    RC_ASSERT(q.get_all_free_blocks() == free_block_list());
    // peek_front: a prefix of the queue, shortened only by the queue's end or by holes.
    std::vector<BlockId> peeked(static_cast<size_t>(*rc::gen::inRange(0, 6)), -7);
    const size_t n = q.peek_front(peeked);
    RC_ASSERT(n <= std::min(peeked.size(), ref.size()));
    RC_ASSERT(
        std::equal(peeked.begin(), peeked.begin() + static_cast<std::ptrdiff_t>(n), ref.begin()));
    if (n > 0) RC_ASSERT(peeked[0] == ref.front());  // the head is never hidden by holes
    q.check_invariants();
  }
  for (BlockId b = 0; b < num_blocks; ++b)
    RC_ASSERT(q.contains(b) == (std::find(ref.begin(), ref.end(), b) != ref.end()));
}

}  // namespace
}  // namespace kvtwin::model::vllm
