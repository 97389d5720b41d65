#include "model/vllm/request_block_hasher.h"

#include <xxhash.h>

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
    : block_size_(block_size), hasher_(std::move(hasher)) {
  KVTWIN_CHECK(block_size > 0) << "block size " << block_size;
  size_t entry_bytes = sizeof(MemoEntry) + sizeof(int32_t) * static_cast<size_t>(block_size);
  size_t entries = 1;
  while (entries * 2 * entry_bytes <= memo_bytes) entries *= 2;
  if (memo_bytes == 0 || entries < 1024) return;  // too small to be worth it: no memo
  memo_.resize(entries);
  memo_tokens_.resize(entries * static_cast<size_t>(block_size));
  memo_mask_ = entries - 1;
}

BlockHash RequestBlockHasher::hash_block(const BlockHash& parent, std::span<const TokenId> tokens,
                                         const ExtraKeys* extra_keys) {
  if (extra_keys != nullptr || memo_.empty())
    return hasher_.hash_block_tokens(parent, tokens, extra_keys);
  // Memo key: parent bytes and tokens; only for tokens that fit the int32 token store.
  int32_t narrow[512];
  bool fits = tokens.size() <= 512;
  for (size_t i = 0; fits && i < tokens.size(); ++i) {
    if (tokens[i] < INT32_MIN || tokens[i] > INT32_MAX) fits = false;
    narrow[i] = static_cast<int32_t>(tokens[i]);
  }
  if (!fits) return hasher_.hash_block_tokens(parent, tokens, nullptr);
  size_t token_bytes = tokens.size() * sizeof(int32_t);
  uint64_t seed = parent.empty() ? 0 : parent.low64();
  uint64_t fp = XXH3_64bits_withSeed(narrow, token_bytes, seed);
  MemoEntry& e = memo_[fp & memo_mask_];
  int32_t* stored = &memo_tokens_[(fp & memo_mask_) * static_cast<size_t>(block_size_)];
  if (!e.hash.empty() && e.fingerprint == fp && e.parent == parent &&
      std::memcmp(stored, narrow, token_bytes) == 0) {
    ++memo_stats_.hits;
    return e.hash;
  }
  ++memo_stats_.misses;
  BlockHash h = hasher_.hash_block_tokens(parent, tokens, nullptr);
  e.fingerprint = fp;
  e.parent = parent;
  e.hash = h;
  std::memcpy(stored, narrow, token_bytes);
  return h;
}

void RequestBlockHasher::hash_new_blocks(const Request& request, std::vector<BlockHash>* out) {
  int64_t bs = block_size_;
  int64_t start = static_cast<int64_t>(request.block_hashes().size()) * bs;
  int64_t num_tokens = request.num_tokens();
  if (start + bs > num_tokens) return;  // no new full block
  // Blocks completed after creation start the mm walk at the last input (-1).
  int curr_mm_idx = start > 0 ? -1 : 0;
  BlockHash prev = request.block_hashes().empty() ? BlockHash() : request.block_hashes().back();
  std::span<const TokenId> tokens = request.all_token_ids();
  for (; start + bs <= num_tokens; start += bs) {
    curr_mm_idx =
        generate_block_hash_extra_keys(request, start, start + bs, curr_mm_idx, &extra_keys_);
    const ExtraKeys* keys = extra_keys_.empty() ? nullptr : &extra_keys_;
    prev =
        hash_block(prev, tokens.subspan(static_cast<size_t>(start), static_cast<size_t>(bs)), keys);
    out->push_back(prev);
  }
}

}  // namespace kvtwin::model::vllm
