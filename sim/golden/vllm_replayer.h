// VllmReplayer: executes "vllm-kv-golden" ops on one KVCacheManager, as the recording harness
// executed them on upstream vLLM, and compares each output with the recorded expectation.
//
// The harness state beside the manager: requests by id (created by add_request, forgotten by
// free with reason finished/aborted; a preempted request stays with num_computed_tokens = 0 and
// num_preemptions + 1), named token sequences (def_seq / save_seq / drop_seq), and per request
// the "pending" computed blocks of its last get_computed_blocks, dropped by allocate_slots.
//
// Comparison: for the frequent ops the outputs are checked against the expected DOM directly;
// any difference (and every other op) goes through the general path, which writes the actual
// output as JSON and compares it field by field (fields of `expect` we do not produce are
// ignored). A difference is reported with its JSON path and both values.
//
// Errors: bad input (unknown request or sequence, a block id out of range, an allocate_slots
// call upstream would reject) throws InputError with the op's file and line.
//
// The model's KVTWIN_CHECKs are preconditions; an op-log can be well formed and still break
// them. So every op's arguments are checked against the request's state BEFORE the model is
// called, with the invariants vLLM's scheduler keeps (and every recorded case keeps):
//   * a request never holds more tokens than config.max_model_len (upstream's input processor
//     rejects longer prompts);
//   * allocate_slots: num_new_computed_tokens comes from the request's pending
//     get_computed_blocks (at most its num_computed_tokens; 0 without "pending"); prefix hits
//     and external tokens only for a request that holds no blocks; computed + new computed +
//     external tokens within max_model_len; the request's num_computed_tokens within the tokens
//     its allocations covered; with a mamba "align" group, no fewer blocks than it holds
//     (upstream asserts it);
//   * cache_blocks: within the request's tokens and its allocated slots;
//   * set_computed / append_tokens: num_computed_tokens non-negative, and never backwards while
//     a mamba "align" group keeps its per-step state blocks.
// Without them the model would abort (or, as upstream, raise from get_new_blocks).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/vllm/kv_cache_manager.h"
#include "model/vllm/request_block_hasher.h"
#include "sim/golden/json.h"
#include "sim/golden/oplog.h"
#include "sim/golden/vllm_ops.h"
#include "sim/golden/vllm_seqs.h"

namespace kvtwin::sim::golden {

// The header's "config", turned into constructor arguments.
struct VllmReplayConfig {
  model::vllm::KVCacheManagerOptions manager;
  bool compute_block_hashes = true;
  model::vllm::HashFn hash_fn = model::vllm::HashFn::kSha256Cbor;
  std::string python_hash_seed = "0";
  bool compact = false;  // expect_level "compact": hash lists as {"n", "last"}
};

// The largest num_gpu_blocks a header may ask for (the recorded cases use at most 8192).
inline constexpr int64_t kMaxGoldenGpuBlocks = int64_t{1} << 24;

// Throws InputError (naming the config field) on a malformed or unsupported config, including
// configs upstream's constructors or lookups would assert on (e.g. a hybrid model whose groups
// all share one spec, a layer in two groups, an unknown dtype).
VllmReplayConfig parse_vllm_config(const OpFields& header);

// A difference between expected and actual output.
struct VllmMismatch {
  std::string field;  // JSON path, e.g. "$.new_block_ids[0][3]"
  std::string expected;
  std::string actual;
};

class VllmReplayer {
 public:
  VllmReplayer(const VllmReplayConfig& config, std::string path);

  // Compares the header's "derived" section with the constructed manager.
  std::optional<VllmMismatch> check_derived(simdjson::dom::element derived);

  // Executes one op.
  void execute(const VllmOp& op, const VllmOpArena& arena);
  // Compares the outputs of the op just executed with expect (the op's "expect" element, or
  // nullopt when the line has none).
  std::optional<VllmMismatch> compare(const VllmOp& op, const VllmOpArena& arena,
                                      std::optional<simdjson::dom::element> expect);
  // True when a compact pre-parsed expectation (VllmExpect) certainly equals the outputs of the
  // op just executed; false means "compare through the DOM" (a difference, or another kind).
  bool expect_equal(const VllmOp& op, const VllmExpect& expect, const VllmExpectArena& data) const;

  const model::vllm::KVCacheManager& manager() const { return manager_; }
  const model::vllm::RequestBlockHasher* hasher() const { return hasher_.get(); }

 private:
  model::vllm::Request& request(const VllmOp& op, const VllmOpArena& arena);
  [[noreturn]] void fail(const VllmOp& op, std::string_view field, const std::string& msg) const;
  void add_request(const VllmOp& op, const VllmOpArena& arena);
  void allocate_slots(const VllmOp& op, const VllmOpArena& arena);
  void free(const VllmOp& op, const VllmOpArena& arena);
  void set_computed(const VllmOp& op, model::vllm::Request& req, std::string_view field,
                    int64_t value);
  void check_allocate_slots(const VllmOp& op, const VllmOpArena& arena,
                            const model::vllm::Request& req,
                            const model::vllm::AllocateSlotsArgs& args);

  // Fast comparison of the frequent ops; true when equal (false: use the general path).
  bool fast_equal(const VllmOp& op, simdjson::dom::element expect) const;
  // Writes the op's actual output as a JSON object.
  void write_actual(const VllmOp& op, const VllmOpArena& arena, JsonWriter* w);

  std::string path_;
  VllmReplayConfig config_;
  std::unique_ptr<model::vllm::RequestBlockHasher> hasher_;
  model::vllm::KVCacheManager manager_;
  std::vector<std::unique_ptr<model::vllm::Request>> requests_;     // by dense index
  std::vector<std::optional<model::vllm::KVCacheBlocks>> pending_;  // by dense index
  // What the replayer knows of each request beyond the model (by dense index): the tokens its
  // successful allocations covered since it last held no blocks, and the num_computed_tokens
  // of its pending get_computed_blocks.
  struct Track {
    int64_t covered_tokens = 0;
    int64_t pending_tokens = 0;
  };
  std::vector<Track> track_;
  std::vector<int> mamba_align_groups_;  // groups with a MambaSpec in "align" mode
  VllmSeqs seqs_;                        // named sequences (def_seq / save_seq / prompt parts)

  // Outputs of the last op.
  size_t num_new_hashes_ = 0;  // add_request / append_tokens
  const model::vllm::Request* last_request_ = nullptr;
  std::optional<model::vllm::KVCacheBlocks> allocated_;  // allocate_slots
  int64_t num_free_blocks_ = 0;                          // free / remove_skipped_blocks
  int64_t saved_len_ = 0;                                // save_seq
  int64_t num_computed_tokens_ = 0;                      // get_computed_blocks
  std::vector<int> common_prefix_;                       // get_num_common_prefix_blocks
  bool reset_ok_ = false;
  std::vector<model::vllm::KVCacheEvent> events_;
  std::optional<model::vllm::PrefixCacheStats> stats_;

  JsonWriter writer_;
  simdjson::dom::parser actual_parser_;
};

}  // namespace kvtwin::sim::golden
