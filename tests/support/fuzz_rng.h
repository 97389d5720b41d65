// The fixed-seed random stream of the deterministic fuzz tests: splitmix64, so that a case list
// is the same on every machine and compiler (std:: distributions are not).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvtwin::testing {

struct FuzzRng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }
};

}  // namespace kvtwin::testing
