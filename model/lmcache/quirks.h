// Quirks: the LMCache f4261ef6 defects the model reproduces by default, each with a switch that
// applies the later upstream fix (or, where upstream has not fixed it, the obvious one), so a
// planner can ask "what if this were fixed". `true` = reproduce f4261ef6 (the golden behaviour).
//
// Every switch below is documented where it acts; model/lmcache/README.md lists them with the
// evidence (golden README §7, research/lmcache.md).
#pragma once

namespace kvtwin::model::lmcache {

struct Quirks {
  // LocalDiskBackend.submit_put_task only skips keys whose write is in flight, not keys already
  // on disk: a re-put reserves the size again (and `usage` grows again when it is written), but
  // eviction releases it once -> permanent capacity loss (README §7.4). Fix: skip the re-put of a
  // resident key.
  bool disk_reput_double_accounting = true;
  // LocalDiskBackend.remove (external remove) lowers `usage` but never the reservation
  // `current_cache_size` (README §7.4). Fix: release the reservation too.
  bool disk_remove_keeps_reservation = true;
  // The disk writer adds len(byte_array) (the unaligned size of an ordinary object) to `usage`
  // while eviction and remove subtract the physical (4 KiB aligned) size, so `usage` drifts
  // negative for partial chunks. No upstream fix as of 2026-04; fix: count physical bytes both
  // ways.
  bool disk_usage_counts_unaligned_writes = true;
  // A disk put rejected for lack of evictable space leaves its key in the in-flight list forever,
  // so that key is never written to disk again (README §7.6). Fix: drop it from the list.
  bool disk_rejected_put_stays_in_flight = true;
  // A missing chunk file: read_file pops the index entry, then load_bytes_from_disk reads the
  // entry again -> KeyError out of retrieve; the reservation is never released (README §7.7).
  // Fix: the read is a miss (None), the entry's reservation and usage are released.
  bool disk_missing_file_raises_key_error = true;
  // LFUCachePolicy.update_on_put resets a re-put key's frequency without removing it from its old
  // bucket, and the disk tier registers a key with the policy at submit time, before it is in the
  // index; a later eviction scan meets such a key and raises KeyError (README §7.8). Fix: move the
  // key between buckets and skip keys that are not in the tier.
  bool lfu_stale_bucket_entries = true;
  // LMCacheEngine._process_tokens_internal after a failed get keeps the *largest* failing start
  // over locations, drops the chunk ending exactly at it (`end < failed_start`) while its mask bits
  // stay set, and never ref_count_down()s the dropped objects (README §7.9; fixed upstream by
  // #2544, 2026-04-16). Fix: smallest failing start, `end <= start`, release dropped objects.
  bool partial_retrieve_bookkeeping = true;
  // LocalCPUBackend.batched_allocate (layerwise) evicts all layers of a candidate chunk and frees
  // them without checking the other layers' pins/references (upstream FIXME; fixed after Feb 2026).
  // Fix: a chunk is a candidate only if every layer object is evictable.
  bool layerwise_eviction_ignores_other_layers = true;
  // LMCacheEngine.lookup(pin=True) without a lookup_id takes the pins, then raises AssertionError:
  // the pins are never released (README §7.15). Fix: check before pinning.
  bool pinned_lookup_without_id_leaks_pins = true;
  // retrieve_layer with zero hit chunks references an undefined GPU consumer in its last step
  // (UnboundLocalError). Fix: the last step yields the all-False mask.
  bool retrieve_layer_zero_hits_unbound = true;

  // Async loading (enable_async_loading, see async_prefetch.h). The async lookup pins CPU objects
  // (batched_async_contains with pin=True) but records no lookup_pins, so lookup_unpin releases
  // nothing and the pins stay forever; the prefetched objects are released only by a retrieve,
  // so a lookup whose request never retrieves (its hit not beyond vLLM's own prefix, below
  // min_retrieve_tokens, timed out, aborted) keeps its event and objects forever; the scheduler
  // does not cancel a timed-out lookup; and cleanup_memory_objs fails on (key, obj) tuples.
  // Fixed upstream by #2559 (e2adfbf7, 2026-03-07). Fix: every prefetched object is released
  // exactly once (and CPU objects unpinned) by the retrieve, by lookup_unpin after the request's
  // first scheduled step, or by the cleanup of a timed-out / aborted lookup.
  bool async_loading_leaks = true;
  // LocalDiskBackend pins a disk entry in batched_async_contains (pin=True) and again in
  // batched_get_non_blocking, and the load unpins once: every disk chunk an async lookup prefetched
  // stays pinned, never evictable (unchanged on dev as of 2026-04). Fix: the load releases both.
  bool async_disk_prefetch_pins_twice = true;
  // Disk and Redis prefetches allocate their CPU buffers with busy_loop=True: with nothing
  // evictable they sleep 0.1 s and retry, holding the serializer (and the disk lock), until other
  // requests free memory; the lookup may time out meanwhile (#1780). Fix (dev b7d025a0,
  // busy_loop=False): the tier returns the chunks it could allocate, a shorter prefix.
  bool async_prefetch_busy_waits_for_memory = true;
  // prefetch_all_done_callback: when a tier returned fewer chunks than its contains count and a
  // later tier returned objects, it calls ref_count_down on (key, obj) tuples -> AttributeError in
  // the callback: no answer reaches the scheduler (its lookup times out after lookup_timeout_ms
  // and the request recomputes) and the event keeps every object. Unfixed on dev (2026-04). Fix:
  // release the later tiers' objects and answer the contiguous length.
  bool async_done_callback_tuple_error = true;
  // RedisConnector._batched_get_non_blocking (async prefetches and layerwise loads) drops the
  // chunks it could not read and the caller zips the survivors with the leading keys: after a
  // missing chunk, the next chunk's KV is loaded in its place (wrong data, silently). Unfixed on
  // dev (2026-04). Fix: keep the leading run of read chunks and release the rest (a layerwise
  // load then ends at the miss).
  bool remote_prefetch_drops_missing_chunks = true;
  // build_connector_meta asserts that a request resumed after preemption has num_computed_tokens
  // == max(lmcache_cached_tokens, vllm_cached_tokens). That is false when LMCache's hit was not
  // loaded (below min_retrieve_tokens: the scheduler got 0 external tokens) and on a whole-prompt
  // hit beyond vLLM's (the last token is recomputed): the AssertionError ends the engine. Later
  // upstream (f1e0db7d) subtracts one for the whole-prompt hit only. Fix: when the load spec
  // cannot load, expect vLLM's own hit; else subtract one for the whole-prompt hit.
  bool resumed_request_check_ignores_skipped_loads = true;
  // RemoteMetadata asserts that every object shape is 4-D, inside the Redis writer (before any
  // SET): the layerwise objects ([T, 2, H*D], MLA [T, D]) fail there, the executor swallows the
  // error, and no layerwise chunk ever reaches the remote tier. Fixed upstream by #2751
  // (575a7456, 2026-04-17). Fix: shapes of rank < 4 are padded with trailing zeros on write and
  // the zeros stripped on read.
  bool remote_metadata_requires_4d_shapes = true;
  // build_connector_meta extends a running request's tracker with
  // all_token_ids[num_computed_tokens : num_computed_tokens + num_scheduled]. After a failed KV
  // load that vLLM recomputes (kv_load_failure_policy = "recompute"), num_computed_tokens went
  // back: the recomputed tokens are appended a second time, and the tracker's later metadata
  // hashes (and saves under) a token sequence the request does not have; when those tokens outrun
  // the request's blocks, the worker's slot-mapping assertion raises (a failed store here, where
  // upstream's engine stops). Fix: the tracker is cut back to num_computed_tokens first.
  bool tracker_reappends_recomputed_tokens = true;
  // HealthMonitor's "local_cpu" fallback turns the CPU hot cache on while the remote tier is
  // bypassed. Recovering, it restores use_hot (False when local_cpu is off) and only then calls
  // LocalCPUBackend.clear(), which returns at once when use_hot is False: what the hot cache took
  // in stays in the pool, found by lookups, and with use_hot False nothing ever evicts it. Fix:
  // clear while the hot cache is still on, then restore use_hot.
  bool health_recovery_clear_is_noop = true;

  static Quirks upstream() { return Quirks{}; }
  static Quirks all_fixed() {
    Quirks q;
    q.disk_reput_double_accounting = false;
    q.disk_remove_keeps_reservation = false;
    q.disk_usage_counts_unaligned_writes = false;
    q.disk_rejected_put_stays_in_flight = false;
    q.disk_missing_file_raises_key_error = false;
    q.lfu_stale_bucket_entries = false;
    q.partial_retrieve_bookkeeping = false;
    q.layerwise_eviction_ignores_other_layers = false;
    q.pinned_lookup_without_id_leaks_pins = false;
    q.retrieve_layer_zero_hits_unbound = false;
    q.async_loading_leaks = false;
    q.async_disk_prefetch_pins_twice = false;
    q.async_prefetch_busy_waits_for_memory = false;
    q.async_done_callback_tuple_error = false;
    q.remote_prefetch_drops_missing_chunks = false;
    q.resumed_request_check_ignores_skipped_loads = false;
    q.remote_metadata_requires_4d_shapes = false;
    q.tracker_reappends_recomputed_tokens = false;
    q.health_recovery_clear_is_noop = false;
    return q;
  }
};

}  // namespace kvtwin::model::lmcache
