// KVCacheBlocks: block ids per KV cache group — the value KVCacheManager hands to the scheduler
// (vLLM's kv_cache_manager.KVCacheBlocks). blocks[g][j] is the j-th block of group g.
//
// Stored flat (one id vector plus group offsets) so that an allocation result with no new block
// costs no heap allocation. A KVCacheBlocks whose groups are all empty plays the role of
// upstream's shared `empty_kv_cache_blocks` sentinel: KVCacheManager returns one exactly when
// upstream returns the sentinel (create_kv_cache_blocks maps "all empty" to it), so all_empty()
// answers upstream's identity test `blocks is empty_kv_cache_blocks.blocks`.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "model/check.h"
#include "model/vllm/kv_cache_block.h"

namespace kvtwin::model::vllm {

class KVCacheBlocks {
 public:
  static constexpr int kMaxGroups = 32;

  KVCacheBlocks() = default;
  // num_groups empty groups.
  explicit KVCacheBlocks(int num_groups) { reset(num_groups); }

  int num_groups() const { return num_groups_; }
  std::span<const BlockId> operator[](int g) const {
    return {ids_.data() + offsets_[static_cast<size_t>(g)],
            offsets_[static_cast<size_t>(g) + 1] - offsets_[static_cast<size_t>(g)]};
  }
  bool all_empty() const { return ids_.empty(); }
  // KVCacheBlocks.get_block_ids(): a copy as nested vectors.
  std::vector<std::vector<BlockId>> get_block_ids() const {
    std::vector<std::vector<BlockId>> out(static_cast<size_t>(num_groups_));
    for (int g = 0; g < num_groups_; ++g)
      out[static_cast<size_t>(g)].assign((*this)[g].begin(), (*this)[g].end());
    return out;
  }

  // Building, group after group: reset(n), then for g = 0..n-1 append ids with ids() and call
  // end_group(g).
  void reset(int num_groups) {
    KVTWIN_CHECK(num_groups >= 0 && num_groups <= kMaxGroups) << num_groups << " groups";
    num_groups_ = num_groups;
    ids_.clear();
    // Offsets past num_groups are never read (operator== and [] stop at num_groups).
    std::fill_n(offsets_.begin(), num_groups + 1, 0u);
  }
  std::vector<BlockId>& ids() { return ids_; }
  void end_group(int g) {
    offsets_[static_cast<size_t>(g) + 1] = static_cast<uint32_t>(ids_.size());
  }

  friend bool operator==(const KVCacheBlocks& a, const KVCacheBlocks& b) {
    return a.num_groups_ == b.num_groups_ && a.ids_ == b.ids_ &&
           std::equal(a.offsets_.begin(), a.offsets_.begin() + a.num_groups_ + 1,
                      b.offsets_.begin());
  }

 private:
  std::vector<BlockId> ids_;
  std::array<uint32_t, kMaxGroups + 1> offsets_{};
  int num_groups_ = 0;
};

}  // namespace kvtwin::model::vllm
