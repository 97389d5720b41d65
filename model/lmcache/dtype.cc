#include "model/lmcache/dtype.h"

#include <array>

namespace kvtwin::model::lmcache {
namespace {

struct DtypeInfo {
  KvDtype dtype;
  std::string_view key;
  int64_t itemsize;
  int32_t remote_code;  // -1: none
};

constexpr std::array<DtypeInfo, 14> kDtypes = {{
    {KvDtype::kHalf, "half", 2, 2},
    {KvDtype::kBfloat16, "bfloat16", 2, 3},
    {KvDtype::kFloat, "float", 4, 4},
    {KvDtype::kDouble, "double", 8, 5},
    {KvDtype::kInt8, "int8", 1, -1},
    {KvDtype::kUint8, "uint8", 1, 6},
    {KvDtype::kInt16, "int16", 2, -1},
    {KvDtype::kInt32, "int32", 4, -1},
    {KvDtype::kInt64, "int64", 8, -1},
    {KvDtype::kBool, "bool", 1, -1},
    {KvDtype::kFp8E4m3fn, "fp8_e4m3fn", 1, 7},
    {KvDtype::kFp8E4m3fnuz, "fp8_e4m3fnuz", 1, -1},
    {KvDtype::kFp8E5m2, "fp8_e5m2", 1, 8},
    {KvDtype::kFp8E5m2fnuz, "fp8_e5m2fnuz", 1, -1},
}};

const DtypeInfo& info(KvDtype d) {
  return kDtypes[static_cast<size_t>(d)];
}

}  // namespace

std::string_view dtype_str(KvDtype d) {
  return info(d).key;
}

int64_t dtype_itemsize(KvDtype d) {
  return info(d).itemsize;
}

std::optional<int32_t> dtype_remote_code(KvDtype d) {
  int32_t c = info(d).remote_code;
  if (c < 0) return std::nullopt;
  return c;
}

std::optional<KvDtype> dtype_from_name(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  if (name == "float16") return KvDtype::kHalf;
  if (name == "float32") return KvDtype::kFloat;
  if (name == "float64") return KvDtype::kDouble;
  if (name == "float8_e4m3fn") return KvDtype::kFp8E4m3fn;
  if (name == "float8_e4m3fnuz") return KvDtype::kFp8E4m3fnuz;
  if (name == "float8_e5m2") return KvDtype::kFp8E5m2;
  if (name == "float8_e5m2fnuz") return KvDtype::kFp8E5m2fnuz;
  for (const DtypeInfo& i : kDtypes) {
    if (i.key == name) return i.dtype;
  }
  return std::nullopt;
}

}  // namespace kvtwin::model::lmcache
