#include "tests/cuda/kv_test_support.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <utility>

#include "model/check.h"

namespace kvtwin::cuda::testing {
namespace {

constexpr size_t kAlign = 64;
size_t round_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Coordinates of one element, by axis letter: k kv plane, b block, s offset in block, h head,
// d element in head, l layer, t token in chunk, o the unit axis of KV_MLA's leading 1.
struct Coord {
  int64_t k = 0, b = 0, s = 0, h = 0, d = 0, l = 0, t = 0, o = 0;
  int64_t get(char axis) const {
    switch (axis) {
      case 'k':
        return k;
      case 'b':
        return b;
      case 's':
        return s;
      case 'h':
        return h;
      case 'd':
        return d;
      case 'l':
        return l;
      case 't':
        return t;
      case 'o':
        return o;
    }
    KVTWIN_CHECK(false) << "axis " << axis;
    return 0;
  }
};

// A row-major tensor described by its axes, outermost first.
struct Axes {
  std::vector<std::pair<char, int64_t>> dims;
  int64_t element(const Coord& c) const {
    int64_t index = 0;
    for (const auto& [axis, extent] : dims) {
      const int64_t i = c.get(axis);
      KVTWIN_CHECK(i >= 0 && i < extent) << axis << "=" << i << " of " << extent;
      index = index * extent + i;
    }
    return index;
  }
};

Axes paged_axes(const PagedLayout& p) {
  const int64_t NB = p.num_blocks, BS = p.block_size, H = p.num_heads, D = p.head_size;
  switch (p.kind) {
    case PagedKind::kNHD:
      return {{{'k', 2}, {'b', NB}, {'s', BS}, {'h', H}, {'d', D}}};
    case PagedKind::kHND:
      return {{{'k', 2}, {'b', NB}, {'h', H}, {'s', BS}, {'d', D}}};
    case PagedKind::kFlashInfer:
      return {{{'b', NB}, {'k', 2}, {'s', BS}, {'h', H}, {'d', D}}};
    case PagedKind::kMLA:
      return {{{'b', NB}, {'s', BS}, {'d', D}}};
  }
  return {};
}

Axes chunk_axes(ChunkFormat f, int64_t L, int64_t T, int64_t H, int64_t D) {
  switch (f) {
    case ChunkFormat::kKV_2LTD:
      return {{{'k', 2}, {'l', L}, {'t', T}, {'h', H}, {'d', D}}};
    case ChunkFormat::kKV_T2D:
      return {{{'t', T}, {'k', 2}, {'h', H}, {'d', D}}};
    case ChunkFormat::kKV_2TD:
      return {{{'k', 2}, {'t', T}, {'h', H}, {'d', D}}};
    case ChunkFormat::kKV_MLA:
      return {{{'o', 1}, {'l', L}, {'t', T}, {'d', D}}};
  }
  return {};
}

}  // namespace

void fill_random(uint8_t* data, size_t bytes, uint64_t seed) {
  SplitMix64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng.next();
    std::memcpy(data + i, &v, 8);
  }
  const uint64_t v = rng.next();
  std::memcpy(data + i, &v, bytes - i);
}

PagedLayout KvCase::paged() const {
  return make_paged_layout(kind, num_blocks, block_size, num_heads, head_size, elem_bytes);
}

std::string KvCase::name() const {
  std::ostringstream s;
  s << paged_kind_name(kind) << "_" << chunk_format_name(format) << "_"
    << (direction == CopyDirection::kPagedToChunk ? "gather" : "scatter") << "_e" << elem_bytes
    << "_H" << num_heads << "_D" << head_size << "_L" << num_layers << "_BS" << block_size << "_n"
    << num_tokens << "_T" << tokens_per_chunk;
  if (chunk_misalign) s << "_mis" << chunk_misalign;
  return s.str();
}

std::vector<KvCase> full_kv_matrix() {
  std::vector<KvCase> cases;
  uint64_t seed = 1000;
  const CopyDirection directions[] = {CopyDirection::kPagedToChunk, CopyDirection::kChunkToPaged};
  const int32_t elems[] = {1, 2, 4};
  for (PagedKind kind : {PagedKind::kNHD, PagedKind::kHND, PagedKind::kFlashInfer}) {
    for (ChunkFormat f : {ChunkFormat::kKV_2LTD, ChunkFormat::kKV_T2D, ChunkFormat::kKV_2TD}) {
      for (CopyDirection dir : directions) {
        for (int32_t e : elems) {
          for (int32_t head : {128, 66}) {
            KvCase c;
            c.kind = kind;
            c.format = f;
            c.direction = dir;
            c.elem_bytes = e;
            c.head_size = head;
            c.num_heads = 2;
            c.num_layers = f == ChunkFormat::kKV_2LTD ? 3 : 1;
            c.seed = ++seed;
            cases.push_back(c);
          }
        }
      }
    }
  }
  for (int32_t layers : {3, 1}) {  // whole-chunk and layerwise MLA objects
    for (CopyDirection dir : directions) {
      for (int32_t e : elems) {
        for (int32_t head : {576, 66}) {
          KvCase c;
          c.kind = PagedKind::kMLA;
          c.format = ChunkFormat::kKV_MLA;
          c.direction = dir;
          c.elem_bytes = e;
          c.head_size = head;
          c.num_heads = 1;
          c.num_layers = layers;
          c.seed = ++seed;
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

std::vector<int64_t> make_slots(const KvCase& kc) {
  SplitMix64 rng(kc.seed * 31 + 7);
  const int64_t num_slots = kc.num_blocks * kc.block_size;
  KVTWIN_CHECK_LE(kc.num_tokens, num_slots) << "paged buffer too small for the case";
  const int64_t starts = std::min<int64_t>(kc.block_size, num_slots - kc.num_tokens + 1);
  const int64_t start = static_cast<int64_t>(rng.below(static_cast<uint64_t>(starts)));
  std::vector<int64_t> blocks(static_cast<size_t>(kc.num_blocks));
  for (int64_t b = 0; b < kc.num_blocks; ++b) blocks[b] = b;
  for (int64_t i = kc.num_blocks - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(blocks[i], blocks[static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)))]);
  }
  std::vector<int64_t> slots(static_cast<size_t>(kc.num_tokens));
  for (int64_t i = 0; i < kc.num_tokens; ++i) {
    const int64_t pos = start + i;
    slots[i] = blocks[pos / kc.block_size] * kc.block_size + pos % kc.block_size;
    if (rng.below(100) < kc.skip_percent) slots[i] = -1;
  }
  return slots;
}

HostKvArena::HostKvArena(const KvCase& kc) : case_(kc), paged_(kc.paged()), slots_(make_slots(kc)) {
  size_t offset = kGuardBytes;
  for (int l = 0; l < kc.num_layers; ++l) {
    layer_offsets_.push_back(offset);
    offset = round_up(offset + static_cast<size_t>(paged_.layer_bytes())) + kGuardBytes;
  }
  KvCopyRequest probe;
  probe.num_tokens = kc.num_tokens;
  probe.tokens_per_chunk = kc.tokens_per_chunk;
  for (int64_t c = 0; c < probe.num_chunks(); ++c) {
    chunk_offsets_.push_back(offset + kc.chunk_misalign);
    const ChunkLayout cl =
        chunk_layout_for(paged_, kc.format, kc.num_layers, probe.chunk_tokens(c));
    offset =
        round_up(offset + kc.chunk_misalign + static_cast<size_t>(cl.total_bytes())) + kGuardBytes;
  }
  size_ = offset;
  storage_.resize(size_ + kAlign);
  const auto address = reinterpret_cast<uintptr_t>(storage_.data());
  data_ = storage_.data() + (kAlign - address % kAlign) % kAlign;
  layer_ptrs_ = layer_pointers();
  chunk_ptrs_ = chunk_pointers();
}

int64_t HostKvArena::chunk_bytes(int64_t c) const {
  const int64_t T = case_.tokens_per_chunk;
  const int64_t tokens = std::min(T, case_.num_tokens - c * T);
  return chunk_layout_for(paged_, case_.format, case_.num_layers, tokens).total_bytes();
}

void HostKvArena::reset(uint8_t poison) {
  fill_random(data_, size_, case_.seed);
  if (case_.direction == CopyDirection::kPagedToChunk) {
    for (size_t c = 0; c < chunk_offsets_.size(); ++c) {
      std::memset(data_ + chunk_offsets_[c], poison, static_cast<size_t>(chunk_bytes(c)));
    }
  } else {
    for (size_t off : layer_offsets_) {
      std::memset(data_ + off, poison, static_cast<size_t>(paged_.layer_bytes()));
    }
  }
}

std::vector<uint8_t*> HostKvArena::layer_pointers() {
  std::vector<uint8_t*> v;
  for (size_t off : layer_offsets_) v.push_back(data_ + off);
  return v;
}

std::vector<uint8_t*> HostKvArena::chunk_pointers() {
  std::vector<uint8_t*> v;
  for (size_t off : chunk_offsets_) v.push_back(data_ + off);
  return v;
}

void HostKvArena::restore(const std::vector<uint8_t>& bytes) {
  KVTWIN_CHECK_EQ(bytes.size(), size_);
  std::memcpy(data_, bytes.data(), size_);
}

KvCopyRequest HostKvArena::request() {
  KvCopyRequest r;
  r.paged = paged_;
  r.format = case_.format;
  r.num_layers = case_.num_layers;
  r.layers = layer_ptrs_.data();
  for (uint8_t* p : layer_ptrs_) r.layer_address_bits |= reinterpret_cast<uintptr_t>(p);
  r.slots = slots_.data();
  r.num_tokens = case_.num_tokens;
  r.tokens_per_chunk = case_.tokens_per_chunk;
  r.chunks = chunk_ptrs_.data();
  r.direction = case_.direction;
  return r;
}

void naive_kv_copy(const KvCopyRequest& req) {
  const PagedLayout& p = req.paged;
  const Axes paged = paged_axes(p);
  const int64_t e = p.elem_bytes;
  const int64_t H = p.num_heads, D = p.head_size, BS = p.block_size;
  const int64_t num_kv = p.kind == PagedKind::kMLA ? 1 : 2;
  for (int64_t c = 0; c < req.num_chunks(); ++c) {
    const int64_t T = req.chunk_tokens(c);
    const Axes chunk = chunk_axes(req.format, req.num_layers, T, H, D);
    Coord x;
    for (x.k = 0; x.k < num_kv; ++x.k) {
      for (x.l = 0; x.l < req.num_layers; ++x.l) {
        for (x.t = 0; x.t < T; ++x.t) {
          const int64_t slot = req.slots[c * req.tokens_per_chunk + x.t];
          if (slot < 0) continue;
          x.b = slot / BS;
          x.s = slot % BS;
          for (x.h = 0; x.h < H; ++x.h) {
            for (x.d = 0; x.d < D; ++x.d) {
              uint8_t* pg = req.layers[x.l] + paged.element(x) * e;
              uint8_t* ch = req.chunks[c] + chunk.element(x) * e;
              if (req.direction == CopyDirection::kPagedToChunk) {
                std::memcpy(ch, pg, static_cast<size_t>(e));
              } else {
                std::memcpy(pg, ch, static_cast<size_t>(e));
              }
            }
          }
        }
      }
    }
  }
}

std::string describe_arena_offset(const HostKvArena& arena, size_t offset) {
  std::ostringstream s;
  for (int l = 0; l < arena.kv_case().num_layers; ++l) {
    const size_t begin = arena.layer_offset(l);
    if (offset >= begin && offset < begin + static_cast<size_t>(arena.layer_bytes())) {
      s << "layer " << l << " + " << offset - begin;
      return s.str();
    }
  }
  KvCopyRequest probe;
  probe.num_tokens = arena.kv_case().num_tokens;
  probe.tokens_per_chunk = arena.kv_case().tokens_per_chunk;
  for (int64_t c = 0; c < probe.num_chunks(); ++c) {
    const size_t begin = arena.chunk_offset(c);
    if (offset >= begin && offset < begin + static_cast<size_t>(arena.chunk_bytes(c))) {
      s << "chunk " << c << " + " << offset - begin;
      return s.str();
    }
  }
  s << "guard at " << offset;
  return s.str();
}

std::string compare_with_oracle(HostKvArena& arena, const std::function<void(HostKvArena&)>& oracle,
                                const std::function<void(HostKvArena&)>& implementation) {
  for (uint8_t poison : {uint8_t{0xA5}, uint8_t{0x5A}}) {
    arena.reset(poison);
    oracle(arena);
    const std::vector<uint8_t> expected = arena.snapshot();
    arena.reset(poison);
    implementation(arena);
    const int64_t at = first_difference(expected, arena.snapshot());
    if (at >= 0) {
      std::ostringstream s;
      s << arena.kv_case().name() << ": poison " << int{poison} << ": first difference at "
        << describe_arena_offset(arena, static_cast<size_t>(at)) << " (expected "
        << int{expected[at]} << ", got " << int{arena.data()[at]} << ")";
      return s.str();
    }
  }
  return "";
}

int64_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  KVTWIN_CHECK_EQ(a.size(), b.size());
  const auto m = std::mismatch(a.begin(), a.end(), b.begin());
  return m.first == a.end() ? -1 : m.first - a.begin();
}

}  // namespace kvtwin::cuda::testing
