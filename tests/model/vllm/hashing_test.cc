// Byte-exact hashing: the encoders against CPython's pickle and cbor2's canonical CBOR, NONE_HASH
// and block-hash chains against values recorded from upstream vLLM and LMCache.
#include "model/vllm/hashing.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include "tests/support/paths.h"

namespace kvtwin::model::vllm {
namespace {

std::vector<uint8_t> parent32() {
  std::vector<uint8_t> p(32);
  std::iota(p.begin(), p.end(), 0);
  return p;
}

std::string hex_of(const std::vector<uint8_t>& v) {
  return to_hex(v);
}

// A plain key (no extra keys) takes a direct writer; the general writer with an empty extra-keys
// tuple must give the same bytes but for that one element (EMPTY_TUPLE 0x29 instead of None
// 0x4e, four bytes from the end). Tokens of every width, blocks up to past the 64 KiB frame.
RC_GTEST_PROP(PickleEncoder, PlainKeysMatchTheGeneralWriter, ()) {
  const auto gen_token =
      rc::gen::oneOf(rc::gen::inRange<TokenId>(0, 256), rc::gen::inRange<TokenId>(0, 65536),
                     rc::gen::inRange<TokenId>(INT32_MIN, INT32_MAX), rc::gen::arbitrary<TokenId>(),
                     rc::gen::element<TokenId>(INT32_MIN, INT32_MAX, -1, 255, 256, 65535, 65536));
  const size_t n = *rc::gen::oneOf(rc::gen::inRange<size_t>(0, 40),
                                   rc::gen::element<size_t>(4096u, 4097u, 13200u, 13500u));
  const bool wide = *rc::gen::inRange(0, 10) == 0;  // some blocks with a 64-bit token
  std::vector<TokenId> tokens;
  const bool three_byte = *rc::gen::inRange(0, 4) == 0;  // every token 256..65535: fixed stride
  for (size_t i = 0; i < n; ++i) {
    tokens.push_back(three_byte      ? *rc::gen::inRange<TokenId>(0x100, 0x10000)
                     : wide || i % 2 ? *gen_token
                                     : static_cast<TokenId>(i % 300));
  }
  const size_t parent_size = *rc::gen::element<size_t>(16u, 32u);
  std::vector<uint8_t> parent(parent_size, 0xab);
  std::vector<uint8_t> plain{0x01}, general{0x01};  // appends after existing bytes
  encode_block_key_pickle(parent, tokens, nullptr, &plain);
  ExtraKeys none;
  encode_block_key_pickle(parent, tokens, &none, &general);
  RC_ASSERT(plain.size() == general.size());
  RC_ASSERT(general[general.size() - 4] == 0x29);
  general[general.size() - 4] = 0x4e;
  RC_ASSERT(plain == general);
}

// Expected bytes below were printed by CPython 3.11's C pickler: pickle.dumps(obj, protocol=5).
TEST(PickleEncoder, MatchesCPythonForEveryIntWidthAndStrings) {
  std::vector<TokenId> ints = {
      0,         23,           24,        255,       256,           65535,      65536,
      -1,        -128,         -129,      INT32_MIN, INT32_MAX,     2147483648, -2147483649LL,
      1LL << 40, -(1LL << 40), INT64_MAX, INT64_MIN, INT64_MIN + 1, 1LL << 55,  -(1LL << 55)};
  ExtraKeys extra = {{"lora-a"}, {"mm:1"}, {"salt"}};
  std::vector<uint8_t> out;
  encode_block_key_pickle(parent32(), ints, &extra, &out);
  EXPECT_EQ(hex_of(out),
            "800595bd000000000000004320000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c"
            "1d1e1f94284b004b174b184bff4d00014dffff4a000001004affffffff4a80ffffff4a7fffffff4a0000"
            "00804affffff7f8a0500000080008a05ffffff7fff8a060000000000018a060000000000ff8a08ffffff"
            "ffffffff7f8a0800000000000000808a0801000000000000808a0800000000000080008a070000000000"
            "008074948c066c6f72612d61948c046d6d3a31948c0473616c7494879487942e");
}

TEST(PickleEncoder, EmptyAndSingleTokenTuples) {
  std::vector<uint8_t> out;
  encode_block_key_pickle(parent32(), {}, nullptr, &out);
  EXPECT_EQ(hex_of(out),
            "80059528000000000000004320000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c"
            "1d1e1f94294e87942e");
  out.clear();
  std::vector<TokenId> one = {7};
  encode_block_key_pickle(parent32(), one, nullptr, &out);
  EXPECT_EQ(hex_of(out),
            "8005952b000000000000004320000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c"
            "1d1e1f944b0785944e87942e");
}

TEST(PickleEncoder, CutsFramesAt64KiBLikeTheCPickler) {
  std::vector<TokenId> big(20000);
  std::iota(big.begin(), big.end(), 100000);
  std::vector<uint8_t> out;
  encode_block_key_pickle(parent32(), big, nullptr, &out);
  EXPECT_EQ(out.size(), 100062u);
  // First frame: exactly 65,536 bytes, cut after the int that reached the target.
  EXPECT_EQ(to_hex(std::span(out).subspan(0, 12)), "800595000001000000000043");
  EXPECT_EQ(digest_bytes(HashFn::kSha256, out).hex(),
            "5c015d565d80907ef171aeb10f30758560e19ed3a851cc1cdb15bc7e4ce4b325");
}

TEST(PickleEncoder, NoneHashOfSeedZero) {
  std::vector<uint8_t> out;
  encode_str_pickle("0", &out);
  EXPECT_EQ(hex_of(out), "80059505000000000000008c0130942e");
  EXPECT_EQ(none_hash(HashFn::kSha256, "0").hex(),
            "1973e23848344dc43a988a9b478663803cfffe1243480253f9a3cf004b14aa7c");
}

// RFC 8949 shortest forms; the example of golden README §5.
TEST(CborEncoder, ShortestIntFormsAndNone) {
  std::vector<uint8_t> out;
  std::vector<TokenId> tokens = {0,  23,  24,  255,  256, 65535, 65536, 4294967295LL, 4294967296LL,
                                 -1, -24, -25, -256, -257};
  encode_block_key_cbor(std::vector<uint8_t>(16, 0xab), tokens, nullptr, &out);
  EXPECT_EQ(hex_of(out),
            "8350abababababababababababababababab8e0017181818ff19010019ffff1a000100001affffffff"
            "1b00000001000000002037381838ff390100f6");
}

// RFC 8949 §4.2.1's shortest head, written the plain way (an independent check of the encoder's
// branch-free token writer).
void reference_cbor_head(uint8_t major, uint64_t u, std::vector<uint8_t>* out) {
  const int extra = u < 24 ? 0 : u <= 0xff ? 1 : u <= 0xffff ? 2 : u <= 0xffffffffULL ? 4 : 8;
  const int info = extra == 0   ? static_cast<int>(u)
                   : extra == 1 ? 24
                   : extra == 2 ? 25
                   : extra == 4 ? 26
                                : 27;
  out->push_back(static_cast<uint8_t>(major << 5 | info));
  for (int i = extra - 1; i >= 0; --i) out->push_back(static_cast<uint8_t>(u >> (8 * i)));
}

RC_GTEST_PROP(CborEncoder, TokenArraysMatchAPlainShortestFormWriter, ()) {
  const auto gen_token = rc::gen::oneOf(
      rc::gen::inRange<TokenId>(0, 30), rc::gen::inRange<TokenId>(0, 300),
      rc::gen::inRange<TokenId>(0, 70000), rc::gen::inRange<TokenId>(0, 1LL << 33),
      rc::gen::arbitrary<TokenId>(),
      rc::gen::element<TokenId>(0, 23, 24, 255, 256, 65535, 65536, 4294967295LL, 4294967296LL, -1,
                                -24, -25, -256, -257, INT64_MIN, INT64_MAX));
  // A third of the blocks from a vocabulary whose tokens all take 3 bytes (the fixed-stride path).
  const auto tokens =
      *rc::gen::inRange(0, 3) == 0
          ? *rc::gen::container<std::vector<TokenId>>(rc::gen::inRange<TokenId>(0x100, 0x10000))
          : *rc::gen::container<std::vector<TokenId>>(gen_token);
  std::vector<uint8_t> parent(16, 0xcd);
  std::vector<uint8_t> expected = parent;  // 83, then the parent as a 16-byte string (50 ...)
  expected.insert(expected.begin(), {0x83, 0x50});
  reference_cbor_head(4, tokens.size(), &expected);
  for (TokenId t : tokens) {
    if (t >= 0) {
      reference_cbor_head(0, static_cast<uint64_t>(t), &expected);
    } else {
      reference_cbor_head(1, static_cast<uint64_t>(-(t + 1)), &expected);
    }
  }
  expected.push_back(0xf6);
  std::vector<uint8_t> out;
  encode_block_key_cbor(parent, tokens, nullptr, &out);
  RC_ASSERT(out == expected);
}

// hash_block_tokens encodes the common key on the stack; it must digest exactly the bytes the
// public encoders write, for every hash function, token width and length (past the 256-token
// stack limit too), with and without extra keys.
RC_GTEST_PROP(BlockHasher, HashesTheBytesThePublicEncodersWrite, ()) {
  const auto fn =
      *rc::gen::element(HashFn::kSha256, HashFn::kSha256Cbor, HashFn::kXxhash, HashFn::kXxhashCbor);
  const auto gen_token = rc::gen::oneOf(
      rc::gen::inRange<TokenId>(0, 256), rc::gen::inRange<TokenId>(0, 131072),
      rc::gen::inRange<TokenId>(INT32_MIN, INT32_MAX),
      rc::gen::element<TokenId>(-1, 255, 256, 65535, 65536, INT32_MAX, 1LL << 32, INT64_MIN));
  const size_t n = *rc::gen::oneOf(rc::gen::inRange<size_t>(0, 20),
                                   rc::gen::element<size_t>(16u, 255u, 256u, 257u, 600u));
  std::vector<TokenId> tokens;
  const bool three_byte = *rc::gen::inRange(0, 3) == 0;  // every token 256..65535: fixed stride
  for (size_t i = 0; i < n; ++i)
    tokens.push_back(three_byte ? *rc::gen::inRange<TokenId>(0x100, 0x10000) : *gen_token);
  const bool with_keys = *rc::gen::inRange(0, 4) == 0;
  ExtraKeys keys = {{"lora"}, {"salt"}};
  BlockHasher hasher(fn, none_hash(fn, "0"));
  const bool first = *rc::gen::arbitrary<bool>();
  BlockHash parent = first ? BlockHash() : digest_bytes(fn, parent32());
  const BlockHash& p = first ? hasher.none_hash() : parent;
  std::vector<uint8_t> bytes;
  if (hash_fn_uses_cbor(fn)) {
    encode_block_key_cbor(p.bytes(), tokens, with_keys ? &keys : nullptr, &bytes);
  } else {
    encode_block_key_pickle(p.bytes(), tokens, with_keys ? &keys : nullptr, &bytes);
  }
  RC_ASSERT(hasher.hash_block_tokens(parent, tokens, with_keys ? &keys : nullptr) ==
            digest_bytes(fn, bytes));
}

TEST(CborEncoder, ExtraKeysAsTextAndByteStrings) {
  std::vector<uint8_t> out;
  ExtraKeys extra = {{"ab"}, {std::string("\x01\x02", 2), true}};
  std::vector<TokenId> tokens = {1};
  encode_block_key_cbor(std::vector<uint8_t>(16, 0), tokens, &extra, &out);
  EXPECT_EQ(hex_of(out), "835000000000000000000000000000000000810182626162420102");
}

TEST(NoneHash, LmcacheVectorsForEverySeed) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc =
      parser.load(testing::shared_path("golden/lmcache/public/lmcache_hash_vectors.json"));
  int n = 0;
  for (auto [seed, hex] : doc["none_hash"].get_object()) {
    EXPECT_EQ(none_hash(HashFn::kSha256Cbor, seed).hex(), std::string_view(hex.get_string()))
        << "seed " << seed;
    ++n;
  }
  EXPECT_EQ(n, 4);
}

// LMCache's chunk keys carry h_i = SHA256(CBOR([h_{i-1}, [chunk tokens], null])) as field 4 of
// "model@world_size@worker_id@<hash>@dtype...".
TEST(BlockHasher, LmcacheChunkChains) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc =
      parser.load(testing::shared_path("golden/lmcache/public/lmcache_hash_vectors.json"));
  BlockHasher hasher(HashFn::kSha256Cbor, none_hash(HashFn::kSha256Cbor, "0"));
  int checked = 0;
  for (simdjson::dom::element c : doc["cases"].get_array()) {
    int64_t chunk = c["chunk_size"].get_int64();
    std::vector<TokenId> tokens;
    for (int64_t t : c["tokens"].get_array()) tokens.push_back(t);
    std::map<int64_t, std::string> chain;  // start -> hex
    BlockHash parent;
    for (size_t s = 0; s < tokens.size(); s += chunk) {
      size_t e = std::min(tokens.size(), s + static_cast<size_t>(chunk));
      parent = hasher.hash_block_tokens(parent, std::span(tokens).subspan(s, e - s), nullptr);
      chain[static_cast<int64_t>(s)] = parent.hex();
    }
    for (simdjson::dom::element ch : c["chunks"].get_array()) {
      std::string_view key = ch["key"].get_string();
      // The hash is the 64-hex field after the third '@' (the model name has no '@').
      size_t at = 0;
      for (int i = 0; i < 3; ++i) at = key.find('@', at) + 1;
      std::string_view hex = key.substr(at, 64);
      EXPECT_EQ(chain.at(ch["start"].get_int64()), hex) << key;
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

// Every vLLM public case: NONE_HASH from the header, and the block hashes of every plain
// add_request (no LoRA, multimodal or salt) recomputed from its prompt.
TEST(BlockHasher, VllmGoldenHeadersAndPromptHashes) {
  simdjson::dom::parser parser;
  int cases = 0, requests = 0;
  std::map<std::string, int> fns;
  for (const auto& entry :
       std::filesystem::directory_iterator(testing::shared_path("golden/public"))) {
    if (entry.path().extension() != ".jsonl") continue;
    std::ifstream in(entry.path());
    std::string line;
    std::getline(in, line);
    simdjson::dom::element header = parser.parse(line);
    std::string_view fn_name = header["config"]["hash_fn"].get_string();
    auto fn = hash_fn_from_name(fn_name);
    ASSERT_TRUE(fn.has_value()) << fn_name;
    std::string_view seed = header["config"]["python_hash_seed"].get_string();
    EXPECT_EQ(none_hash(*fn, seed).hex(),
              std::string_view(header["derived"]["none_hash"].get_string()))
        << entry.path();
    ++fns[std::string(fn_name)];
    ++cases;
    if (!header["config"]["compute_block_hashes"].get_bool().value()) continue;
    int64_t block = header["config"]["hash_block_size"].get_int64();
    BlockHasher hasher(*fn, none_hash(*fn, seed));
    while (std::getline(in, line)) {
      simdjson::dom::element op = parser.parse(line);
      if (op["op"].error() || std::string_view(op["op"].get_string()) != "add_request") continue;
      if (!op["prompt"].error() && op["lora"].error() && op["mm"].error() &&
          op["cache_salt"].error() && !op["expect"]["block_hashes"].is_object()) {
        std::vector<TokenId> prompt;
        for (int64_t t : op["prompt"].get_array()) prompt.push_back(t);
        std::vector<std::string> expected;
        for (auto h : op["expect"]["block_hashes"].get_array())
          expected.emplace_back(std::string_view(h.get_string()));
        std::vector<std::string> actual;
        BlockHash parent;
        for (size_t s = 0; s + block <= prompt.size(); s += block) {
          parent = hasher.hash_block_tokens(parent, std::span(prompt).subspan(s, block), nullptr);
          actual.push_back(parent.hex());
        }
        ASSERT_EQ(actual, expected) << entry.path() << ": " << line.substr(0, 80);
        ++requests;
      }
    }
  }
  EXPECT_EQ(cases, 41);
  EXPECT_GT(requests, 1000);
  EXPECT_GT(fns["sha256"], 0);
  EXPECT_GT(fns["xxhash_cbor"], 0);
}

TEST(BlockHash, HexRoundTripAndLow64) {
  BlockHash h;
  ASSERT_TRUE(BlockHash::from_hex("000102030405060708090a0b0c0d0e0f", &h));
  EXPECT_EQ(h.size(), 16u);
  EXPECT_EQ(h.hex(), "000102030405060708090a0b0c0d0e0f");
  EXPECT_EQ(h.low64(), 0x08090a0b0c0d0e0fULL);
  EXPECT_FALSE(BlockHash::from_hex("0g", &h));
  EXPECT_FALSE(BlockHash::from_hex("abc", &h));
}

TEST(BlockHash, TheIntFormIsTheLastEightBytesBigEndian) {
  const std::vector<uint8_t> b = {0xff, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(int_block_hash(b), 0x0102030405060708ULL);
  const std::vector<uint8_t> s = {0xab, 0xcd};
  EXPECT_EQ(int_block_hash(s), 0xabcdULL);
  EXPECT_EQ(BlockHash(s).low64(), 0xabcdULL);
}

}  // namespace
}  // namespace kvtwin::model::vllm
