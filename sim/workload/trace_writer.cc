#include "sim/workload/trace_writer.h"

#include "model/check.h"
#include "sim/io/input_error.h"

namespace kvtwin::sim::workload {
namespace {

void append_u64(uint64_t v, std::string* out) {
  *out += std::to_string(v);
}

// Exact decimal of ns / 10^scale_digits with trailing zeros trimmed (at least one digit kept
// after the point only when there is a fraction).
std::string decimal(SimTime ns, int scale_digits) {
  int64_t scale = 1;
  for (int i = 0; i < scale_digits; ++i) scale *= 10;
  std::string s = std::to_string(ns / scale);
  int64_t frac = ns % scale;
  if (frac == 0) return s;
  std::string f = std::to_string(frac);
  f.insert(0, static_cast<size_t>(scale_digits) - f.size(), '0');
  while (f.back() == '0') f.pop_back();
  return s + "." + f;
}

}  // namespace

TraceWriter::TraceWriter(std::FILE* out, TraceFormat format) : out_(out), format_(format) {
  KVTWIN_CHECK(format == TraceFormat::kNative || format == TraceFormat::kMooncake);
}

std::string TraceWriter::native_row(const TraceRequest& r) {
  std::string s = decimal(r.arrival, 9) + "," + std::to_string(r.prompt_tokens) + "," +
                  std::to_string(r.output_tokens) + ",";
  if (r.has_session) append_u64(r.session_id, &s);
  s += ",";
  if (!r.block_ids.empty()) {
    s += std::to_string(r.block_size) + ",";
    for (size_t i = 0; i < r.block_ids.size(); ++i) {
      if (i) s += ' ';
      append_u64(r.block_ids[i], &s);
    }
  } else {
    s += ",";
  }
  s += ",";
  if (r.priority != 0) s += std::to_string(r.priority);
  return s;
}

std::string TraceWriter::mooncake_row(const TraceRequest& r) {
  if (!r.block_ids.empty() && r.block_size != 512)
    throw InputError("<output>", r.index + 1, "hash_ids",
                     "block size " + std::to_string(r.block_size) +
                         " cannot be written as Mooncake's 512-token ids");
  std::string s = "{\"timestamp\": " + decimal(r.arrival, 6) +
                  ", \"input_length\": " + std::to_string(r.prompt_tokens) +
                  ", \"output_length\": " + std::to_string(r.output_tokens) + ", \"hash_ids\": [";
  for (size_t i = 0; i < r.block_ids.size(); ++i) {
    if (i) s += ", ";
    append_u64(r.block_ids[i], &s);
  }
  s += "]";
  if (r.has_session) s += ", \"session_id\": " + std::to_string(r.session_id);
  if (r.priority != 0) s += ", \"priority\": " + std::to_string(r.priority);
  return s + "}";
}

void TraceWriter::write(const TraceRequest& r) {
  std::string row;
  if (format_ == TraceFormat::kNative) {
    if (!header_written_) {
      std::fputs(kNativeHeader, out_);
      std::fputc('\n', out_);
      header_written_ = true;
    }
    row = native_row(r);
  } else {
    row = mooncake_row(r);
  }
  row += '\n';
  std::fwrite(row.data(), 1, row.size(), out_);
}

}  // namespace kvtwin::sim::workload
