#include "model/lmcache/request_tracker.h"

#include <algorithm>

#include "model/check.h"

namespace kvtwin::model::lmcache {
namespace {

// Makes room for `extra` more elements in `v` without moving what it holds: past its capacity,
// its buffer goes to `retired` (views of it stay valid) and `v` continues in a copy.
template <typename T>
void grow_in_place_or_retire(std::vector<T>& v, size_t extra,
                             std::vector<std::vector<T>>& retired) {
  if (v.size() + extra <= v.capacity()) return;
  std::vector<T> next;
  next.reserve(std::max(2 * v.capacity(), v.size() + extra));
  next.assign(v.begin(), v.end());
  retired.push_back(std::move(v));
  v = std::move(next);
}

// `v` is about to be rewritten: its buffer goes to `retired`, `v` starts empty.
template <typename T>
void retire(std::vector<T>& v, std::vector<std::vector<T>>& retired) {
  if (v.capacity() == 0) return;
  retired.push_back(std::move(v));
  v = std::vector<T>();
}

}  // namespace

void RequestTracker::update(std::span<const TokenId> new_token_ids,
                            const std::optional<std::vector<int64_t>>& new_block_ids,
                            bool preempted, int64_t lmcache_cached_tokens,
                            int64_t vllm_cached_tokens,
                            const std::span<const TokenId>* all_token_ids,
                            std::optional<int64_t> num_computed_tokens) {
  if (preempted) {
    KVTWIN_CHECK(all_token_ids != nullptr) << "preempted request " << req_id << " needs its tokens";
    retire(allocated_block_ids, retired_block_buffers);
    retire(token_ids, retired_token_buffers);
    if (new_block_ids)
      allocated_block_ids = *new_block_ids;
    else
      allocated_block_ids.clear();
    num_saved_tokens = lmcache_cached_tokens;
    int64_t num_computed =
        num_computed_tokens.value_or(std::max(lmcache_cached_tokens, vllm_cached_tokens));
    int64_t needed = std::max<int64_t>(num_computed + static_cast<int64_t>(new_token_ids.size()),
                                       lmcache_cached_tokens);
    size_t n = std::min<size_t>(static_cast<size_t>(needed), all_token_ids->size());
    token_ids.assign(all_token_ids->begin(), all_token_ids->begin() + static_cast<ptrdiff_t>(n));
    chunk_hashes.clear();  // the tokens were rebuilt
    tokens_diverged = false;
  } else {
    if (new_block_ids) {
      grow_in_place_or_retire(allocated_block_ids, new_block_ids->size(), retired_block_buffers);
      allocated_block_ids.insert(allocated_block_ids.end(), new_block_ids->begin(),
                                 new_block_ids->end());
    }
    grow_in_place_or_retire(token_ids, new_token_ids.size(), retired_token_buffers);
    token_ids.insert(token_ids.end(), new_token_ids.begin(), new_token_ids.end());
  }
  if (new_token_ids.size() == 1) is_decode_phase = true;
}

std::optional<ReqMeta> req_meta_from_tracker(RequestTracker& tracker,
                                             const std::optional<LoadSpec>& load_spec,
                                             const ReqMetaOptions& options) {
  const int64_t chunk = options.chunk_size;
  int64_t input_len = static_cast<int64_t>(tracker.token_ids.size());
  bool is_last_prefill = input_len >= tracker.prompt_len;
  int64_t skip_leading = tracker.num_saved_tokens;
  int64_t chunk_boundary = (tracker.num_saved_tokens + 1 + chunk - 1) / chunk * chunk;
  bool request_skip = false;
  if (tracker.request_configs) {
    if (const ConfigValue* v = find_config(*tracker.request_configs, "lmcache.skip_save"))
      request_skip = v->truthy;
  }
  bool skip_save = tracker.skip_save ||
                   (tracker.num_saved_tokens > 0 && input_len < chunk_boundary) ||
                   (tracker.is_decode_phase && !options.save_decode_cache) || request_skip;
  if (skip_save && !load_spec) return std::nullopt;
  int64_t to_save =
      (!is_last_prefill || options.discard_partial_chunks) ? input_len / chunk * chunk : input_len;
  if (!skip_save) tracker.num_saved_tokens = to_save;
  ReqMeta meta;
  meta.req_id = tracker.req_id;
  meta.token_ids = std::span<const TokenId>(tracker.token_ids.data(), static_cast<size_t>(to_save));
  meta.block_ids = tracker.allocated_block_ids;
  meta.block_size = std::max<int64_t>(options.block_size, 1);
  meta.is_last_prefill = is_last_prefill;
  meta.save_spec = SaveSpec{skip_leading, !skip_save};
  if (load_spec && load_spec->can_load) meta.load_spec = load_spec;
  meta.request_configs = tracker.request_configs;
  meta.chunk_hashes = &tracker.chunk_hashes;
  return meta;
}

}  // namespace kvtwin::model::lmcache
