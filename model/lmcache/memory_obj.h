// MemoryObj: one allocation in the pinned CPU pool (memory_management.TensorMemoryObj), and PyRef,
// a Python reference to it.
//
// Two different counts live on an object, and the model keeps both because LMCache's behaviour
// depends on each:
//
//   ref_count / pin_count   LMCache's own counters. An allocation starts with ref_count 1.
//                           ref_count_down to 0 with pin_count 0 returns the block to the pool;
//                           unpin with both <= 0 does too. can_evict <=> pin_count == 0 and
//                           ref_count == 1 (only the cache's own reference remains).
//   py_refs                 how many Python references the object has (the hot cache's dict entry,
//                           a queued write job, a local variable of the running call). When the
//                           last one disappears, CPython runs MemoryObj.__del__, which frees a
//                           still-valid block whatever its counters say. This is how LMCache's
//                           leaks (objects dropped without ref_count_down) are reclaimed, and
//                           *when* it happens changes later first-fit addresses, so the model
//                           follows CPython: a PyRef is a counted handle; the object's slot lives
//                           as long as any PyRef does.
//
// `valid` is false once the block went back to the pool (TensorMemoryObj.invalidate); a freed
// object's metadata stays readable while PyRefs remain, as in Python.
//
// `content` is the logical payload (which key's KV bytes the block holds); the model moves it
// instead of bytes so a load can be checked (golden "bad").
#pragma once

#include <cstdint>

#include "model/lmcache/dtype.h"
#include "model/lmcache/memory_format.h"

namespace kvtwin::model::lmcache {

using MemObjId = uint32_t;
inline constexpr MemObjId kNoMemObj = UINT32_MAX;

struct MemoryObj {
  uint64_t address = 0;
  uint64_t phy_size = 0;  // aligned size taken from the pool
  uint64_t size = 0;      // get_size(): numel * itemsize
  uint64_t byte_len = 0;  // len(byte_array): size, or the aligned unit of a batched allocation
  Shape shape;
  KvDtype dtype = KvDtype::kHalf;
  MemoryFormat fmt = MemoryFormat::kUndefined;
  int32_t ref_count = 1;
  int32_t pin_count = 0;
  bool valid = true;
  uint32_t py_refs = 0;
  uint64_t content = 0;

  bool is_pinned() const { return pin_count > 0; }
  bool can_evict() const { return !is_pinned() && ref_count == 1; }
  // shape[fmt.token_dim()]; upstream raises IndexError for a shape of lower rank.
  int64_t num_tokens() const;
};

class TensorMemoryAllocator;

// A counted Python reference to a memory object. Copying adds a reference, destroying drops one.
class PyRef {
 public:
  PyRef() = default;
  PyRef(TensorMemoryAllocator* allocator, MemObjId id);
  PyRef(const PyRef& other);
  PyRef(PyRef&& other) noexcept : allocator_(other.allocator_), id_(other.id_) {
    other.allocator_ = nullptr;
    other.id_ = kNoMemObj;
  }
  PyRef& operator=(const PyRef& other);
  PyRef& operator=(PyRef&& other) noexcept;
  ~PyRef() { reset(); }

  void reset();
  explicit operator bool() const { return allocator_ != nullptr; }
  MemObjId id() const { return id_; }
  TensorMemoryAllocator* allocator() const { return allocator_; }
  MemoryObj& operator*() const;
  MemoryObj* operator->() const { return &**this; }
  friend bool operator==(const PyRef& a, const PyRef& b) {
    return a.allocator_ == b.allocator_ && a.id_ == b.id_;
  }

 private:
  TensorMemoryAllocator* allocator_ = nullptr;
  MemObjId id_ = kNoMemObj;
};

}  // namespace kvtwin::model::lmcache
