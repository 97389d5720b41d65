#include "sim/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>
#include <utility>

#include "model/check.h"

#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define KVTWIN_FIBER_ASAN 1
#endif

namespace kvtwin::sim {
namespace {

// AddressSanitizer must hear of every stack switch, or it reports the other stack's frames as
// overflows; without it these do nothing.
void start_switch(void** fake_stack_save, const void* bottom, size_t size) {
#ifdef KVTWIN_FIBER_ASAN
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}

void finish_switch(void* fake_stack_save, const void** bottom_old, size_t* size_old) {
#ifdef KVTWIN_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
#else
  (void)fake_stack_save, (void)bottom_old, (void)size_old;
#endif
}

// The switch itself. Under AddressSanitizer, libc's swapcontext, not ASan's interceptor: that one
// prints a warning on first use (on stderr, which a successful run keeps empty) and clears the
// target stack's shadow at every switch, forgetting the poison of a suspended body's live frames.
// The annotations tell ASan all it needs; start() unpoisons the reused stack instead.
int switch_context(ucontext_t* from, const ucontext_t* to) {
#ifdef KVTWIN_FIBER_ASAN
  using Fn = int (*)(ucontext_t*, const ucontext_t*);
  static const Fn libc_swapcontext = [] {
    void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    void* f = libc != nullptr ? dlsym(libc, "swapcontext") : nullptr;
    return f != nullptr ? reinterpret_cast<Fn>(f) : &::swapcontext;
  }();
  return libc_swapcontext(from, to);
#else
  return swapcontext(from, to);
#endif
}

size_t page_bytes() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

Fiber::~Fiber() {
  KVTWIN_CHECK(state_ != State::kRunning) << "a fiber destroyed from inside its body";
  if (state_ == State::kSuspended) {
    cancel_ = true;
    try {
      // suspend() throws Cancelled: the body's locals are destroyed on the way out.
      resume();
    } catch (...) {
      // A destructor that threw while unwinding: there is no one left to report it to.
    }
  }
  if (mapping_ != nullptr) {
#ifdef KVTWIN_FIBER_ASAN
    // The last body's final frames left their redzones in the shadow; a later mapping at this
    // address must not inherit them.
    __asan_unpoison_memory_region(stack_, kStackBytes);
#endif
    munmap(mapping_, page_bytes() + kStackBytes);
  }
}

void Fiber::map_stack() {
  const size_t page = page_bytes();
  void* m = mmap(nullptr, page + kStackBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  mprotect(m, page, PROT_NONE);  // the guard page: an overflow faults instead of corrupting
  mapping_ = m;
  stack_ = static_cast<char*>(m) + page;
}

void Fiber::start(std::function<void()> body) {
  KVTWIN_CHECK(state_ == State::kIdle) << "a fiber started while busy";
  if (mapping_ == nullptr) map_stack();
  body_ = std::move(body);
  cancel_ = false;
#ifdef KVTWIN_FIBER_ASAN
  // The last body's final frames (the trampoline's) never returned: their redzones are stale.
  __asan_unpoison_memory_region(stack_, kStackBytes);
#endif
  getcontext(&fiber_);
  fiber_.uc_stack.ss_sp = stack_;
  fiber_.uc_stack.ss_size = kStackBytes;
  fiber_.uc_link = nullptr;  // the trampoline never returns: it switches out
  // makecontext passes int arguments only: the pointer goes in two halves.
  const auto self = reinterpret_cast<uintptr_t>(this);
  makecontext(&fiber_, reinterpret_cast<void (*)()>(&Fiber::trampoline), 2,
              static_cast<unsigned>(self >> 32), static_cast<unsigned>(self & 0xffffffffu));
  switch_in();
}

void Fiber::resume() {
  KVTWIN_CHECK(state_ == State::kSuspended) << "resume() of a fiber that is not suspended";
  switch_in();
}

void Fiber::suspend() {
  KVTWIN_CHECK(state_ == State::kRunning) << "suspend() outside the fiber's body";
  state_ = State::kSuspended;
  switch_out(/*finishing=*/false);
  if (cancel_) throw Cancelled{};
}

void Fiber::switch_in() {
  state_ = State::kRunning;
  start_switch(&caller_fake_, stack_, kStackBytes);
  switch_context(&caller_, &fiber_);
  finish_switch(caller_fake_, nullptr, nullptr);
  // The fiber switched out: state_ is kSuspended, or kIdle when the body ended.
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void Fiber::switch_out(bool finishing) {
  // A finishing fiber passes no fake-stack slot: AddressSanitizer frees its fake frames.
  start_switch(finishing ? nullptr : &fiber_fake_, caller_bottom_, caller_size_);
  switch_context(&fiber_, &caller_);
  finish_switch(fiber_fake_, &caller_bottom_, &caller_size_);
}

void Fiber::trampoline(unsigned hi, unsigned lo) {
  Fiber* f = reinterpret_cast<Fiber*>(static_cast<uintptr_t>(hi) << 32 | lo);
  finish_switch(nullptr, &f->caller_bottom_, &f->caller_size_);
  try {
    f->body_();
  } catch (const Cancelled&) {  // the owner is destroying the fiber
  } catch (...) {
    f->error_ = std::current_exception();
  }
  f->body_ = nullptr;
  f->state_ = State::kIdle;
  f->switch_out(/*finishing=*/true);  // never resumed: the next start() makes a new context
}

}  // namespace kvtwin::sim
