#include "cuda/cuda_handles.h"

#include <cstdio>
#include <utility>

namespace kvtwin::cuda {
namespace {

// Destructors cannot return a Status: say what failed instead of dropping it.
void report_release_failure(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kvtwin: %s failed on release: %s\n", what, cudaGetErrorString(e));
  }
}

}  // namespace

Status probe_device(int* count) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (count) *count = e == cudaSuccess ? n : 0;
  if (e != cudaSuccess) {
    cudaGetLastError();  // consume the error so a later launch check does not report it
    return cuda_call_status(e, "cudaGetDeviceCount", __FILE__, __LINE__);
  }
  if (n == 0) return Status::error("no CUDA device");
  return Status();
}

// --- DeviceBuffer ------------------------------------------------------------------------------

Status DeviceBuffer::allocate(size_t bytes, DeviceBuffer* out) {
  DeviceBuffer b;
  if (bytes > 0) {
    void* p = nullptr;
    KVTWIN_CUDA_TRY(cudaMalloc(&p, bytes));
    b.data_ = static_cast<uint8_t*>(p);
    b.size_ = bytes;
  }
  *out = std::move(b);
  return Status();
}

void DeviceBuffer::release() {
  if (data_) report_release_failure(cudaFree(data_), "cudaFree");
  data_ = nullptr;
  size_ = 0;
}
DeviceBuffer::~DeviceBuffer() {
  release();
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

// --- PinnedBuffer ------------------------------------------------------------------------------

Status PinnedBuffer::allocate(size_t bytes, PinnedBuffer* out) {
  PinnedBuffer b;
  if (bytes > 0) {
    void* h = nullptr;
    KVTWIN_CUDA_TRY(cudaHostAlloc(&h, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
    b.host_ = static_cast<uint8_t*>(h);
    b.size_ = bytes;
    void* d = nullptr;
    KVTWIN_CUDA_TRY(cudaHostGetDevicePointer(&d, h, 0));  // b frees h on this early return
    b.device_ = static_cast<uint8_t*>(d);
  }
  *out = std::move(b);
  return Status();
}

void PinnedBuffer::release() {
  if (host_) report_release_failure(cudaFreeHost(host_), "cudaFreeHost");
  host_ = device_ = nullptr;
  size_ = 0;
}
PinnedBuffer::~PinnedBuffer() {
  release();
}
PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : host_(std::exchange(o.host_, nullptr)),
      device_(std::exchange(o.device_, nullptr)),
      size_(std::exchange(o.size_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    release();
    host_ = std::exchange(o.host_, nullptr);
    device_ = std::exchange(o.device_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

// --- Stream ------------------------------------------------------------------------------------

Status Stream::create(Stream* out) {
  Stream s;
  KVTWIN_CUDA_TRY(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  *out = std::move(s);
  return Status();
}
Status Stream::synchronize() const {
  KVTWIN_CUDA_TRY(cudaStreamSynchronize(stream_));
  return Status();
}
void Stream::release() {
  if (stream_) report_release_failure(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  stream_ = nullptr;
}
Stream::~Stream() {
  release();
}
Stream::Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    release();
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}

// --- Event -------------------------------------------------------------------------------------

Status Event::create(Event* out, bool timing) {
  Event ev;
  KVTWIN_CUDA_TRY(
      cudaEventCreateWithFlags(&ev.event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  *out = std::move(ev);
  return Status();
}
Status Event::record(cudaStream_t stream) const {
  KVTWIN_CUDA_TRY(cudaEventRecord(event_, stream));
  return Status();
}
Status Event::wait_on(cudaStream_t stream) const {
  KVTWIN_CUDA_TRY(cudaStreamWaitEvent(stream, event_, 0));
  return Status();
}
Status Event::synchronize() const {
  KVTWIN_CUDA_TRY(cudaEventSynchronize(event_));
  return Status();
}
Status Event::elapsed_ms(const Event& start, const Event& end, float* ms) {
  KVTWIN_CUDA_TRY(cudaEventElapsedTime(ms, start.event_, end.event_));
  return Status();
}
void Event::release() {
  if (event_) report_release_failure(cudaEventDestroy(event_), "cudaEventDestroy");
  event_ = nullptr;
}
Event::~Event() {
  release();
}
Event::Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    release();
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}

}  // namespace kvtwin::cuda
