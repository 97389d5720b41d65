#include "model/vllm/request_block_hasher.h"

#include <gtest/gtest.h>

#include "model/vllm/block_hash_with_group_id.h"

namespace kvtwin::model::vllm {
namespace {

const BlockHash kNone = none_hash(HashFn::kSha256Cbor, "0");

std::vector<TokenId> tokens(int n, int start = 0) {
  std::vector<TokenId> t;
  for (int i = 0; i < n; ++i) t.push_back(start + i);
  return t;
}

std::vector<std::string> key_strings(const ExtraKeys& k) {
  std::vector<std::string> out;
  for (const auto& x : k) out.push_back(x.value);
  return out;
}

using Strs = std::vector<std::string>;

TEST(RequestBlockHasher, HashesEveryFullPromptBlockAtCreationAndChainsParents) {
  RequestBlockHasher hasher(4, BlockHasher(HashFn::kSha256Cbor, kNone));
  Request req("r", tokens(10), {}, &hasher);
  ASSERT_EQ(req.block_hashes().size(), 2u);
  BlockHasher h(HashFn::kSha256Cbor, kNone);
  std::vector<TokenId> t = tokens(10);
  BlockHash b0 = h.hash_block_tokens(BlockHash(), {t.data(), 4}, nullptr);
  BlockHash b1 = h.hash_block_tokens(b0, {t.data() + 4, 4}, nullptr);
  EXPECT_EQ(req.block_hashes()[0], b0);
  EXPECT_EQ(req.block_hashes()[1], b1);
}

TEST(RequestBlockHasher, AppendedTokensHashOnlyTheBlocksTheyComplete) {
  RequestBlockHasher hasher(4, BlockHasher(HashFn::kSha256Cbor, kNone));
  Request req("r", tokens(6), {}, &hasher);
  EXPECT_EQ(req.append_output_token_ids(std::vector<TokenId>{6}), 0u);
  EXPECT_EQ(req.append_output_token_ids(std::vector<TokenId>{7, 8}), 1u);
  Request whole("w", tokens(9), {}, &hasher);
  EXPECT_EQ(req.block_hashes(), whole.block_hashes());
}

TEST(RequestBlockHasher, TheMemoNeverChangesAHash) {
  RequestBlockHasher memo(4, BlockHasher(HashFn::kSha256Cbor, kNone), 1u << 20);
  RequestBlockHasher plain(4, BlockHasher(HashFn::kSha256Cbor, kNone), 0);
  for (int round = 0; round < 3; ++round) {
    for (int start : {0, 1, 0, 7}) {
      Request a("a", tokens(64, start), {}, &memo);
      Request b("b", tokens(64, start), {}, &plain);
      ASSERT_EQ(a.block_hashes(), b.block_hashes());
    }
  }
  EXPECT_GT(memo.memo().hits(), 0u);
  // Same tokens under another parent (a salted first block) must not reuse memo entries.
  RequestOptions salted;
  salted.cache_salt = "x";
  Request a("a", tokens(64), salted, &memo);
  Request b("b", tokens(64), salted, &plain);
  EXPECT_EQ(a.block_hashes(), b.block_hashes());
  Request c("c", tokens(64), {}, &plain);
  EXPECT_NE(a.block_hashes()[5], c.block_hashes()[5]);
}

TEST(ExtraKeys, LoraNameOnEveryBlockAndTheSaltOnlyOnTheFirst) {
  RequestOptions o;
  o.lora_request = LoRARequest{"adapter", 7};
  o.cache_salt = "salt";
  Request req("r", tokens(8), o, nullptr);
  ExtraKeys k;
  generate_block_hash_extra_keys(req, 0, 4, 0, &k);
  EXPECT_EQ(key_strings(k), (Strs{"adapter", "salt"}));
  generate_block_hash_extra_keys(req, 4, 8, 0, &k);
  EXPECT_EQ(key_strings(k), (Strs{"adapter"}));
}

TEST(ExtraKeys, MultimodalInputsAreAddedToEveryBlockTheyOverlap) {
  RequestOptions o;
  o.mm_features = {{"aaa", 2, 5}, {"bbb", 9, 2}};  // [2, 7) and [9, 11)
  Request req("r", tokens(16), o, nullptr);
  ExtraKeys k;
  int next = generate_block_hash_extra_keys(req, 0, 4, 0, &k);
  EXPECT_EQ(key_strings(k), (Strs{"aaa"}));
  EXPECT_EQ(next, 0);  // aaa continues into the next block
  next = generate_block_hash_extra_keys(req, 4, 8, next, &k);
  EXPECT_EQ(key_strings(k), (Strs{"aaa"}));
  EXPECT_EQ(next, 1);
  next = generate_block_hash_extra_keys(req, 8, 12, next, &k);
  EXPECT_EQ(key_strings(k), (Strs{"bbb"}));
  EXPECT_EQ(next, 2);
  generate_block_hash_extra_keys(req, 12, 16, next, &k);
  EXPECT_TRUE(k.empty());
}

TEST(ExtraKeys, ABlockStartingWhereTheLastInputEndsStillGetsItFromIndexMinusOne) {
  // Quirk 19 of the golden README: the end test is s > o + l, so a walk that restarts at the
  // last input (after appends) adds it to a block that begins exactly at its end.
  RequestOptions o;
  o.mm_features = {{"img", 4, 4}};  // [4, 8)
  Request req("r", tokens(12), o, nullptr);
  ExtraKeys k;
  generate_block_hash_extra_keys(req, 8, 12, -1, &k);
  EXPECT_EQ(key_strings(k), (Strs{"img"}));
  int next = generate_block_hash_extra_keys(req, 4, 8, 0, &k);
  EXPECT_EQ(next, 1);
  generate_block_hash_extra_keys(req, 8, 12, next, &k);
  EXPECT_TRUE(k.empty());
}

TEST(RequestBlockHasher, DecodeBlocksGetTheLastMmInputWhenHashedAfterAppends) {
  RequestBlockHasher hasher(4, BlockHasher(HashFn::kSha256Cbor, kNone));
  RequestOptions o;
  o.mm_features = {{"img", 4, 4}};
  Request at_creation("a", tokens(12), o, &hasher);
  Request appended("b", tokens(8), o, &hasher);
  appended.append_output_token_ids(std::vector<TokenId>{8, 9, 10, 11});
  EXPECT_EQ(at_creation.block_hashes()[1], appended.block_hashes()[1]);
  EXPECT_NE(at_creation.block_hashes()[2], appended.block_hashes()[2]);
}

TEST(BlockHashListWithBlockSize, ConcatenatesConsecutiveHashes) {
  std::vector<BlockHash> h;
  for (uint8_t i = 0; i < 5; ++i) h.push_back(BlockHash(std::vector<uint8_t>(16, i)));
  BlockHashListWithBlockSize merged(h, 16, 32);
  EXPECT_EQ(merged.size(), 2);
  std::vector<uint8_t> scratch;
  auto b = merged.at(1, &scratch);
  ASSERT_EQ(b.size(), 32u);
  EXPECT_EQ(b[0], 2);
  EXPECT_EQ(b[31], 3);
  BlockHashWithGroupId key(b, 1);
  EXPECT_EQ(key.size(), 36u);
  EXPECT_EQ(key.group_id(), 1u);
  EXPECT_EQ(key.hex().substr(64), "00000001");
}

}  // namespace
}  // namespace kvtwin::model::vllm
