// RAII handles for the CUDA objects cuda/ owns: device memory, pinned (page-locked, mapped) host
// memory, streams and events. Each is created by a factory returning Status (creation fails
// cleanly without a driver or device) and released in its destructor; a failure on release cannot
// be returned from a destructor, so it is printed to stderr rather than ignored.
//
// Handles are move-only. Threading: a handle may be used from any host thread, but not from two at
// once; ordering between streams is the caller's (events).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/status.h"

namespace kvtwin::cuda {

// Ok when a CUDA device is usable, with the number of devices in *count. Without a driver
// cudaGetDeviceCount fails (cudaErrorInsufficientDriver, 35, on the CI machine); without a device
// it fails or reports 0. Every one of these is an error Status here.
Status probe_device(int* count = nullptr);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // cudaMalloc(bytes); bytes == 0 gives an empty buffer.
  static Status allocate(size_t bytes, DeviceBuffer* out);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Page-locked host memory from cudaHostAlloc(Portable | Mapped): DMA-able by the copy engines and
// readable / writable by kernels through its device alias (zero-copy).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static Status allocate(size_t bytes, PinnedBuffer* out);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  uint8_t* host() const { return host_; }
  // The device alias of host(): kernels read and write the host bytes through it over the link.
  uint8_t* device() const { return device_; }
  // The device alias of a pointer inside this buffer. REQUIRES: host() <= p < host() + size().
  uint8_t* device_alias(const uint8_t* p) const { return device_ + (p - host_); }
  size_t size() const { return size_; }

 private:
  void release();
  uint8_t* host_ = nullptr;
  uint8_t* device_ = nullptr;
  size_t size_ = 0;
};

class Stream {
 public:
  Stream() = default;
  // A non-blocking stream (does not synchronise with the legacy default stream).
  static Status create(Stream* out);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  Status synchronize() const;

 private:
  void release();
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event() = default;
  // timing: whether cudaEventElapsedTime may be asked of it (costs a little on record).
  static Status create(Event* out, bool timing = false);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  Status record(cudaStream_t stream) const;
  // Makes `stream` wait (on the device) until this event's recorded work completes.
  Status wait_on(cudaStream_t stream) const;
  Status synchronize() const;
  // Milliseconds from `start` to `end`; both recorded with timing and completed.
  static Status elapsed_ms(const Event& start, const Event& end, float* ms);

 private:
  void release();
  cudaEvent_t event_ = nullptr;
};

}  // namespace kvtwin::cuda
