#include "sim/io/line_reader.h"

#include <zlib.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "sim/io/input_error.h"

namespace kvtwin::sim::io {
namespace {

constexpr size_t kChunkBytes = 1 << 20;
constexpr size_t kMaxQueuedChunks = 8;

// Source errors carry only a message; LineReader adds the file and line.
struct SourceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

class LineReader::Source {
 public:
  virtual ~Source() = default;
  // Copies up to n bytes into dst; returns 0 only at the end of the data.
  virtual size_t read(char* dst, size_t n) = 0;
  virtual bool compressed() const = 0;
};

namespace {

class PlainSource final : public LineReader::Source {
 public:
  explicit PlainSource(FILE* f) : f_(f) {}
  ~PlainSource() override { std::fclose(f_); }
  size_t read(char* dst, size_t n) override {
    size_t got = std::fread(dst, 1, n, f_);
    if (got == 0 && std::ferror(f_)) throw SourceError("read error");
    return got;
  }
  bool compressed() const override { return false; }

 private:
  FILE* f_;
};

// Inflates on a background thread into a bounded queue of chunks. Handles multi-member gzip
// files; a stream that ends before its trailer is an error ("truncated gzip stream").
class GzipSource final : public LineReader::Source {
 public:
  explicit GzipSource(FILE* f) : f_(f) {
    worker_ = std::thread([this] { run(); });
  }
  ~GzipSource() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
    std::fclose(f_);
  }

  size_t read(char* dst, size_t n) override {
    size_t copied = 0;
    while (copied < n) {
      if (pos_ == current_.size()) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || done_; });
        if (queue_.empty()) {
          if (!error_.empty()) throw SourceError(error_);
          break;
        }
        current_ = std::move(queue_.front());
        queue_.pop_front();
        pos_ = 0;
        lock.unlock();
        cv_.notify_all();
      }
      size_t take = std::min(n - copied, current_.size() - pos_);
      std::memcpy(dst + copied, current_.data() + pos_, take);
      pos_ += take;
      copied += take;
    }
    return copied;
  }
  bool compressed() const override { return true; }

 private:
  void run() {
    std::string error;
    try {
      inflate_all();
    } catch (const SourceError& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lock(mu_);
    error_ = error;
    done_ = true;
    cv_.notify_all();
  }

  bool push(std::string chunk) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.size() < kMaxQueuedChunks || stop_; });
    if (stop_) return false;
    queue_.push_back(std::move(chunk));
    cv_.notify_all();
    return true;
  }

  void inflate_all() {
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 32) != Z_OK) throw SourceError("zlib init failed");
    std::string in(kChunkBytes, '\0');
    std::string out(kChunkBytes, '\0');
    bool stream_open = true;  // inside a gzip member whose trailer has not been seen
    bool any_input = false;
    try {
      for (;;) {
        if (zs.avail_in == 0) {
          size_t got = std::fread(in.data(), 1, in.size(), f_);
          if (got == 0) {
            if (std::ferror(f_)) throw SourceError("read error");
            break;
          }
          any_input = true;
          zs.next_in = reinterpret_cast<Bytef*>(in.data());
          zs.avail_in = static_cast<uInt>(got);
          if (!stream_open) {
            inflateReset(&zs);  // next member of a multi-member file
            stream_open = true;
          }
        }
        zs.next_out = reinterpret_cast<Bytef*>(out.data());
        zs.avail_out = static_cast<uInt>(out.size());
        int rc = inflate(&zs, Z_NO_FLUSH);
        size_t produced = out.size() - zs.avail_out;
        if (produced > 0 && !push(out.substr(0, produced))) break;
        if (rc == Z_STREAM_END) {
          stream_open = false;
          if (zs.avail_in > 0) {
            inflateReset(&zs);
            stream_open = true;
          }
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
          throw SourceError(std::string("corrupt gzip stream: ") + (zs.msg ? zs.msg : "error"));
        } else if (rc == Z_BUF_ERROR && zs.avail_in > 0 && produced == 0) {
          throw SourceError("corrupt gzip stream");
        }
      }
      if (!any_input || stream_open) throw SourceError("truncated gzip stream");
    } catch (...) {
      inflateEnd(&zs);
      throw;
    }
    inflateEnd(&zs);
  }

  FILE* f_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool done_ = false;
  bool stop_ = false;
  std::string error_;
  std::string current_;
  size_t pos_ = 0;
};

}  // namespace

LineReader::LineReader(std::string path) : path_(std::move(path)) {
  FILE* f = std::fopen(path_.c_str(), "rb");
  if (f == nullptr)
    throw InputError(path_, 0, "", std::string("cannot open: ") + std::strerror(errno));
  unsigned char magic[2] = {0, 0};
  size_t got = std::fread(magic, 1, 2, f);
  std::rewind(f);
  if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    source_ = std::make_unique<GzipSource>(f);
  } else {
    source_ = std::make_unique<PlainSource>(f);
  }
  buffer_.resize(4 * kChunkBytes + kPadding);
}

LineReader::~LineReader() = default;

bool LineReader::compressed() const {
  return source_->compressed();
}

bool LineReader::refill() {
  if (eof_) return false;
  // Move the unread tail to the front; grow when a single line fills the buffer.
  size_t unread = end_ - begin_;
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, unread);
    begin_ = 0;
    end_ = unread;
  }
  if (buffer_.size() - end_ < kChunkBytes + kPadding) buffer_.resize(2 * buffer_.size() + kPadding);
  size_t got;
  try {
    got = source_->read(buffer_.data() + end_, buffer_.size() - end_ - kPadding);
  } catch (const SourceError& e) {
    throw InputError(path_, line_number_ + 1, "", e.what());
  }
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

bool LineReader::next(std::string_view* line) {
  size_t scan_from = begin_;
  for (;;) {
    const char* base = buffer_.data();
    const void* nl = std::memchr(base + scan_from, '\n', end_ - scan_from);
    if (nl != nullptr) {
      size_t stop = static_cast<size_t>(static_cast<const char*>(nl) - base);
      size_t len = stop - begin_;
      if (len > 0 && base[begin_ + len - 1] == '\r') --len;
      *line = std::string_view(base + begin_, len);
      begin_ = stop + 1;
      ++line_number_;
      return true;
    }
    size_t scanned = end_ - begin_;
    if (!refill()) break;
    scan_from = begin_ + scanned;
  }
  if (end_ > begin_) {  // last line without '\n'
    size_t len = end_ - begin_;
    if (buffer_[begin_ + len - 1] == '\r') --len;
    *line = std::string_view(buffer_.data() + begin_, len);
    begin_ = end_;
    ++line_number_;
    return true;
  }
  return false;
}

}  // namespace kvtwin::sim::io
