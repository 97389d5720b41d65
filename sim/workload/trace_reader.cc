#include "sim/workload/trace_reader.h"

#include "sim/io/input_error.h"
#include "sim/io/parse.h"
#include "sim/workload/line_source.h"
#include "sim/workload/readers.h"

namespace kvtwin::sim::workload {
namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

TraceFormat detect(LineSource& lines) {
  std::string_view first;
  if (!lines.next(&first)) return TraceFormat::kNative;  // empty: the native reader reports it
  first = io::trim(first);
  if (!first.empty() && first.front() == '{') return TraceFormat::kMooncake;
  if (starts_with(first, "TIMESTAMP")) return TraceFormat::kAzure;
  return TraceFormat::kNative;
}

// Wraps a format reader: numbers requests, checks that arrivals never decrease.
class CheckedReader final : public TraceReader {
 public:
  CheckedReader(std::unique_ptr<FormatReader> inner, TraceFormat format)
      : inner_(std::move(inner)), format_(format) {}
  bool next(TraceRequest* out) override {
    if (!inner_->next(out)) {
      if (count_ == 0) throw InputError(path(), 0, "", "the trace has no requests");
      return false;
    }
    out->index = count_++;
    if (out->arrival < last_arrival_)
      throw InputError(path(), inner_->line_number(), inner_->time_field(),
                       "arrival time decreases (trace must be sorted by arrival)");
    if (out->arrival > kMaxTraceArrival)
      throw InputError(path(), inner_->line_number(), inner_->time_field(),
                       "arrival more than 1e9 s after the trace's time origin");
    last_arrival_ = out->arrival;
    return true;
  }
  TraceFormat format() const override { return format_; }
  const std::string& path() const override { return inner_->name(); }
  uint64_t line_number() const override { return inner_->line_number(); }
  const char* time_field() const override { return inner_->time_field(); }

 private:
  std::unique_ptr<FormatReader> inner_;
  TraceFormat format_;
  uint64_t count_ = 0;
  SimTime last_arrival_ = 0;
};

std::unique_ptr<TraceReader> open(std::unique_ptr<LineSource> (*make)(const void*), const void* arg,
                                  TraceFormat format) {
  if (format == TraceFormat::kAuto) {
    std::unique_ptr<LineSource> probe = make(arg);
    format = detect(*probe);
  }
  std::unique_ptr<LineSource> lines = make(arg);
  std::unique_ptr<FormatReader> inner;
  switch (format) {
    case TraceFormat::kMooncake:
      inner = make_mooncake_reader(std::move(lines));
      break;
    case TraceFormat::kAzure:
      inner = make_azure_reader(std::move(lines));
      break;
    default:
      inner = make_native_reader(std::move(lines));
      format = TraceFormat::kNative;
      break;
  }
  return std::make_unique<CheckedReader>(std::move(inner), format);
}

}  // namespace

std::optional<TraceFormat> trace_format_from_name(std::string_view name) {
  if (name == "auto") return TraceFormat::kAuto;
  if (name == "native") return TraceFormat::kNative;
  if (name == "mooncake") return TraceFormat::kMooncake;
  if (name == "azure") return TraceFormat::kAzure;
  return std::nullopt;
}

std::string_view trace_format_name(TraceFormat format) {
  switch (format) {
    case TraceFormat::kAuto:
      return "auto";
    case TraceFormat::kNative:
      return "native";
    case TraceFormat::kMooncake:
      return "mooncake";
    case TraceFormat::kAzure:
      return "azure";
  }
  return "?";
}

std::unique_ptr<TraceReader> open_trace(const std::string& path, TraceFormat format) {
  return open([](const void* p) { return LineSource::file(*static_cast<const std::string*>(p)); },
              &path, format);
}

std::unique_ptr<TraceReader> open_trace_bytes(std::string name, std::string_view bytes,
                                              TraceFormat format) {
  struct Arg {
    std::string name;
    std::string_view bytes;
  } arg{std::move(name), bytes};
  return open(
      [](const void* p) {
        const Arg* a = static_cast<const Arg*>(p);
        return LineSource::memory(a->name, a->bytes);
      },
      &arg, format);
}

}  // namespace kvtwin::sim::workload
