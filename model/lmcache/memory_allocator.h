// TensorMemoryAllocator: the pinned CPU pool as LMCache manages it (MixedMemoryAllocator for the KV
// formats -> TensorMemoryAllocator -> AddressManager), with the memory objects it hands out.
//
//   allocate(shape, dtype, fmt)      one block of align(numel*itemsize) bytes, first fit;
//                                    the object's size is the unaligned byte count.
//   batched_allocate(shape, dtype, n) ONE contiguous block of n * align(unit) bytes, cut into n
//                                    objects of align(unit) bytes each (layerwise: n = layers).
//   free(obj)                        returns the block if the object is still valid.
//   batched_free(objs)               sorts by address and frees runs of adjacent objects as one
//                                    range each.
//
// The object operations of TensorMemoryObj (ref_count_up/down, pin/unpin) live here because they
// call back into free(). Clamping follows upstream: a ref_count below 0 is reset to 0 (a logged
// "double free"); unpin lets pin_count reach -1 before clamping, so an over-unpinned object with
// ref_count <= 0 is freed.
//
// Ownership: the allocator owns every MemoryObj slot; PyRef handles keep slots alive (see
// memory_obj.h). A slot is reused only after its last PyRef is gone, so ids never dangle.
// Nothing here knows about keys or tiers.
//
// Invariants (check_invariants): the address manager's invariants; every valid object's block
// [address, address+phy_size) is disjoint from every other valid object's and from the free list;
// the valid blocks and the free list tile [0, pool); sum of valid phy_size == allocated bytes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/lmcache/address_manager.h"
#include "model/lmcache/memory_obj.h"

namespace kvtwin::model::lmcache {

class TensorMemoryAllocator {
 public:
  explicit TensorMemoryAllocator(uint64_t pool_bytes,
                                 uint64_t align_bytes = AddressManager::kAlignBytes);
  TensorMemoryAllocator(const TensorMemoryAllocator&) = delete;
  TensorMemoryAllocator& operator=(const TensorMemoryAllocator&) = delete;

  // An empty PyRef when no free block is large enough.
  PyRef allocate(const Shape& shape, KvDtype dtype, MemoryFormat fmt);
  // Empty when the one contiguous block does not fit. REQUIRES: batch_size >= 1.
  std::vector<PyRef> batched_allocate(const Shape& shape, KvDtype dtype, int batch_size,
                                      MemoryFormat fmt);
  void free(MemObjId id);
  void batched_free(std::vector<MemObjId> ids);

  void ref_count_up(MemObjId id);
  void ref_count_down(MemObjId id);
  void pin(MemObjId id);
  void unpin(MemObjId id);

  const MemoryObj& obj(MemObjId id) const;
  MemoryObj& mutable_obj(MemObjId id);

  const AddressManager& address_manager() const { return address_manager_; }
  uint64_t pool_bytes() const { return address_manager_.heap_size(); }
  uint64_t total_allocated_size() const { return address_manager_.total_allocated_size(); }
  // Objects whose block is still allocated.
  size_t num_active_allocations() const { return num_active_allocations_; }
  // How many still-valid objects lost their last Python reference and were freed by __del__.
  uint64_t num_reclaimed_by_del() const { return num_reclaimed_by_del_; }
  // How many ref_count_down / unpin calls left an object evictable (MemoryObj::can_evict). Apart
  // from a new allocation (ref_count 1), no other call makes an object evictable; the CPU tier
  // names its eviction walks by this count (CanEvictFn's token).
  uint64_t num_became_evictable() const { return num_became_evictable_; }
  // Ids of every object whose block is allocated, in address order.
  std::vector<MemObjId> valid_objects() const;
  // LMCache's memcheck(): consistent sizes and a coalesced free list.
  bool memcheck() const { return address_manager_.check_consistency(); }
  void check_invariants() const;

 private:
  friend class PyRef;
  void add_py_ref(MemObjId id);
  void drop_py_ref(MemObjId id);
  MemObjId new_slot();

  AddressManager address_manager_;
  std::vector<MemoryObj> objs_;
  std::vector<MemObjId> free_slots_;
  size_t num_active_allocations_ = 0;
  uint64_t num_reclaimed_by_del_ = 0;
  uint64_t num_became_evictable_ = 0;
};

}  // namespace kvtwin::model::lmcache
