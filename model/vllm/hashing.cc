#include "model/vllm/hashing.h"

// SHA256_Init/Update/Final go straight to OpenSSL's SHA-NI code; the one-shot SHA256() of
// OpenSSL 3 fetches the algorithm on every call and is several times slower on short inputs.
#define OPENSSL_API_COMPAT 10101
#include <openssl/sha.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace kvtwin::model::vllm {

std::optional<HashFn> hash_fn_from_name(std::string_view name) {
  if (name == "sha256") return HashFn::kSha256;
  if (name == "sha256_cbor") return HashFn::kSha256Cbor;
  if (name == "xxhash") return HashFn::kXxhash;
  if (name == "xxhash_cbor") return HashFn::kXxhashCbor;
  return std::nullopt;
}

std::string_view hash_fn_name(HashFn fn) {
  switch (fn) {
    case HashFn::kSha256:
      return "sha256";
    case HashFn::kSha256Cbor:
      return "sha256_cbor";
    case HashFn::kXxhash:
      return "xxhash";
    case HashFn::kXxhashCbor:
      return "xxhash_cbor";
  }
  return "?";
}

size_t hash_fn_digest_size(HashFn fn) {
  return (fn == HashFn::kSha256 || fn == HashFn::kSha256Cbor) ? 32 : 16;
}

bool hash_fn_uses_cbor(HashFn fn) {
  return fn == HashFn::kSha256Cbor || fn == HashFn::kXxhashCbor;
}

// ---------------------------------------------------------------------------------------------
// Canonical CBOR (RFC 8949 §4.2 shortest forms), as cbor2.dumps(obj, canonical=True) writes the
// few types a block key holds: arrays (tuples), ints, byte strings, text strings and None.
namespace {

void cbor_head(uint8_t major, uint64_t value, std::vector<uint8_t>* out) {
  uint8_t m = static_cast<uint8_t>(major << 5);
  if (value < 24) {
    out->push_back(m | static_cast<uint8_t>(value));
  } else if (value <= 0xff) {
    out->push_back(m | 24);
    out->push_back(static_cast<uint8_t>(value));
  } else if (value <= 0xffff) {
    out->push_back(m | 25);
    out->push_back(static_cast<uint8_t>(value >> 8));
    out->push_back(static_cast<uint8_t>(value));
  } else if (value <= 0xffffffffULL) {
    out->push_back(m | 26);
    for (int shift = 24; shift >= 0; shift -= 8)
      out->push_back(static_cast<uint8_t>(value >> shift));
  } else {
    out->push_back(m | 27);
    for (int shift = 56; shift >= 0; shift -= 8)
      out->push_back(static_cast<uint8_t>(value >> shift));
  }
}

void cbor_bytes(std::span<const uint8_t> b, std::vector<uint8_t>* out) {
  cbor_head(2, b.size(), out);
  out->insert(out->end(), b.begin(), b.end());
}

void cbor_text(std::string_view s, std::vector<uint8_t>* out) {
  cbor_head(3, s.size(), out);
  out->insert(out->end(), s.begin(), s.end());
}

}  // namespace

namespace {

// Writes a CBOR head (major type, shortest-form argument) at p (at most 9 bytes); returns the
// end.
inline uint8_t* cbor_head_at(uint8_t* p, uint8_t major, uint64_t u) {
  uint8_t m = static_cast<uint8_t>(major << 5);
  if (u < 24) {
    *p++ = m | static_cast<uint8_t>(u);
  } else if (u <= 0xff) {
    *p++ = m | 24;
    *p++ = static_cast<uint8_t>(u);
  } else if (u <= 0xffff) {
    *p++ = m | 25;
    *p++ = static_cast<uint8_t>(u >> 8);
    *p++ = static_cast<uint8_t>(u);
  } else if (u <= 0xffffffffULL) {
    *p++ = m | 26;
    for (int shift = 24; shift >= 0; shift -= 8) *p++ = static_cast<uint8_t>(u >> shift);
  } else {
    *p++ = m | 27;
    for (int shift = 56; shift >= 0; shift -= 8) *p++ = static_cast<uint8_t>(u >> shift);
  }
  return p;
}

// An int in shortest form: major type 0, or 1 carrying -1 - v for negative v.
inline uint8_t* cbor_int_at(uint8_t* p, int64_t v) {
  if (v >= 0 && v < 24) {
    *p = static_cast<uint8_t>(v);
    return p + 1;
  }
  return v >= 0 ? cbor_head_at(p, 0, static_cast<uint64_t>(v))
                : cbor_head_at(p, 1, static_cast<uint64_t>(-(v + 1)));
}

// cbor_int_at for a token, without a branch on its magnitude when 0 <= v < 2^32 (every real
// vocabulary): with k = (v >= 24) + (v > 0xff) + (v > 0xffff) the item is
//
//   k = 0: [v]                 k = 2: [19, v>>8, v]
//   k = 1: [18, v]             k = 3: [1a, v>>24, v>>16, v>>8, v]   (big-endian payload)
//
// written as one 8-byte little-endian store of head | payload << 8, the pointer then advancing
// by 1 + {0, 1, 2, 4}[k]. REQUIRES: 8 writable bytes at p (9 reserved per token suffice).
inline uint8_t* cbor_token_at(uint8_t* p, int64_t v) {
  if (static_cast<uint64_t>(v) > 0xffffffffULL) return cbor_int_at(p, v);  // rare: negative/huge
  static constexpr uint8_t kPayloadBytes[4] = {0, 1, 2, 4};
  const auto u = static_cast<uint32_t>(v);
  const unsigned k = static_cast<unsigned>(u >= 24) + static_cast<unsigned>(u > 0xff) +
                     static_cast<unsigned>(u > 0xffff);
  const unsigned n = kPayloadBytes[k];
  const uint64_t head = k == 0 ? u : 0x17 + k;
  const uint64_t payload = static_cast<uint64_t>(__builtin_bswap32(u)) >> (32 - 8 * n);
  const uint64_t word = head | payload << 8;
  std::memcpy(p, &word, sizeof word);
  return p + 1 + n;
}

// True when every token lies in [0x100, 0xffff], so that each one has the same 3-byte form in
// both encodings (CBOR 19 hi lo, pickle BININT2 4d lo hi). With vocabularies under 64 k nearly
// every block qualifies, and a min/max reduction (vectorised) then a fixed stride beats the
// per-token width computation; larger vocabularies mix widths and take the general writers.
inline bool all_two_byte_tokens(std::span<const TokenId> tokens) {
  TokenId lo = INT64_MAX, hi = INT64_MIN;
  for (TokenId t : tokens) {
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  return lo >= 0x100 && hi <= 0xffff;
}

// The token array's items (after its head). REQUIRES: 9 writable bytes per token at p.
inline uint8_t* cbor_tokens_at(uint8_t* p, std::span<const TokenId> tokens) {
  if (all_two_byte_tokens(tokens)) {
    for (TokenId t : tokens) {
      const uint32_t word = 0x19u | uint32_t{__builtin_bswap16(static_cast<uint16_t>(t))} << 8;
      std::memcpy(p, &word, sizeof word);
      p += 3;
    }
    return p;
  }
  for (TokenId t : tokens) p = cbor_token_at(p, t);
  return p;
}

}  // namespace

void encode_block_key_cbor(std::span<const uint8_t> parent, std::span<const TokenId> tokens,
                           const ExtraKeys* extra_keys, std::vector<uint8_t>* out) {
  out->push_back(0x83);
  cbor_bytes(parent, out);
  cbor_head(4, tokens.size(), out);
  // Tokens through a raw pointer into room for the longest encoding (9 bytes each).
  size_t at = out->size();
  out->resize(at + 9 * tokens.size());  // 9 bytes per token also cover each 8-byte store
  uint8_t* p = out->data() + at;
  p = cbor_tokens_at(p, tokens);
  out->resize(static_cast<size_t>(p - out->data()));
  if (extra_keys == nullptr) {
    out->push_back(0xf6);
    return;
  }
  cbor_head(4, extra_keys->size(), out);
  for (const ExtraKey& k : *extra_keys) {
    if (k.is_bytes) {
      cbor_bytes({reinterpret_cast<const uint8_t*>(k.value.data()), k.value.size()}, out);
    } else {
      cbor_text(k.value, out);
    }
  }
}

void encode_str_cbor(std::string_view s, std::vector<uint8_t>* out) {
  cbor_text(s, out);
}

// ---------------------------------------------------------------------------------------------
// pickle protocol 5 as CPython's C pickler writes the key tuple:
//
//   80 05                PROTO 5
//   95 <u64 LE n>        FRAME of n bytes (everything up to and including STOP)
//   43 20 <32 bytes> 94  SHORT_BINBYTES parent, MEMOIZE
//   28 <ints> 74 94      MARK ... TUPLE, MEMOIZE   (85/86/87 + 94 for 1-3 items, 29 for none)
//   4e                   None (or the extra-keys tuple, strings as 8c <len> <utf8> 94)
//   87 94 2e             TUPLE3, MEMOIZE, STOP
//
// Every object here is new to the memo (the golden data has no repeated objects inside one key),
// so no memo references (GET opcodes) are emitted. Frames are cut at object boundaries once they
// reach 64 KiB, as the C pickler does; keys that large need blocks of over 13,000 tokens.
namespace {

constexpr uint8_t kProto = 0x80, kFrame = 0x95, kMemoize = 0x94, kStop = 0x2e, kMark = 0x28,
                  kTuple = 0x74, kEmptyTuple = 0x29, kNone = 0x4e, kBinInt1 = 0x4b, kBinInt2 = 0x4d,
                  kBinInt = 0x4a, kLong1 = 0x8a, kShortBinBytes = 0x43, kBinBytes = 0x42,
                  kShortBinUnicode = 0x8c, kBinUnicode = 0x58;
constexpr uint8_t kTupleN[4] = {kEmptyTuple, 0x85, 0x86, 0x87};
constexpr size_t kFrameSizeTarget = 64 * 1024;
constexpr size_t kFrameSizeMin = 4;
constexpr size_t kFrameHeaderSize = 9;

class PickleWriter {
 public:
  explicit PickleWriter(std::vector<uint8_t>* out) : out_(out) {
    out_->push_back(kProto);
    out_->push_back(5);
    open_frame();
  }

  void byte(uint8_t b) { out_->push_back(b); }
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_->push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void raw(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
  }

  // Called after each complete object, where the C pickler may cut a frame.
  void object_boundary() {
    if (out_->size() - frame_start_ - kFrameHeaderSize >= kFrameSizeTarget) {
      commit_frame();
      open_frame();
    }
  }

  void finish() {
    byte(kStop);
    commit_frame();
  }

  void int_value(int64_t v) {
    if (v >= 0 && v <= 0xff) {
      byte(kBinInt1);
      byte(static_cast<uint8_t>(v));
    } else if (v >= 0 && v <= 0xffff) {
      byte(kBinInt2);
      le(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      byte(kBinInt);
      le(static_cast<uint64_t>(v), 4);
    } else {
      // LONG1: pickle's encode_long. n = bit_length(|v|) / 8 + 1 bytes of little-endian two's
      // complement, then one trailing 0xff dropped when the byte before it already carries the
      // sign. Byte i >= 8 is the sign extension (only INT64_MIN-sized magnitudes reach n = 9).
      uint64_t u = static_cast<uint64_t>(v);
      uint64_t mag = v < 0 ? uint64_t{0} - u : u;
      int n = ((64 - __builtin_clzll(mag)) >> 3) + 1;
      auto byte_at = [&](int i) -> uint8_t {
        return i < 8 ? static_cast<uint8_t>(u >> (8 * i)) : (v < 0 ? 0xff : 0x00);
      };
      if (v < 0 && n > 1 && byte_at(n - 1) == 0xff && (byte_at(n - 2) & 0x80) != 0) --n;
      byte(kLong1);
      byte(static_cast<uint8_t>(n));
      for (int i = 0; i < n; ++i) byte(byte_at(i));
    }
    object_boundary();
  }

  void bytes_value(std::span<const uint8_t> b) {
    if (b.size() <= 0xff) {
      byte(kShortBinBytes);
      byte(static_cast<uint8_t>(b.size()));
    } else {
      byte(kBinBytes);
      le(b.size(), 4);
    }
    raw(b.data(), b.size());
    byte(kMemoize);
    object_boundary();
  }

  void str_value(std::string_view s) {
    if (s.size() <= 0xff) {
      byte(kShortBinUnicode);
      byte(static_cast<uint8_t>(s.size()));
    } else {
      byte(kBinUnicode);
      le(s.size(), 4);
    }
    raw(s.data(), s.size());
    byte(kMemoize);
    object_boundary();
  }

  void none_value() {
    byte(kNone);
    object_boundary();
  }

  // Opens a tuple of n items; close_tuple(n) after writing them.
  void open_tuple(size_t n) {
    if (n > 3) byte(kMark);
  }
  void close_tuple(size_t n) {
    if (n == 0) {
      byte(kEmptyTuple);  // the empty tuple is a singleton: not memoized
    } else {
      byte(n <= 3 ? kTupleN[n] : kTuple);
      byte(kMemoize);
    }
    object_boundary();
  }

 private:
  void open_frame() {
    frame_start_ = out_->size();
    out_->resize(out_->size() + kFrameHeaderSize);
  }
  void commit_frame() {
    size_t len = out_->size() - frame_start_ - kFrameHeaderSize;
    if (len >= kFrameSizeMin) {
      (*out_)[frame_start_] = kFrame;
      for (int i = 0; i < 8; ++i)
        (*out_)[frame_start_ + 1 + i] = static_cast<uint8_t>(len >> (8 * i));
    } else {
      out_->erase(out_->begin() + static_cast<std::ptrdiff_t>(frame_start_),
                  out_->begin() + static_cast<std::ptrdiff_t>(frame_start_ + kFrameHeaderSize));
    }
  }

  std::vector<uint8_t>* out_;
  size_t frame_start_ = 0;
};

}  // namespace

namespace {

// One int32 token as BININT1 (u <= 0xff), BININT2 (u <= 0xffff) or BININT (the rest, negative
// int32s included: u is their two's complement), without a branch on the magnitude: the opcode
// and the token's little-endian bytes go out as one 8-byte store and the pointer advances by the
// opcode's length. REQUIRES: t fits int32; 8 writable bytes at p.
inline uint8_t* pickle_int32_at(uint8_t* p, int64_t t) {
  static constexpr uint8_t kOpcode[3] = {kBinInt1, kBinInt2, kBinInt};
  static constexpr uint8_t kLength[3] = {2, 3, 5};
  const auto u = static_cast<uint32_t>(t);
  const unsigned k = static_cast<unsigned>(u > 0xff) + static_cast<unsigned>(u > 0xffff);
  const uint64_t word = kOpcode[k] | static_cast<uint64_t>(u) << 8;
  std::memcpy(p, &word, sizeof word);
  return p + kLength[k];
}

// Bytes pickle_small_key_at may touch for a key of n tokens: the encoding (5 bytes per token at
// most) plus 3 bytes past the last token's 5 for its 8-byte store.
constexpr size_t pickle_small_key_room(size_t parent_size, size_t n) {
  return 2 + kFrameHeaderSize + 3 + parent_size + 1 + 5 * n + 3 + 2 + 4;
}

// The common key (no extra keys, int32 tokens, parent under 256 bytes, one frame) written
// straight at p: the same bytes as PickleWriter, without a size check per byte. Returns the end
// of the key, or nullptr when the key is not of that shape (what was written is then garbage).
// REQUIRES: pickle_small_key_room(parent.size(), tokens.size()) writable bytes at p.
uint8_t* pickle_small_key_at(uint8_t* p, std::span<const uint8_t> parent,
                             std::span<const TokenId> tokens, const ExtraKeys* extra_keys) {
  // 5 bytes per BININT: 4,096 tokens stay well inside one 64 KiB frame.
  constexpr size_t kMaxTokens = 4096;
  if (extra_keys != nullptr || tokens.size() > kMaxTokens || parent.size() > 0xff) return nullptr;
  *p++ = kProto;
  *p++ = 5;
  uint8_t* frame = p;
  p += kFrameHeaderSize;
  const uint8_t* body = p;
  *p++ = kShortBinBytes;
  *p++ = static_cast<uint8_t>(parent.size());
  if (!parent.empty()) std::memcpy(p, parent.data(), parent.size());
  p += parent.size();
  *p++ = kMemoize;
  const size_t n = tokens.size();
  if (n > 3) *p++ = kMark;
  if (all_two_byte_tokens(tokens)) {
    for (TokenId t : tokens) {
      const uint32_t word = kBinInt2 | static_cast<uint32_t>(t) << 8;
      std::memcpy(p, &word, sizeof word);
      p += 3;
    }
  } else {
    for (TokenId t : tokens) {
      if (t != static_cast<int32_t>(t)) return nullptr;  // LONG1 territory: PickleWriter's job
      p = pickle_int32_at(p, t);
    }
  }
  if (n == 0) {
    *p++ = kEmptyTuple;
  } else {
    *p++ = n <= 3 ? kTupleN[n] : kTuple;
    *p++ = kMemoize;
  }
  *p++ = kNone;
  *p++ = kTupleN[3];
  *p++ = kMemoize;
  *p++ = kStop;
  const uint64_t len = static_cast<uint64_t>(p - body);
  frame[0] = kFrame;
  for (int i = 0; i < 8; ++i) frame[1 + i] = static_cast<uint8_t>(len >> (8 * i));
  return p;
}

bool encode_block_key_pickle_small(std::span<const uint8_t> parent, std::span<const TokenId> tokens,
                                   const ExtraKeys* extra_keys, std::vector<uint8_t>* out) {
  const size_t base = out->size();
  out->resize(base + pickle_small_key_room(parent.size(), tokens.size()));
  uint8_t* end = pickle_small_key_at(out->data() + base, parent, tokens, extra_keys);
  out->resize(end == nullptr ? base : static_cast<size_t>(end - out->data()));
  return end != nullptr;
}

}  // namespace

void encode_block_key_pickle(std::span<const uint8_t> parent, std::span<const TokenId> tokens,
                             const ExtraKeys* extra_keys, std::vector<uint8_t>* out) {
  if (encode_block_key_pickle_small(parent, tokens, extra_keys, out)) return;
  PickleWriter w(out);
  w.open_tuple(3);
  w.bytes_value(parent);
  w.open_tuple(tokens.size());
  for (TokenId t : tokens) w.int_value(t);
  w.close_tuple(tokens.size());
  if (extra_keys == nullptr) {
    w.none_value();
  } else {
    w.open_tuple(extra_keys->size());
    for (const ExtraKey& k : *extra_keys) {
      if (k.is_bytes) {
        w.bytes_value({reinterpret_cast<const uint8_t*>(k.value.data()), k.value.size()});
      } else {
        w.str_value(k.value);
      }
    }
    w.close_tuple(extra_keys->size());
  }
  w.close_tuple(3);
  w.finish();
}

void encode_str_pickle(std::string_view s, std::vector<uint8_t>* out) {
  PickleWriter w(out);
  w.str_value(s);
  w.finish();
}

// ---------------------------------------------------------------------------------------------

BlockHash digest_bytes(HashFn fn, std::span<const uint8_t> bytes) {
  uint8_t digest[32];
  if (fn == HashFn::kSha256 || fn == HashFn::kSha256Cbor) {
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, bytes.data(), bytes.size());
    SHA256_Final(digest, &ctx);
    return BlockHash({digest, 32});
  }
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, h);
  static_assert(sizeof(canonical.digest) == 16);
  return BlockHash({canonical.digest, 16});
}

BlockHash none_hash(HashFn fn, std::string_view python_hash_seed) {
  std::vector<uint8_t> buf;
  if (hash_fn_uses_cbor(fn)) {
    encode_str_cbor(python_hash_seed, &buf);
  } else {
    encode_str_pickle(python_hash_seed, &buf);
  }
  return digest_bytes(fn, buf);
}

BlockHasher::BlockHasher(HashFn fn, BlockHash none_hash) : fn_(fn), none_hash_(none_hash) {
  KVTWIN_CHECK(!none_hash_.empty()) << "NONE_HASH must be set";
  scratch_.reserve(4096);
}

BlockHash BlockHasher::hash_block_tokens(const BlockHash& parent, std::span<const TokenId> tokens,
                                         const ExtraKeys* extra_keys) {
  const BlockHash& p = parent.empty() ? none_hash_ : parent;
  if (hash_fn_uses_cbor(fn_) && extra_keys == nullptr && tokens.size() <= 256) {
    // The common key, encoded on the stack: 83, parent as a byte string, the token array, f6.
    uint8_t buf[16 + BlockHash::kMaxSize + 9 * 256];
    uint8_t* q = buf;
    *q++ = 0x83;
    q = cbor_head_at(q, 2, p.size());
    std::memcpy(q, p.data(), p.size());
    q += p.size();
    q = cbor_head_at(q, 4, tokens.size());
    q = cbor_tokens_at(q, tokens);
    *q++ = 0xf6;
    return digest_bytes(fn_, {buf, static_cast<size_t>(q - buf)});
  }
  if (!hash_fn_uses_cbor(fn_) && tokens.size() <= 256) {
    uint8_t buf[pickle_small_key_room(BlockHash::kMaxSize, 256)];
    if (const uint8_t* end = pickle_small_key_at(buf, p.bytes(), tokens, extra_keys))
      return digest_bytes(fn_, {buf, static_cast<size_t>(end - buf)});
  }
  scratch_.clear();
  if (hash_fn_uses_cbor(fn_)) {
    encode_block_key_cbor(p.bytes(), tokens, extra_keys, &scratch_);
  } else {
    encode_block_key_pickle(p.bytes(), tokens, extra_keys, &scratch_);
  }
  return digest_bytes(fn_, scratch_);
}

}  // namespace kvtwin::model::vllm
