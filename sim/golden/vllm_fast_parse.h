// The DOM-free parser of the frequent op lines of a "vllm-kv-golden" op-log, in the compact JSON
// the recorder writes (no whitespace, keys without escapes, ASCII strings, non-negative
// integers): allocate_slots and append_tokens (95% of the lines of a decode-heavy log), and
// add_request, get_computed_blocks, free, save_seq, drop_seq, set_computed, new_step and
// prefix_cache_stats (the long token arrays of prompts and computed blocks). Their expectations
// become compact VllmExpect kinds, so the executing thread compares them without a DOM either.
//
// Contract: parse_hot_vllm_op either fills *op and *expect exactly as the DOM path
// (OplogStream + parse_vllm_op + the "expect" element) would, or returns false having changed
// nothing observable (arena, expect arena, interning tables). It returns false for any line it
// does not fully understand — another op, an unknown or repeated key, whitespace, an escape, a
// negative number, a float, an expect of another shape, anything after the closing brace — and
// such a line then goes through the DOM path, which gives the same op or the input error. So
// the fast path can only be faster, never different.
//
// Threading: none (the caller's arenas).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/golden/vllm_ops.h"

namespace kvtwin::sim::golden {

// With want_expect false the expect is validated but not stored (*expect is left kAbsent).
// REQUIRES: kLinePadding readable bytes after the line (LineReader gives io::LineReader::kPadding),
// so numbers are read a word at a time.
inline constexpr size_t kLinePadding = 8;
bool parse_hot_vllm_op(std::string_view line, uint64_t line_no, bool want_expect,
                       VllmOpArena* arena, VllmExpectArena* expects, VllmOp* op,
                       VllmExpect* expect);

}  // namespace kvtwin::sim::golden
