#include "sim/io/line_reader.h"

#include <isa-l/igzip_lib.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

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

// Inflates on a background thread (ISA-L's igzip, several times faster than zlib) into a bounded
// queue of chunks whose buffers are recycled, so steady state neither allocates nor faults pages.
// Handles multi-member gzip files; a stream that ends before its trailer is an error ("truncated
// gzip stream"), as is a bad header, block, symbol or checksum ("corrupt gzip stream: ...").
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
        if (current_.capacity() > 0) free_.push_back(std::move(current_));
        current_ = std::string();
        pos_ = 0;
        cv_.wait(lock, [&] { return !queue_.empty() || done_; });
        if (queue_.empty()) {
          if (!error_.empty()) throw SourceError(error_);
          break;
        }
        current_ = std::move(queue_.front());
        queue_.pop_front();
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

  // A recycled output buffer of kChunkBytes (a fresh one while the queue fills up).
  std::string take_buffer() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string b;
    if (!free_.empty()) {
      b = std::move(free_.back());
      free_.pop_back();
    }
    b.resize(kChunkBytes);
    return b;
  }

  bool push(std::string chunk) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.size() < kMaxQueuedChunks || stop_; });
    if (stop_) return false;
    queue_.push_back(std::move(chunk));
    cv_.notify_all();
    return true;
  }

  // Refills the input buffer; false at the end of the file.
  bool fill(inflate_state* st, std::string* in) {
    size_t got = std::fread(in->data(), 1, in->size(), f_);
    if (got == 0) {
      if (std::ferror(f_)) throw SourceError("read error");
      return false;
    }
    st->next_in = reinterpret_cast<uint8_t*>(in->data());
    st->avail_in = static_cast<uint32_t>(got);
    return true;
  }

  static const char* isal_error(int rc) {
    switch (rc) {
      case ISAL_INVALID_BLOCK:
        return "invalid block";
      case ISAL_INVALID_SYMBOL:
        return "invalid symbol";
      case ISAL_INVALID_LOOKBACK:
        return "invalid distance";
      case ISAL_INVALID_WRAPPER:
        return "incorrect header check";
      case ISAL_UNSUPPORTED_METHOD:
        return "unknown compression method";
      case ISAL_INCORRECT_CHECKSUM:
        return "incorrect data check";
      default:
        return "error";
    }
  }

  void inflate_all() {
    auto st = std::make_unique<inflate_state>();
    isal_inflate_init(st.get());
    st->crc_flag = ISAL_GZIP;
    std::string in(kChunkBytes, '\0');
    bool eof = !fill(st.get(), &in);
    if (eof) throw SourceError("truncated gzip stream");
    for (;;) {
      if (st->block_state == ISAL_BLOCK_FINISH) {  // end of a member: another one may follow
        if (st->avail_in == 0 && (eof || !fill(st.get(), &in))) return;
        isal_inflate_reset(st.get());
        st->crc_flag = ISAL_GZIP;
      } else if (st->avail_in == 0 && !eof) {
        eof = !fill(st.get(), &in);
      }
      std::string out = take_buffer();
      st->next_out = reinterpret_cast<uint8_t*>(out.data());
      st->avail_out = static_cast<uint32_t>(out.size());
      uint32_t avail_in = st->avail_in;
      int rc = isal_inflate(st.get());
      if (rc < 0) throw SourceError(std::string("corrupt gzip stream: ") + isal_error(rc));
      size_t produced = out.size() - st->avail_out;
      bool progress = produced > 0 || st->avail_in != avail_in;
      if (produced > 0) {
        out.resize(produced);
        if (!push(std::move(out))) return;
      }
      if (st->block_state == ISAL_BLOCK_FINISH) continue;
      if (!progress && eof) throw SourceError("truncated gzip stream");
      if (!progress && st->avail_in > 0) throw SourceError("corrupt gzip stream");
    }
  }

  FILE* f_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::vector<std::string> free_;  // consumed buffers for reuse
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
