// The ops of a "vllm-kv-golden" op-log (../shared/golden/README.md §4), parsed into a compact
// form that can be executed straight away (streaming replay) or kept in memory and executed
// later (the speed measurement of the model alone).
//
// Variable-length inputs (tokens, prompt parts, request extras) live in a VllmOpArena and ops
// refer to them by index range. Request ids and sequence names are interned to dense indices at
// parse time, so execution never hashes a string: op.req indexes the replayer's request table,
// op.seq its sequence table. The arena's interning tables persist across ops; the rest of the
// arena may be cleared after each executed op when streaming.
//
// Threading: none.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/vllm/request.h"
#include "sim/golden/oplog.h"

namespace kvtwin::sim::golden {

enum class VllmOpKind : uint8_t {
  kAddRequest,
  kDefSeq,
  kSaveSeq,
  kDropSeq,
  kAppendTokens,
  kSetComputed,
  kGetComputedBlocks,
  kAllocateSlots,
  kFree,
  kCacheBlocks,
  kRemoveSkippedBlocks,
  kGetBlockIds,
  kGetNumCommonPrefixBlocks,
  kResetPrefixCache,
  kEvictBlocks,
  kNewStep,
  kTakeEvents,
  kPrefixCacheStats,
  kUsage,
  kFreeQueue,
  kPoolState,
};

std::string_view vllm_op_name(VllmOpKind kind);

// allocate_slots' new_computed_blocks argument.
enum class NewComputedBlocks : uint8_t { kNone, kPending, kEmpty };
enum class FreeReason : uint8_t { kFinished, kAborted, kPreempted };

struct IndexRange {
  uint32_t begin = 0;
  uint32_t end = 0;
  uint32_t size() const { return end - begin; }
};

// One element of add_request's prompt_parts: a named sequence (its first `len` tokens, all when
// len < 0) or literal tokens.
struct PromptPart {
  int32_t seq = -1;
  int64_t len = -1;
  IndexRange tokens;
};

// The rarely present inputs of add_request.
struct AddRequestExtras {
  std::optional<std::string> cache_salt;
  std::optional<model::vllm::LoRARequest> lora;
  std::vector<model::vllm::MultiModalFeatureSpec> mm;
};

struct VllmOp {
  VllmOpKind kind = VllmOpKind::kNewStep;
  NewComputedBlocks new_computed_blocks = NewComputedBlocks::kNone;
  FreeReason reason = FreeReason::kFinished;
  // add_request: skip_reading_prefix_cache; append_tokens: num_computed_tokens given;
  // allocate_slots: delay_cache_blocks; pool_state: hash_map.
  bool flag = false;
  int32_t req = -1;     // dense request index
  int32_t seq = -1;     // dense sequence index
  int32_t extras = -1;  // add_request: index into arena.extras
  uint64_t line = 0;    // line in the op-log (for errors)
  // Numeric arguments, by kind:
  //   add_request: max_tokens | append_tokens: num_computed_tokens | set_computed: value
  //   allocate_slots: num_new_tokens, num_new_computed_tokens, num_lookahead_tokens,
  //                   num_external_computed_tokens, num_encoder_tokens
  //   cache_blocks: num_computed_tokens | remove_skipped_blocks: total_computed_tokens
  int64_t n[5] = {0, 0, 0, 0, 0};
  IndexRange tokens;  // prompt / appended / def_seq tokens; evict_blocks ids
  IndexRange parts;   // add_request prompt_parts
};

// Interns names (request ids, sequence names) to dense indices 0, 1, 2, ... in first-seen order.
// Open addressing (linear probing, at most half full) over slots that hold the name's first 16
// bytes and its length, so looking up a name of at most 16 bytes (every request id of the logs)
// touches one slot and no string. The names live in chunks that never move (chunk k holds
// 64 << k names), so one thread may intern while another reads any name whose index was handed
// to it (through a synchronising queue) before.
class NameIndex {
 public:
  NameIndex() = default;
  NameIndex(const NameIndex&) = delete;
  NameIndex& operator=(const NameIndex&) = delete;

  // The index of `name`, adding it if new.
  int32_t intern(std::string_view name);
  const std::string& name(int32_t index) const;
  size_t size() const { return size_; }

 private:
  // The first 16 bytes of a name, zero-padded, and its length.
  struct Key {
    uint64_t w0 = 0;
    uint64_t w1 = 0;
    uint64_t size = 0;
    bool operator==(const Key&) const = default;
  };
  struct Slot {
    Key key;
    int32_t index = -1;
  };
  static Key key_of(std::string_view name);
  static uint64_t hash_of(const Key& key, std::string_view name);
  int32_t add(std::string_view name, Slot* slot, const Key& key);
  void grow();

  static constexpr int kChunks = 25;  // 64 * (2^25 - 1) names in all
  std::vector<Slot> table_ = std::vector<Slot>(64);
  std::array<std::unique_ptr<std::string[]>, kChunks> chunks_;
  size_t size_ = 0;
};

// The interning tables of one op-log, shared by every arena that holds its ops.
struct VllmNames {
  NameIndex requests;
  NameIndex seqs;
};

struct VllmOpArena {
  std::vector<int64_t> tokens;
  std::vector<PromptPart> parts;
  std::vector<AddRequestExtras> extras;
  // Interning (persistent; shared with the arenas of the log's other op batches).
  std::shared_ptr<VllmNames> names = std::make_shared<VllmNames>();

  // Clears the per-op storage, keeping the interning tables.
  void clear_op_data() {
    tokens.clear();
    parts.clear();
    extras.clear();
  }
  int32_t intern_request(std::string_view name) { return names->requests.intern(name); }
  int32_t intern_seq(std::string_view name) { return names->seqs.intern(name); }
  const std::string& request_name(int32_t index) const { return names->requests.name(index); }
  const std::string& seq_name(int32_t index) const { return names->seqs.name(index); }
};

// An op's recorded expectation in checkable form, parsed without a DOM for the hot ops
// (vllm_fast_parse.h). Whatever is not in a compact kind is kept as JSON text.
struct VllmExpect {
  enum class Kind : uint8_t {
    kAbsent,  // the line has no "expect"
    kText,    // only as JSON text: `text` is the whole line (whole_line) or the expect value
    kNull,    // {"new_block_ids":null}
    kGroups,  // {"new_block_ids":[[ids],...]}: `groups` ranges of VllmExpectArena::groups
    kHashes,  // {"new_block_hashes":{"n":n}} or {...,"last":hex} (append_tokens), the same
              // under "block_hashes" (add_request): `hex` empty when no "last"
    kComputedBlocks,  // {"block_ids":[[ids],...],"num_computed_tokens":n} (get_computed_blocks)
    kCount,           // {"num_free_blocks":n} (free) or {"len":n} (save_seq)
    kStats,  // {"stats":{"reset":b,"requests":n,...,"preempted_hits":n}} (prefix_cache_stats):
             // n is reset (0 or 1), `counts` the six counts in VllmExpectArena::ids
  };
  Kind kind = Kind::kAbsent;
  bool whole_line = false;
  int64_t n = 0;
  IndexRange groups;
  IndexRange counts;  // kStats: in VllmExpectArena::ids
  IndexRange hex;     // in VllmExpectArena::text
  IndexRange text;    // in VllmExpectArena::text: the expect value (or whole line) as JSON
};

// Storage of VllmExpect data for a batch of ops. Every text range is followed by at least
// kPadding readable bytes once the batch is sealed, so it can be parsed in place.
struct VllmExpectArena {
  std::vector<IndexRange> groups;  // ranges of ids
  std::vector<int64_t> ids;
  std::string text;
  void clear() {
    groups.clear();
    ids.clear();
    text.clear();
  }
};

// Parses one op line into *op (arena data appended to *arena). Throws InputError naming the
// file, line and field on an unknown op, a missing or mistyped field.
void parse_vllm_op(const OpFields& fields, VllmOpArena* arena, VllmOp* op);

}  // namespace kvtwin::sim::golden
