// OplogStream: reads a golden op-log (header, ops, footer) for a replayer.
//
// Both op-log formats share the framing: line 1 is the header, then one JSON object per op, and
// the last line is {"type":"footer","num_ops":N,"sha256_of_preceding_lines":hex,...} where the
// digest covers every preceding line including its '\n'. The stream hands out ops as parsed DOM
// objects with their line number, and when the footer arrives checks the op count, the per-op
// counts of its "op_counts" (when present) and the digest, so a truncated or edited file is an
// input error, never a silent pass.
//
// OpFields wraps one op for typed access; every accessor names the field in its InputError.
//
// Threading: one stream per thread.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/io/input_error.h"
#include "sim/io/line_reader.h"

namespace kvtwin::sim::golden {

// Typed, error-reporting access to the fields of one JSON object of an op-log line.
class OpFields {
 public:
  OpFields(const std::string* file, uint64_t line, simdjson::dom::object obj)
      : file_(file), line_(line), obj_(obj) {}

  simdjson::dom::object object() const { return obj_; }
  uint64_t line() const { return line_; }
  const std::string& file() const { return *file_; }

  bool has(std::string_view field) const;
  // Present and not null.
  bool has_value(std::string_view field) const;

  simdjson::dom::element element(std::string_view field) const;  // required
  std::optional<simdjson::dom::element> optional_element(std::string_view field) const;

  std::string_view str(std::string_view field) const;
  int64_t i64(std::string_view field) const;
  int64_t i64_or(std::string_view field, int64_t fallback) const;  // absent or null → fallback
  bool boolean(std::string_view field) const;
  bool boolean_or(std::string_view field, bool fallback) const;
  simdjson::dom::array array(std::string_view field) const;
  simdjson::dom::object object(std::string_view field) const;
  OpFields sub(std::string_view field) const { return OpFields(file_, line_, object(field)); }

  // Typed conversions of a nested element, naming `field` in errors.
  int64_t as_i64(simdjson::dom::element e, std::string_view field) const;
  std::string_view as_str(simdjson::dom::element e, std::string_view field) const;

  [[noreturn]] void fail(std::string_view field, const std::string& message) const;

 private:
  const std::string* file_;
  uint64_t line_;
  simdjson::dom::object obj_;
};

// With the header's op_index_field, each op's "i" must count the ops from 0: throws InputError
// naming "i" when it does not.
void check_op_index(const OpFields& fields, uint64_t index);

class OplogStream {
 public:
  // Takes over `reader` positioned after the header line (which the caller already read).
  OplogStream(io::LineReader& reader, std::string_view header_line);
  ~OplogStream();
  OplogStream(const OplogStream&) = delete;
  OplogStream& operator=(const OplogStream&) = delete;

  // The header (valid for the stream's lifetime).
  const OpFields& header() const { return header_; }

  // Parses the next op into *op (valid until the next call); returns false after the footer
  // was read and verified.
  // Throws InputError on malformed JSON, a missing footer, a wrong op count or digest.
  bool next(OpFields* op);

  // The same in two steps, for callers with a parser of their own for some lines:
  // next_line gives the next non-blank line (blank lines are hashed and skipped; the view is
  // valid until the next call) and its line number; then either take_op(line) when the caller
  // parsed it as an op itself (only for a line without a "type" key: it cannot be the footer),
  // or parse_line(line, line_no, op), which is next()'s DOM path (false after the footer).
  // take_op is given the op's name, for the footer's op_counts.
  void next_line(std::string_view* line, uint64_t* line_no);
  void take_op(std::string_view line, std::string_view op_name) {
    hash_line(line);
    ++num_ops_;
    count_op(op_name);
  }
  bool parse_line(std::string_view line, uint64_t line_no, OpFields* op);
  bool done() const { return done_; }

  uint64_t num_ops() const { return num_ops_; }
  const std::string& path() const { return reader_.path(); }

 private:
  void check_footer(const OpFields& footer);
  void count_op(std::string_view op_name);
  void hash_line(std::string_view line);
  void flush_digest();

  io::LineReader& reader_;
  std::string path_;
  simdjson::dom::parser header_parser_;
  simdjson::dom::parser parser_;
  OpFields header_;
  uint64_t num_ops_ = 0;
  // Ops per name, in first-seen order (few names: a linear scan from the last hit).
  std::vector<std::pair<std::string, uint64_t>> op_counts_;
  size_t last_count_ = 0;
  bool done_ = false;
  struct Digest;
  std::unique_ptr<Digest> digest_;
  // Consecutive lines (each with its '\n') not yet digested: one SHA-256 update per run of lines
  // that lie back to back in the reader's buffer, flushed before the reader releases them.
  const char* pending_begin_ = nullptr;
  const char* pending_end_ = nullptr;
};

}  // namespace kvtwin::sim::golden
