#include "sim/golden/vllm_seqs.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "model/vllm/request_block_hasher.h"

namespace kvtwin::sim::golden {
namespace {

namespace mv = model::vllm;

mv::BlockHasher sha256_cbor() {
  return mv::BlockHasher(mv::HashFn::kSha256Cbor, mv::none_hash(mv::HashFn::kSha256Cbor, "0"));
}

// The replayer's use of VllmSeqs, beside a plain model of every sequence's tokens; every prompt
// is also hashed from scratch to check the known hashes it was given.
struct World {
  explicit World(int block_size)
      : hasher(block_size, sha256_cbor(), 1u << 20),
        plain(block_size, sha256_cbor(), 0),
        seqs(&requests, block_size) {}

  void define(size_t s, std::vector<mv::TokenId> tokens) {
    seqs.define(s, tokens);
    model[s] = std::move(tokens);
  }
  void save(size_t s, size_t r) {
    seqs.save(s, r);
    auto ids = requests[r]->all_token_ids();
    model[s].assign(ids.begin(), ids.end());
  }
  void drop(size_t s) {
    seqs.drop(s);
    model.erase(s);
  }
  // Request r := the first `len` tokens of s, then `tail`.
  void add(size_t r, size_t s, size_t len, const std::vector<mv::TokenId>& tail,
           const mv::RequestOptions& options) {
    std::vector<mv::TokenId> expected(model[s].begin(),
                                      model[s].begin() + static_cast<ptrdiff_t>(len));
    expected.insert(expected.end(), tail.begin(), tail.end());
    VllmSeqs::Taken taken = seqs.take(s, len, options);
    const bool took = !taken.tokens.empty();
    std::vector<mv::TokenId> prompt = std::move(taken.tokens);
    std::vector<mv::BlockHash> known = std::move(taken.hashes);
    if (!took) {
      auto ids = seqs.tokens(s).first(len);
      prompt.assign(ids.begin(), ids.end());
      auto h = seqs.known_hashes(s, len, options);
      known.assign(h.begin(), h.end());
    }
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    RC_ASSERT(prompt == expected);
    if (r >= requests.size()) requests.resize(r + 1);
    requests[r] = std::make_unique<mv::Request>("r", prompt, options, &hasher, std::move(known));
    mv::Request reference("ref", expected, options, &plain);
    RC_ASSERT(requests[r]->block_hashes() == reference.block_hashes());
    seqs.prompt_built(s, len, r, took);
  }
  void free(size_t r) {
    seqs.release(r, requests[r].get());
    requests[r].reset();
  }
  void check() const {
    for (size_t s = 0; s < 8; ++s) {
      auto it = model.find(s);
      RC_ASSERT(seqs.defined(s) == (it != model.end()));
      if (it == model.end()) continue;
      auto ids = seqs.tokens(s);
      RC_ASSERT(std::vector<mv::TokenId>(ids.begin(), ids.end()) == it->second);
    }
  }

  mv::RequestBlockHasher hasher;
  mv::RequestBlockHasher plain;
  VllmSeqs::Requests requests;
  VllmSeqs seqs;
  std::map<size_t, std::vector<mv::TokenId>> model;
};

std::vector<mv::TokenId> iota(mv::TokenId from, size_t n) {
  std::vector<mv::TokenId> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = from + static_cast<mv::TokenId>(i);
  return v;
}

TEST(VllmSeqs, ASavedSequenceOutlivesItsRequestAndItsLaterTokens) {
  World w(4);
  w.define(0, iota(0, 10));
  w.add(0, 0, 10, iota(100, 6), {});
  w.save(1, 0);
  w.requests[0]->append_output_token_ids(iota(200, 3));  // after the save: not in the sequence
  w.free(0);
  auto ids = w.seqs.tokens(1);
  EXPECT_EQ(std::vector<mv::TokenId>(ids.begin(), ids.end()), w.model[1]);
  EXPECT_EQ(ids.size(), 16u);
}

TEST(VllmSeqs, APromptBuiltOnTheWholeSequenceLeavesItReadable) {
  World w(4);
  w.define(0, iota(0, 12));
  w.add(0, 0, 12, iota(50, 5), {});
  ASSERT_EQ(w.seqs.tokens(0).size(), 12u);
  EXPECT_EQ(w.seqs.tokens(0)[11], 11);
  w.free(0);
  EXPECT_EQ(w.seqs.tokens(0).size(), 12u);
  EXPECT_EQ(w.seqs.tokens(0)[0], 0);
}

TEST(VllmSeqs, KnownHashesFollowTheLoraNameAndSalt) {
  World w(4);
  w.define(0, iota(0, 16));
  mv::RequestOptions salted;
  salted.cache_salt = "s";
  w.add(0, 0, 16, {}, salted);
  w.free(0);
  EXPECT_EQ(w.seqs.known_hashes(0, 16, salted).size(), 4u);
  EXPECT_TRUE(w.seqs.known_hashes(0, 16, {}).empty());
  mv::RequestOptions lora;
  lora.lora_request = mv::LoRARequest{"a", 1};
  EXPECT_TRUE(w.seqs.known_hashes(0, 16, lora).empty());
  EXPECT_EQ(w.seqs.known_hashes(0, 9, salted).size(), 2u);  // only whole blocks of the prefix
}

RC_GTEST_PROP(VllmSeqsProperty, SequencesMatchAPlainModelAndKnownHashesAreExact, ()) {
  World w(*rc::gen::element(1, 2, 4));
  std::vector<size_t> live;
  size_t next_request = 0;
  const int ops = *rc::gen::inRange(1, 40);
  for (int i = 0; i < ops; ++i) {
    const size_t s = *rc::gen::inRange<size_t>(0, 8);
    switch (*rc::gen::inRange(0, 6)) {
      case 0:
        w.define(s, *rc::gen::container<std::vector<mv::TokenId>>(
                        *rc::gen::inRange<size_t>(0, 24), rc::gen::inRange<mv::TokenId>(0, 50)));
        break;
      case 1:
        if (!live.empty()) w.save(s, *rc::gen::elementOf(live));
        break;
      case 2:
        if (w.model.count(s)) w.drop(s);
        break;
      case 3: {
        if (!w.model.count(s)) break;
        size_t size = w.model[s].size();
        size_t len = *rc::gen::element(size, *rc::gen::inRange<size_t>(0, size + 1));
        mv::RequestOptions options;
        if (*rc::gen::arbitrary<bool>()) options.lora_request = mv::LoRARequest{"a", 1};
        if (*rc::gen::arbitrary<bool>())
          options.cache_salt = *rc::gen::element<std::string>("x", "");
        w.add(next_request, s, len,
              *rc::gen::container<std::vector<mv::TokenId>>(*rc::gen::inRange<size_t>(0, 10),
                                                            rc::gen::inRange<mv::TokenId>(0, 50)),
              options);
        live.push_back(next_request++);
        break;
      }
      case 4:
        if (!live.empty())
          w.requests[*rc::gen::elementOf(live)]->append_output_token_ids(
              *rc::gen::container<std::vector<mv::TokenId>>(*rc::gen::inRange<size_t>(1, 6),
                                                            rc::gen::inRange<mv::TokenId>(0, 50)));
        break;
      case 5:
        if (!live.empty()) {
          size_t k = *rc::gen::inRange<size_t>(0, live.size());
          w.free(live[k]);
          live.erase(live.begin() + static_cast<ptrdiff_t>(k));
        }
        break;
    }
    w.check();
  }
}

}  // namespace
}  // namespace kvtwin::sim::golden
