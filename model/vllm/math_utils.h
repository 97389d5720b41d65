// Integer division with Python's semantics (vllm/utils/math_utils.py's cdiv and the `//` the
// managers use): floor division, and ceiling division as -(a // -b). Some manager paths divide
// negative token counts (Mamba's num_computed_tokens - 1 at 0), where C++'s truncating division
// would differ.
#pragma once

#include <bit>
#include <cstdint>

namespace kvtwin::model::vllm {

// Python's a // b. REQUIRES: b != 0.
inline int64_t floor_div(int64_t a, int64_t b) {
  // Block sizes are powers of two: then an arithmetic shift is the floor division, negative a
  // included, without a 64-bit idiv (tens of cycles, on every allocate_slots).
  if (b > 0 && (b & (b - 1)) == 0) return a >> std::countr_zero(static_cast<uint64_t>(b));
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// vLLM's cdiv: -(a // -b).
inline int64_t cdiv(int64_t a, int64_t b) {
  // Power of two: the floor plus one when the remainder (a & (b - 1), never negative) is not 0.
  if (b > 0 && (b & (b - 1)) == 0)
    return (a >> std::countr_zero(static_cast<uint64_t>(b))) + ((a & (b - 1)) != 0);
  return -floor_div(a, -b);
}

}  // namespace kvtwin::model::vllm
