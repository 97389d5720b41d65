#include "cuda/tiers/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "cuda/tiers/chunk_file.h"
#include "cuda/tiers/host_buffer.h"
#include "model/check.h"

namespace kvtwin::cuda::tiers {
namespace {

TierStatus status_from_errno(int err) {
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) return TierStatus::kNoSpace;
  return TierStatus::kIoError;
}

bool is_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kDirectIoAlign == 0;
}

// The state of one object while its I/O is in flight.
struct Op {
  HostBuffer blocks{2 * kDirectIoAlign};  // [0, 4096) header, [4096, 8192) payload tail
  HostBuffer bounce;                      // aligned copy of an unaligned caller buffer
  int fd = -1;
  std::string tmp_path;  // puts only
  uint64_t checksum = 0;
  TierStatus status = TierStatus::kIoError;

  std::span<uint8_t> header() { return {blocks.data(), kDirectIoAlign}; }
  uint8_t* tail() { return blocks.data() + kDirectIoAlign; }
  void close_fd() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Lays out header, payload body and padded tail as up to three iovecs (chunk_file.h picture);
// without the header, the I/O starts at the payload's offset.
void plan_iov(Op& op, bool with_header, uint8_t* payload, uint64_t payload_bytes, IoRequest* req) {
  const uint64_t body = payload_bytes / kDirectIoAlign * kDirectIoAlign;
  req->fd = op.fd;
  req->offset = with_header ? 0 : kChunkHeaderBytes;
  req->iovcnt = 0;
  if (with_header)
    req->iov[static_cast<size_t>(req->iovcnt++)] = {op.header().data(), kDirectIoAlign};
  if (body > 0) req->iov[static_cast<size_t>(req->iovcnt++)] = {payload, body};
  if (payload_bytes > body)
    req->iov[static_cast<size_t>(req->iovcnt++)] = {op.tail(), kDirectIoAlign};
}

std::string strip_file_scheme(std::string path) {
  constexpr std::string_view kScheme = "file://";
  if (path.starts_with(kScheme)) path.erase(0, kScheme.size());
  return path;
}

// Creates, writes, reads back and removes one block-sized file in `dir` with `flags`.
bool probe_directory(const std::string& dir, bool direct_io, std::string* error) {
  const std::string probe = dir + "/.kvtwin-probe." + std::to_string(::getpid());
  const int flags = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | (direct_io ? O_DIRECT : 0);
  const int fd = ::open(probe.c_str(), flags, 0644);
  if (fd < 0) {
    const int err = errno;
    *error = (direct_io && err == EINVAL)
                 ? "disk tier directory " + dir + " does not support O_DIRECT (set direct_io off)"
                 : "cannot create files in disk tier directory " + dir + ": " + std::strerror(err);
    return false;
  }
  HostBuffer block(kDirectIoAlign);
  fill_content("probe", block.span());
  bool ok = ::pwrite(fd, block.data(), kDirectIoAlign, 0) == static_cast<ssize_t>(kDirectIoAlign);
  const int write_err = errno;
  ok = ok && ::pread(fd, block.data(), kDirectIoAlign, 0) == static_cast<ssize_t>(kDirectIoAlign);
  if (!ok) *error = "cannot write disk tier directory " + dir + ": " + std::strerror(write_err);
  ::close(fd);
  ::unlink(probe.c_str());
  return ok;
}

}  // namespace

std::unique_ptr<DiskTier> DiskTier::open(DiskTierConfig config, std::string* error) {
  config.path = strip_file_scheme(config.path);
  if (config.path.empty()) {
    *error = "disk tier path is empty";
    return nullptr;
  }
  std::error_code ec;
  std::filesystem::create_directories(config.path, ec);
  if (ec || !std::filesystem::is_directory(config.path)) {
    *error = "cannot create disk tier directory " + config.path + ": " +
             (ec ? ec.message() : std::string("not a directory"));
    return nullptr;
  }
  if (!probe_directory(config.path, config.direct_io, error)) return nullptr;
  std::unique_ptr<IoEngine> engine;
  if (config.use_uring) {
    if (config.queue_depth < 1) {
      *error = "disk tier queue depth must be at least 1";
      return nullptr;
    }
    std::string why;
    engine = make_uring_engine(config.queue_depth, &why);
    if (!engine) {
      *error = "io_uring is not available for the disk tier (" + why + "); use the posix engine";
      return nullptr;
    }
  } else {
    engine = make_posix_engine();
  }
  return std::unique_ptr<DiskTier>(new DiskTier(std::move(config), std::move(engine)));
}

DiskTier::DiskTier(DiskTierConfig config, std::unique_ptr<IoEngine> engine)
    : config_(std::move(config)), engine_(std::move(engine)) {}

DiskTier::~DiskTier() = default;

std::string DiskTier::file_path(std::string_view key) const {
  return config_.path + "/" + chunk_file_name(key);
}

int DiskTier::inject(DiskFaultPoint point, std::string_view key) const {
  return config_.inject_fault ? config_.inject_fault(point, key) : 0;
}

void DiskTier::batched_put(std::span<const DiskPut> puts, std::span<TierStatus> out) {
  KVTWIN_CHECK_EQ(out.size(), puts.size());
  std::vector<Op> ops(puts.size());
  const int open_flags =
      O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (config_.direct_io ? O_DIRECT : 0);

  auto start = [&](size_t i, IoRequest* req) {
    Op& op = ops[i];
    const DiskPut& put = puts[i];
    const uint64_t n = put.payload.size();
    op.tmp_path = file_path(put.key) + ".tmp." + std::to_string(::getpid()) + "." +
                  std::to_string(next_tmp_seq_++);
    if (int err = inject(DiskFaultPoint::kCreate, put.key); err != 0) {
      op.status = status_from_errno(err);
      return false;
    }
    op.fd = ::open(op.tmp_path.c_str(), open_flags, 0644);
    if (op.fd < 0) {
      op.status = status_from_errno(errno);
      return false;
    }
    // Reserve the whole file first: a full disk shows here, before any byte is written.
    if (::fallocate(op.fd, 0, 0, static_cast<off_t>(chunk_file_bytes(n))) != 0 &&
        errno != EOPNOTSUPP) {
      op.status = status_from_errno(errno);
      op.close_fd();
      ::unlink(op.tmp_path.c_str());
      return false;
    }
    const uint8_t* src = put.payload.data();
    if (config_.direct_io && !is_aligned(src) && n >= kDirectIoAlign) {
      op.bounce = HostBuffer(n);
      std::memcpy(op.bounce.data(), src, n);
      src = op.bounce.data();
    }
    const uint64_t body = n / kDirectIoAlign * kDirectIoAlign;
    if (n > body) std::memcpy(op.tail(), src + body, n - body);
    if (n == 0) {  // nothing to overlap with: the header is the whole write
      encode_chunk_header(put.key, 0, payload_checksum(put.payload), op.header());
      plan_iov(op, /*with_header=*/true, nullptr, 0, req);
    } else {
      plan_iov(op, /*with_header=*/false, const_cast<uint8_t*>(src), n, req);
    }
    req->write = true;
    return true;
  };

  // The payload is on its way to the device: checksum it meanwhile; the header follows it.
  auto submitted = [&](size_t i) {
    if (puts[i].payload.empty()) return;
    encode_chunk_header(puts[i].key, puts[i].payload.size(), payload_checksum(puts[i].payload),
                        ops[i].header());
  };

  auto finish = [&](size_t i, int64_t result) {
    Op& op = ops[i];
    const uint64_t n = puts[i].payload.size();
    const uint64_t expected = n == 0 ? kChunkHeaderBytes : round_up_to_block(n);
    if (int err = inject(DiskFaultPoint::kWrite, puts[i].key); err != 0) result = -err;
    int err = result < 0 ? static_cast<int>(-result) : 0;
    if (err == 0 && static_cast<uint64_t>(result) != expected) err = EIO;
    // Stage 2: the header, written last, so a file cut short anywhere has no valid header.
    if (err == 0 && n > 0) {
      IoRequest header;
      plan_iov(op, /*with_header=*/true, nullptr, 0, &header);
      header.write = true;
      const int64_t r = transfer_rest(header, 0);
      if (r != static_cast<int64_t>(kChunkHeaderBytes)) err = r < 0 ? static_cast<int>(-r) : EIO;
    }
    if (::close(op.fd) != 0 && err == 0) err = errno;
    op.fd = -1;
    if (err == 0) err = inject(DiskFaultPoint::kRename, puts[i].key);
    if (err == 0 && ::rename(op.tmp_path.c_str(), file_path(puts[i].key).c_str()) != 0) err = errno;
    if (err != 0) {
      ::unlink(op.tmp_path.c_str());
      op.status = status_from_errno(err);
      return;
    }
    op.status = TierStatus::kOk;
  };

  engine_->run(puts.size(), start, submitted, finish);
  for (size_t i = 0; i < puts.size(); ++i) {
    out[i] = ops[i].status;
    stats_.count_put(out[i], puts[i].payload.size());
  }
}

void DiskTier::batched_get(std::span<const DiskGet> gets, std::span<TierStatus> out) {
  KVTWIN_CHECK_EQ(out.size(), gets.size());
  std::vector<Op> ops(gets.size());
  const int open_flags = O_RDONLY | O_CLOEXEC | (config_.direct_io ? O_DIRECT : 0);

  auto start = [&](size_t i, IoRequest* req) {
    Op& op = ops[i];
    const DiskGet& get = gets[i];
    op.fd = ::open(file_path(get.key).c_str(), open_flags);
    if (op.fd < 0) {
      op.status = errno == ENOENT ? TierStatus::kMiss : TierStatus::kIoError;
      return false;
    }
    uint8_t* dst = get.out.data();
    if (config_.direct_io && !is_aligned(dst) && get.out.size() >= kDirectIoAlign) {
      op.bounce = HostBuffer(get.out.size());
      dst = op.bounce.data();
    }
    plan_iov(op, /*with_header=*/true, dst, get.out.size(), req);
    req->write = false;
    return true;
  };

  auto finish = [&](size_t i, int64_t result) {
    Op& op = ops[i];
    const DiskGet& get = gets[i];
    const uint64_t n = get.out.size();
    op.close_fd();
    if (int err = inject(DiskFaultPoint::kRead, get.key); err != 0) result = -err;
    if (result < 0) {
      op.status = TierStatus::kIoError;
      return;
    }
    if (static_cast<uint64_t>(result) < chunk_file_bytes(n)) {
      op.status = TierStatus::kCorrupt;  // truncated
      return;
    }
    uint64_t recorded = 0;
    switch (check_chunk_header(op.header(), get.key, n, &recorded)) {
      case HeaderCheck::kOk:
        break;
      case HeaderCheck::kWrongKey:
        op.status = TierStatus::kMiss;
        return;
      case HeaderCheck::kTorn:
      case HeaderCheck::kWrongLength:
        op.status = TierStatus::kCorrupt;
        return;
    }
    const uint64_t body = n / kDirectIoAlign * kDirectIoAlign;
    if (op.bounce.data() != nullptr) std::memcpy(get.out.data(), op.bounce.data(), body);
    if (n > body) std::memcpy(get.out.data() + body, op.tail(), n - body);
    op.status = payload_checksum(get.out) == recorded ? TierStatus::kOk : TierStatus::kCorrupt;
  };

  engine_->run(gets.size(), start, nullptr, finish);
  for (size_t i = 0; i < gets.size(); ++i) {
    out[i] = ops[i].status;
    stats_.count_get(out[i], gets[i].out.size());
  }
}

TierStatus DiskTier::put(std::string_view key, std::span<const uint8_t> payload) {
  const DiskPut one{key, payload};
  TierStatus status;
  batched_put({&one, 1}, {&status, 1});
  return status;
}

TierStatus DiskTier::get(std::string_view key, std::span<uint8_t> out) {
  const DiskGet one{key, out};
  TierStatus status;
  batched_get({&one, 1}, {&status, 1});
  return status;
}

bool DiskTier::contains(std::string_view key) const {
  struct stat st;
  return ::stat(file_path(key).c_str(), &st) == 0;
}

bool DiskTier::remove(std::string_view key) {
  return ::unlink(file_path(key).c_str()) == 0;
}

}  // namespace kvtwin::cuda::tiers
