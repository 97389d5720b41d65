#include "sim/engine/prompt_hash_memo.h"

#include <algorithm>

#include "model/check.h"
#include "sim/random.h"

namespace kvtwin::sim::engine {

using model::vllm::BlockHash;
using model::vllm::TokenId;

PromptHashMemo::PromptHashMemo(model::vllm::BlockHasher hasher, int hash_block_size, size_t slots,
                               size_t ways)
    : hasher_(std::move(hasher)),
      block_size_(hash_block_size),
      ways_(ways),
      ways_meta_(slots),
      slots_(slots) {
  KVTWIN_CHECK(hash_block_size >= 1) << "hash block size " << hash_block_size;
  KVTWIN_CHECK(ways >= 1 && slots >= ways && slots % ways == 0)
      << "slots " << slots << " ways " << ways;
  const size_t sets = slots / ways;
  KVTWIN_CHECK((sets & (sets - 1)) == 0) << "slots / ways " << sets;
}

size_t PromptHashMemo::find_or_claim(const BlockHash& parent, uint64_t id, int32_t T) {
  const uint64_t parent_word = parent.empty() ? 0 : parent.low64();
  const uint64_t h = mix64(id ^ mix64(parent_word ^ static_cast<uint64_t>(T)));
  const uint64_t tag = h | 1;  // 0 marks an empty way
  const size_t first = (static_cast<size_t>(h) & (slots_.size() / ways_ - 1)) * ways_;
  size_t victim = first;
  ++clock_;
  for (size_t s = first; s < first + ways_; ++s) {
    Way& way = ways_meta_[s];
    if (way.tag == tag) {
      const Slot& slot = slots_[s];
      if (slot.trace_block_size == T && slot.id == id && slot.parent == parent) {
        way.used = clock_;
        return s;
      }
    }
    if (way.used < ways_meta_[victim].used) victim = s;  // empty ways have used == 0
  }
  ways_meta_[victim] = Way{tag, clock_};
  slots_[victim] = Slot{parent, id, T, 0};
  return victim;
}

void PromptHashMemo::prompt_hashes(const workload::TraceRequest& t, std::span<const TokenId> prompt,
                                   std::vector<BlockHash>* out) {
  const int64_t T = t.block_size;
  const int64_t B = block_size_;
  if (T <= 0 || T % B != 0 || t.block_ids.empty()) return;
  const int64_t n_tokens = std::min<int64_t>(t.prompt_tokens, static_cast<int64_t>(prompt.size()));
  if (per_slot_ != T / B) {  // (re)lay out the table for this trace block size
    per_slot_ = static_cast<int32_t>(T / B);
    std::fill(slots_.begin(), slots_.end(), Slot{});
    std::fill(ways_meta_.begin(), ways_meta_.end(), Way{});
    hashes_.assign(slots_.size() * static_cast<size_t>(per_slot_), BlockHash());
  }
  BlockHash parent;  // empty: the first block's parent is NONE_HASH
  for (size_t i = 0; i < t.block_ids.size(); ++i) {
    const int64_t start = static_cast<int64_t>(i) * T;
    const int64_t covered = std::min<int64_t>(T, n_tokens - start);
    const int32_t n = static_cast<int32_t>(std::max<int64_t>(covered, 0) / B);
    if (n == 0) return;
    const uint64_t id = t.block_ids[i];
    const size_t s = find_or_claim(parent, id, static_cast<int32_t>(T));
    Slot& slot = slots_[s];
    BlockHash* run = &hashes_[s * static_cast<size_t>(per_slot_)];
    const int32_t have = std::min(slot.count, n);
    stats_.hits += static_cast<uint64_t>(have);
    for (int32_t k = slot.count; k < n; ++k) {
      const BlockHash& prev = k == 0 ? parent : run[k - 1];
      auto tokens = prompt.subspan(static_cast<size_t>(start + k * B), static_cast<size_t>(B));
      run[k] = hasher_.hash_block_tokens(prev, tokens, nullptr);
      ++stats_.hashed;
    }
    slot.count = std::max(slot.count, n);
    out->insert(out->end(), run, run + n);
    if (n < per_slot_) return;  // the next hash block straddles unique tokens
    parent = run[n - 1];
  }
}

}  // namespace kvtwin::sim::engine
