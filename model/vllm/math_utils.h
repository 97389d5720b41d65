// Integer division with Python's semantics (vllm/utils/math_utils.py's cdiv and the `//` the
// managers use): floor division, and ceiling division as -(a // -b). Some manager paths divide
// negative token counts (Mamba's num_computed_tokens - 1 at 0), where C++'s truncating division
// would differ.
#pragma once

#include <cstdint>

namespace kvtwin::model::vllm {

// Python's a // b. REQUIRES: b != 0.
inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// vLLM's cdiv: -(a // -b).
inline int64_t cdiv(int64_t a, int64_t b) {
  return -floor_div(a, -b);
}

}  // namespace kvtwin::model::vllm
