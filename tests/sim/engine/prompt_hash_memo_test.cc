// PromptHashMemo against direct hashing: on random traces (shared and chained ids, partial last
// blocks, unique tails, every hash function, tiny tables that collide, with 1 to 4 ways), a request
// built with the memo's hashes has exactly the block hashes of one hashed token by token.
#include "sim/engine/prompt_hash_memo.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "model/vllm/request.h"
#include "model/vllm/request_block_hasher.h"
#include "sim/workload/token_synth.h"

namespace kvtwin::sim::engine {
namespace {

namespace vllm = model::vllm;

vllm::BlockHasher block_hasher(vllm::HashFn fn) {
  return vllm::BlockHasher(fn, vllm::none_hash(fn, "0"));
}

// Direct: every full block hashed from the tokens (no memo in the request hasher either).
std::vector<vllm::BlockHash> direct_hashes(vllm::HashFn fn, int block_size,
                                           std::vector<vllm::TokenId> prompt) {
  vllm::RequestBlockHasher hasher(block_size, block_hasher(fn), /*memo_bytes=*/0);
  vllm::RequestOptions options;
  options.max_tokens = 1;
  vllm::Request r("direct", std::move(prompt), options, &hasher);
  return r.block_hashes();
}

TEST(PromptHashMemo, GivesTheHashesOfWholeTraceBlocksOnly) {
  const workload::TokenSynthesizer synth(3, 128256);
  PromptHashMemo memo(block_hasher(vllm::HashFn::kSha256), 16);
  workload::TraceRequest t;
  t.index = 1;
  t.prompt_tokens = 64 + 40;  // one whole trace block, then 40 covered tokens of the second
  t.block_size = 64;
  t.block_ids = {11, 12};
  std::vector<vllm::TokenId> prompt;
  synth.prompt_tokens(t, &prompt);
  std::vector<vllm::BlockHash> got;
  memo.prompt_hashes(t, prompt, &got);
  auto want = direct_hashes(vllm::HashFn::kSha256, 16, prompt);
  ASSERT_EQ(got.size(), 6u);  // 4 + floor(40 / 16)
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
  EXPECT_EQ(memo.stats().hashed, 6u);
  got.clear();
  memo.prompt_hashes(t, prompt, &got);  // the same prompt again: all from the memo
  EXPECT_EQ(memo.stats().hits, 6u);
  EXPECT_EQ(memo.stats().hashed, 6u);
}

TEST(PromptHashMemo, GivesNothingWhenTheHashBlockDoesNotDivideTheTraceBlock) {
  const workload::TokenSynthesizer synth(3, 128256);
  PromptHashMemo memo(block_hasher(vllm::HashFn::kSha256), 48);
  workload::TraceRequest t;
  t.prompt_tokens = 512;
  t.block_size = 64;
  t.block_ids = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<vllm::TokenId> prompt;
  synth.prompt_tokens(t, &prompt);
  std::vector<vllm::BlockHash> got;
  memo.prompt_hashes(t, prompt, &got);
  EXPECT_TRUE(got.empty());
}

TEST(PromptHashMemo, ANewKeyReplacesTheLeastRecentlyUsedEntryOfItsSet) {
  const workload::TokenSynthesizer synth(3, 128256);
  PromptHashMemo memo(block_hasher(vllm::HashFn::kSha256), 16, /*slots=*/2, /*ways=*/2);
  auto hash_one = [&](uint64_t id) {  // one whole trace block of 4 hash blocks
    workload::TraceRequest t;
    t.prompt_tokens = 64;
    t.block_size = 64;
    t.block_ids = {id};
    std::vector<vllm::TokenId> prompt;
    synth.prompt_tokens(t, &prompt);
    std::vector<vllm::BlockHash> got;
    memo.prompt_hashes(t, prompt, &got);
    EXPECT_EQ(got, direct_hashes(vllm::HashFn::kSha256, 16, prompt));
  };
  hash_one(1);
  hash_one(2);
  hash_one(1);  // both fit in the one set: a hit, and 2 is now the older entry
  EXPECT_EQ(memo.stats().hits, 4u);
  hash_one(3);  // replaces 2
  hash_one(1);
  EXPECT_EQ(memo.stats().hits, 8u);
  hash_one(2);  // was replaced: hashed again (and replaces 3)
  EXPECT_EQ(memo.stats().hits, 8u);
  EXPECT_EQ(memo.stats().hashed, 16u);
}

RC_GTEST_PROP(PromptHashMemo, RequestsBuiltWithTheMemoHashLikeTokenByToken, ()) {
  const auto fn = *rc::gen::element(vllm::HashFn::kSha256, vllm::HashFn::kSha256Cbor,
                                    vllm::HashFn::kXxhash, vllm::HashFn::kXxhashCbor);
  const int32_t trace_bs = *rc::gen::element(16, 32, 64);
  const int block_size = *rc::gen::element(1, 2, 3, 4, 8, 16, 32, 64);
  const size_t ways = *rc::gen::element<size_t>(1u, 2u, 4u);
  const size_t slots = ways * *rc::gen::element<size_t>(1u, 2u, 16u);
  const workload::TokenSynthesizer synth(*rc::gen::inRange<uint64_t>(0, 4), 1000);
  PromptHashMemo memo(block_hasher(fn), block_size, slots, ways);
  vllm::RequestBlockHasher hasher(block_size, block_hasher(fn), /*memo_bytes=*/0);
  // A few conversations whose turns extend each other, and ids reused under other parents.
  const int num_requests = *rc::gen::inRange(1, 12);
  std::vector<std::vector<uint64_t>> histories(3);
  for (int i = 0; i < num_requests; ++i) {
    auto& h = histories[static_cast<size_t>(*rc::gen::inRange(0, 3))];
    const int grow = *rc::gen::inRange(0, 4);
    for (int g = 0; g < grow; ++g) h.push_back(*rc::gen::inRange<uint64_t>(0, 6));
    workload::TraceRequest t;
    t.index = static_cast<uint64_t>(i);
    t.block_ids = h;
    t.block_size = h.empty() ? 0 : trace_bs;
    const int64_t covered = static_cast<int64_t>(h.size()) * trace_bs;
    const int64_t lo = h.empty() ? 1 : covered - trace_bs + 1;
    t.prompt_tokens = *rc::gen::inRange<int64_t>(lo, covered + 2 * trace_bs + 1);
    std::vector<vllm::TokenId> prompt;
    synth.prompt_tokens(t, &prompt);
    std::vector<vllm::BlockHash> known;
    memo.prompt_hashes(t, prompt, &known);
    vllm::RequestOptions options;
    options.max_tokens = 1;
    vllm::Request with_memo("m", prompt, options, &hasher, known);
    RC_ASSERT(with_memo.block_hashes() == direct_hashes(fn, block_size, prompt));
  }
}

}  // namespace
}  // namespace kvtwin::sim::engine
