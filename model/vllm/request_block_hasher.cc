#include "model/vllm/request_block_hasher.h"

#include <xxhash.h>

#include <sys/mman.h>
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
    : block_size_(block_size), hasher_(std::move(hasher)) {
  KVTWIN_CHECK(block_size > 0) << "block size " << block_size;
  // Only blocks up to 512 tokens are memoized (a slot holds the block's tokens).
  if (memo_bytes == 0 || block_size > 512) return;
  memo_stride_ =
      (sizeof(MemoHeader) + sizeof(int32_t) * static_cast<size_t>(block_size) + 63) / 64 * 64;
  size_t sets = 1;
  while (sets * 2 * kMemoWays * memo_stride_ <= memo_bytes) sets *= 2;
  if (sets < 512) return;  // too small to be worth it
  memo_mask_ = sets - 1;
  // A performance hint only: ask for transparent huge pages.
  constexpr size_t kHugePage = size_t{2} << 20;
  size_t bytes = (sets * kMemoWays * memo_stride_ + kHugePage - 1) / kHugePage * kHugePage;
  memo_.reset(static_cast<uint8_t*>(std::aligned_alloc(kHugePage, bytes)));
  KVTWIN_CHECK(memo_ != nullptr) << "cannot allocate the block-hash memo";
#ifdef MADV_HUGEPAGE
  madvise(memo_.get(), bytes, MADV_HUGEPAGE);
#endif
  for (size_t i = 0; i < sets; ++i)
    for (size_t w = 0; w < kMemoWays; ++w) new (memo_set(i) + w * memo_stride_) MemoHeader{};
}

void RequestBlockHasher::FreeMemo::operator()(uint8_t* p) const {
  std::free(p);
}

uint64_t RequestBlockHasher::memo_fingerprint(std::span<const TokenId> tokens) const {
  return XXH3_64bits(tokens.data(), tokens.size_bytes());
}

BlockHash RequestBlockHasher::hash_block(const BlockHash& parent, std::span<const TokenId> tokens,
                                         const ExtraKeys* extra_keys, uint64_t fingerprint) {
  if (extra_keys != nullptr || !has_memo())
    return hasher_.hash_block_tokens(parent, tokens, extra_keys);
  uint8_t* set = memo_set(fingerprint);
  for (size_t w = 0; w < kMemoWays; ++w) {
    auto* header = reinterpret_cast<MemoHeader*>(set + w * memo_stride_);
    if (header->hash.empty() || header->fingerprint != fingerprint || !(header->parent == parent))
      continue;
    auto* stored = reinterpret_cast<const int32_t*>(set + w * memo_stride_ + sizeof(MemoHeader));
    bool same = true;
    for (size_t i = 0; i < tokens.size(); ++i) same &= stored[i] == tokens[i];
    if (same) {
      ++memo_stats_.hits;
      return header->hash;
    }
  }
  ++memo_stats_.misses;
  BlockHash h = hasher_.hash_block_tokens(parent, tokens, nullptr);
  for (TokenId t : tokens)
    if (t < INT32_MIN || t > INT32_MAX) return h;  // not storable in an int32 slot
  // Insert at way 0; the previous way-0 entry moves to way 1 (the older one is dropped).
  std::memmove(set + memo_stride_, set, (kMemoWays - 1) * memo_stride_);
  auto* header = reinterpret_cast<MemoHeader*>(set);
  header->fingerprint = fingerprint;
  header->parent = parent;
  header->hash = h;
  auto* stored = reinterpret_cast<int32_t*>(set + sizeof(MemoHeader));
  for (size_t i = 0; i < tokens.size(); ++i) stored[i] = static_cast<int32_t>(tokens[i]);
  return h;
}

void RequestBlockHasher::hash_new_blocks(const Request& request, std::vector<BlockHash>* out) {
  const int64_t bs = block_size_;
  int64_t start = static_cast<int64_t>(request.block_hashes().size()) * bs;
  const int64_t num_tokens = request.num_tokens();
  if (start + bs > num_tokens) return;  // no new full block
  std::span<const TokenId> tokens = request.all_token_ids();
  auto block_tokens = [&](int64_t s) {
    return tokens.subspan(static_cast<size_t>(s), static_cast<size_t>(bs));
  };
  // Fingerprints first, so that memo slots can be prefetched a few blocks ahead.
  const size_t n = static_cast<size_t>((num_tokens - start) / bs);
  constexpr size_t kPrefetchDistance = 24;
  fingerprints_.clear();
  if (has_memo()) {
    for (size_t i = 0; i < n; ++i)
      fingerprints_.push_back(memo_fingerprint(block_tokens(start + static_cast<int64_t>(i) * bs)));
  } else {
    fingerprints_.assign(n, 0);
  }
  auto prefetch = [&](size_t i) {
    if (!has_memo() || i >= n) return;
    const uint8_t* set = memo_set(fingerprints_[i]);
    for (size_t off = 0; off < kMemoWays * memo_stride_; off += 64) __builtin_prefetch(set + off);
  };
  for (size_t i = 0; i < kPrefetchDistance; ++i) prefetch(i);
  // Blocks completed after creation start the mm walk at the last input (-1).
  int curr_mm_idx = start > 0 ? -1 : 0;
  BlockHash prev = request.block_hashes().empty() ? BlockHash() : request.block_hashes().back();
  for (size_t i = 0; i < n; ++i, start += bs) {
    prefetch(i + kPrefetchDistance);
    curr_mm_idx =
        generate_block_hash_extra_keys(request, start, start + bs, curr_mm_idx, &extra_keys_);
    const ExtraKeys* keys = extra_keys_.empty() ? nullptr : &extra_keys_;
    prev = hash_block(prev, block_tokens(start), keys, fingerprints_[i]);
    out->push_back(prev);
  }
}

}  // namespace kvtwin::model::vllm
