#include "model/vllm/block_pool.h"

#include "model/check.h"
#include "model/vllm/request_block_hasher.h"

namespace kvtwin::model::vllm {

BlockPool::BlockPool(const BlockPoolOptions& options)
    : options_(options),
      free_block_queue_(options.num_gpu_blocks),
      cached_(options.num_gpu_blocks),
      detached_(static_cast<size_t>(options.num_gpu_blocks), 0) {
  KVTWIN_CHECK(options.num_gpu_blocks > 0) << "num_gpu_blocks " << options.num_gpu_blocks;
  KVTWIN_CHECK(options.hash_block_size > 0) << "hash_block_size " << options.hash_block_size;
  blocks_.resize(static_cast<size_t>(options.num_gpu_blocks));
  ref_cnt_.assign(blocks_.size(), 0);
  for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i].block_id = static_cast<BlockId>(i);
  // The placeholder block: popped once, never freed, ref_cnt not maintained.
  null_block_ = free_block_queue_.popleft();
  blocks_[static_cast<size_t>(null_block_)].is_null = true;
}

bool BlockPool::get_cached_block(std::span<const uint8_t> hash_bytes,
                                 std::span<const int> group_ids, std::span<BlockId> out) const {
  for (size_t i = 0; i < group_ids.size(); ++i) {
    BlockId b = cached_.get_one_block(blocks_, hash_bytes, static_cast<uint32_t>(group_ids[i]));
    if (b == kNoBlock) return false;
    out[i] = b;
  }
  return true;
}

ExternalBlockHash BlockPool::external_hash(std::span<const uint8_t> bytes) const {
  ExternalBlockHash h;
  if (options_.kv_events_use_int_block_hashes) {
    h.is_int = true;
    h.int_value = int_block_hash(bytes);
  } else {
    h.bytes.assign(bytes.begin(), bytes.end());
  }
  return h;
}

void BlockPool::cache_full_blocks(const Request& request, std::span<const BlockId> blocks,
                                  int num_cached_blocks, int num_full_blocks, int block_size,
                                  int group_id) {
  if (num_cached_blocks >= num_full_blocks) return;
  KVTWIN_CHECK_LE(static_cast<size_t>(num_full_blocks), blocks.size());
  BlockHashListWithBlockSize hashes(request.block_hashes(), options_.hash_block_size, block_size);
  KVTWIN_CHECK_LE(num_full_blocks, hashes.size())
      << "request " << request.request_id() << " lacks block hashes";
  const bool events = options_.enable_kv_cache_events;
  const bool hash_events = options_.record_hash_events;
  BlockStored stored;
  // A prefill caches many blocks at once, scattered through the pool and the hash table: fetch
  // each block and its key's home slot a few iterations ahead (unmerged hashes only, whose
  // bytes need no scratch), so that the misses of several inserts overlap.
  constexpr int kAhead = 4;
  const bool ahead = hashes.scale() == 1;
  for (int i = num_cached_blocks; i < num_full_blocks; ++i) {
    if (ahead && i + kAhead < num_full_blocks) {
      const size_t j = static_cast<size_t>(i + kAhead);
      __builtin_prefetch(&blocks_[static_cast<size_t>(blocks[j])], 1);
      cached_.prefetch_slot(prefix_key_hash64(hashes.hashes()[j].bytes(), group_id));
    }
    KVCacheBlock& blk = blocks_[static_cast<size_t>(blocks[static_cast<size_t>(i)])];
    if (blk.is_null) continue;
    KVTWIN_CHECK(blk.block_hash.empty()) << "block " << blk.block_id << " already has a hash";
    std::span<const uint8_t> h = hashes.at(i, &scratch_);
    blk.block_hash.assign(h, static_cast<uint32_t>(group_id));
    cached_.insert(blocks_, blk.block_id, prefix_key_hash64(h, static_cast<uint32_t>(group_id)));
    if (events) stored.block_hashes.push_back(external_hash(h));
    if (hash_events) hash_events_.push_back({KvHashEvent::kStored, int_block_hash(h)});
  }
  if (!events) return;
  if (num_cached_blocks > 0)
    stored.parent_block_hash = external_hash(hashes.at(num_cached_blocks - 1, &scratch_));
  auto tokens = request.all_token_ids();
  stored.token_ids.assign(tokens.begin() + int64_t{num_cached_blocks} * block_size,
                          tokens.begin() + int64_t{num_full_blocks} * block_size);
  stored.block_size = block_size;
  if (request.lora_request()) {
    stored.lora_id = request.lora_request()->adapter_id();
    stored.lora_name = request.lora_request()->lora_name;
  }
  // Extra keys per stored block, the mm walk restarting at index 0 for this event.
  std::vector<std::optional<ExtraKeys>> extra_keys_list;
  int curr_mm_idx = 0;
  ExtraKeys keys;
  for (int i = num_cached_blocks; i < num_full_blocks; ++i) {
    if (blocks_[static_cast<size_t>(blocks[static_cast<size_t>(i)])].is_null) continue;
    int64_t start = int64_t{i} * block_size;
    curr_mm_idx =
        generate_block_hash_extra_keys(request, start, start + block_size, curr_mm_idx, &keys);
    extra_keys_list.push_back(keys.empty() ? std::nullopt : std::optional<ExtraKeys>(keys));
  }
  if (!extra_keys_list.empty()) stored.extra_keys = std::move(extra_keys_list);
  kv_event_queue_.push_back(std::move(stored));
}

void BlockPool::get_new_blocks(int n, std::vector<BlockId>* out) {
  KVTWIN_CHECK(n <= get_num_free_blocks())
      << "Cannot get " << n << " free blocks from the pool (" << get_num_free_blocks() << ")";
  size_t first = out->size();
  free_block_queue_.popleft_n(n, out);
  const BlockId* ids = out->data() + first;
  // The popped blocks are scattered through the pool and the hash table. In runs of kWarmRun,
  // first load what evicting each block reads (its record; its hash-map links, then its chain's
  // slot), independent loads whose misses the core overlaps, then evict and claim the run.
  const bool caching = options_.enable_caching;
  for (int run = 0; run < n; run += kWarmRun) {
    const int end = std::min(n, run + kWarmRun);
    if (caching) {
      uint32_t sink = 0;
      for (int i = run; i < end; ++i) {
        const size_t b = static_cast<size_t>(ids[i]);
        sink += cached_.warm_pop(ids[i]) + static_cast<uint32_t>(blocks_[b].block_hash.size());
      }
      __asm__ volatile("" : : "r"(sink));
    }
    for (int i = run; i < end; ++i) {
      BlockId b = ids[i];
      if (caching) maybe_evict_cached_block(b);
      int32_t& ref_cnt = ref_cnt_[static_cast<size_t>(b)];
      KVTWIN_CHECK_EQ(ref_cnt, 0) << "allocated block " << b << " was in use";
      ref_cnt = 1;
    }
  }
  if (caching) prefetch_next_evictions();
}

// Most calls take one block (a decode step crossing a block boundary), too few for the
// look-ahead above, and the blocks at the queue head are the least recently used ones, likely
// out of the near caches. So each call fetches what the next calls will evict: the records and
// hash-map links of the next few head blocks, and the chain slot of the first one, whose links
// the previous call's hint has already brought in. Hints only: nothing is read for the result.
void BlockPool::prefetch_next_evictions() const {
  BlockId next[4];
  size_t n = free_block_queue_.peek_front(next);
  if (n == 0) return;
  cached_.prefetch_pop_slot(next[0]);
  for (size_t i = 0; i < n; ++i) {
    __builtin_prefetch(&blocks_[static_cast<size_t>(next[i])], 1);
    cached_.prefetch_links(next[i]);
  }
}

bool BlockPool::maybe_evict_cached_block(BlockId b) {
  KVCacheBlock& blk = blocks_[static_cast<size_t>(b)];
  if (blk.block_hash.empty()) return false;
  if (!cached_.pop(blocks_, b)) return false;
  ++num_evicted_blocks_;
  if (options_.record_hash_events)
    hash_events_.push_back({KvHashEvent::kRemoved, int_block_hash(blk.block_hash.block_hash())});
  if (options_.enable_kv_cache_events) {
    BlockRemoved removed;
    removed.block_hashes.push_back(external_hash(blk.block_hash.block_hash()));
    kv_event_queue_.push_back(std::move(removed));
  }
  blk.block_hash.reset();
  return true;
}

void BlockPool::touch(std::span<const BlockId> blocks) {
  for (BlockId b : blocks) {
    int32_t& ref_cnt = ref_cnt_[static_cast<size_t>(b)];
    if (ref_cnt == 0 && b != null_block_) free_block_queue_.remove(b);
    ++ref_cnt;
  }
}

void BlockPool::free_blocks(std::span<const BlockId> ordered_blocks) {
  for (BlockId b : ordered_blocks) --ref_cnt_[static_cast<size_t>(b)];
  to_append_.clear();
  for (BlockId b : ordered_blocks)
    if (ref_cnt_[static_cast<size_t>(b)] == 0 && b != null_block_) to_append_.push_back(b);
  free_block_queue_.append_n(to_append_);
}

void BlockPool::free_blocks_reversed(std::span<const BlockId> blocks) {
  for (BlockId b : blocks) --ref_cnt_[static_cast<size_t>(b)];
  to_append_.clear();
  for (size_t i = blocks.size(); i-- > 0;) {
    BlockId b = blocks[i];
    if (ref_cnt_[static_cast<size_t>(b)] == 0 && b != null_block_) to_append_.push_back(b);
  }
  free_block_queue_.append_n(to_append_);
}

void BlockPool::evict_blocks(std::span<const BlockId> block_ids) {
  for (BlockId b : block_ids) {
    KVTWIN_CHECK(b >= 0 && b < num_gpu_blocks())
        << "Invalid block_id " << b << " >= " << num_gpu_blocks();
    maybe_evict_cached_block(b);
  }
}

bool BlockPool::reset_prefix_cache() {
  int num_used_blocks = num_gpu_blocks() - get_num_free_blocks();
  if (num_used_blocks != 1) return false;  // the null block is always in use
  cached_.clear();
  for (KVCacheBlock& blk : blocks_) blk.block_hash.reset();
  if (options_.enable_kv_cache_events) kv_event_queue_.push_back(AllBlocksCleared{});
  if (options_.record_hash_events) hash_events_.push_back({KvHashEvent::kCleared, 0});
  return true;
}

double BlockPool::get_usage() const {
  int total = num_gpu_blocks() - 1;
  if (total == 0) return 0;
  return 1.0 - (static_cast<double>(get_num_free_blocks()) / static_cast<double>(total));
}

std::vector<KVCacheEvent> BlockPool::take_events() {
  if (!options_.enable_kv_cache_events) return {};
  std::vector<KVCacheEvent> events;
  events.swap(kv_event_queue_);
  return events;
}

void BlockPool::mark_detached(std::span<const BlockId> blocks) {
  for (BlockId b : blocks) detached_[static_cast<size_t>(b)] = 1;
}

void BlockPool::check_invariants() const {
  free_block_queue_.check_invariants();
  cached_.check_invariants(blocks_);
  for (const KVCacheBlock& blk : blocks_) {
    bool queued = free_block_queue_.contains(blk.block_id);
    const int32_t ref_cnt = ref_cnt_[static_cast<size_t>(blk.block_id)];
    KVTWIN_CHECK_EQ(blk.is_null, blk.block_id == null_block_) << "block " << blk.block_id;
    if (blk.is_null) {
      KVTWIN_CHECK(!queued) << "the null block is in the free queue";
      KVTWIN_CHECK(blk.block_hash.empty()) << "the null block has a hash";
      continue;
    }
    KVTWIN_CHECK_GE(ref_cnt, 0) << "block " << blk.block_id;
    if (detached_[static_cast<size_t>(blk.block_id)]) {
      KVTWIN_CHECK(!queued && ref_cnt == 0) << "sink block " << blk.block_id << " reused";
      continue;
    }
    KVTWIN_CHECK_EQ(queued, ref_cnt == 0)
        << "block " << blk.block_id << " ref_cnt " << ref_cnt << " vs free-queue membership";
  }
}

}  // namespace kvtwin::model::vllm
