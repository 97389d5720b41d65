#include "sim/golden/vllm_seqs.h"

#include <algorithm>

#include "model/check.h"

namespace kvtwin::sim::golden {

namespace mv = model::vllm;

VllmSeqs::VllmSeqs(const Requests* requests, int block_size)
    : requests_(requests), block_size_(block_size) {
  KVTWIN_CHECK(block_size >= 0) << "block size " << block_size;
}

VllmSeqs::Seq& VllmSeqs::at(size_t s) {
  if (s >= seqs_.size()) seqs_.resize(s + 1);
  return seqs_[s];
}

std::span<const mv::TokenId> VllmSeqs::tokens(size_t s) const {
  KVTWIN_CHECK(defined(s)) << "sequence " << s << " is not defined";
  const Seq& seq = seqs_[s];
  if (seq.borrowed_from < 0) return seq.tokens;
  return (*requests_)[static_cast<size_t>(seq.borrowed_from)]->all_token_ids().first(
      seq.borrowed_len);
}

void VllmSeqs::define(size_t s, std::span<const mv::TokenId> tokens) {
  Seq& seq = at(s);
  seq.defined = true;
  seq.borrowed_from = -1;
  seq.tokens.assign(tokens.begin(), tokens.end());
  seq.hashes.clear();
}

void VllmSeqs::save(size_t s, size_t r) {
  Seq& seq = at(s);
  seq.defined = true;
  seq.hashes.clear();  // new tokens; while borrowing, r's own hashes serve its identity
  borrow(s, r, static_cast<size_t>((*requests_)[r]->num_tokens()));
}

void VllmSeqs::drop(size_t s) {
  Seq& seq = at(s);
  seq.defined = false;
  seq.borrowed_from = -1;
}

void VllmSeqs::borrow(size_t s, size_t r, size_t len) {
  Seq& seq = seqs_[s];
  if (seq.borrowed_from != static_cast<int32_t>(r)) {
    seq.borrowed_from = static_cast<int32_t>(r);
    if (r >= borrowers_.size()) borrowers_.resize(r + 1);
    std::vector<int32_t>& list = borrowers_[r];
    if (list.capacity() == 0 && !spare_lists_.empty()) {
      list = std::move(spare_lists_.back());
      spare_lists_.pop_back();
    }
    list.push_back(static_cast<int32_t>(s));
  }
  seq.borrowed_len = len;
}

VllmSeqs::Identity VllmSeqs::identity_of(const mv::Request& req) {
  Identity id;
  if (req.lora_request()) id.lora_name = req.lora_request()->lora_name;
  id.cache_salt = req.cache_salt();
  return id;
}

bool VllmSeqs::matches(const Identity& id, const mv::RequestOptions& options) {
  const auto& lora = options.lora_request;
  if (id.lora_name.has_value() != lora.has_value()) return false;
  if (lora && *id.lora_name != lora->lora_name) return false;
  return id.cache_salt == options.cache_salt;
}

bool VllmSeqs::matches(const mv::Request& req, const mv::RequestOptions& options) {
  if (!req.mm_features().empty()) return false;
  if (req.lora_request().has_value() != options.lora_request.has_value()) return false;
  if (req.lora_request() && req.lora_request()->lora_name != options.lora_request->lora_name)
    return false;
  return req.cache_salt() == options.cache_salt;
}

std::span<const mv::BlockHash> VllmSeqs::known_hashes(size_t s, size_t len,
                                                      const mv::RequestOptions& options) const {
  if (block_size_ == 0 || !options.mm_features.empty()) return {};
  const Seq& seq = seqs_[s];
  size_t blocks = len / static_cast<size_t>(block_size_);
  if (seq.borrowed_from >= 0) {
    const mv::Request& req = *(*requests_)[static_cast<size_t>(seq.borrowed_from)];
    if (matches(req, options)) {
      std::span<const mv::BlockHash> h = req.block_hashes();
      return h.first(std::min(blocks, h.size()));
    }
  }
  for (const Hashes& h : seq.hashes)
    if (matches(h.identity, options))
      return std::span<const mv::BlockHash>(h.hashes).first(std::min(blocks, h.hashes.size()));
  return {};
}

VllmSeqs::Taken VllmSeqs::take(size_t s, size_t len, const mv::RequestOptions& options) {
  Seq& seq = seqs_[s];
  Taken out;
  if (seq.borrowed_from >= 0 || len == 0 || len != seq.tokens.size()) return out;
  seq.defined = false;  // until prompt_built
  out.tokens = std::move(seq.tokens);
  if (block_size_ == 0 || !options.mm_features.empty()) return out;
  for (size_t i = 0; i < seq.hashes.size(); ++i) {
    if (!matches(seq.hashes[i].identity, options)) continue;
    out.hashes = std::move(seq.hashes[i].hashes);
    seq.hashes.erase(seq.hashes.begin() + static_cast<ptrdiff_t>(i));
    seq.next_replaced = 0;
    break;
  }
  return out;
}

void VllmSeqs::prompt_built(size_t s, size_t len, size_t r, bool took) {
  Seq& seq = seqs_[s];
  const mv::Request& req = *(*requests_)[r];
  if (took) {
    seq.defined = true;
    borrow(s, r, len);
    return;
  }
  if (block_size_ == 0 || !req.mm_features().empty()) return;
  size_t blocks = std::min(len / static_cast<size_t>(block_size_), req.block_hashes().size());
  mv::RequestOptions options;
  options.lora_request = req.lora_request();
  options.cache_salt = req.cache_salt();
  if (known_hashes(s, len, options).size() >= blocks) return;
  remember(&seq, identity_of(req),
           std::vector<mv::BlockHash>(req.block_hashes().begin(),
                                      req.block_hashes().begin() + static_cast<ptrdiff_t>(blocks)));
}

void VllmSeqs::remember(Seq* seq, Identity identity, std::vector<mv::BlockHash> hashes) {
  if (hashes.empty()) return;
  Hashes* slot = nullptr;
  for (Hashes& h : seq->hashes)
    if (h.identity.lora_name == identity.lora_name && h.identity.cache_salt == identity.cache_salt)
      slot = &h;
  if (slot == nullptr) {
    if (seq->hashes.size() < kMaxIdentities) {
      slot = &seq->hashes.emplace_back();
    } else {
      slot = &seq->hashes[seq->next_replaced];
      seq->next_replaced = (seq->next_replaced + 1) % kMaxIdentities;
    }
    slot->identity = std::move(identity);
    slot->hashes.clear();
  }
  if (slot->hashes.size() < hashes.size()) slot->hashes = std::move(hashes);
}

void VllmSeqs::release(size_t r, mv::Request* req) {
  if (r >= borrowers_.size()) return;
  std::vector<int32_t>& list = borrowers_[r];
  // Stale entries (sequences that moved on) are skipped; the last live one takes the vectors.
  int32_t taker = -1;
  for (int32_t s : list) {
    Seq& seq = seqs_[static_cast<size_t>(s)];
    if (seq.borrowed_from != static_cast<int32_t>(r) || s == taker) continue;
    if (taker >= 0) {
      Seq& other = seqs_[static_cast<size_t>(taker)];
      std::span<const mv::TokenId> ids = req->all_token_ids().first(other.borrowed_len);
      other.tokens.assign(ids.begin(), ids.end());
      other.borrowed_from = -1;
      if (block_size_ > 0 && req->mm_features().empty()) {
        size_t blocks = std::min(other.borrowed_len / static_cast<size_t>(block_size_),
                                 req->block_hashes().size());
        remember(&other, identity_of(*req),
                 std::vector<mv::BlockHash>(
                     req->block_hashes().begin(),
                     req->block_hashes().begin() + static_cast<ptrdiff_t>(blocks)));
      }
    }
    taker = s;
  }
  list.clear();
  spare_lists_.push_back(std::move(list));  // its buffer serves a later request's borrowers
  if (taker < 0) return;
  Seq& seq = seqs_[static_cast<size_t>(taker)];
  seq.borrowed_from = -1;
  seq.tokens = std::move(*req).release_token_ids();
  seq.tokens.resize(seq.borrowed_len);
  if (block_size_ > 0 && req->mm_features().empty()) {
    std::vector<mv::BlockHash> hashes = std::move(*req).release_block_hashes();
    hashes.resize(std::min(hashes.size(), seq.borrowed_len / static_cast<size_t>(block_size_)));
    remember(&seq, identity_of(*req), std::move(hashes));
  }
}

}  // namespace kvtwin::sim::golden
