// Writing traces (`kvtwin trace convert`): native CSV or Mooncake JSON Lines.
//
// native:   arrival_s printed exactly from integer ns ("12.345678901"); block_ids space-separated.
// mooncake: timestamp in ms (an integer when the arrival is a whole ms, else a decimal with ns
//           precision); hash_ids only when the request's block size is 512 (Mooncake's), else
//           conversion fails with the row's index, since the format has no block-size field.
#pragma once

#include <cstdio>
#include <string>

#include "sim/workload/trace_reader.h"

namespace kvtwin::sim::workload {

class TraceWriter {
 public:
  // `format` must be kNative or kMooncake. Writes to `out` (not owned).
  TraceWriter(std::FILE* out, TraceFormat format);
  void write(const TraceRequest& r);

  static std::string native_row(const TraceRequest& r);
  static std::string mooncake_row(const TraceRequest& r);
  static constexpr const char* kNativeHeader =
      "arrival_s,prompt_tokens,output_tokens,session_id,block_size,block_ids,priority";

 private:
  std::FILE* out_;
  TraceFormat format_;
  bool header_written_ = false;
};

}  // namespace kvtwin::sim::workload
