// HostBuffer: a plain host buffer aligned for O_DIRECT, and the deterministic chunk content the
// real movers write and check.
//
// O_DIRECT on Linux wants the buffer address, the file offset and the length aligned to the
// logical block size (512 here, 4096 on many NVMe drives; ../shared/research/toolchain.md §4).
// kDirectIoAlign = 4096 satisfies every device we meet, so every buffer here starts on a 4 KiB
// boundary and its capacity is a whole number of 4 KiB blocks (the tail past size() is zero).
//
// Content: the bytes of an object are a pure function of its key (XXH3-64 of the key seeds a
// splitmix64 counter stream, 8 bytes per counter), so a reader can check what it got byte for
// byte without keeping a copy of what was written. Equal keys give equal bytes in every process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace kvtwin::cuda::tiers {

inline constexpr size_t kDirectIoAlign = 4096;

inline constexpr uint64_t round_up_to_block(uint64_t n) {
  return (n + kDirectIoAlign - 1) / kDirectIoAlign * kDirectIoAlign;
}

class HostBuffer {
 public:
  HostBuffer() = default;
  // A zero-filled buffer of `size` bytes (capacity rounded up to 4 KiB), 4 KiB aligned.
  explicit HostBuffer(size_t size);
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  std::span<uint8_t> span() { return {data_, size_}; }
  std::span<const uint8_t> span() const { return {data_, size_}; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Fills `out` with the content of the object named `key`.
void fill_content(std::string_view key, std::span<uint8_t> out);

// Returns the offset of the first byte of `data` that differs from the content of `key`, or
// data.size() when every byte matches.
size_t first_content_mismatch(std::string_view key, std::span<const uint8_t> data);

}  // namespace kvtwin::cuda::tiers
