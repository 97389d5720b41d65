// Properties of KVCacheManager under random configurations (every manager kind and the hybrid
// layouts) and random scheduler-like op sequences. RC_PARAMS=max_success=1000 in CI.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <variant>

#include "model/vllm/free_kv_cache_block_queue.h"
#include "tests/model/vllm/random_kv_workload.h"

namespace kvtwin::model::vllm::testing {
namespace {

constexpr int kMinOps = 40;
constexpr int kMaxOps = 200;

// The structural invariants (checked by check_invariants): ref_cnt equals the number of
// request tables holding each block (null block excepted); a block is in the free queue iff
// its ref_cnt is 0 (sink blocks excepted); the queue is a consistent doubly linked list of
// distinct blocks; the prefix-cache map and the blocks' hashes agree.
RC_GTEST_PROP(KVCacheManagerProperty, InvariantsHoldAfterEveryOp, ()) {
  RandomConfig config = *gen_config();
  RC_TAG(config.label);
  RandomScheduler s(config);
  int n = pick(kMinOps, kMaxOps);
  for (int i = 0; i < n; ++i) {
    std::string op = s.step();
    try {
      s.manager().check_invariants();
    } catch (const CheckFailedError& e) {
      RC_FAIL("after op " + std::to_string(i) + " (" + op + ") on " + config.label + ": " +
              e.what());
    }
  }
  RC_CLASSIFY(s.stats().hit_tokens > 0, "prefix hits");
  RC_CLASSIFY(s.stats().preemptions > 0, "preemptions");
  RC_CLASSIFY(s.stats().allocations >= 5, ">= 5 allocations");
}

// The hash stream (record_hash_events) is the full events reduced to their int hashes, in order:
// a consumer indexing cached hashes sees the same thing from either.
RC_GTEST_PROP(KVCacheManagerProperty, TheHashStreamIsTheEventsReduced, ()) {
  RandomConfig config = *gen_config();
  config.options.enable_kv_cache_events = true;
  config.options.record_hash_events = true;
  RC_TAG(config.label);
  RandomScheduler s(config);
  int n = pick(kMinOps, kMaxOps);
  std::vector<KvHashEvent> stream;
  size_t seen = 0;
  for (int i = 0; i < n; ++i) {
    std::string op = s.step();
    std::vector<KvHashEvent> want;
    for (const KVCacheEvent& e : s.manager().take_events()) {
      auto to_int = [&](const ExternalBlockHash& h) {
        return h.is_int ? h.int_value : int_block_hash(h.bytes);
      };
      if (const auto* st = std::get_if<BlockStored>(&e)) {
        for (const auto& h : st->block_hashes) want.push_back({KvHashEvent::kStored, to_int(h)});
      } else if (const auto* rm = std::get_if<BlockRemoved>(&e)) {
        for (const auto& h : rm->block_hashes) want.push_back({KvHashEvent::kRemoved, to_int(h)});
      } else {
        want.push_back({KvHashEvent::kCleared, 0});
      }
    }
    s.manager().take_hash_events(&stream);
    seen += stream.size();
    if (stream != want)
      RC_FAIL("after op " + std::to_string(i) + " (" + op + ") on " + config.label + ": " +
              std::to_string(stream.size()) + " hash events, " + std::to_string(want.size()) +
              " expected from the full events");
  }
  RC_CLASSIFY(seen > 0, "hash events");
}

// Usage is 1 - free / (num_blocks - 1), and free blocks are exactly the queued ones.
RC_GTEST_PROP(KVCacheManagerProperty, UsageIsConsistentWithTheFreeQueue, ()) {
  RandomConfig config = *gen_config();
  RC_TAG(config.label);
  RandomScheduler s(config);
  int n = pick(kMinOps, kMaxOps);
  for (int i = 0; i < n; ++i) {
    s.step();
    const BlockPool& pool = s.manager().block_pool();
    int free = static_cast<int>(pool.free_block_queue().get_all_free_blocks().size());
    RC_ASSERT(free == s.manager().num_free_blocks());
    double expected = 1.0 - static_cast<double>(free) / (pool.num_gpu_blocks() - 1);
    RC_ASSERT(s.manager().usage() == expected);
    RC_ASSERT(s.manager().usage() >= 0.0);
    RC_ASSERT(s.manager().usage() <= 1.0);
  }
}

// free() returns exactly the request's blocks: each loses one reference per table entry, the
// ones that reach zero are appended to the queue tail (per group, tail block first), nothing
// else moves.
RC_GTEST_PROP(KVCacheManagerProperty, FreeReturnsExactlyWhatWasAllocated, ()) {
  RandomConfig config = *gen_config();
  RC_TAG(config.label);
  RandomScheduler s(config);
  KVCacheManager& m = s.manager();
  std::vector<int32_t> refs_before;
  std::vector<BlockId> queue_before;
  std::vector<std::vector<BlockId>> tables;
  s.before_free = [&](SimRequest& r) {
    refs_before.assign(m.block_pool().ref_cnts().begin(), m.block_pool().ref_cnts().end());
    queue_before = m.block_pool().free_block_queue().get_all_free_blocks();
    tables = m.get_block_ids(r.request->request_id());
  };
  s.after_free = [&](SimRequest& r) {
    RC_ASSERT(m.get_blocks(r.request->request_id()).all_empty());
    std::map<BlockId, int> held;
    std::vector<BlockId> expected_tail;
    for (const auto& table : tables)
      for (BlockId b : table) ++held[b];
    std::vector<int32_t> refs_after(m.block_pool().ref_cnts().begin(),
                                    m.block_pool().ref_cnts().end());
    for (size_t b = 0; b < refs_after.size(); ++b) {
      int n = held.count(static_cast<BlockId>(b)) ? held[static_cast<BlockId>(b)] : 0;
      RC_ASSERT(refs_after[b] == refs_before[b] - n);
    }
    for (const auto& table : tables)
      for (auto it = table.rbegin(); it != table.rend(); ++it)
        if (*it != m.block_pool().null_block() && refs_after[static_cast<size_t>(*it)] == 0)
          expected_tail.push_back(*it);
    std::vector<BlockId> expected = queue_before;
    expected.insert(expected.end(), expected_tail.begin(), expected_tail.end());
    RC_ASSERT(m.block_pool().free_block_queue().get_all_free_blocks() == expected);
  };
  int n = pick(kMinOps, kMaxOps);
  for (int i = 0; i < n; ++i) s.step();
}

// Full attention: a hit is a prefix of the request's block hashes, every block of it is cached
// under the matching key, and (without EAGLE) the next block is not cached — hits are
// downward-closed and maximal.
RC_GTEST_PROP(KVCacheManagerProperty, FullAttentionHitsAreDownwardClosed, ()) {
  RandomConfig config = *gen_config(/*full_attention_with_caching=*/true);
  RC_TAG(config.label);
  RandomScheduler s(config);
  KVCacheManager& m = s.manager();
  const BlockPool& pool = m.block_pool();
  const int block_size = config.options.hash_block_size;
  s.on_hit = [&](const Request& req, const KVCacheManager::ComputedBlocks& hit) {
    if (req.skip_reading_prefix_cache()) return;
    std::span<const BlockId> blocks = hit.blocks[0];
    RC_ASSERT(hit.num_computed_tokens == static_cast<int64_t>(blocks.size()) * block_size);
    const auto& hashes = req.block_hashes();
    const int groups[1] = {0};
    BlockId found[1];
    for (size_t i = 0; i < blocks.size(); ++i) {
      RC_ASSERT(pool.block(blocks[i]).block_hash.matches(hashes[i].bytes(), 0));
      RC_ASSERT(pool.get_cached_block(hashes[i].bytes(), groups, found));
    }
    size_t max_blocks = static_cast<size_t>((req.num_tokens() - 1) / block_size);
    if (!config.options.use_eagle && blocks.size() < max_blocks)
      RC_ASSERT(!pool.get_cached_block(hashes[blocks.size()].bytes(), groups, found));
  };
  int n = pick(kMinOps, kMaxOps);
  for (int i = 0; i < n; ++i) s.step();
  RC_CLASSIFY(s.stats().hit_tokens > 0, "prefix hits");
}

// The free queue against a std::list model: same order after any sequence of operations.
RC_GTEST_PROP(FreeKVCacheBlockQueueProperty, MatchesAListModel, ()) {
  const int n = pick(1, 40);
  FreeKVCacheBlockQueue q(n);
  std::list<BlockId> model;
  for (BlockId b = 0; b < n; ++b) model.push_back(b);
  std::vector<BlockId> out;  // blocks outside the queue
  const int ops = pick(0, 200);
  for (int i = 0; i < ops; ++i) {
    int op = pick(0, 4);
    if (op == 0 && !model.empty()) {
      int k = pick(0, static_cast<int>(model.size()) + 1);
      size_t before = out.size();
      q.popleft_n(k, &out);
      for (int j = 0; j < k; ++j) {
        RC_ASSERT(out[before + static_cast<size_t>(j)] == model.front());
        model.pop_front();
      }
    } else if (op == 1 && !model.empty()) {
      auto it = model.begin();
      std::advance(it, pick<size_t>(0, model.size()));
      q.remove(*it);
      out.push_back(*it);
      model.erase(it);
    } else if (op == 2 && !out.empty()) {
      size_t k = pick<size_t>(0, out.size() + 1);
      std::vector<BlockId> back(out.end() - static_cast<std::ptrdiff_t>(k), out.end());
      out.resize(out.size() - k);
      q.append_n(back);
      model.insert(model.end(), back.begin(), back.end());
    } else if (op == 3 && !out.empty()) {
      q.append(out.back());
      model.push_back(out.back());
      out.pop_back();
    }
    q.check_invariants();
    RC_ASSERT(q.get_all_free_blocks() == std::vector<BlockId>(model.begin(), model.end()));
  }
}

// The (parent, tokens) memo is exact: hashes with and without it are equal on random requests.
RC_GTEST_PROP(RequestBlockHasherProperty, TheMemoIsTransparent, ()) {
  const int block_size = *rc::gen::element(1, 2, 4, 16);
  HashFn fn =
      *rc::gen::element(HashFn::kSha256, HashFn::kSha256Cbor, HashFn::kXxhash, HashFn::kXxhashCbor);
  RequestBlockHasher memo(block_size, BlockHasher(fn, none_hash(fn, "0")), 1u << 20);
  RequestBlockHasher plain(block_size, BlockHasher(fn, none_hash(fn, "0")), 0);
  std::vector<TokenId> base =
      *rc::gen::container<std::vector<TokenId>>(rc::gen::inRange<TokenId>(-3, 70000));
  const int requests = pick(1, 8);
  for (int i = 0; i < requests; ++i) {
    std::vector<TokenId> prompt(base.begin(), base.begin() + pick<size_t>(0, base.size() + 1));
    RequestOptions opts;
    if (*rc::gen::arbitrary<bool>()) opts.cache_salt = "s";
    Request a("a", prompt, opts, &memo);
    Request b("b", prompt, opts, &plain);
    RC_ASSERT(a.block_hashes() == b.block_hashes());
    std::vector<TokenId> more =
        *rc::gen::container<std::vector<TokenId>>(rc::gen::inRange<TokenId>(0, 9));
    a.append_output_token_ids(more);
    b.append_output_token_ids(more);
    RC_ASSERT(a.block_hashes() == b.block_hashes());
  }
}

}  // namespace
}  // namespace kvtwin::model::vllm::testing
