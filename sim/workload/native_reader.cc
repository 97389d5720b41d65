// The native trace CSV (see trace_reader.h for the columns).
#include <string>

#include "sim/io/parse.h"
#include "sim/workload/csv.h"
#include "sim/workload/readers.h"

namespace kvtwin::sim::workload {
namespace {

constexpr const char* kColumns[] = {"arrival_s",  "prompt_tokens", "output_tokens", "session_id",
                                    "block_size", "block_ids",     "priority"};

class NativeReader final : public FormatReader {
 public:
  explicit NativeReader(std::unique_ptr<LineSource> lines)
      : lines_(std::move(lines)),
        csv_(lines_->name(), std::make_unique<CsvByteSource>(lines_.get())) {
    try {
      csv_.read_header(::io::ignore_missing_column | ::io::ignore_extra_column, kColumns[0],
                       kColumns[1], kColumns[2], kColumns[3], kColumns[4], kColumns[5],
                       kColumns[6]);
    } catch (const ::io::error::base& e) {
      throw_csv_error(e, name(), 1);
    }
    for (int i = 0; i < 3; ++i)
      if (!csv_.has_column(kColumns[i]))
        throw InputError(name(), 1, kColumns[i], "required column missing from the header");
    has_ids_ = csv_.has_column("block_ids");
    if (has_ids_ != csv_.has_column("block_size"))
      throw InputError(name(), 1, has_ids_ ? "block_size" : "block_ids",
                       "block_ids and block_size come together");
  }

  bool next(TraceRequest* out) override {
    char* col[7] = {};
    try {
      if (!csv_.read_row(col[0], col[1], col[2], col[3], col[4], col[5], col[6])) return false;
    } catch (const ::io::error::base& e) {
      throw_csv_error(e, name(), csv_.get_file_line());
    }
    line_ = csv_.get_file_line();
    *out = TraceRequest{};
    auto arrival = io::parse_double(col[0]);
    if (!arrival || *arrival < 0 || *arrival > 1e9)
      fail(kColumns[0], "expected seconds in [0, 1e9], got '" + std::string(col[0]) + "'");
    out->arrival = from_seconds(*arrival);
    out->prompt_tokens = int_column(col[1], kColumns[1]);
    out->output_tokens = int_column(col[2], kColumns[2]);
    if (col[3] && !io::trim(col[3]).empty()) {
      auto s = io::parse_uint64(col[3]);
      if (!s) fail(kColumns[3], "expected an unsigned integer, got '" + std::string(col[3]) + "'");
      out->has_session = true;
      out->session_id = *s;
    }
    if (has_ids_) read_ids(col[4], col[5], out);
    if (col[6] && !io::trim(col[6]).empty()) out->priority = int_column(col[6], kColumns[6]);
    validate_request(*out, name(), line_, kColumns[1], kColumns[2], kColumns[5]);
    return true;
  }

  uint64_t line_number() const override { return line_; }
  const std::string& name() const override { return lines_->name(); }
  const char* time_field() const override { return kColumns[0]; }

 private:
  [[noreturn]] void fail(const char* field, const std::string& msg) const {
    throw InputError(name(), line_, field, msg);
  }
  int64_t int_column(const char* text, const char* field) const {
    auto v = io::parse_int64(text);
    if (!v) fail(field, "expected an integer, got '" + std::string(text) + "'");
    return *v;
  }
  void read_ids(const char* size_text, const char* ids_text, TraceRequest* out) const {
    std::string_view ids = io::trim(ids_text);
    if (ids.empty()) return;  // no prefix information for this row
    auto bs = io::parse_int64(size_text);
    if (!bs || *bs < 1 || *bs > (1 << 20))
      fail("block_size", "expected tokens per block id in [1, 1048576]");
    out->block_size = static_cast<int32_t>(*bs);
    while (!ids.empty()) {
      size_t sp = ids.find_first_of(" \t");
      std::string_view tok = ids.substr(0, sp);
      auto id = io::parse_uint64(tok);
      if (!id) fail("block_ids", "expected unsigned 64-bit ids, got '" + std::string(tok) + "'");
      out->block_ids.push_back(*id);
      ids = sp == std::string_view::npos ? std::string_view() : io::trim(ids.substr(sp));
    }
  }

  std::unique_ptr<LineSource> lines_;
  CsvReader<7> csv_;
  bool has_ids_ = false;
  uint64_t line_ = 0;
};

}  // namespace

std::unique_ptr<FormatReader> make_native_reader(std::unique_ptr<LineSource> lines) {
  return std::make_unique<NativeReader>(std::move(lines));
}

}  // namespace kvtwin::sim::workload
