#include "sim/io/line_reader.h"

#include <sys/stat.h>

#include <isa-l/igzip_lib.h>

#include <algorithm>
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

// 256 KiB chunks: a chunk is still in cache when the parser reads the lines the inflater wrote.
constexpr size_t kChunkBytes = 1 << 18;
constexpr size_t kMaxQueuedChunks = 16;

// Source errors carry only a message; LineReader adds the file and line.
struct SourceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

class LineReader::Source {
 public:
  virtual ~Source() = default;
  // Replaces *chunk by the next chunk of data (its buffer keeps kPadding bytes beyond size); false
  // only at the end of the data. A source may swap buffers: the chunk's old buffer is recycled.
  virtual bool next(Chunk* chunk) = 0;
  virtual bool compressed() const = 0;
};

namespace {

class PlainSource final : public LineReader::Source {
 public:
  explicit PlainSource(FILE* f) : f_(f) {}
  ~PlainSource() override { std::fclose(f_); }
  bool next(LineReader::Chunk* chunk) override {
    if (chunk->buf.size() < kChunkBytes + LineReader::kPadding)
      chunk->buf.assign(kChunkBytes + LineReader::kPadding, '\0');
    chunk->size = std::fread(chunk->buf.data(), 1, kChunkBytes, f_);
    if (chunk->size == 0 && std::ferror(f_)) throw SourceError("read error");
    return chunk->size > 0;
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

  bool next(LineReader::Chunk* chunk) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (chunk->buf.size() > 0) free_.push_back(std::move(chunk->buf));
    chunk->buf = std::string();
    chunk->size = 0;
    cv_.wait(lock, [&] { return !queue_.empty() || done_; });
    if (queue_.empty()) {
      if (!error_.empty()) throw SourceError(error_);
      return false;
    }
    *chunk = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    cv_.notify_all();
    return true;
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

  // A recycled output buffer of kChunkBytes + kPadding (a fresh one while the queue fills up).
  std::string take_buffer() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string b;
    if (!free_.empty()) {
      b = std::move(free_.back());
      free_.pop_back();
    }
    b.resize(kChunkBytes + LineReader::kPadding);
    return b;
  }

  bool push(LineReader::Chunk chunk) {
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
      LineReader::Chunk out{take_buffer(), 0};
      st->next_out = reinterpret_cast<uint8_t*>(out.buf.data());
      st->avail_out = static_cast<uint32_t>(kChunkBytes);
      uint32_t avail_in = st->avail_in;
      int rc = isal_inflate(st.get());
      if (rc < 0) throw SourceError(std::string("corrupt gzip stream: ") + isal_error(rc));
      size_t produced = kChunkBytes - st->avail_out;
      bool progress = produced > 0 || st->avail_in != avail_in;
      if (produced > 0) {
        out.size = produced;
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
  std::deque<LineReader::Chunk> queue_;
  std::vector<std::string> free_;  // consumed buffers for reuse
  bool done_ = false;
  bool stop_ = false;
  std::string error_;
};

}  // namespace

LineReader::LineReader(std::string path) : path_(std::move(path)) {
  FILE* f = std::fopen(path_.c_str(), "rb");
  if (f == nullptr)
    throw InputError(path_, 0, "", std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(::fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::fclose(f);
    throw InputError(path_, 0, "", "is a directory, not a file");
  }
  unsigned char magic[2] = {0, 0};
  size_t got = std::fread(magic, 1, 2, f);
  std::rewind(f);
  if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    source_ = std::make_unique<GzipSource>(f);
  } else {
    source_ = std::make_unique<PlainSource>(f);
  }
}

LineReader::~LineReader() = default;

bool LineReader::compressed() const {
  return source_->compressed();
}

bool LineReader::fetch() {
  if (eof_) return false;
  if (release_hook_) release_hook_();
  try {
    eof_ = !source_->next(&chunk_);
  } catch (const SourceError& e) {
    throw InputError(path_, line_number_ + 1, "", e.what());
  }
  pos_ = 0;
  return !eof_;
}

void LineReader::carry(const char* data, size_t n) {
  if (carry_.size() < carry_len_ + n + kPadding)
    carry_.resize(std::max(2 * carry_.size(), carry_len_ + n + kPadding));
  std::memcpy(carry_.data() + carry_len_, data, n);
  carry_len_ += n;
}

bool LineReader::next(std::string_view* line) {
  if (carry_returned_) {
    if (release_hook_) release_hook_();
    carry_len_ = 0;
    carry_returned_ = false;
  }
  for (;;) {
    const char* base = chunk_.buf.data();
    if (pos_ < chunk_.size) {
      const void* nl = std::memchr(base + pos_, '\n', chunk_.size - pos_);
      if (nl != nullptr) {
        size_t stop = static_cast<size_t>(static_cast<const char*>(nl) - base);
        if (carry_len_ == 0) {
          *line = std::string_view(base + pos_, stop - pos_);
        } else {  // the end of a line that started in an earlier chunk
          carry(base + pos_, stop - pos_);
          *line = std::string_view(carry_.data(), carry_len_);
          carry_returned_ = true;
        }
        pos_ = stop + 1;
        if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
        ++line_number_;
        return true;
      }
      carry(base + pos_, chunk_.size - pos_);
      pos_ = chunk_.size;
    }
    if (!fetch()) break;
  }
  if (carry_len_ > 0) {  // last line without '\n'
    *line = std::string_view(carry_.data(), carry_len_);
    if (line->back() == '\r') line->remove_suffix(1);
    carry_returned_ = true;
    ++line_number_;
    return true;
  }
  return false;
}

}  // namespace kvtwin::sim::io
