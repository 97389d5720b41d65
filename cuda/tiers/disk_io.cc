#include "cuda/tiers/disk_io.h"

#include <liburing.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "model/check.h"

namespace kvtwin::cuda::tiers {

int64_t transfer_rest(const IoRequest& req, uint64_t done) {
  const uint64_t total = req.bytes();
  while (done < total) {
    // The iovecs that remain after `done` bytes.
    std::array<iovec, 3> rest{};
    int count = 0;
    uint64_t skip = done;
    for (int i = 0; i < req.iovcnt; ++i) {
      const iovec& v = req.iov[static_cast<size_t>(i)];
      if (skip >= v.iov_len) {
        skip -= v.iov_len;
        continue;
      }
      rest[static_cast<size_t>(count++)] = {static_cast<char*>(v.iov_base) + skip,
                                            v.iov_len - skip};
      skip = 0;
    }
    const off_t at = static_cast<off_t>(req.offset + done);
    const ssize_t r = req.write ? ::pwritev(req.fd, rest.data(), count, at)
                                : ::preadv(req.fd, rest.data(), count, at);
    if (r < 0) {
      if (errno == EINTR) continue;
      // A read that already got bytes and now fails (O_DIRECT past an unaligned end of file
      // says EINVAL) ended at the file's end: report the short count, not the error.
      if (!req.write && done > 0) break;
      return -errno;
    }
    if (r == 0) {
      if (req.write) return -EIO;  // a write that makes no progress
      break;                       // end of file
    }
    done += static_cast<uint64_t>(r);
  }
  return static_cast<int64_t>(done);
}

namespace {

class PosixEngine final : public IoEngine {
 public:
  void run(size_t n, const Start& start, const Submitted& submitted,
           const Finish& finish) override {
    for (size_t i = 0; i < n; ++i) {
      IoRequest req;
      if (!start(i, &req)) continue;
      const int64_t result = transfer_rest(req, 0);
      if (submitted) submitted(i);
      finish(i, result);
    }
  }
  std::string_view name() const override { return "posix"; }
  int queue_depth() const override { return 1; }
};

class UringEngine final : public IoEngine {
 public:
  explicit UringEngine(int depth) : depth_(depth) {}
  ~UringEngine() override {
    if (ready_) io_uring_queue_exit(&ring_);
  }
  bool init(std::string* error) {
    const int rc = io_uring_queue_init(static_cast<unsigned>(depth_), &ring_, 0);
    if (rc < 0) {
      *error = std::string("io_uring_queue_init: ") + std::strerror(-rc);
      return false;
    }
    ready_ = true;
    return true;
  }

  void run(size_t n, const Start& start, const Submitted& submitted,
           const Finish& finish) override {
    std::vector<IoRequest> reqs(n);  // iovecs must outlive their submission
    size_t next = 0;
    int in_flight = 0;
    while (next < n || in_flight > 0) {
      // Stage 1: up to the queue depth, prepare and submit one operation at a time, so the
      // device starts on it while the caller prepares (or computes for) the next.
      while (next < n && in_flight < depth_) {
        const size_t i = next++;
        if (!start(i, &reqs[i])) continue;
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        KVTWIN_CHECK(sqe != nullptr) << "io_uring submission queue full";
        IoRequest& r = reqs[i];
        if (r.write)
          io_uring_prep_writev(sqe, r.fd, r.iov.data(), static_cast<unsigned>(r.iovcnt), r.offset);
        else
          io_uring_prep_readv(sqe, r.fd, r.iov.data(), static_cast<unsigned>(r.iovcnt), r.offset);
        io_uring_sqe_set_data64(sqe, i);
        const int rc = io_uring_submit(&ring_);
        KVTWIN_CHECK_EQ(rc, 1) << "io_uring_submit";
        ++in_flight;
        if (submitted) submitted(i);
      }
      if (in_flight == 0) continue;
      // Stage 2: take one completion (waiting if needed), then every other one already there.
      io_uring_cqe* cqe = nullptr;
      int rc;
      do rc = io_uring_wait_cqe(&ring_, &cqe);
      while (rc == -EINTR);
      KVTWIN_CHECK_EQ(rc, 0) << "io_uring_wait_cqe";
      while (cqe != nullptr) {
        const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
        int64_t result = cqe->res;
        io_uring_cqe_seen(&ring_, cqe);
        --in_flight;
        if (result > 0 && static_cast<uint64_t>(result) < reqs[i].bytes())
          result = transfer_rest(reqs[i], static_cast<uint64_t>(result));
        finish(i, result);
        cqe = nullptr;
        if (io_uring_peek_cqe(&ring_, &cqe) != 0) cqe = nullptr;
      }
    }
  }
  std::string_view name() const override { return "uring"; }
  int queue_depth() const override { return depth_; }

 private:
  int depth_;
  bool ready_ = false;
  io_uring ring_{};
};

}  // namespace

std::unique_ptr<IoEngine> make_posix_engine() {
  return std::make_unique<PosixEngine>();
}

std::unique_ptr<IoEngine> make_uring_engine(int queue_depth, std::string* error) {
  KVTWIN_CHECK_GE(queue_depth, 1);
  auto engine = std::make_unique<UringEngine>(queue_depth);
  if (!engine->init(error)) return nullptr;
  return engine;
}

}  // namespace kvtwin::cuda::tiers
