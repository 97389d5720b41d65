// TraceReader: streams the requests of a trace file, one at a time, in file order.
//
// Readers hold one row at a time (memory is independent of the trace length). Three formats:
//
//   native    CSV with header; columns arrival_s, prompt_tokens, output_tokens (required) and
//             session_id, block_size, block_ids, priority (optional; block_ids is a space-
//             separated list of unsigned 64-bit ids, block_size its tokens per id; priority a
//             signed integer, vLLM's request priority). Any column order.
//   mooncake  JSON Lines: timestamp (ms), input_length, output_length, hash_ids (512-token
//             chained block ids), optional session_id and priority (an integer; kvtwin's
//             extension). Unknown fields are ignored.
//   azure     Azure LLM inference 2023 CSV: TIMESTAMP (YYYY-MM-DD HH:MM:SS[.fffffff]),
//             ContextTokens, GeneratedTokens; arrivals relative to the first row.
//
// Plain or gzip files (detected by content). Arrival times must not decrease and must not exceed
// kMaxTraceArrival; a trace without any request is an input error (at the first next()). Every
// malformed row throws InputError naming the file, the 1-based line and the column.
//
// Threading: one reader per thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sim/workload/trace_request.h"

namespace kvtwin::sim::workload {

enum class TraceFormat { kAuto, kNative, kMooncake, kAzure };

std::optional<TraceFormat> trace_format_from_name(std::string_view name);
std::string_view trace_format_name(TraceFormat format);

class TraceReader {
 public:
  virtual ~TraceReader() = default;
  // Fills *out with the next request; false at the end of the trace. Throws InputError.
  virtual bool next(TraceRequest* out) = 0;
  virtual TraceFormat format() const = 0;
  virtual const std::string& path() const = 0;
  // The 1-based line of the request last returned, and the column / key of its arrival time (for
  // errors found after reading, such as a scaled arrival out of range).
  virtual uint64_t line_number() const = 0;
  virtual const char* time_field() const = 0;
};

// Latest arrival a trace may give, after the time origin (and the latest after a workload's
// rate_scale): 1e9 s, about 31.7 years. Larger times are input errors.
inline constexpr SimTime kMaxTraceArrival = SimTime{1'000'000'000} * kNsPerSecond;

// Opens `path` in `format`; kAuto decides from the first line (a JSON object → mooncake; a header
// starting with TIMESTAMP → azure; otherwise native). Throws InputError if unreadable.
std::unique_ptr<TraceReader> open_trace(const std::string& path, TraceFormat format);

// A reader over bytes already in memory (the embedded default trace). `name` stands for the file
// name in error messages. The bytes must outlive the reader.
std::unique_ptr<TraceReader> open_trace_bytes(std::string name, std::string_view bytes,
                                              TraceFormat format);

}  // namespace kvtwin::sim::workload
