// VllmParseStage: the parsing half of the streaming vLLM golden replay, on a thread of its own.
//
// The stage reads an op-log through its OplogStream (LineReader → lines → footer digest), parses
// each op (hot lines without a DOM, vllm_fast_parse.h; every other line through the DOM and
// parse_vllm_op) and hands the ops over in order, in batches, to the thread that executes and
// compares them. On two cores the slowest of the stages (inflate, parse, execute) sets the pace
// instead of their sum.
//
// Errors keep their order: an input error while parsing ends the batch; the consumer executes the
// ops before it and then rethrows it (VllmOpBatch::error), exactly where the one-thread loop
// would have thrown it.
//
// Memory: a fixed pool of kBatches batches of at most kBatchOps ops circulates between the two
// threads, so memory stays bounded whatever the log's length.
//
// Threading: the stage owns the stream while it lives; next() and release() are for one consumer
// thread. The batches' arenas share one VllmNames, interned by the stage and read by the consumer
// only for indices of ops it was handed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "sim/golden/oplog.h"
#include "sim/golden/vllm_ops.h"

namespace kvtwin::sim::golden {

struct VllmOpBatch {
  VllmOpArena arena;
  std::vector<VllmOp> ops;
  std::vector<VllmExpect> expects;  // one per op (all kAbsent when expectations are not wanted)
  VllmExpectArena expect_data;
  std::exception_ptr error;  // raised after `ops`: the input error that ended the parse
  bool last = false;         // no batch follows (the footer was verified, or `error`)
};

class VllmParseStage {
 public:
  static constexpr size_t kBatchOps = 4096;
  static constexpr size_t kBatches = 4;

  // Starts parsing at once. has_index: the ops carry "i" (checked against their position);
  // want_expect: keep each op's expectation for comparison.
  VllmParseStage(OplogStream& stream, bool has_index, bool want_expect);
  ~VllmParseStage();  // stops the parse (wherever it is) and joins
  VllmParseStage(const VllmParseStage&) = delete;
  VllmParseStage& operator=(const VllmParseStage&) = delete;

  // The next batch in order (blocks until parsed). The caller hands it back with release()
  // before asking for the next one; no call after a batch with `last`.
  VllmOpBatch* next();
  void release(VllmOpBatch* batch);

  // The names of the log's requests and sequences.
  const std::shared_ptr<VllmNames>& names() const { return names_; }

 private:
  void run();
  void fill(VllmOpBatch* b);

  OplogStream& stream_;
  const bool has_index_;
  const bool want_expect_;
  uint64_t index_ = 0;  // of the next op
  std::shared_ptr<VllmNames> names_ = std::make_shared<VllmNames>();
  std::vector<std::unique_ptr<VllmOpBatch>> pool_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<VllmOpBatch*> free_;
  std::deque<VllmOpBatch*> ready_;
  bool stop_ = false;
  std::thread worker_;  // last: starts after everything above exists
};

}  // namespace kvtwin::sim::golden
