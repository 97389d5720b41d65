// fast-cpp-csv-parser over a LineSource, with fccp's errors turned into InputError.
//
// Pitfalls handled here (../shared/research/toolchain.md): <limits> before <libfccp/csv.h>;
// double-quote escaping (the default policy throws on "a,b"); spaces/tabs trimmed; empty lines
// skipped; no reader thread (LineSource already inflates gzip in the background).
#pragma once

#include <limits>  // must precede csv.h
#define CSV_IO_NO_THREAD
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-truncation"  // fccp's bounded file-name copy
#include <libfccp/csv.h>
#pragma GCC diagnostic pop

#include <cstring>
#include <string>

#include "sim/io/input_error.h"
#include "sim/workload/line_source.h"

namespace kvtwin::sim::workload {

// Feeds fccp the lines of a LineSource, each followed by '\n'.
class CsvByteSource final : public ::io::ByteSourceBase {
 public:
  explicit CsvByteSource(LineSource* lines) : lines_(lines) {}
  int read(char* buffer, int size) override {
    int n = 0;
    while (n < size) {
      if (pos_ == pending_.size()) {
        std::string_view line;
        if (!lines_->next(&line)) break;
        // fccp ends a field at a NUL byte; a row with one would be read short without a word.
        if (line.find('\0') != std::string_view::npos)
          throw InputError(lines_->name(), lines_->line_number(), "", "NUL byte in the line");
        pending_.assign(line);
        pending_.push_back('\n');
        pos_ = 0;
      }
      size_t take = std::min(pending_.size() - pos_, static_cast<size_t>(size - n));
      std::memcpy(buffer + n, pending_.data() + pos_, take);
      pos_ += take;
      n += static_cast<int>(take);
    }
    return n;
  }

 private:
  LineSource* lines_;
  std::string pending_;
  size_t pos_ = 0;
};

template <unsigned N>
using CsvReader =
    ::io::CSVReader<N, ::io::trim_chars<' ', '\t'>, ::io::double_quote_escape<',', '"'>,
                    ::io::throw_on_overflow, ::io::empty_line_comment>;

// Rethrows the fccp error being handled as InputError(name, line, field, message).
[[noreturn]] inline void throw_csv_error(const ::io::error::base& e, const std::string& name,
                                         uint64_t fallback_line) {
  uint64_t line = fallback_line;
  if (auto* wl = dynamic_cast<const ::io::error::with_file_line*>(&e); wl && wl->file_line >= 0)
    line = static_cast<uint64_t>(wl->file_line);
  std::string field;
  if (auto* wc = dynamic_cast<const ::io::error::with_column_name*>(&e)) field = wc->column_name;
  std::string msg = "malformed CSV";
  if (dynamic_cast<const ::io::error::too_few_columns*>(&e)) msg = "too few columns";
  if (dynamic_cast<const ::io::error::too_many_columns*>(&e)) msg = "too many columns";
  if (dynamic_cast<const ::io::error::escaped_string_not_closed*>(&e)) msg = "unclosed quote";
  if (dynamic_cast<const ::io::error::header_missing*>(&e)) msg = "header line missing";
  if (dynamic_cast<const ::io::error::duplicated_column_in_header*>(&e))
    msg = "duplicated column in header";
  if (dynamic_cast<const ::io::error::line_length_limit_exceeded*>(&e)) msg = "line too long";
  throw InputError(name, line, field, msg);
}

}  // namespace kvtwin::sim::workload
