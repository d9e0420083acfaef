// Lifetimes of the native PyTorch observer's state (torch_observer.cpp), apart from it so that a test without
// torch (capture/tests/observer_exit.rs) runs the very same code.
//
// The observer's callbacks keep firing while the process exits: c10d's watchdog and NCCL's threads free tensors
// and query events while the main thread runs static destructors, and a thread frees tensors while its
// thread-locals are destroyed. Observer state destroyed by then is written after its memory was freed, which
// corrupts the heap (two-GPU NCCL programs died of SIGSEGV or SIGABRT at exit, issue 14). So:
// - state shared by all threads is made once and never destroyed (`forever`);
// - each thread's state is freed at that thread's exit behind a flag that stays readable until the thread is
//   gone (`this_thread`), after which the thread's callbacks get no state and record nothing.
#pragma once

namespace streamtrace_observer {

// The one `T` of the process, made at first use and never destroyed.
template <typename T>
T& forever() {
  static T* value = new T();
  return *value;
}

// A thread's state and whether the thread has begun to exit: trivially destructible, so it stays readable while
// the thread's other thread-locals are destroyed.
template <typename State>
struct ThreadSlot {
  State* state;
  bool gone;
};

template <typename State>
inline thread_local ThreadSlot<State> thread_slot{nullptr, false};

// Frees the thread's state when the thread exits, and marks it gone.
template <typename State>
struct ThreadSlotOwner {
  bool armed = false;
  ~ThreadSlotOwner() {
    thread_slot<State>.gone = true;
    delete thread_slot<State>.state;
    thread_slot<State>.state = nullptr;
  }
};

template <typename State>
inline thread_local ThreadSlotOwner<State> thread_slot_owner;

// The calling thread's state, made at its first call; null once the thread has begun to exit.
template <typename State>
State* this_thread() {
  ThreadSlot<State>& slot = thread_slot<State>;
  if (slot.state != nullptr || slot.gone) {
    return slot.state;
  }
  thread_slot_owner<State>.armed = true;  // constructs the owner, whose destructor runs at this thread's exit
  slot.state = new State();
  return slot.state;
}

}  // namespace streamtrace_observer
