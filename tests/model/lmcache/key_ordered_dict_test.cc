// KeyOrderedDict against a plain reference (a vector of (key, value) in dict order): random
// set / pop / move_to_end / clear sequences over a small key universe, so that keys come and go
// and probe runs wrap around, with every lookup and the full order compared after each op.
#include "model/lmcache/key_ordered_dict.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace kvtwin::model::lmcache {
namespace {

struct Reference {
  std::vector<std::pair<int, uint32_t>> items;  // oldest first
  auto find(int k) {
    return std::find_if(items.begin(), items.end(), [k](const auto& p) { return p.first == k; });
  }
};

RC_GTEST_PROP(KeyOrderedDictProperties, BehavesAsAnInsertionOrderedDict, ()) {
  KeyScopeRegistry registry;
  const KeyScope* scope = registry.intern("m", 1, 0, KvDtype::kHalf, {});
  const int universe = *rc::gen::inRange(1, 200);
  auto key = [&](int i) { return CacheEngineKey{scope, ChunkHash::from_int(i), -1}; };
  KeyOrderedDict dict;
  Reference ref;
  const int n = *rc::gen::inRange(1, 600);
  for (int step = 0; step < n; ++step) {
    const int op = *rc::gen::inRange(0, 100);
    const int k = *rc::gen::inRange(0, universe);
    const uint32_t v = static_cast<uint32_t>(step);
    if (op < 45) {
      dict.set(key(k), v);
      auto it = ref.find(k);
      if (it != ref.items.end()) {
        it->second = v;
      } else {
        ref.items.emplace_back(k, v);
      }
    } else if (op < 75) {
      auto got = dict.pop(key(k));
      auto it = ref.find(k);
      RC_ASSERT(got.has_value() == (it != ref.items.end()));
      if (got) {
        RC_ASSERT(*got == it->second);
        ref.items.erase(it);
      }
    } else if (op < 97) {
      const bool last = op % 2 == 0;
      auto it = ref.find(k);
      RC_ASSERT(dict.move_to_end(key(k), last) == (it != ref.items.end()));
      if (it != ref.items.end()) {
        auto item = *it;
        ref.items.erase(it);
        ref.items.insert(last ? ref.items.end() : ref.items.begin(), item);
      }
    } else {
      dict.clear();
      ref.items.clear();
    }
    RC_ASSERT(dict.size() == ref.items.size());
    for (int q = 0; q < universe; ++q) {
      auto it = ref.find(q);
      const uint32_t* got = dict.find(key(q));
      RC_ASSERT((got != nullptr) == (it != ref.items.end()));
      RC_ASSERT(dict.contains(key(q)) == (it != ref.items.end()));
      if (got) RC_ASSERT(*got == it->second);
    }
    size_t i = 0;
    for (uint32_t node = dict.first(); node != KeyOrderedDict::kEnd; node = dict.next(node), ++i) {
      RC_ASSERT(i < ref.items.size());
      RC_ASSERT(dict.key_at(node) == key(ref.items[i].first));
      RC_ASSERT(dict.value_at(node) == ref.items[i].second);
    }
    RC_ASSERT(i == ref.items.size());
  }
}

}  // namespace
}  // namespace kvtwin::model::lmcache
