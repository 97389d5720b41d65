// LineReader: streams the lines of a text file, plain or gzip-compressed (detected by the magic
// bytes 1f 8b, not by the name), with 1-based line numbers.
//
// Memory stays bounded by the longest line plus a fixed window, whatever the file size. Every
// returned line is followed in memory by at least kPadding readable bytes, so it can be handed to
// simdjson as a padded_string_view without a copy. The view is valid until the next call.
//
// Errors (throws InputError with the file name and line): unreadable file, corrupt or truncated
// gzip stream, a NUL byte inside a line. A final line without '\n' is returned as a line.
//
// Threading: one reader per thread. A background thread decompresses ahead when the input is
// gzip, so inflating overlaps with the caller's parsing. Lines are handed out in place in the
// decompressed (or read) chunks; only a line that spans two chunks is copied.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace kvtwin::sim::io {

class LineReader {
 public:
  static constexpr size_t kPadding = 64;  // >= SIMDJSON_PADDING

  explicit LineReader(std::string path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Sets *line to the next line without its '\n' (and without a trailing '\r'); false at end.
  bool next(std::string_view* line);

  // Called (on the reader's thread) just before the bytes of the lines handed out so far may be
  // overwritten or freed, i.e. before the reader moves to its next chunk or reuses the buffer of
  // a line that spanned chunks. Until then every line handed out stays readable in place, so a
  // consumer may keep views of several consecutive lines (e.g. to digest them in one call) and
  // flush them from the hook. An empty function removes the hook.
  void set_release_hook(std::function<void()> hook) { release_hook_ = std::move(hook); }

  // Line number of the line last returned (1-based; 0 before the first).
  uint64_t line_number() const { return line_number_; }
  const std::string& path() const { return path_; }
  bool compressed() const;

  // Byte source behind the reader (plain file or background gzip inflater), and the chunks it
  // hands over: data in [0, size), followed by at least kPadding bytes of buf.
  class Source;
  struct Chunk {
    std::string buf;
    size_t size = 0;
  };

 private:
  // Hands the current chunk back to the source and takes the next one; false at the end.
  bool fetch();
  void carry(const char* data, size_t n);

  std::string path_;
  std::unique_ptr<Source> source_;
  Chunk chunk_;  // [pos_, chunk_.size) unread
  size_t pos_ = 0;
  std::string carry_;  // the start of a line that spans chunks, then kPadding slack
  size_t carry_len_ = 0;
  bool carry_returned_ = false;  // carry_ was the last line handed out
  bool eof_ = false;
  uint64_t line_number_ = 0;
  std::function<void()> release_hook_;
};

}  // namespace kvtwin::sim::io
