// IoEngine: runs a batch of independent file reads / writes, some of them in flight at once.
//
// The disk tier turns each object into at most one vectored I/O (header block, payload, tail
// block) and hands the batch to an engine:
//   posix  one preadv / pwritev at a time, on the calling thread;
//   uring  io_uring (liburing) with up to queue_depth operations in flight; the calling thread
//          prepares the next operation (open, checksum) while earlier ones are in flight.
//
// run(n, start, submitted, finish): for each i in [0, n) calls start(i, &req) — which fills req
// and returns true, or returns false when operation i needs no I/O (it already failed); once the
// I/O is handed to the kernel, submitted(i) (the caller's chance to compute while the device
// works: the uring engine submits each operation as soon as it is prepared); once the I/O
// completed, finish(i, result) with result = bytes transferred or -errno. A short transfer is
// carried on synchronously until it is complete, the file ends (reads) or an error occurs, so
// finish sees a short count only at end of file. start and submitted are called in index order,
// finish in completion order; all on the calling thread.
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace kvtwin::cuda::tiers {

struct IoRequest {
  int fd = -1;
  bool write = false;
  std::array<iovec, 3> iov{};
  int iovcnt = 0;
  uint64_t offset = 0;

  uint64_t bytes() const {
    uint64_t n = 0;
    for (int i = 0; i < iovcnt; ++i) n += iov[static_cast<size_t>(i)].iov_len;
    return n;
  }
};

// Carries `req` on from `done` bytes with preadv / pwritev until complete, end of file or error.
// Returns the total bytes transferred, or -errno (a read that fails after some bytes returns
// the bytes it got: the file ended).
int64_t transfer_rest(const IoRequest& req, uint64_t done);

class IoEngine {
 public:
  using Start = std::function<bool(size_t i, IoRequest* req)>;
  using Submitted = std::function<void(size_t i)>;
  using Finish = std::function<void(size_t i, int64_t result)>;
  virtual ~IoEngine() = default;
  virtual void run(size_t n, const Start& start, const Submitted& submitted,
                   const Finish& finish) = 0;
  virtual std::string_view name() const = 0;
  virtual int queue_depth() const = 0;
};

std::unique_ptr<IoEngine> make_posix_engine();
// Returns nullptr and sets *error when io_uring cannot be set up (kernel without it, disabled by
// sysctl or seccomp). REQUIRES: queue_depth >= 1.
std::unique_ptr<IoEngine> make_uring_engine(int queue_depth, std::string* error);

}  // namespace kvtwin::cuda::tiers
