// The per-format trace parsers behind open_trace (internal to sim/workload).
//
// A FormatReader turns lines into TraceRequests and validates each row (counts, id lists); the
// wrapper in trace_reader.cc numbers requests and checks that arrivals never decrease.
#pragma once

#include <memory>
#include <string>

#include "sim/workload/line_source.h"
#include "sim/workload/trace_request.h"

namespace kvtwin::sim::workload {

class FormatReader {
 public:
  virtual ~FormatReader() = default;
  virtual bool next(TraceRequest* out) = 0;
  virtual uint64_t line_number() const = 0;  // line of the request last returned
  virtual const std::string& name() const = 0;
  virtual const char* time_field() const = 0;  // column / key holding the arrival time
};

std::unique_ptr<FormatReader> make_native_reader(std::unique_ptr<LineSource> lines);
std::unique_ptr<FormatReader> make_mooncake_reader(std::unique_ptr<LineSource> lines);
std::unique_ptr<FormatReader> make_azure_reader(std::unique_ptr<LineSource> lines);

// Shared row checks: throws InputError(name, line, field, ...) when a count is out of range or
// the id list is longer than the prompt's blocks.
void validate_request(const TraceRequest& r, const std::string& name, uint64_t line,
                      const char* prompt_field, const char* output_field, const char* ids_field);

}  // namespace kvtwin::sim::workload
