// Fiber: a function run on a stack of its own, which can pause itself and be continued later.
//
// Upstream code that blocks a thread in a loop (LMCache's allocator sleeping 0.1 s at a time
// until another thread frees memory) is modelled by code that calls down a deep, synchronous
// stack. Where such a call must wait in simulated time, it runs on a Fiber: the wait suspends
// the fiber, the simulator's event loop goes on (other events may free the memory), and an event
// resumes the fiber where it stopped. Only one stack runs at a time, so runs stay deterministic.
//
//   start(body)   runs body on the fiber's stack until it returns or calls suspend()
//   suspend()     from inside body: back to whoever called start() or resume()
//   resume()      continues a suspended body until it returns or suspends again
//   An exception that leaves body is rethrown by the start() or resume() that was running it.
//   Destroying a suspended fiber unwinds its body: suspend() throws Fiber::Cancelled (not a
//   std::exception; code between may catch (...) only to rethrow it), so the body's locals are
//   destroyed. An owner must therefore destroy its fiber before what the body's locals refer to.
//
// The stack (kStackBytes, with an inaccessible guard page below it) is mapped at the first
// start() and reused. Works under AddressSanitizer (the switches are announced to it).
//
// Threading: a fiber belongs to the thread that starts it; it must never be resumed from another.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>

#include <ucontext.h>

namespace kvtwin::sim {

class Fiber {
 public:
  struct Cancelled {};  // thrown by suspend() when a suspended fiber is destroyed

  static constexpr size_t kStackBytes = size_t{4} << 20;  // touched pages only use memory

  Fiber() = default;
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // REQUIRES: !busy().
  void start(std::function<void()> body);
  // REQUIRES: suspended() and the caller is not inside the body.
  void resume();
  // REQUIRES: inside().
  void suspend();

  bool suspended() const { return state_ == State::kSuspended; }
  bool inside() const { return state_ == State::kRunning; }
  bool busy() const { return state_ != State::kIdle; }  // started, not finished

 private:
  enum class State { kIdle, kRunning, kSuspended };
  static void trampoline(unsigned hi, unsigned lo);
  void switch_in();                 // caller -> fiber; returns when the fiber switches out
  void switch_out(bool finishing);  // fiber -> caller; returns when resumed (unless finishing)
  void map_stack();

  State state_ = State::kIdle;
  bool cancel_ = false;
  std::function<void()> body_;
  std::exception_ptr error_;
  ucontext_t caller_{};
  ucontext_t fiber_{};
  void* mapping_ = nullptr;  // guard page + stack
  char* stack_ = nullptr;    // lowest usable address
  // AddressSanitizer's view of the two stacks (unused without it).
  const void* caller_bottom_ = nullptr;
  size_t caller_size_ = 0;
  void* caller_fake_ = nullptr;
  void* fiber_fake_ = nullptr;
};

}  // namespace kvtwin::sim
