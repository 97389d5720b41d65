// FastDivmod: division of 31-bit unsigned numerators by a divisor fixed at construction, with one
// multiply-high and one shift instead of a hardware-less integer division (a runtime 32-bit
// division costs about twenty instructions on a GPU; the copy kernels do five per 16-byte word).
//
// Method (round-up multiplier, as in Granlund & Montgomery and CUTLASS's FastDivmod): with
// l = ceil(log2 d) and p = 31 + l, m = ceil(2^p / d) fits 32 bits, and for every n < 2^31
//   floor(n / d) == floor(n * m / 2^p) == mulhi32(n, m) >> (l - 1).
// Proof sketch: n*m/2^p = n/d + n*e/(d*2^p) with 0 <= e < d, and the error term is below
// n/2^p < 2^-l <= 1/d, too small to cross the next multiple of 1/d.
//
// Invariant: 1 <= divisor < 2^31; divisor 1 is handled without the multiplier.
// Thread-safe (immutable after construction); usable on host and device.
#pragma once

#include <cstdint>

#include "cuda/host_device.h"

namespace kvtwin::cuda {

class FastDivmod {
 public:
  FastDivmod() = default;  // divisor 1

  // REQUIRES: 1 <= d < 2^31 (checked by the caller that builds plans; see kv_copy_plan.cc).
  explicit FastDivmod(uint32_t d) : divisor_(d) {
    if (d <= 1) return;
    uint32_t l = 0;
    while ((uint64_t{1} << l) < d) ++l;  // l = ceil(log2 d), 1 <= l <= 31
    const uint64_t p = 31 + l;
    multiplier_ = static_cast<uint32_t>(((uint64_t{1} << p) + d - 1) / d);
    shift_ = l - 1;
  }

  KVTWIN_HD uint32_t divisor() const { return divisor_; }

  // floor(n / divisor). REQUIRES: n < 2^31.
  KVTWIN_HD uint32_t div(uint32_t n) const {
    if (divisor_ == 1) return n;
    return mulhi(n, multiplier_) >> shift_;
  }

  // quotient and remainder of n / divisor. REQUIRES: n < 2^31.
  KVTWIN_HD void divmod(uint32_t n, uint32_t& quotient, uint32_t& remainder) const {
    quotient = div(n);
    remainder = n - quotient * divisor_;
  }

 private:
  KVTWIN_HD static uint32_t mulhi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return static_cast<uint32_t>((uint64_t{a} * b) >> 32);
#endif
  }

  uint32_t divisor_ = 1;
  uint32_t multiplier_ = 0;
  uint32_t shift_ = 0;
};

}  // namespace kvtwin::cuda
