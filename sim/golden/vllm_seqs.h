// VllmSeqs: the named token sequences of a "vllm-kv-golden" replay (def_seq, save_seq, drop_seq,
// and the {"seq": name} parts of add_request prompts), by dense sequence index.
//
// Two things make multi-turn prompts cheap without changing a single output:
//
// 1. Tokens move rather than copy. A sequence saved from a request, or handed to a prompt that
//    starts with the whole of it, *borrows* that request's token ids: it is their first `len`
//    (requests only ever append, so that prefix never changes). When the request is destroyed,
//    release() moves its token vector into the sequence. A conversation's history thus passes
//    from turn to turn instead of being copied twice per turn:
//
//      save_seq c := r1      c borrows r1's ids            (no copy)
//      free r1               c takes r1's vector           (no copy)
//      add_request r2 = [c, new tokens]
//                            r2 is built on c's vector, c borrows it back (no copy)
//
// 2. Block hashes are remembered. A sequence keeps the hashes of its leading full blocks as a
//    request with a given LoRA name and cache salt (and no multimodal inputs) hashes them, for
//    up to kMaxIdentities identities (replaced round-robin); while it borrows a request with no
//    mm inputs, that request's own hashes serve its identity. A prompt starting with the sequence
//    takes them as known block hashes. Exact: a block's hash depends only on the tokens up to its
//    end and on those two keys, and the known prefix equals the sequence's tokens.
//
// Invariants: a sequence borrows at most one request, which is live; release(r) is called
// before request r is destroyed and leaves no sequence borrowing it.
//
// Threading: none.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/vllm/request.h"

namespace kvtwin::sim::golden {

class VllmSeqs {
 public:
  using Requests = std::vector<std::unique_ptr<model::vllm::Request>>;
  // Enough for every LoRA x salt mix the perf op-log gives one system prompt (13 seen).
  static constexpr size_t kMaxIdentities = 32;

  // requests: the replay's requests by dense index (read through this pointer; must outlive
  // this). block_size: the requests' hash block size, 0 when they carry no block hashes.
  VllmSeqs(const Requests* requests, int block_size);

  bool defined(size_t s) const { return s < seqs_.size() && seqs_[s].defined; }
  // REQUIRES: defined(s).
  std::span<const model::vllm::TokenId> tokens(size_t s) const;

  void define(size_t s, std::span<const model::vllm::TokenId> tokens);
  // s := the current token ids of live request r.
  void save(size_t s, size_t r);
  void drop(size_t s);

  // For a prompt that starts with the first `len` tokens of s (REQUIRES: defined, len <= size):
  // the hashes of the full blocks among them as a request with `options` hashes them, as far
  // as known (possibly none).
  std::span<const model::vllm::BlockHash> known_hashes(
      size_t s, size_t len, const model::vllm::RequestOptions& options) const;
  // For a prompt that holds all of s (len == its size): s's own token vector, when s is not empty
  // and does not borrow, and its hashes for `options`' identity if it has some (both moved out:
  // the prompt is built on them; s is undefined until prompt_built, and then borrows the request,
  // whose own hashes serve that identity). Otherwise both empty.
  struct Taken {
    std::vector<model::vllm::TokenId> tokens;
    std::vector<model::vllm::BlockHash> hashes;
  };
  Taken take(size_t s, size_t len, const model::vllm::RequestOptions& options);
  // Request r was just built from a prompt starting with the first `len` tokens of s; `took`:
  // it was built on take()'s vector.
  void prompt_built(size_t s, size_t len, size_t r, bool took);

  // Request r (== *req) is about to be destroyed: the sequences borrowing it take its token ids
  // (moved out of *req) and, with its identity, its block hashes.
  void release(size_t r, model::vllm::Request* req);

 private:
  struct Identity {
    std::optional<std::string> lora_name;
    std::optional<std::string> cache_salt;
  };
  struct Hashes {
    Identity identity;
    std::vector<model::vllm::BlockHash> hashes;  // of the sequence's leading full blocks
  };
  struct Seq {
    bool defined = false;
    std::vector<model::vllm::TokenId> tokens;  // the sequence when not borrowing; else spare
    int32_t borrowed_from = -1;                // request index, or -1
    size_t borrowed_len = 0;
    std::vector<Hashes> hashes;
    size_t next_replaced = 0;
  };

  static Identity identity_of(const model::vllm::Request& req);
  static bool matches(const Identity& id, const model::vllm::RequestOptions& options);
  static bool matches(const model::vllm::Request& req, const model::vllm::RequestOptions& options);
  Seq& at(size_t s);
  void borrow(size_t s, size_t r, size_t len);
  // Makes `hashes` s's hashes for `identity` (when longer than the ones it has).
  void remember(Seq* seq, Identity identity, std::vector<model::vllm::BlockHash> hashes);

  const Requests* requests_;
  int block_size_;
  std::vector<Seq> seqs_;
  std::vector<std::vector<int32_t>> borrowers_;    // by request index; stale entries skipped
  std::vector<std::vector<int32_t>> spare_lists_;  // emptied borrower lists, kept for reuse
};

}  // namespace kvtwin::sim::golden
