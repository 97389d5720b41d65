// MemoryFormat and Shape: the logical layout of a memory object (memory_management.MemoryFormat).
//
//   format       value  logical shape               token dim   used for
//   KV_2LTD      1      [2, L, T, H*D]              2           default chunk object
//   KV_T2D       2      [T, 2, H*D]                 1           layerwise: one object per layer
//   KV_2TD       3      [2, T, H*D]                 0           layerwise + blending
//   BINARY       4      bytes                       0
//   BINARY_BUFFER 5     bytes                       0
//   KV_MLA_FMT   6      [1, L, T, D_mla]            2           MLA chunk (layerwise: [T, D_mla])
//
// `value` is the enum's integer (written into the remote metadata header). A Shape holds up to 4
// dimensions; its byte size is numel * itemsize (LMCache's get_size, unaligned).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "model/check.h"

namespace kvtwin::model::lmcache {

enum class MemoryFormat : int32_t {
  kUndefined = 0,
  kKv2LTD = 1,
  kKvT2D = 2,
  kKv2TD = 3,
  kBinary = 4,
  kBinaryBuffer = 5,
  kKvMlaFmt = 6,
};

// LMCache's MemoryFormat.token_dim().
int memory_format_token_dim(MemoryFormat fmt);
// Upstream enum name ("KV_2LTD", ...).
std::string_view memory_format_name(MemoryFormat fmt);

// A torch.Size of rank 1..4.
struct Shape {
  std::array<int64_t, 4> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    KVTWIN_CHECK(d.size() <= 4) << "shape rank " << d.size();
    for (int64_t v : d) dims[rank++] = v;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  int64_t operator[](int i) const {
    KVTWIN_CHECK(i >= 0 && i < rank) << "dim " << i << " of a rank-" << rank << " shape";
    return dims[i];
  }
  friend bool operator==(const Shape& a, const Shape& b) {
    return a.rank == b.rank && a.dims == b.dims;
  }
};

}  // namespace kvtwin::model::lmcache
