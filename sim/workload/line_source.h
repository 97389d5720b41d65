// LineSource: lines of a trace from a file (plain or gzip, through io::LineReader) or from bytes
// in memory (the embedded default trace), with 1-based line numbers. Every returned line is
// followed by at least io::LineReader::kPadding readable bytes (simdjson's padding).
//
// CsvByteSource adapts a LineSource to fast-cpp-csv-parser's byte source, so the CSV readers get
// gzip and in-memory input for free and fccp's line numbers equal the file's.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "sim/io/line_reader.h"

namespace kvtwin::sim::workload {

class LineSource {
 public:
  static std::unique_ptr<LineSource> file(const std::string& path);
  static std::unique_ptr<LineSource> memory(std::string name, std::string_view bytes);
  virtual ~LineSource() = default;

  // Sets *line to the next line without '\n' / trailing '\r'; false at the end.
  virtual bool next(std::string_view* line) = 0;
  virtual uint64_t line_number() const = 0;
  virtual const std::string& name() const = 0;
};

}  // namespace kvtwin::sim::workload
