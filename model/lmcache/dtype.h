// KvDtype: the torch dtypes LMCache names in keys (utils.TORCH_DTYPE_TO_STR_DTYPE) with their
// element sizes and the integer codes of the remote metadata header (protocol.DTYPE_TO_INT).
//
//   torch name        key string      itemsize   remote code
//   float16 / half    "half"          2          2   (torch.half == torch.float16, so the later
//   bfloat16          "bfloat16"      2          3    dict entry 2 wins over 1)
//   float32 / float   "float"         4          4
//   float64 / double  "double"        8          5
//   uint8             "uint8"         1          6
//   float8_e4m3fn     "fp8_e4m3fn"    1          7
//   float8_e5m2       "fp8_e5m2"      1          8
//   int8/int16/int32/int64/bool, fp8_e4m3fnuz, fp8_e5m2fnuz: key strings only (no remote code; a
//   remote put of such an object fails upstream with KeyError inside the writer and is dropped).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvtwin::model::lmcache {

enum class KvDtype {
  kHalf,
  kBfloat16,
  kFloat,
  kDouble,
  kInt8,
  kUint8,
  kInt16,
  kInt32,
  kInt64,
  kBool,
  kFp8E4m3fn,
  kFp8E4m3fnuz,
  kFp8E5m2,
  kFp8E5m2fnuz,
};

// The key string ("half", "bfloat16", ...).
std::string_view dtype_str(KvDtype d);
int64_t dtype_itemsize(KvDtype d);
// protocol.DTYPE_TO_INT; nullopt where upstream has no code.
std::optional<int32_t> dtype_remote_code(KvDtype d);
// Parses a torch name as written in configs ("float16", "half", "bfloat16", "float32", "float",
// ...) or a key string ("fp8_e4m3fn").
std::optional<KvDtype> dtype_from_name(std::string_view name);

}  // namespace kvtwin::model::lmcache
