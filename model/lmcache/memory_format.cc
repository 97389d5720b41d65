#include "model/lmcache/memory_format.h"

namespace kvtwin::model::lmcache {

int memory_format_token_dim(MemoryFormat fmt) {
  switch (fmt) {
    case MemoryFormat::kKv2LTD:
      return 2;
    case MemoryFormat::kKvT2D:
      return 1;
    case MemoryFormat::kKv2TD:
      return 0;
    case MemoryFormat::kBinary:
      return 0;
    case MemoryFormat::kBinaryBuffer:
      return 0;
    case MemoryFormat::kKvMlaFmt:
      return 2;
    case MemoryFormat::kUndefined:
      return 0;
  }
  return 0;
}

std::string_view memory_format_name(MemoryFormat fmt) {
  switch (fmt) {
    case MemoryFormat::kUndefined:
      return "UNDEFINED";
    case MemoryFormat::kKv2LTD:
      return "KV_2LTD";
    case MemoryFormat::kKvT2D:
      return "KV_T2D";
    case MemoryFormat::kKv2TD:
      return "KV_2TD";
    case MemoryFormat::kBinary:
      return "BINARY";
    case MemoryFormat::kBinaryBuffer:
      return "BINARY_BUFFER";
    case MemoryFormat::kKvMlaFmt:
      return "KV_MLA_FMT";
  }
  return "?";
}

}  // namespace kvtwin::model::lmcache
