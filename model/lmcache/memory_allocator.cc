#include "model/lmcache/memory_allocator.h"

#include <algorithm>

#include "model/check.h"
#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {

// ----------------------------------------------------------------------------- MemoryObj / PyRef

int64_t MemoryObj::num_tokens() const {
  int dim = memory_format_token_dim(fmt);
  if (dim >= shape.rank) raise(PyError::kIndexError, "shape index out of range");
  return shape.dims[dim];
}

PyRef::PyRef(TensorMemoryAllocator* allocator, MemObjId id) : allocator_(allocator), id_(id) {
  allocator_->add_py_ref(id_);
}

PyRef::PyRef(const PyRef& other) : allocator_(other.allocator_), id_(other.id_) {
  if (allocator_ != nullptr) allocator_->add_py_ref(id_);
}

PyRef& PyRef::operator=(const PyRef& other) {
  if (this == &other) return *this;
  PyRef copy(other);
  *this = std::move(copy);
  return *this;
}

PyRef& PyRef::operator=(PyRef&& other) noexcept {
  if (this == &other) return *this;
  // Python rebinding: the new value is bound before the old one is released.
  TensorMemoryAllocator* old_allocator = allocator_;
  MemObjId old_id = id_;
  allocator_ = other.allocator_;
  id_ = other.id_;
  other.allocator_ = nullptr;
  other.id_ = kNoMemObj;
  if (old_allocator != nullptr) old_allocator->drop_py_ref(old_id);
  return *this;
}

void PyRef::reset() {
  if (allocator_ == nullptr) return;
  TensorMemoryAllocator* a = allocator_;
  allocator_ = nullptr;
  a->drop_py_ref(id_);
  id_ = kNoMemObj;
}

MemoryObj& PyRef::operator*() const {
  KVTWIN_CHECK(allocator_ != nullptr) << "dereferencing an empty PyRef";
  return allocator_->mutable_obj(id_);
}

// ----------------------------------------------------------------------------- allocator

TensorMemoryAllocator::TensorMemoryAllocator(uint64_t pool_bytes, uint64_t align_bytes)
    : address_manager_(pool_bytes, align_bytes) {}

MemObjId TensorMemoryAllocator::new_slot() {
  if (!free_slots_.empty()) {
    MemObjId id = free_slots_.back();
    free_slots_.pop_back();
    objs_[id] = MemoryObj{};
    return id;
  }
  KVTWIN_CHECK_LT(objs_.size(), static_cast<size_t>(kNoMemObj));
  objs_.emplace_back();
  return static_cast<MemObjId>(objs_.size() - 1);
}

PyRef TensorMemoryAllocator::allocate(const Shape& shape, KvDtype dtype, MemoryFormat fmt) {
  uint64_t raw = static_cast<uint64_t>(shape.numel() * dtype_itemsize(dtype));
  auto block = address_manager_.allocate(raw);
  if (!block) return PyRef();
  MemObjId id = new_slot();
  MemoryObj& o = objs_[id];
  o.address = block->first;
  o.phy_size = block->second;
  o.size = raw;
  o.byte_len = raw;
  o.shape = shape;
  o.dtype = dtype;
  o.fmt = fmt;
  ++num_active_allocations_;
  return PyRef(this, id);
}

std::vector<PyRef> TensorMemoryAllocator::batched_allocate(const Shape& shape, KvDtype dtype,
                                                           int batch_size, MemoryFormat fmt) {
  KVTWIN_CHECK(batch_size >= 1) << "batch of " << batch_size;
  uint64_t unit_raw = static_cast<uint64_t>(shape.numel() * dtype_itemsize(dtype));
  uint64_t unit_aligned = address_manager_.compute_aligned_size(unit_raw);
  auto block = address_manager_.allocate(unit_aligned * static_cast<uint64_t>(batch_size));
  if (!block) return {};
  std::vector<PyRef> out;
  out.reserve(batch_size);
  uint64_t at = block->first;
  for (int i = 0; i < batch_size; ++i) {
    MemObjId id = new_slot();
    MemoryObj& o = objs_[id];
    o.address = at;
    o.phy_size = unit_aligned;
    o.size = unit_raw;
    o.byte_len = unit_aligned;  // torch.chunk of the aligned block
    o.shape = shape;
    o.dtype = dtype;
    o.fmt = fmt;
    at += unit_aligned;
    out.emplace_back(this, id);
  }
  num_active_allocations_ += batch_size;
  return out;
}

void TensorMemoryAllocator::free(MemObjId id) {
  MemoryObj& o = mutable_obj(id);
  if (!o.valid) return;
  address_manager_.free(o.address, o.phy_size);
  o.valid = false;
  --num_active_allocations_;
}

void TensorMemoryAllocator::batched_free(std::vector<MemObjId> ids) {
  std::stable_sort(ids.begin(), ids.end(),
                   [&](MemObjId a, MemObjId b) { return obj(a).address < obj(b).address; });
  bool have = false;
  uint64_t start = 0, size = 0;
  for (MemObjId id : ids) {
    MemoryObj& o = mutable_obj(id);
    if (!o.valid) continue;  // upstream warns "Trying to free an invalidated MemoryObj"
    o.valid = false;
    --num_active_allocations_;
    if (have && start + size == o.address) {
      size += o.phy_size;
      continue;
    }
    if (have) address_manager_.free(start, size);
    have = true;
    start = o.address;
    size = o.phy_size;
  }
  if (have) address_manager_.free(start, size);
}

void TensorMemoryAllocator::ref_count_up(MemObjId id) {
  ++mutable_obj(id).ref_count;
}

void TensorMemoryAllocator::ref_count_down(MemObjId id) {
  MemoryObj& o = mutable_obj(id);
  o.ref_count -= 1;
  if (o.ref_count < 0) o.ref_count = 0;  // upstream: "Double free occurred somewhere"
  if (o.ref_count == 0 && o.pin_count == 0) free(id);
  if (o.can_evict()) ++num_became_evictable_;
}

void TensorMemoryAllocator::pin(MemObjId id) {
  ++mutable_obj(id).pin_count;
}

void TensorMemoryAllocator::unpin(MemObjId id) {
  MemoryObj& o = mutable_obj(id);
  o.pin_count -= 1;
  if (o.pin_count <= 0 && o.ref_count <= 0) free(id);
  if (o.pin_count < 0) o.pin_count = 0;  // upstream: "Double unpin occurred somewhere"
  if (o.can_evict()) ++num_became_evictable_;
}

const MemoryObj& TensorMemoryAllocator::obj(MemObjId id) const {
  KVTWIN_CHECK(id < objs_.size() && objs_[id].py_refs > 0) << "stale memory object id " << id;
  return objs_[id];
}

MemoryObj& TensorMemoryAllocator::mutable_obj(MemObjId id) {
  KVTWIN_CHECK(id < objs_.size() && objs_[id].py_refs > 0) << "stale memory object id " << id;
  return objs_[id];
}

void TensorMemoryAllocator::add_py_ref(MemObjId id) {
  KVTWIN_CHECK_LT(id, objs_.size());
  ++objs_[id].py_refs;
}

void TensorMemoryAllocator::drop_py_ref(MemObjId id) {
  MemoryObj& o = objs_[id];
  KVTWIN_CHECK(o.py_refs > 0) << "PyRef underflow on object " << id;
  if (--o.py_refs > 0) return;
  // MemoryObj.__del__: a block still allocated goes back to the pool whatever the counters say.
  if (o.valid) {
    address_manager_.free(o.address, o.phy_size);
    o.valid = false;
    --num_active_allocations_;
    ++num_reclaimed_by_del_;
  }
  free_slots_.push_back(id);
}

std::vector<MemObjId> TensorMemoryAllocator::valid_objects() const {
  std::vector<MemObjId> out;
  for (MemObjId id = 0; id < objs_.size(); ++id) {
    if (objs_[id].py_refs > 0 && objs_[id].valid) out.push_back(id);
  }
  std::sort(out.begin(), out.end(),
            [&](MemObjId a, MemObjId b) { return objs_[a].address < objs_[b].address; });
  return out;
}

void TensorMemoryAllocator::check_invariants() const {
  address_manager_.check_invariants();
  // Valid blocks and free blocks, merged in address order, must tile the pool exactly.
  std::vector<FreeBlock> ranges;
  uint64_t valid_bytes = 0;
  for (MemObjId id : valid_objects()) {
    ranges.push_back({objs_[id].address, objs_[id].phy_size});
    valid_bytes += objs_[id].phy_size;
  }
  KVTWIN_CHECK_EQ(valid_bytes, address_manager_.total_allocated_size());
  for (const FreeBlock& b : address_manager_.free_blocks()) ranges.push_back(b);
  std::sort(ranges.begin(), ranges.end(),
            [](const FreeBlock& a, const FreeBlock& b) { return a.start < b.start; });
  uint64_t at = 0;
  for (const FreeBlock& r : ranges) {
    KVTWIN_CHECK_EQ(r.start, at) << "gap or overlap in the pool at " << at;
    at += r.size;
  }
  KVTWIN_CHECK_EQ(at, address_manager_.heap_size());
  size_t active = 0;
  for (const MemoryObj& o : objs_) active += (o.py_refs > 0 && o.valid) ? 1 : 0;
  KVTWIN_CHECK_EQ(active, num_active_allocations_);
}

}  // namespace kvtwin::model::lmcache
