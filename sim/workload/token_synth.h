// Deterministic token ids for traces that carry only block ids (or nothing).
//
// Token j of a block with id b is a pure function of (seed, b, j). Equal ids therefore give
// equal tokens, and since ids are chained (equal id ⇒ equal prefix), requests sharing ids up to
// block i share their first (i+1)·block_size tokens at any engine block or chunk size. Tokens
// not covered by an id are unique to the request: a function of (seed, request index, position).
// Generated (output) tokens are unique to the request too, so a later turn that repeats an
// earlier answer under new ids does not hit on it — as in Mooncake, where outputs are not hashed.
//
//   prompt position p:  i = p / block_size
//     i < ids.size()  → token(ids[i], p % block_size)
//     otherwise       → unique(request.index, p)
//
// All tokens lie in [0, vocab_size). Threading: const methods, safe to share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/random.h"
#include "sim/workload/trace_request.h"

namespace kvtwin::sim::workload {

class TokenSynthesizer {
 public:
  TokenSynthesizer(uint64_t seed, int64_t vocab_size)
      : block_salt_(mix64(seed ^ 0x626c6f636b746f6bULL)),
        unique_salt_(mix64(seed ^ 0x756e69717565746bULL)),
        vocab_(static_cast<uint64_t>(vocab_size)) {}

  // Appends the request's prompt_tokens tokens to *out.
  void prompt_tokens(const TraceRequest& r, std::vector<int64_t>* out) const {
    const size_t first = out->size();
    out->resize(first + static_cast<size_t>(std::max<int64_t>(r.prompt_tokens, 0)));
    int64_t* dst = out->data() + first;  // written in place: no capacity check per token
    int64_t p = 0;
    for (uint64_t id : r.block_ids) {
      uint64_t base = mix64(id ^ block_salt_);
      int64_t end = std::min<int64_t>(p + r.block_size, r.prompt_tokens);
      for (int64_t j = 0; p < end; ++p, ++j) dst[p] = to_vocab(base + static_cast<uint64_t>(j));
    }
    uint64_t base = mix64(r.index ^ unique_salt_);
    for (; p < r.prompt_tokens; ++p) dst[p] = to_vocab(base + static_cast<uint64_t>(p));
  }

  // The i-th generated token of request `index` (0-based).
  int64_t output_token(uint64_t index, int64_t i) const {
    return to_vocab(mix64(index ^ unique_salt_) + (uint64_t{1} << 40) + static_cast<uint64_t>(i));
  }

 private:
  int64_t to_vocab(uint64_t x) const {
    // Lemire's multiply-shift maps a 64-bit value onto [0, vocab).
    return static_cast<int64_t>((static_cast<__uint128_t>(mix64(x)) * vocab_) >> 64);
  }

  uint64_t block_salt_;
  uint64_t unique_salt_;
  uint64_t vocab_;
};

}  // namespace kvtwin::sim::workload
