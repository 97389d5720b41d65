#include "model/vllm/full_attention_manager.h"

#include <algorithm>

namespace kvtwin::model::vllm {

void FullAttentionManager::find_longest_cache_hit(const BlockHashListWithBlockSize& block_hashes,
                                                  int64_t max_length,
                                                  std::span<const int> group_ids, bool use_eagle,
                                                  int64_t alignment_tokens,
                                                  std::vector<std::vector<BlockId>>* out) const {
  out->resize(group_ids.size());
  for (auto& blocks : *out) blocks.clear();
  // block_size_ already includes dcp x pcp, as upstream scales the spec's block size here.
  int64_t max_num_blocks =
      std::min<int64_t>(floor_div(max_length, block_size_), block_hashes.size());
  if (group_ids.size() == 1 && block_hashes.scale() == 1) {
    size_t n = static_cast<size_t>(std::max<int64_t>(max_num_blocks, 0));
    find_hits_one_group(block_hashes.hashes().first(n), static_cast<uint32_t>(group_ids[0]),
                        &(*out)[0]);
  } else {
    std::vector<uint8_t> scratch;
    BlockId hit[KVCacheBlocks::kMaxGroups];
    for (int64_t i = 0; i < max_num_blocks; ++i) {
      std::span<const uint8_t> h = block_hashes.at(static_cast<int>(i), &scratch);
      if (!block_pool_->get_cached_block(h, group_ids, hit)) break;
      for (size_t g = 0; g < group_ids.size(); ++g) (*out)[g].push_back(hit[g]);
    }
  }
  if (use_eagle && !(*out)[0].empty()) {
    for (auto& blocks : *out) blocks.pop_back();  // recompute the last block for the drafter
  }
  while (block_size_ != alignment_tokens &&
         static_cast<int64_t>((*out)[0].size()) * block_size_ % alignment_tokens != 0) {
    for (auto& blocks : *out) blocks.pop_back();
  }
}

// The common case (one group, unmerged hashes), kept lean: each hash's table hash is computed
// once, and since hits are scattered through the table and the pool, the table slot is fetched
// kAhead lookups ahead and the chain head's block kHeadAhead ahead, so that the cache misses of
// several lookups overlap. The result is the loop above's.
void FullAttentionManager::find_hits_one_group(std::span<const BlockHash> hashes, uint32_t group_id,
                                               std::vector<BlockId>* hit) const {
  constexpr size_t kAhead = 8, kHeadAhead = 4;
  const BlockHashToBlockMap& map = block_pool_->cached_block_hash_to_block();
  std::span<const KVCacheBlock> blocks = block_pool_->blocks();
  const size_t n = hashes.size();
  hit->reserve(hit->size() + n);  // at most one block per hash: no regrowth inside the loop
  uint64_t ring[kAhead];  // ring[j % kAhead]: table hash of hashes[j], for j in [i, i + kAhead)
  for (size_t j = 0; j < std::min(kAhead, n); ++j) {
    ring[j] = prefix_key_hash64(hashes[j].bytes(), group_id);
    map.prefetch_slot(ring[j]);
  }
  for (size_t j = 0; j < std::min(kHeadAhead, n); ++j) map.prefetch_head(blocks, ring[j]);
  for (size_t i = 0; i < n; ++i) {
    uint64_t h = ring[i % kAhead];
    if (i + kAhead < n) {
      ring[i % kAhead] = prefix_key_hash64(hashes[i + kAhead].bytes(), group_id);
      map.prefetch_slot(ring[i % kAhead]);
    }
    if (i + kHeadAhead < n) map.prefetch_head(blocks, ring[(i + kHeadAhead) % kAhead]);
    BlockId b = map.get_one_block(blocks, h, hashes[i].bytes(), group_id);
    if (b == kNoBlock) break;
    hit->push_back(b);
  }
}

int FullAttentionManager::get_num_common_prefix_blocks(RequestSlot slot) {
  const std::vector<BlockId>& blocks = req_blocks_entry(slot);
  int n = 0;
  for (BlockId b : blocks) {
    if (block_pool_->ref_cnt(b) != num_req_entries_) break;
    ++n;
  }
  return n;
}

}  // namespace kvtwin::model::vllm
