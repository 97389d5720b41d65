#include "sim/golden/vllm_parse_stage.h"

#include "sim/golden/vllm_fast_parse.h"
#include "sim/io/line_reader.h"

namespace kvtwin::sim::golden {

VllmParseStage::VllmParseStage(OplogStream& stream, bool has_index, bool want_expect)
    : stream_(stream), has_index_(has_index), want_expect_(want_expect) {
  for (size_t i = 0; i < kBatches; ++i) {
    pool_.push_back(std::make_unique<VllmOpBatch>());
    pool_.back()->arena.names = names_;
    free_.push_back(pool_.back().get());
  }
  worker_ = std::thread([this] { run(); });
}

VllmParseStage::~VllmParseStage() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

VllmOpBatch* VllmParseStage::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty(); });
  VllmOpBatch* b = ready_.front();
  ready_.pop_front();
  return b;
}

void VllmParseStage::release(VllmOpBatch* batch) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(batch);
  }
  cv_.notify_all();
}

void VllmParseStage::run() {
  for (;;) {
    VllmOpBatch* b;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !free_.empty() || stop_; });
      if (stop_) return;
      b = free_.front();
      free_.pop_front();
    }
    fill(b);
    bool last = b->last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_.push_back(b);
    }
    cv_.notify_all();
    if (last) return;
  }
}

void VllmParseStage::fill(VllmOpBatch* b) {
  b->arena.clear_op_data();
  b->ops.clear();
  b->expects.clear();
  b->expect_data.clear();
  b->error = nullptr;
  b->last = false;
  try {
    std::string_view line;
    uint64_t line_no;
    VllmOp op;
    VllmExpect expect;
    OpFields f(nullptr, 0, {});
    while (b->ops.size() < kBatchOps) {
      stream_.next_line(&line, &line_no);
      if (!has_index_ && parse_hot_vllm_op(line, line_no, want_expect_, &b->arena, &b->expect_data,
                                           &op, &expect)) {
        stream_.take_op(line, vllm_op_name(op.kind));
      } else {
        if (!stream_.parse_line(line, line_no, &f)) {
          b->last = true;
          break;
        }
        if (has_index_) check_op_index(f, index_);
        parse_vllm_op(f, &b->arena, &op);
        expect = VllmExpect{};
        if (want_expect_ && f.has("expect")) {  // the consumer re-parses the line when needed
          expect.kind = VllmExpect::Kind::kText;
          expect.whole_line = true;
          expect.text.begin = static_cast<uint32_t>(b->expect_data.text.size());
          b->expect_data.text.append(line);
          expect.text.end = static_cast<uint32_t>(b->expect_data.text.size());
        }
      }
      b->ops.push_back(op);
      b->expects.push_back(expect);
      ++index_;
    }
  } catch (...) {
    b->error = std::current_exception();
    b->last = true;
  }
  b->expect_data.text.append(io::LineReader::kPadding, ' ');  // parse every range in place
}

}  // namespace kvtwin::sim::golden
