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

#include <cstdint>
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
// Open addressing over (hash, index) pairs; the names themselves are kept in `names`.
class NameIndex {
 public:
  // The index of `name`, adding it if new.
  int32_t intern(std::string_view name);
  const std::string& name(int32_t index) const { return names_[static_cast<size_t>(index)]; }
  size_t size() const { return names_.size(); }

 private:
  struct Slot {
    uint64_t hash = 0;
    int32_t index = -1;
  };
  void grow();
  std::vector<Slot> table_ = std::vector<Slot>(64);
  std::vector<std::string> names_;
};

struct VllmOpArena {
  std::vector<int64_t> tokens;
  std::vector<PromptPart> parts;
  std::vector<AddRequestExtras> extras;
  // Interning (persistent).
  NameIndex requests;
  NameIndex seqs;

  // Clears the per-op storage, keeping the interning tables.
  void clear_op_data() {
    tokens.clear();
    parts.clear();
    extras.clear();
  }
  int32_t intern_request(std::string_view name) { return requests.intern(name); }
  int32_t intern_seq(std::string_view name) { return seqs.intern(name); }
  const std::string& request_name(int32_t index) const { return requests.name(index); }
  const std::string& seq_name(int32_t index) const { return seqs.name(index); }
};

// Parses one op line into *op (arena data appended to *arena). Throws InputError naming the
// file, line and field on an unknown op, a missing or mistyped field.
void parse_vllm_op(const OpFields& fields, VllmOpArena* arena, VllmOp* op);

}  // namespace kvtwin::sim::golden
