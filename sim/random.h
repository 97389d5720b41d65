// Seeded randomness for the simulator: named streams built on splitmix64 / xoshiro256**.
//
// No std:: distribution is used anywhere in kvtwin because their algorithms differ between
// standard libraries, and a run must give byte-identical outputs on any machine for the same
// seed. Each consumer derives its own stream from (run seed, stream name), so adding a new
// consumer never shifts the numbers another one draws.
//
// Threading: a Rng is a value; one per consumer, not shared between threads.
#pragma once

#include <cstdint>
#include <string_view>

namespace kvtwin::sim {

// splitmix64's output function: a bijective 64-bit mixer (Steele, Lea, Flood 2014).
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a of a name, mixed: turns a stream name into a 64-bit salt.
inline uint64_t name_salt(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return mix64(h);
}

// xoshiro256** (Blackman, Vigna 2018), seeded through splitmix64.
class Rng {
 public:
  Rng(uint64_t seed, std::string_view stream) {
    uint64_t x = seed ^ name_salt(stream);
    for (uint64_t& s : s_) {
      x += 0x9e3779b97f4a7c15ULL;
      s = mix64(x);
    }
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n). REQUIRES: n > 0. Lemire's multiply-shift, with rejection so the
  // result is exactly uniform.
  uint64_t next_below(uint64_t n) {
    uint64_t x = next_u64();
    __uint128_t m = static_cast<__uint128_t>(x) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        x = next_u64();
        m = static_cast<__uint128_t>(x) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace kvtwin::sim
