#include "model/vllm/request_block_hasher.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "model/check.h"

namespace kvtwin::model::vllm {
namespace {

// The mm part of the walk (vLLM's _gen_mm_extra_hash_keys); returns the next mm index.
int append_mm_extra_keys(const Request& request, int64_t start, int64_t end, int start_mm_idx,
                         ExtraKeys* out) {
  const std::vector<MultiModalFeatureSpec>& mm = request.mm_features();
  if (mm.empty()) return start_mm_idx;
  const MultiModalFeatureSpec& last = mm.back();
  // Quick exit: the block starts after the end of the last input.
  if (last.offset + last.length < start) return start_mm_idx;
  int n = static_cast<int>(mm.size());
  if (start_mm_idx < 0) {
    KVTWIN_CHECK_LE(-start_mm_idx, n);
    start_mm_idx = n + start_mm_idx;
  }
  int curr = start_mm_idx;
  while (curr < n) {
    const MultiModalFeatureSpec& f = mm[static_cast<size_t>(curr)];
    if (end <= f.offset) break;  // the block has not reached this input
    if (start > f.offset + f.length) {
      ++curr;  // the block is past this input
      continue;
    }
    out->push_back(ExtraKey{f.identifier, false});
    if (end >= f.offset + f.length) {
      ++curr;  // the block holds the end of this input and may hold the next one
    } else {
      break;
    }
  }
  return curr;
}

}  // namespace

int generate_block_hash_extra_keys(const Request& request, int64_t start_token_idx,
                                   int64_t end_token_idx, int start_mm_idx, ExtraKeys* out) {
  out->clear();
  if (request.lora_request()) out->push_back(ExtraKey{request.lora_request()->lora_name, false});
  int next = append_mm_extra_keys(request, start_token_idx, end_token_idx, start_mm_idx, out);
  if (start_token_idx == 0 && request.cache_salt() && !request.cache_salt()->empty())
    out->push_back(ExtraKey{*request.cache_salt(), false});
  return next;
}

RequestBlockHasher::RequestBlockHasher(int block_size, BlockHasher hasher, size_t memo_bytes)
    : block_size_(block_size), hasher_(std::move(hasher)), memo_(memo_bytes, block_size) {}

void RequestBlockHasher::hash_new_blocks(const Request& request, std::vector<BlockHash>* out) {
  const int64_t bs = block_size_;
  int64_t start = static_cast<int64_t>(request.block_hashes().size()) * bs;
  const int64_t num_tokens = request.num_tokens();
  if (start + bs > num_tokens) return;  // no new full block
  std::span<const TokenId> tokens = request.all_token_ids();
  // Blocks completed after creation start the mm walk at the last input (-1).
  int curr_mm_idx = start > 0 ? -1 : 0;
  BlockHash prev = request.block_hashes().empty() ? BlockHash() : request.block_hashes().back();
  uint32_t slot = BlockHashMemo::kNoSlot;
  size_t needed = out->size() + static_cast<size_t>((num_tokens - start) / bs);
  if (out->capacity() < needed) {
    // Room for the blocks of the whole prompt and of the outputs the request may add, as its
    // token vector has (Request::token_capacity), so that decoding does not regrow the list.
    size_t planned = Request::token_capacity(static_cast<size_t>(request.num_prompt_tokens()),
                                             request.max_tokens()) /
                         static_cast<size_t>(bs) +
                     1;
    out->reserve(std::max({needed, 2 * out->capacity(), planned}));
  }
  // Most requests have no extra keys at all (no LoRA, no mm input, no salt): skip the walk.
  const bool has_salt = request.cache_salt() && !request.cache_salt()->empty();
  const bool plain = !request.lora_request() && request.mm_features().empty();
  for (; start + bs <= num_tokens; start += bs) {
    const ExtraKeys* keys = nullptr;
    if (!plain || (has_salt && start == 0)) {
      curr_mm_idx =
          generate_block_hash_extra_keys(request, start, start + bs, curr_mm_idx, &extra_keys_);
      if (!extra_keys_.empty()) keys = &extra_keys_;
    }
    std::span<const TokenId> block =
        tokens.subspan(static_cast<size_t>(start), static_cast<size_t>(bs));
    prev = memo_.enabled() ? memo_.hash(hasher_, prev, block, keys, &slot)
                           : hasher_.hash_block_tokens(prev, block, keys);
    out->push_back(prev);
  }
}

}  // namespace kvtwin::model::vllm
