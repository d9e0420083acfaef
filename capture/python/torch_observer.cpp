// streamtrace's native PyTorch observer (tier T2), built by the bootstrap (sitecustomize.py) against the
// program's own libtorch the first time a program imports it, and loaded into that program.
//
// It does in C++ what the bootstrap's Python dispatch mode does in Python, at a fraction of the cost: a global
// RecordFunction callback sees every top-level dispatcher op on every thread, takes the extents of the CUDA
// tensors it reads when it starts and of those it writes when it returns (the op schema says which; an op that
// resizes its output moves it), and the Python line that called it; the caching allocator's trace tracker
// reports each block it hands out and takes back. CPU tensors in pinned memory that an op touches without any
// CUDA tensor become host accesses, and non-contiguous tensors are written as strided views. Records go to the
// capture library through the entry points the bootstrap passes in, in order with the CUDA calls each op makes.
// The ops an op runs itself are not observed: their callbacks only count them (so that their ends are told
// from the op's), and their kernels take the op's sets. (Switching RecordFunction off for the op's duration
// would spare their boxed inputs, but each switch rebuilds PyTorch's per-thread callback tables: measured, it
// cost twice what the nested ops' boxing does.) Python code running inside an op (a saved-tensor hook, a
// __torch_dispatch__, a Python kernel of an op) is the program's own, and the ops it runs are its own too: the
// bootstrap brackets such code with streamtrace_torch_python_enter and _exit, and the ops it runs are observed
// as ops nested in the one it runs in (a stack of ops per thread), whose kernels take their own sets.
//
// An op that recorded nothing by its end (a view, record_stream: no CUDA call, no block) is left out whole when
// the capture library can say so (streamtrace_torch_frames), and an op of PyTorch's own reads its Python line
// only then, so such ops cost no GIL round trip.
//
// Nothing here may throw into PyTorch: every callback catches everything and records less instead (but lets a
// thread that Python ends while it waits for the GIL unwind: catching that unwind would abort the process).
// Callbacks keep firing while the process exits, so nothing this file keeps is destroyed before its callbacks
// stop (observer_lifetime.h, beside this file, says how).
//
// One file of about 900 lines on purpose: the bootstrap compiles this one translation unit with the program's
// compiler at first use, and it is one concern (turning PyTorch's op and allocator events into trace records).

#include <ATen/Context.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "observer_lifetime.h"
#include "python_frames.h"


#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

// The rest of the CPython functions used to find the calling Python line (python_frames.h declares those its walk
// needs), declared here so that building needs no Python headers; they resolve against the running interpreter.
extern "C" {
struct _object* PyObject_GetAttrString(struct _object*, const char*);
const char* PyUnicode_AsUTF8(struct _object*);
void PyErr_Clear(void);
void PyErr_Fetch(struct _object**, struct _object**, struct _object**);
void PyErr_Restore(struct _object*, struct _object*, struct _object*);
char* PyBytes_AsString(struct _object*);
long PyBytes_Size(struct _object*);
long PyLong_AsLong(struct _object*);
int Py_IsInitialized(void);
}

namespace {

using OpBeginFn = int (*)();
using RecordFn = int (*)(const char*, size_t);
using PinnedFn = int (*)(uint64_t);

OpBeginFn op_begin = nullptr;          // an op whose CUDA calls want their native call sites
OpBeginFn op_begin_unsited = nullptr;  // an op whose record says where its CUDA calls come from
RecordFn record = nullptr;
RecordFn record_op_end = nullptr;      // an op's op_end record, which also ends the op
PinnedFn host_memory_pinned = nullptr;  // whether host memory is in a pinned block the capture saw (1, 0; -1: ask CUDA)
// Whether the op running on this thread recorded anything yet (1, 0; -1: cannot say), and the end of one that
// did not, which leaves nothing of it in the trace; both null with a capture library older than this file.
OpBeginFn op_recorded = nullptr;
OpBeginFn op_close = nullptr;
// Whether an op of PyTorch's own may find its Python line only at its end, when it turns out to have recorded
// something: needs op_recorded and the allocator's history recorder (the line of a block allocated inside the
// op is read there, outside the allocator's lock). Most views and bookkeeping ops then cost no GIL round trip.
std::atomic<bool> lines_at_end{false};
bool cuda_only = true;  // off only in the CPU benchmark, where CPU tensors stand in for CUDA ones
int (*is_finalizing)() = nullptr;
// STREAMTRACE_OBSERVER_NOOP (benchmarks only): the callbacks stay registered, so PyTorch still boxes each op's
// inputs and outputs and builds each allocator event, but observe nothing. With STREAMTRACE_CALLBACK_NOOP it
// gives what the mechanisms the capture relies on cost a program before the capture does any work of its own.
bool observe_nothing = false;

// ---- What observing costs ---------------------------------------------------------------------------------------

// Where the observer's own time goes, kept only with STREAMTRACE_COST_DETAIL (each part then reads the clock
// twice) and said by the bootstrap at exit. RecordFunction's own work (boxing an op's inputs) happens before
// the callbacks and is not in it.
enum CostPart { kOpStart, kPythonLine, kOpEnd, kBlockEvent, kBlockLine, kCostParts };
bool cost_detail = false;
std::atomic<uint64_t> cost_calls[kCostParts];
std::atomic<uint64_t> cost_ns[kCostParts];

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// Counts the time from its making to the end of its scope into one part.
class TimedPart {
 public:
  explicit TimedPart(CostPart part) : part_(part), started_(cost_detail ? now_ns() : 0) {}
  ~TimedPart() {
    if (cost_detail) {
      cost_calls[part_].fetch_add(1, std::memory_order_relaxed);
      cost_ns[part_].fetch_add(now_ns() - started_, std::memory_order_relaxed);
    }
  }
  TimedPart(const TimedPart&) = delete;
  TimedPart& operator=(const TimedPart&) = delete;

 private:
  CostPart part_;
  uint64_t started_;
};

void emit(const std::string& text) {
  record(text.data(), text.size());
}

// The contents of a JSON string: quotes, backslashes and control characters escaped.
void append_json_escaped(std::string& out, const char* text) {
  for (const char* c = text; *c; ++c) {
    unsigned char byte = static_cast<unsigned char>(*c);
    if (byte == '"' || byte == '\\') {
      out += '\\';
      out += *c;
    } else if (byte < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
      out += escaped;
    } else {
      out += *c;
    }
  }
}

void append_json_string(std::string& out, const char* text) {
  out += '"';
  append_json_escaped(out, text);
  out += '"';
}

void append_number(std::string& out, uint64_t value) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, end);
}

// ---- Python lines ---------------------------------------------------------------------------------------------

struct CodeFacts {
  bool user;            // outside torch, the standard library's threading and streamtrace's own files
  std::string file;     // the file name, JSON-escaped without quotes
};

// The line of a code object's instruction, by (code object, instruction offset): CPython finds a line by
// scanning the code's line table from its start, which showed in the cost of every op.
struct InstructionKey {
  struct _object* code;
  int offset;
  bool operator==(const InstructionKey& other) const { return code == other.code && offset == other.offset; }
};
struct InstructionHash {
  size_t operator()(const InstructionKey& key) const {
    return std::hash<const void*>()(key.code) ^ (static_cast<size_t>(key.offset) * 0x9E3779B97F4A7C15ull);
  }
};

// What is known of Python files: guarded by the GIL (only touched while the calling thread holds it), never freed.
// Every code object seen is kept alive for good (also past streamtrace_torch_library_files), so that its address
// names it for the life of the process: the caches below are keyed by it.
struct PythonFiles {
  std::vector<std::string> library_prefixes;
  std::unordered_map<struct _object*, CodeFacts> code_facts;
  std::unordered_map<InstructionKey, int, InstructionHash> lines;  // of user code objects
};

PythonFiles& python_files() {
  return streamtrace_observer::forever<PythonFiles>();
}

// PyFrame_GetLasti, where the interpreter has it (3.11 and later): the key of the line cache.
int (*frame_lasti)(struct _frame*) = nullptr;
// PyCode_Addr2Line (3.10 and later): a line from a code object and the byte offset of an instruction.
int (*code_line)(struct _object*, int) = nullptr;
// The running CPython's frame layout, checked at start (python_frames.h), or null: lines are read through the API.
const streamtrace_python::FrameLayout* frame_layout = nullptr;
const void* code_type = nullptr;  // &PyCode_Type
const void* unicode_type = nullptr;  // &PyUnicode_Type
// Where code objects keep their file name, found at start (python_frames.h), or null: a code object that this
// thread has not seen under the GIL then has no line without it.
const streamtrace_python::CodeFileLayout* code_files = nullptr;
// Where code objects keep their line table and first line, found at start (python_frames.h), or null.
const streamtrace_python::LineTableLayout* line_tables = nullptr;
const void* bytes_type = nullptr;  // &PyBytes_Type
// Changed by streamtrace_torch_library_files: which code is the user's may have changed.
std::atomic<uint64_t> files_generation{0};
// The library folders as last published (under the GIL) for the walks that decide without it which code is the
// user's: each change publishes a new copy, and the old ones are kept (a reader may still hold one).
std::atomic<const std::vector<std::string>*> published_prefixes{nullptr};

// The line `frame` (of user code object `code`, kept alive by facts_of) is at.
int line_of(struct _frame* frame, struct _object* code) {
  if (!frame_lasti) {
    return PyFrame_GetLineNumber(frame);
  }
  auto& lines = python_files().lines;
  InstructionKey key{code, frame_lasti(frame)};
  auto found = lines.find(key);
  if (found != lines.end()) {
    return found->second;
  }
  int line = PyFrame_GetLineNumber(frame);
  lines.emplace(key, line);
  return line;
}

// Whether code of the file `file` is the user's: a real file outside the library folders `prefixes`.
bool is_user_file(const char* file, const std::vector<std::string>& prefixes) {
  if (file[0] == '<' || file[0] == '\0') {
    return false;
  }
  return std::none_of(prefixes.begin(), prefixes.end(), [&](const std::string& prefix) {
    return std::strncmp(file, prefix.data(), prefix.size()) == 0;
  });
}

// Needs the GIL.
const CodeFacts& facts_of(struct _object* code) {
  auto& code_facts = python_files().code_facts;
  auto found = code_facts.find(code);
  if (found != code_facts.end()) {
    return found->second;
  }
  CodeFacts facts{false, ""};
  // An op may start while an exception is pending (a frame's locals freed as it unwinds): it stays pending.
  struct _object *pending_type = nullptr, *pending_value = nullptr, *pending_traceback = nullptr;
  PyErr_Fetch(&pending_type, &pending_value, &pending_traceback);
  if (struct _object* name = PyObject_GetAttrString(code, "co_filename")) {
    if (const char* text = PyUnicode_AsUTF8(name)) {
      facts.user = is_user_file(text, python_files().library_prefixes);
      append_json_escaped(facts.file, text);
    }
    Py_DecRef(name);
  }
  PyErr_Clear();
  PyErr_Restore(pending_type, pending_value, pending_traceback);
  Py_IncRef(code);  // its address keys the caches, so it must never be reused
  return code_facts.emplace(code, std::move(facts)).first->second;
}

// Whether a frame of a file may name an op's line when no user frame is on the stack: a real file (a thread that
// torch.distributed.checkpoint or a DataLoader started runs only library code, and its innermost library line
// says more than none).
bool names_a_place(const CodeFacts& facts) {
  return !facts.file.empty() && facts.file[0] != '<';
}

// `"file:line"` of a line of `file` (JSON-escaped).
void append_place(std::string& out, const std::string& file, int line) {
  out += '"';
  out += file;
  out += ':';
  append_number(out, static_cast<uint64_t>(line));
  out += '"';
}

// The innermost user frame of the calling thread's Python stack as a JSON string ("file:line"); without one, its
// innermost frame of a real file; else null. Needs the GIL.
void append_python_line(std::string& out) {
  struct _frame* frame = PyEval_GetFrame();
  if (frame) {
    Py_IncRef(reinterpret_cast<struct _object*>(frame));
  }
  std::string innermost;  // the fallback's text
  while (frame) {
    struct _object* code = PyFrame_GetCode(frame);
    const CodeFacts& facts = facts_of(code);
    Py_DecRef(code);  // still alive: facts_of keeps every code object it has seen
    if (facts.user) {
      append_place(out, facts.file, line_of(frame, code));
      Py_DecRef(reinterpret_cast<struct _object*>(frame));
      return;
    }
    if (innermost.empty() && names_a_place(facts)) {
      append_place(innermost, facts.file, line_of(frame, code));
    }
    struct _frame* back = PyFrame_GetBack(frame);
    Py_DecRef(reinterpret_cast<struct _object*>(frame));
    frame = back;
  }
  out += innermost.empty() ? "null" : innermost;
}

// One thread's copies of what it learned of its frames (python_frames.h: read without the GIL, so nothing shared
// that another thread may change is touched): whether a code object is the user's, its file, and the line text of
// a frame's instruction that named a line (a user frame's, or on a stack without any the innermost real file's).
// Filled under the GIL at the first sight of each code object, which facts_of then keeps alive for good, so that
// its address names it; emptied when the library files change.
struct ThreadLines {
  uint64_t generation = 0;
  std::unordered_map<const void*, bool> user_code;
  // The file of each code object of a real file, JSON-escaped: a new line of a known code object is found without
  // the GIL (line_read_without_gil).
  std::unordered_map<const void*, std::string> files;
  std::unordered_map<InstructionKey, std::string, InstructionHash> texts;  // "\"file:line\"", or "null"
  std::vector<InstructionKey> others;  // reused by each walk: the frames it passed that are not the user's
  // Reused by each walk that learns without the GIL (WalkMode::kUncached): what it read of code objects it had not
  // seen, and the texts it made of them. Never kept past the walk: nothing keeps such a code object alive.
  std::vector<std::pair<const void*, std::string>> walk_files;  // the file, or "" for none
  std::deque<std::string> walk_texts;
};

// How a walk treats a code object its thread has not seen.
enum class WalkMode {
  kCachedOnly,  // without the GIL: the walk fails
  kLearn,       // with the GIL held: learned and kept (facts_of)
  kUncached,    // without the GIL: read from the code object itself, for this walk only
};

// The running CPython's Py_Version (0x030C01F0: 3.12.1 final), read at start.
unsigned long python_version = 0;

// Whether CPython's own PyCode_Addr2Line may be called without the GIL: that of 3.12 and of 3.13.0 to 3.13.2 reads
// only the immutable table (checked in their code). 3.11's may read the line array a tracing thread builds lazily,
// and later releases' the line table sys.monitoring builds when a tracer attaches.
bool addr2line_without_gil() {
  unsigned long release = python_version >> 8;  // major, minor, micro
  return frame_layout != nullptr && release >= 0x030C00ul && release <= 0x030D02ul;
}

// The line of the instruction `offset` bytes into `code`, a code object running on this thread's stack, without the
// GIL: decoded from its own line table (python_frames.h) where its layout was found at start, else CPython's where
// that is safe; -1 for none.
int line_read_without_gil(const void* code, int offset) {
  if (line_tables != nullptr) {
    return streamtrace_python::line_without_gil(*line_tables, code, bytes_type, offset);
  }
  return addr2line_without_gil() ? code_line(static_cast<struct _object*>(const_cast<void*>(code)), offset) : -1;
}

// What facts_of says of `code`, a code object running on this thread's stack, read without the GIL from the code
// object itself (python_frames.h): whether it is the user's, and its file (JSON-escaped; "" for a code object of
// no real file). False where its file name cannot be read so.
bool read_without_gil(const void* code, bool& user, std::string& escaped) {
  static const std::vector<std::string> none;
  const std::vector<std::string>* prefixes = published_prefixes.load(std::memory_order_acquire);
  std::string file;
  if (code_files == nullptr || !streamtrace_python::code_file(*code_files, code, unicode_type, file)) {
    return false;
  }
  user = is_user_file(file.c_str(), prefixes != nullptr ? *prefixes : none);
  escaped.clear();
  if (file[0] != '<') {
    append_json_escaped(escaped, file.c_str());
  }
  return true;
}

// The calling Python line from the thread's own frames (python_frames.h), into `out`. What the thread's caches
// lack is learned as `mode` says; a miss returns false (as does a stack the walk cannot read), and `out` is left
// as it was.
bool append_walked_line(const void* thread_state, WalkMode mode, std::string& out) {
  ThreadLines* lines = streamtrace_observer::this_thread<ThreadLines>();
  if (lines == nullptr) {
    return false;
  }
  bool gil = mode == WalkMode::kLearn;
  uint64_t generation = files_generation.load(std::memory_order_acquire);
  if (lines->generation != generation) {
    lines->user_code.clear();
    lines->files.clear();
    lines->texts.clear();
    lines->generation = generation;
  }
  lines->walk_files.clear();
  lines->walk_texts.clear();
  const std::string* text = nullptr;
  bool missed = false;
  // The stack's frames that are not the user's, innermost first: the first of a real file names the line when no
  // frame is the user's (as append_python_line chooses).
  std::vector<InstructionKey>& others = lines->others;
  others.clear();
  // The file of a code object this walk read without keeping it, or null.
  auto walk_file = [&](const void* code) -> const std::string* {
    for (const auto& [seen, file] : lines->walk_files) {
      if (seen == code) {
        return &file;
      }
    }
    return nullptr;
  };
  // The text of `key`'s line: kept for a code object the thread has learned (alive for good), made for this walk
  // only for one it read without the GIL; null on a miss.
  auto line_text = [&](const InstructionKey& key) -> const std::string* {
    auto found = lines->texts.find(key);
    if (found != lines->texts.end()) {
      return &found->second;
    }
    std::string quoted;
    auto file = lines->files.find(key.code);
    if (file != lines->files.end()) {
      int line = gil ? code_line(key.code, key.offset) : line_read_without_gil(key.code, key.offset);
      if (line < 0 && !gil) {
        missed = true;
        return nullptr;
      }
      append_place(quoted, file->second, line);
    } else if (const std::string* unkept = walk_file(key.code); unkept != nullptr) {
      int line = unkept->empty() ? 0 : line_read_without_gil(key.code, key.offset);
      if (line < 0) {
        missed = true;
        return nullptr;
      }
      if (unkept->empty()) {
        quoted = "null";
      } else {
        append_place(quoted, *unkept, line);
      }
      return &lines->walk_texts.emplace_back(std::move(quoted));
    } else {
      // Every frame this walk passes was learned by `visit` first: one learned (alive for good) without a file
      // is of no real file (`<string>`, `<frozen ...>`), and has no line at all.
      quoted = "null";
    }
    return &lines->texts.emplace(key, std::move(quoted)).first->second;
  };
  auto visit = [&](const void* code, int lasti) {
    auto known = lines->user_code.find(code);
    bool user;
    if (known != lines->user_code.end()) {
      user = known->second;
    } else if (gil) {
      const CodeFacts& facts = facts_of(static_cast<struct _object*>(const_cast<void*>(code)));
      user = facts.user;
      lines->user_code.emplace(code, user);
      if (names_a_place(facts)) {
        lines->files.emplace(code, facts.file);
      }
    } else {
      std::string file;
      if (mode != WalkMode::kUncached || !read_without_gil(code, user, file)) {
        missed = true;
        return true;
      }
      lines->walk_files.emplace_back(code, std::move(file));
    }
    InstructionKey key{static_cast<struct _object*>(const_cast<void*>(code)), lasti};
    if (!user) {
      others.push_back(key);
      return false;
    }
    text = line_text(key);
    return true;
  };
  if (!streamtrace_python::walk_frames(*frame_layout, code_type, thread_state, visit) || missed) {
    return false;
  }
  for (size_t index = 0; text == nullptr && index < others.size(); ++index) {
    const std::string* other = line_text(others[index]);
    if (missed) {
      return false;
    }
    if (*other != "null") {
      text = other;
    }
  }
  out += text != nullptr ? text->c_str() : "null";
  return true;
}

bool python_usable() {
  // A thread that never ran Python (the autograd engine's workers) has no Python stack to look at.
  return Py_IsInitialized() && !(is_finalizing && is_finalizing()) && PyGILState_GetThisThreadState() != nullptr;
}

// The calling Python line: read from the thread's own frames without the GIL where the layout is known and the
// thread has seen this frame before, else taking the GIL if this thread released it (most ops release it
// before dispatching).
void append_source(std::string& out) {
  TimedPart timed(kPythonLine);
  if (!python_usable()) {
    out += "null";
    return;
  }
  const void* thread_state = PyGILState_GetThisThreadState();
  if (frame_layout != nullptr && append_walked_line(thread_state, WalkMode::kCachedOnly, out)) {
    return;
  }
  int state = PyGILState_Ensure();
  if (frame_layout == nullptr || !append_walked_line(thread_state, WalkMode::kLearn, out)) {
    append_python_line(out);
  }
  PyGILState_Release(state);
}

// The calling thread's Python line, for a CUDA call made outside any op (the capture library asks from inside
// the driver's call: capture/src/python_line.rs). It calls no Python API, which needs the GIL (PyGILState_Check
// cannot say whether the thread holds it once a subinterpreter exists) and may clear a pending exception or run
// a collection: the line comes from the thread's own frames, and a code object the thread has not learned at its
// ops is read for this walk only (WalkMode::kUncached).
bool read_call_line(std::string& out) {
  if (frame_layout == nullptr || !python_usable()) {
    return false;
  }
  return append_walked_line(PyGILState_GetThisThreadState(), WalkMode::kUncached, out);
}

// Where code objects keep their file name, found on the calling frame's code (python_frames.h); needs the GIL.
const streamtrace_python::CodeFileLayout* find_code_files() {
  unicode_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
  struct _frame* frame = PyEval_GetFrame();
  if (unicode_type == nullptr || frame == nullptr) {
    return nullptr;
  }
  struct _object* code = PyFrame_GetCode(frame);
  static streamtrace_python::CodeFileLayout layout;
  bool found = false;
  if (struct _object* name = PyObject_GetAttrString(code, "co_filename")) {
    const char* text = PyUnicode_AsUTF8(name);
    bool ascii = text != nullptr && std::all_of(text, text + std::strlen(text), [](char c) {
      return static_cast<unsigned char>(c) < 0x80;
    });
    found = ascii && streamtrace_python::find_code_file_layout(code, name, text, std::strlen(text), layout);
    Py_DecRef(name);
  }
  PyErr_Clear();
  Py_DecRef(code);
  return found ? &layout : nullptr;
}

// Where code objects keep their line table and first line, found on the calling frame's code and its caller's
// (python_frames.h), and checked: the calling frame's line decoded as CPython gives it. Needs the GIL.
const streamtrace_python::LineTableLayout* find_line_tables() {
  bytes_type = dlsym(RTLD_DEFAULT, "PyBytes_Type");
  struct _frame* frame = PyEval_GetFrame();
  if (bytes_type == nullptr || frame == nullptr || frame_lasti == nullptr) {
    return nullptr;
  }
  Py_IncRef(reinterpret_cast<struct _object*>(frame));
  // The first caller of another first line: the two codes tell the first line's place from other numbers.
  struct _frame* caller = PyFrame_GetBack(frame);
  struct _object* code = PyFrame_GetCode(frame);
  auto first_line = [](struct _object* of) {
    long line = -1;
    if (struct _object* number = PyObject_GetAttrString(of, "co_firstlineno")) {
      line = PyLong_AsLong(number);
      Py_DecRef(number);
    }
    PyErr_Clear();
    return static_cast<int>(line);
  };
  int first = first_line(code);
  struct _object* other = nullptr;
  int other_first = -1;
  while (caller != nullptr && other == nullptr) {
    struct _object* candidate = PyFrame_GetCode(caller);
    int candidate_first = first_line(candidate);
    if (candidate_first >= 0 && candidate_first != first) {
      other = candidate;
      other_first = candidate_first;
    } else {
      Py_DecRef(candidate);
    }
    struct _frame* next = PyFrame_GetBack(caller);
    Py_DecRef(reinterpret_cast<struct _object*>(caller));
    caller = next;
  }
  if (caller != nullptr) {
    Py_DecRef(reinterpret_cast<struct _object*>(caller));
  }
  static streamtrace_python::LineTableLayout layout;
  bool found = false;
  if (other != nullptr && first >= 0) {
    if (struct _object* table = PyObject_GetAttrString(code, "co_linetable")) {
      const char* bytes = PyBytes_AsString(table);
      long size = PyBytes_Size(table);
      found = bytes != nullptr && size > 0 &&
              streamtrace_python::find_line_table_layout(code, table, bytes, static_cast<size_t>(size), first, other,
                                                         other_first, layout) &&
              streamtrace_python::line_without_gil(layout, code, bytes_type, frame_lasti(frame)) ==
                  PyFrame_GetLineNumber(frame);
      Py_DecRef(table);
    }
    Py_DecRef(other);
  }
  PyErr_Clear();
  Py_DecRef(code);
  Py_DecRef(reinterpret_cast<struct _object*>(frame));
  return found ? &layout : nullptr;
}

// Chooses the frame layout of the running CPython, checked on the calling thread's stack; needs the GIL.
void choose_frame_layout() {
  frame_lasti = reinterpret_cast<int (*)(struct _frame*)>(dlsym(RTLD_DEFAULT, "PyFrame_GetLasti"));
  code_line = reinterpret_cast<int (*)(struct _object*, int)>(dlsym(RTLD_DEFAULT, "PyCode_Addr2Line"));
  code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
  const auto* version = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));
  if (std::getenv("STREAMTRACE_PYTHON_FRAMES_API") != nullptr || code_line == nullptr || version == nullptr) {
    return;  // the API alone (the variable: to compare the two ways, benches/observer_instructions.py)
  }
  python_version = *version;
  frame_layout = streamtrace_python::checked_layout(*version, code_type, PyGILState_GetThisThreadState(), frame_lasti);
  if (frame_layout != nullptr) {
    code_files = find_code_files();
    line_tables = find_line_tables();
  }
}

// ---- Ops ------------------------------------------------------------------------------------------------------

struct OpFacts {
  std::string schema_name;       // "aten::addmm", to confirm a cache hit
  std::string quoted_name;       // "\"addmm.default\"", as the Python dispatch mode names ops, as a JSON string
  std::vector<bool> written;     // per schema argument: does the op write it (Tensor(a!))
  int group_argument = -1;       // a c10d op's ProcessGroup argument, or -1
  bool torch_own = false;        // an op of PyTorch's own (aten, prims, c10d...): its native frames are PyTorch's
  bool metadata_only = false;    // it changes a tensor's metadata (shape, storage), no byte: reads and writes none
  bool resize = false;           // a resize: no byte either, unless deterministic mode fills what it grows
  const std::vector<int>* shape_only = nullptr;  // arguments it takes a shape from, no byte (shape_only_arguments)
  const std::vector<struct SchemaCorrection>* corrections = nullptr;  // where its schema says less (or null)
};

// In-place ops whose schemas mark `self` written (Tensor(a!)) but that change only what the tensor is (its
// storage, sizes, strides, flags), not a byte of memory: `y.set_(storage)` by torch.distributed.checkpoint's
// stager, `transpose_`. Counted as writes, they raced with the copies into the same bytes. Their CUDA work,
// where they make any, is recorded as its own copies. Kept in step with _METADATA_ONLY_OPS in sitecustomize.py.
bool is_metadata_only(const std::string& schema_name) {
  static const std::unordered_set<std::string> kOps = {
      "aten::set_",          "aten::as_strided_",   "aten::transpose_",       "aten::t_",
      "aten::squeeze_",      "aten::unsqueeze_",    "aten::swapdims_",        "aten::swapaxes_",
      "aten::detach_",       "aten::requires_grad_", "aten::rename_",         "aten::set_data",
      "aten::record_stream", "aten::sparse_resize_", "aten::sparse_resize_and_clear_",
      "aten::resize_as_sparse_", "aten::_coalesced_", "aten::shallow_copy_data_"};
  return kOps.count(schema_name) > 0;
}

// Tensor arguments an op takes only a shape, dtype and device from, never a byte, by place. Factories that
// make a tensor like `self` (`torch.ones_like(loss)`, which backward() runs on the stream it is called on,
// `p.new_zeros(...)`): self; taken as a read, it raced with self's writer on another stream. Their other
// tensors are read (randint_like's `high`, on the host). Backward kernels that take the forward's input only for
// its shape (pooling and padding, nll_loss's log-probabilities, layer norm's bias, gather's and masked_select's
// input), cuDNN's batch norm backward its running stats (unused), `type_as` and `reshape_as` the tensor they
// copy like. Left out: a pooling or nll_loss backward makes a non-contiguous input contiguous first, a read of
// its bytes inside the op (their values unused; the saved activations are contiguous in practice). Kept in step
// with _SHAPE_ONLY_ARGUMENTS in sitecustomize.py.
const std::vector<int>* shape_only_arguments(const std::string& schema_name) {
  static const std::vector<int> kSelf = {0};
  static const std::vector<int> kSecond = {1};
  static const std::unordered_map<std::string, std::vector<int>> kOps = {
      {"aten::empty_like", kSelf},
      {"aten::zeros_like", kSelf},
      {"aten::ones_like", kSelf},
      {"aten::full_like", kSelf},
      {"aten::rand_like", kSelf},
      {"aten::randn_like", kSelf},
      {"aten::randint_like", kSelf},
      {"aten::new_empty", kSelf},
      {"aten::new_empty_strided", kSelf},
      {"aten::new_zeros", kSelf},
      {"aten::new_ones", kSelf},
      {"aten::new_full", kSelf},
      {"aten::type_as", kSecond},
      {"aten::reshape_as", kSecond},
      {"aten::nll_loss_backward", kSecond},
      {"aten::nll_loss2d_backward", kSecond},
      {"aten::max_pool2d_with_indices_backward", kSecond},
      {"aten::max_pool3d_with_indices_backward", kSecond},
      {"aten::avg_pool2d_backward", kSecond},
      {"aten::avg_pool3d_backward", kSecond},
      {"aten::_adaptive_avg_pool2d_backward", kSecond},
      {"aten::_adaptive_avg_pool3d_backward", kSecond},
      {"aten::adaptive_max_pool2d_backward", kSecond},
      {"aten::adaptive_max_pool3d_backward", kSecond},
      {"aten::reflection_pad1d_backward", kSecond},
      {"aten::reflection_pad2d_backward", kSecond},
      {"aten::reflection_pad3d_backward", kSecond},
      {"aten::replication_pad1d_backward", kSecond},
      {"aten::replication_pad2d_backward", kSecond},
      {"aten::replication_pad3d_backward", kSecond},
      {"aten::gather_backward", kSecond},
      {"aten::masked_select_backward", kSecond},
      {"aten::native_layer_norm_backward", {6}},
      {"aten::cudnn_batch_norm_backward", {3, 4}},
  };
  auto found = kOps.find(schema_name);
  return found == kOps.end() ? nullptr : &found->second;
}

// Whether the op takes its argument `index` for its shape alone (shape_only_arguments).
bool shape_only(const OpFacts& facts, size_t index) {
  return facts.shape_only != nullptr &&
         std::find(facts.shape_only->begin(), facts.shape_only->end(), static_cast<int>(index)) != facts.shape_only->end();
}

// Resizes change no byte (a CUDA one that grows copies the old bytes with a copy of its own), except that with
// torch.use_deterministic_algorithms and its fill_uninitialized_memory they fill the bytes they add, by kernels
// inside the op that take its extents. Kept in step with _RESIZE_OPS in sitecustomize.py.
bool is_resize(const std::string& schema_name) {
  return schema_name == "aten::resize_" || schema_name == "aten::resize_as_" || schema_name == "aten::_resize_output_";
}

// Whether deterministic mode fills the memory ops leave uninitialized (its own switch since torch 2.1; before it
// deterministic mode always filled).
template <typename Context>
auto fills_uninitialized(const Context& context, int) -> decltype(context.deterministicFillUninitializedMemory()) {
  return context.deterministicFillUninitializedMemory();
}
template <typename Context>
bool fills_uninitialized(const Context&, long) {
  return true;
}

// Whether an op of `facts` touches no byte now (deterministic mode can be switched at run time).
bool touches_no_byte(const OpFacts& facts) {
  if (facts.metadata_only) {
    return true;
  }
  const at::Context& context = at::globalContext();
  return facts.resize && !(context.deterministicAlgorithms() && fills_uninitialized(context, 0));
}

// The namespaces of PyTorch's own ops. The native call site of their kernels lies in libtorch, which names
// nothing the user wrote; an op of another namespace (a C++ extension's) keeps its native frames when it has no
// Python line.
bool is_torch_own(const std::string& schema_name) {
  for (const char* prefix : {"aten::", "prims::", "c10d::", "_c10d_functional", "inductor::", "quantized::"}) {
    if (schema_name.rfind(prefix, 0) == 0) {
      return true;
    }
  }
  return false;
}

// An observed op running on this thread. Its inputs are boxed only for the start callback, so what is needed
// of them is taken there: the extents it reads, and the arguments it writes (their extents are taken at the
// end, after an op that resizes its output has moved it).
struct ThreadOp {
  int nested = 0;                       // unobserved starts inside it (the ops it runs itself, named ranges)
  int python_regions = 0;               // Python code running inside it whose ops are observed (python_enter)
  const OpFacts* facts = nullptr;
  std::string source;                   // its Python line, as JSON (also for the blocks it allocates)
  bool line_pending = false;            // its line is not read yet (lines_at_end): source is empty
  std::string group;                    // a c10d op's process group, JSON-escaped; empty for other ops
  std::string reads;                    // "[[first,length],...]"
  std::string host_reads;               // the same, of CPU tensors in pinned memory
  std::vector<c10::IValue> written;     // the written arguments
  std::vector<const void*> storages;    // the storages of its tensor arguments: an output in one is a view
  bool no_byte = false;                 // it touches no byte (touches_no_byte at its start): no extents
};

// Everything this file keeps per thread.
struct ThreadState {
  std::unordered_map<const char*, OpFacts> op_facts;  // keyed by the schema's own name string
  // The observed ops running, outermost first: an op, then those Python code inside it ran. The first `depth`
  // are running; the others are kept for their buffers.
  std::vector<ThreadOp> ops;
  size_t depth = 0;
  std::string pending_block_source;  // see note_block_source
  std::string writes, host_writes, text;  // reused by each op's end and block event

  // The innermost observed op running, or null.
  ThreadOp* running() { return depth > 0 ? &ops[depth - 1] : nullptr; }
};

// The calling thread's state; null once the thread has begun to exit (its callbacks then record nothing).
ThreadState* this_thread() {
  return streamtrace_observer::this_thread<ThreadState>();
}

// c10d's collectives and point-to-point ops write the tensors of their first argument (reduced in place,
// received, gathered or scattered into) whatever their schemas mark; `send`, the barriers and the NaN check only
// read theirs. Kept in step with _C10D_READERS in sitecustomize.py.
bool c10d_writes_first_argument(const std::string& schema_name) {
  static const std::unordered_set<std::string> kReaders = {"c10d::send", "c10d::barrier", "c10d::monitored_barrier_",
                                                           "c10d::check_for_nan"};
  return schema_name.rfind("c10d::", 0) == 0 && kReaders.count(schema_name) == 0;
}

// Where an op's schema says less than its kernels do, for one argument (schema_corrections).
enum class Correction {
  kWritten,        // written, though not marked Tensor(a!)
  kWrittenIfTrue,  // written when the bool argument `condition` is true (batch norm's running stats in training)
  kReadIfNone,     // marked written, but only read when the argument `condition` is None
};

struct SchemaCorrection {
  int argument;
  Correction rule;
  int condition;  // the argument the rule asks about, or -1
};

// Ops whose kernels write arguments their schemas do not mark, or mark arguments they leave alone, by argument
// place (from PyTorch's kernels): batch norm updates its running stats in training (a missed write: races with
// a side stream that reads them went unseen), the statistics ops always (batch_norm_gather_stats_with_counts is
// SyncBatchNorm's; batch_norm_update_stats); the fused optimizers
// store the gradients back only when unscaling them (grad_scale given): without it, as in bfloat16 training,
// the gradients are only read. Kept in step with _SCHEMA_CORRECTIONS in sitecustomize.py.
const std::vector<SchemaCorrection>* schema_corrections(const std::string& schema_name) {
  using C = Correction;
  static const std::vector<SchemaCorrection> kRunningStatsInTraining = {{3, C::kWrittenIfTrue, 5},
                                                                        {4, C::kWrittenIfTrue, 5}};
  static const std::unordered_map<std::string, std::vector<SchemaCorrection>> kCorrections = {
      {"aten::batch_norm", kRunningStatsInTraining},
      {"aten::_batch_norm_impl_index", kRunningStatsInTraining},
      {"aten::native_batch_norm", kRunningStatsInTraining},
      {"aten::cudnn_batch_norm", kRunningStatsInTraining},
      {"aten::miopen_batch_norm", kRunningStatsInTraining},
      {"aten::instance_norm", kRunningStatsInTraining},  // argument 5: use_input_stats
      {"aten::batch_norm_update_stats", {{1, C::kWritten, -1}, {2, C::kWritten, -1}}},
      {"aten::batch_norm_gather_stats", {{3, C::kWritten, -1}, {4, C::kWritten, -1}}},
      {"aten::batch_norm_gather_stats_with_counts", {{3, C::kWritten, -1}, {4, C::kWritten, -1}}},
      {"aten::_fused_adam_", {{1, C::kReadIfNone, 13}}},
      {"aten::_fused_adamw_", {{1, C::kReadIfNone, 13}}},
      {"aten::_fused_sgd_", {{1, C::kReadIfNone, 10}}},
  };
  auto found = kCorrections.find(schema_name);
  return found == kCorrections.end() ? nullptr : &found->second;
}

// Whether the op writes its argument `index` in this call (`inputs`: its boxed arguments): as its schema marks
// it, or as a correction says.
template <typename Inputs>
bool writes_argument(const OpFacts& facts, const Inputs& inputs, size_t index) {
  bool written = index < facts.written.size() && facts.written[index];
  if (facts.corrections == nullptr) {
    return written;
  }
  for (const SchemaCorrection& correction : *facts.corrections) {
    if (static_cast<size_t>(correction.argument) != index) {
      continue;
    }
    const bool asked = correction.condition >= 0 && static_cast<size_t>(correction.condition) < inputs.size();
    switch (correction.rule) {
      case Correction::kWritten:
        written = true;
        break;
      case Correction::kWrittenIfTrue:
        written = asked && inputs[correction.condition].isBool() && inputs[correction.condition].toBool();
        break;
      case Correction::kReadIfNone:
        written = written && !(asked && inputs[correction.condition].isNone());
        break;
    }
  }
  return written;
}

const OpFacts* facts_of(ThreadState& thread, const at::RecordFunction& fn) {
  auto& op_facts = thread.op_facts;
  const char* key = fn.name();
  auto found = op_facts.find(key);
  if (found != op_facts.end() && found->second.schema_name == key) {
    return &found->second;
  }
  std::optional<c10::FunctionSchema> schema = fn.operator_schema();
  if (!schema) {
    return nullptr;  // a named range, not a dispatcher op
  }
  if (schema->name() == "aten::is_pinned") {
    return nullptr;  // a question about memory, asked by the recording of .numpy() and .tolist() too
  }
  OpFacts facts;
  facts.schema_name = schema->name();
  auto colons = facts.schema_name.find("::");
  std::string name = colons == std::string::npos ? facts.schema_name : facts.schema_name.substr(colons + 2);
  name += '.';
  name += schema->overload_name().empty() ? "default" : schema->overload_name();
  append_json_string(facts.quoted_name, name.c_str());
  for (const auto& argument : schema->arguments()) {
    const c10::AliasInfo* alias = argument.alias_info();
    facts.written.push_back(alias != nullptr && alias->isWrite());
  }
  if (!facts.written.empty() && c10d_writes_first_argument(facts.schema_name)) {
    facts.written[0] = true;
  }
  facts.torch_own = is_torch_own(facts.schema_name);
  facts.metadata_only = is_metadata_only(facts.schema_name);
  facts.resize = is_resize(facts.schema_name);
  facts.shape_only = shape_only_arguments(facts.schema_name);
  facts.corrections = schema_corrections(facts.schema_name);
  if (facts.schema_name.rfind("c10d::", 0) == 0) {
    const auto& arguments = schema->arguments();
    for (size_t index = 0; index < arguments.size(); ++index) {
      if (arguments[index].type()->str().find("ProcessGroup") != std::string::npos) {
        facts.group_argument = static_cast<int>(index);
        break;
      }
    }
  }
  op_facts.erase(key);
  return &op_facts.emplace(key, std::move(facts)).first->second;
}

// Where an op's tensor extents go: CUDA tensors' into the op's read or write list; CPU tensors in pinned memory
// (which copies to and from the GPU touch) into the host's, which become a host_access record; other CPU
// tensors nowhere (the GPU never touches them).
struct ExtentLists {
  std::string& device;
  std::string& host;
};

// Whether host memory is pinned: by the capture's own table of the blocks it saw allocated and registered (one
// lookup), else asked of the context (several driver calls), never through the is_pinned op: no dispatch (and no
// RecordFunction) from inside one.
bool is_pinned(const void* data) {
  int known = host_memory_pinned != nullptr ? host_memory_pinned(reinterpret_cast<uint64_t>(data)) : -1;
  return known >= 0 ? known == 1 : at::globalContext().isPinnedPtr(data);
}

// Appends the bytes a tensor covers, preceded by a comma unless it is the list's first (docs/trace-format.md):
// "[first byte,length]" when it is contiguous; a strided view as "[first byte,extent,element size,[[size,
// stride],...]]" (strides in elements), so that the analyzer compares the bytes the view covers (x[0::2] and
// x[1::2] share none); a view with a negative stride as the plain extent from its lowest to its highest byte.
void append_extent(ExtentLists out, const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) {
    return;
  }
  std::string* list = &out.device;
  if (!tensor.is_cuda() && cuda_only) {
    if (tensor.numel() == 0) {
      return;  // no byte, and perhaps no pointer to ask about
    }
    if (!tensor.is_cpu() || !is_pinned(tensor.const_data_ptr())) {
      return;
    }
    list = &out.host;
  }
  int64_t low = 0;
  int64_t high = 0;
  for (int64_t dim = 0; dim < tensor.dim(); ++dim) {
    int64_t size = tensor.size(dim);
    int64_t stride = tensor.stride(dim);
    if (size == 0) {
      return;
    }
    (stride < 0 ? low : high) += (size - 1) * stride;
  }
  const uint64_t element = static_cast<uint64_t>(tensor.element_size());
  const uint64_t span = static_cast<uint64_t>(high - low + 1) * element;
  uintptr_t first = reinterpret_cast<uintptr_t>(tensor.const_data_ptr());
  if (list->back() != '[') {
    *list += ',';
  }
  *list += '[';
  if (low < 0) {
    append_number(*list, first - static_cast<uint64_t>(-low) * element);
    *list += ',';
    append_number(*list, span);
    *list += ']';
    return;
  }
  append_number(*list, first);
  *list += ',';
  append_number(*list, span);
  if (tensor.is_contiguous()) {
    *list += ']';
    return;
  }
  *list += ',';
  append_number(*list, element);
  *list += ",[";
  for (int64_t dim = 0; dim < tensor.dim(); ++dim) {
    *list += dim == 0 ? "[" : ",[";
    append_number(*list, static_cast<uint64_t>(tensor.size(dim)));
    *list += ',';
    append_number(*list, static_cast<uint64_t>(tensor.stride(dim)));
    *list += ']';
  }
  *list += "]]";
}


// Calls `visit` with each tensor a value holds (a tensor, a tensor list, or a list that may hold tensors or
// lists of them: c10d's all_gather takes a list of tensor lists).
template <typename Visit>
void for_each_tensor(const c10::IValue& value, Visit& visit) {
  if (value.isTensor()) {
    visit(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& tensor : value.toTensorList()) {
      visit(tensor);
    }
  } else if (value.isList()) {
    for (const c10::IValue& item : value.toListRef()) {
      for_each_tensor(item, visit);
    }
  }
}

void append_extents(ExtentLists out, const c10::IValue& value) {
  auto visit = [&](const at::Tensor& tensor) { append_extent(out, tensor); };
  for_each_tensor(value, visit);
}

// c10d's ProcessGroup accessors, as libtorch exports them. The observer does not include ProcessGroup.hpp: with
// it, the build (which the first capture on a machine waits for) took 1.4 times as long, for these two calls.
// Null where libtorch was built without distributed.
using GroupText = const std::string& (*)(const void* group);
GroupText group_text(const char* symbol) {
  return reinterpret_cast<GroupText>(dlsym(RTLD_DEFAULT, symbol));
}
const GroupText group_desc = group_text("_ZNK4c10d12ProcessGroup12getGroupDescB5cxx11Ev");
const GroupText group_name = group_text("_ZNK4c10d12ProcessGroup12getGroupNameB5cxx11Ev");

// A c10d op's process group as the user knows it, JSON-escaped, into `out` (left empty where it cannot be
// said): its description ("default_pg", or new_group's group_desc) when it has one, else "group" and its name.
void note_process_group(const c10::IValue& value, std::string& out) {
  out.clear();
  if (group_desc == nullptr || group_name == nullptr || !value.isObject()) {
    return;
  }
  // A TorchBind object holds its C++ object in its one slot. ProcessGroup derives from CustomClassHolder alone,
  // so the holder's address is the group's; the class name says it is a ProcessGroup and not another class.
  const std::string type = value.type()->str();
  constexpr std::string_view kGroupClass = ".c10d.ProcessGroup";
  if (type.size() < kGroupClass.size() || type.compare(type.size() - kGroupClass.size(), kGroupClass.size(),
                                                       kGroupClass) != 0) {
    return;
  }
  const auto& object = value.toObjectRef();
  if (object.slots().size() != 1 || !object.getSlot(0).isCapsule()) {
    return;
  }
  const void* group = object.getSlot(0).toCapsule().get();
  const std::string& description = group_desc(group);  // may throw (no backend yet): the caller catches
  if (!description.empty() && description != "undefined") {
    append_json_escaped(out, description.c_str());
  } else if (const std::string& name = group_name(group); !name.empty()) {
    out += "group ";
    append_json_escaped(out, name.c_str());
  }
}

const void* storage_of(const at::Tensor& tensor) {
  return tensor.defined() && tensor.has_storage() ? tensor.storage().unsafeGetStorageImpl() : nullptr;
}

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  if (observe_nothing) {
    return nullptr;
  }
  ThreadState* thread = this_thread();
  if (thread == nullptr) {
    return nullptr;  // the thread is exiting
  }
  ThreadOp* outer = thread->running();
  if (outer != nullptr && outer->python_regions == 0) {
    ++outer->nested;  // an op the op runs itself: not an op of its own
    return nullptr;
  }
  TimedPart timed(kOpStart);
  ThreadOp* started = nullptr;
  try {
    const OpFacts* facts = facts_of(*thread, fn);
    if (!facts) {
      if (outer != nullptr) {
        ++outer->nested;  // a named range inside Python code inside an op: its end must not end the op
      }
      return nullptr;
    }
    if (thread->ops.size() == thread->depth) {
      thread->ops.emplace_back();
    }
    ThreadOp& op = thread->ops[thread->depth++];
    started = &op;
    op.nested = 0;
    op.python_regions = 0;
    op.facts = facts;
    op.no_byte = touches_no_byte(*facts);
    op.reads.assign("[");
    op.host_reads.assign("[");
    op.written.clear();
    op.storages.clear();
    auto inputs = fn.inputs();
    auto note_storage = [&](const at::Tensor& tensor) { op.storages.push_back(storage_of(tensor)); };
    for (size_t index = 0; index < inputs.size(); ++index) {
      for_each_tensor(inputs[index], note_storage);
      if (op.no_byte) {
        continue;
      }
      if (writes_argument(*facts, inputs, index)) {
        op.written.push_back(inputs[index]);
      } else if (!shape_only(*facts, index)) {
        append_extents({op.reads, op.host_reads}, inputs[index]);
      }
    }
    op.reads += ']';
    op.host_reads += ']';
    op.group.clear();
    if (facts->group_argument >= 0 && static_cast<size_t>(facts->group_argument) < inputs.size()) {
      try {
        note_process_group(inputs[facts->group_argument], op.group);
      } catch (abi::__forced_unwind&) {
        throw;
      } catch (...) {
        op.group.clear();  // the op is observed all the same, without its group
      }
    }
    op.source.clear();
    // Where the op's record already says where its kernels come from, the capture need not walk the stack: an
    // op of PyTorch's own never needs the walk, so its line can wait for its end.
    op.line_pending = facts->torch_own && lines_at_end.load(std::memory_order_relaxed);
    if (!op.line_pending) {
      append_source(op.source);
    }
    (facts->torch_own || op.source != "null" ? op_begin_unsited : op_begin)();
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (...) {
    if (started != nullptr) {  // the op is observed with what could be had: its end still closes the frame
      ThreadOp& op = *started;
      op.reads.assign("[]");
      op.host_reads.assign("[]");
      op.written.clear();
      op.storages.clear();
      op.source.clear();
      op.line_pending = false;
      op.group.clear();
      op_begin();
    }
  }
  return nullptr;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (observe_nothing) {
    return;
  }
  ThreadState* thread = this_thread();
  if (thread == nullptr) {
    return;  // the thread is exiting
  }
  ThreadOp* running = thread->running();
  if (running == nullptr) {
    return;  // a named range: its start was not observed
  }
  if (running->nested > 0) {
    --running->nested;
    return;
  }
  TimedPart timed(kOpEnd);
  ThreadOp& op = *running;
  --thread->depth;  // ended: from here on, block events belong to the op around it (kept in `ops`, not reused here)
  std::string& writes = thread->writes;
  std::string& host_writes = thread->host_writes;
  std::string& text = thread->text;
  int new_outputs = 0, aliased_outputs = 0;
  try {
    writes.assign("[");
    host_writes.assign("[");
    for (const c10::IValue& argument : op.written) {
      append_extents({writes, host_writes}, argument);
    }
    // An output in the storage of an argument is a view of it (detach, slice, a `to` that had nothing to do) or
    // the argument an in-place op wrote (counted above): no new bytes. Decided at run time: `to`, `contiguous`
    // and `reshape` alias when they can and copy when they cannot.
    auto take_output = [&](const at::Tensor& tensor) {
      const void* storage = storage_of(tensor);
      if (storage != nullptr && std::find(op.storages.begin(), op.storages.end(), storage) != op.storages.end()) {
        ++aliased_outputs;
      } else {
        ++new_outputs;
        append_extent({writes, host_writes}, tensor);
      }
    };
    if (!op.no_byte) {
      for (const c10::IValue& output : fn.outputs()) {
        for_each_tensor(output, take_output);
      }
    }
    writes += ']';
    host_writes += ']';
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (...) {
    writes.assign("[]");
    host_writes.assign("[]");
  }
  bool wrote_arguments = !op.written.empty();
  op.written.clear();
  op.storages.clear();
  bool ended = false;  // the capture's frame of the op: it must end whatever fails here
  try {
    bool touches_cuda = op.reads.size() > 2 || writes.size() > 2;
    // A view op (its outputs all in its arguments' storages, none written) reads no byte either.
    bool view = aliased_outputs > 0 && new_outputs == 0 && !wrote_arguments;
    // A CPU op on pinned memory: the host itself read or wrote it (rule 12), after the op, on this thread. In an
    // op with CUDA tensors too (a copy to or from the GPU) the pinned bytes are the copy's, not the host's.
    bool host_access = !touches_cuda && !view && (op.host_reads.size() > 2 || host_writes.size() > 2);
    // An op that issued no CUDA work and allocated no block (a view, `record_stream`, a CPU op) orders and
    // attributes nothing: it is left out whole, without its line.
    bool left_out = op_close != nullptr && op_recorded() == 0;
    if (op.line_pending && (!left_out || host_access)) {
      append_source(op.source);
      op.line_pending = false;
    }
    if (left_out) {
      ended = true;
      op_close();
    } else {
      text.assign("{\"type\":\"op_end\",\"name\":");
      text += op.facts->quoted_name;
      text += ",\"reads\":";
      text += op.reads;
      text += ",\"writes\":";
      text += writes;
      text += ",\"src\":";
      text += op.source.empty() ? "null" : op.source;
      if (!op.group.empty()) {
        text += ",\"process_group\":\"";
        text += op.group;
        text += '"';
      }
      text += '}';
      ended = true;
      record_op_end(text.data(), text.size());
    }
    if (host_access) {
      // Spelled out whole, as every record here is: format/tests/framework_writers.rs reads the records this
      // file spells and holds them to the vocabulary.
      text.assign("{\"type\":\"host_access\",\"name\":");
      text += op.facts->quoted_name;
      text += ",\"reads\":";
      text += op.host_reads;
      text += ",\"writes\":";
      text += host_writes;
      text += ",\"src\":";
      text += op.source.empty() ? "null" : op.source;
      text += '}';
      emit(text);
    }
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (...) {
    if (!ended) {  // out of memory building the record: the op ends without it
      static const char kEmptyEnd[] = "{\"type\":\"op_end\",\"reads\":[],\"writes\":[]}";
      op_close != nullptr ? op_close() : record_op_end(kEmptyEnd, sizeof kEmptyEnd - 1);
    }
  }
}

// ---- Caching-allocator blocks ---------------------------------------------------------------------------------

using TraceEntry = c10::cuda::CUDACachingAllocator::TraceEntry;

// The blocks handed out and not yet taken back, never freed (see the top of the file).
struct Blocks {
  std::mutex lock;  // the tracker runs under one allocator lock per device
  std::unordered_map<uint64_t, uint64_t> live;  // address -> block id
  uint64_t next = 1;
};

Blocks& blocks() {
  return streamtrace_observer::forever<Blocks>();
}

template <typename Stream>
uint64_t stream_handle(const Stream& stream) {
  if constexpr (std::is_pointer_v<Stream>) {
    return reinterpret_cast<uintptr_t>(stream);
  } else if constexpr (std::is_same_v<Stream, c10::Stream>) {
    return reinterpret_cast<uintptr_t>(c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream).stream());
  } else {
    return 0;
  }
}

// The Python line of a block event outside any op (a tensor dropped by Python code). Torch releases the GIL
// before it frees a block, and its trace tracker runs under the allocator's lock, where taking the GIL could
// deadlock; but the allocator asks its history context recorder, outside that lock, just before each
// allocation and free on the same thread. That is where the line is read (taking the GIL, as torch's own
// recorder does), to be picked up by the tracker.
// Reads the calling Python line into `out` for a block event, empty where it cannot be had.
void read_block_line(std::string& out) {
  TimedPart timed(kBlockLine);
  try {
    append_source(out);
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (...) {
    out.clear();
  }
}

std::shared_ptr<c10::GatheredContext> note_block_source() {
  ThreadState* thread = this_thread();
  if (thread == nullptr) {
    return nullptr;
  }
  ThreadOp* op = thread->running();
  if (op == nullptr) {
    thread->pending_block_source.clear();
    read_block_line(thread->pending_block_source);
  } else if (op->line_pending) {
    // A block allocated inside an op whose line waits for its end (lines_at_end): the block needs it now.
    read_block_line(op->source);
    op->line_pending = false;
  }
  return nullptr;
}

// The line a block event belongs to: the running op's, or the one noted just before the allocator took its lock.
void append_block_source(ThreadState& thread, std::string& out) {
  if (const ThreadOp* op = thread.running()) {
    out += op->source.empty() ? "null" : op->source;
  } else if (!thread.pending_block_source.empty()) {
    out += thread.pending_block_source;
    thread.pending_block_source.clear();
  } else {
    out += "null";
  }
}

// Asks the allocator for its history context recorder at every allocation and free (the smallest history:
// one entry). Its signature differs between torch versions; returns false where none of the known ones fits.
template <typename When>
bool record_block_sources(When when) {
  namespace allocator = c10::cuda::CUDACachingAllocator;
  std::vector<std::string> skip_actions;
  if constexpr (requires { allocator::recordHistory(true, note_block_source, size_t{1}, when, false, skip_actions); }) {
    allocator::recordHistory(true, note_block_source, 1, when, false, skip_actions);
    return true;
  } else if constexpr (requires { allocator::recordHistory(true, note_block_source, size_t{1}, when, false); }) {
    allocator::recordHistory(true, note_block_source, 1, when, false);
    return true;
  } else {
    return false;
  }
}

void on_allocator_event(const TraceEntry& entry) {
  if (observe_nothing) {
    return;
  }
  ThreadState* thread = this_thread();
  if (thread == nullptr) {
    return;  // the thread is exiting
  }
  TimedPart timed(kBlockEvent);
  try {
    std::string& text = thread->text;
    Blocks& known = blocks();
    if (entry.action_ == TraceEntry::ALLOC) {
      uint64_t id;
      {
        std::lock_guard<std::mutex> guard(known.lock);
        id = known.next++;
        known.live[entry.addr_] = id;
      }
      text.assign("{\"type\":\"alloc\",\"id\":");
      append_number(text, id);
      text += ",\"addr\":";
      append_number(text, entry.addr_);
      text += ",\"size\":";
      append_number(text, entry.size_);
      text += ",\"alloc_kind\":\"pool_block\"";
      if (uint64_t stream = stream_handle(entry.stream_)) {
        text += ",\"stream\":";
        append_number(text, stream);
      }
    } else if (entry.action_ == TraceEntry::FREE_REQUESTED) {
      uint64_t id;
      {
        std::lock_guard<std::mutex> guard(known.lock);
        auto found = known.live.find(entry.addr_);
        if (found == known.live.end()) {
          return;  // handed out before recording started
        }
        id = found->second;
        known.live.erase(found);
      }
      text.assign("{\"type\":\"free\",\"id\":");
      append_number(text, id);
      text += ",\"free_kind\":\"pool_block\"";
    } else {
      return;
    }
    text += ",\"src\":";
    append_block_source(*thread, text);
    text += '}';
    emit(text);
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (...) {
  }
}

}  // namespace

extern "C" {

// Starts observing ops on every thread: `begin`, `begin_unsited`, `write`, `write_op_end` and `pinned` are the
// capture library's entry points (streamtrace_framework_op_begin, _op_begin_unsited, _record, _op_end and
// streamtrace_host_memory_pinned), and `all_devices` counts CPU tensors too (for the CPU benchmark). Returns 0,
// or -1 with a reason in `error`.
int streamtrace_torch_observe(OpBeginFn begin, OpBeginFn begin_unsited, RecordFn write, RecordFn write_op_end,
                              PinnedFn pinned, int all_devices, char* error, size_t error_len) {
  try {
    op_begin = begin;
    op_begin_unsited = begin_unsited;
    record = write;
    record_op_end = write_op_end;
    host_memory_pinned = pinned;
    cuda_only = all_devices == 0;
    cost_detail = std::getenv("STREAMTRACE_COST_DETAIL") != nullptr;
    observe_nothing = std::getenv("STREAMTRACE_OBSERVER_NOOP") != nullptr;
    choose_frame_layout();  // called with the GIL held (the bootstrap loads this file with ctypes.PyDLL)
    void* finalizing = dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
    if (!finalizing) {
      finalizing = dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
    }
    is_finalizing = reinterpret_cast<int (*)()>(finalizing);
    at::addGlobalCallback(at::RecordFunctionCallback(on_op_start, on_op_end)
                              .needsInputs(true)
                              .needsOutputs(true)
                              .scopes({at::RecordScope::FUNCTION}));
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_len, "%s", e.what());
  } catch (...) {
    std::snprintf(error, error_len, "unknown C++ exception");
  }
  return -1;
}

// The calling thread's Python line (read_call_line) into `out` as `file:line`, JSON-escaped without quotes;
// its length, or 0 when there is none, it is not at hand without the GIL, or it is longer than `capacity`.
size_t streamtrace_torch_python_line(char* out, size_t capacity) {
  try {
    std::string text;  // no thread_local: a CUDA call in a thread's exit may come after its destructor
    if (!read_call_line(text) || text.size() < 2 || text.front() != '"' || text.size() - 2 > capacity) {
      return 0;
    }
    std::memcpy(out, text.data() + 1, text.size() - 2);
    return text.size() - 2;
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (...) {
    return 0;
  }
}

// The capture library's streamtrace_framework_op_recorded and _op_close, with which an op that recorded nothing
// is left out whole; call before streamtrace_torch_observe (a library older than this file has neither: every
// op is then written).
void streamtrace_torch_frames(OpBeginFn recorded, OpBeginFn close) {
  if (recorded != nullptr && close != nullptr) {
    op_recorded = recorded;
    op_close = close;
  }
}

// Starts recording caching-allocator blocks; call once CUDA is initialized (the allocator attaches trackers only
// to the devices it has set up). Returns 0 (1 when blocks freed outside ops will have no Python line), or -1
// with a reason in `error`.
int streamtrace_torch_observe_blocks(char* error, size_t error_len) {
  try {
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(on_allocator_event);
    if (!record_block_sources(c10::cuda::CUDACachingAllocator::RecordContext::ALL)) {
      return 1;
    }
    lines_at_end.store(op_close != nullptr, std::memory_order_relaxed);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_len, "%s", e.what());
  } catch (...) {
    std::snprintf(error, error_len, "unknown C++ exception");
  }
  return -1;
}

// Python code (a saved-tensor hook, a __torch_dispatch__, a Python kernel of an op) starts on the calling thread:
// inside an observed op, the ops it runs are observed as ops of their own, nested in that op, until the matching
// streamtrace_torch_python_exit. Returns what to pass to it: 0 outside any op (nothing changes), 1 inside one,
// 2 when RecordFunction had been switched off on the thread (by the program: a profiler guard) and was switched
// back on for the Python code. Called with the GIL held; costs a thread-local lookup outside ops.
int streamtrace_torch_python_enter() {
  try {
    ThreadState* thread = this_thread();
    ThreadOp* op = thread != nullptr ? thread->running() : nullptr;
    if (op == nullptr) {
      return 0;
    }
    ++op->python_regions;
    if (at::isRecordFunctionEnabled()) {
      return 1;
    }
    at::enableRecordFunction(true);
    return 2;
  } catch (...) {
    return 0;  // the Python code's ops stay unobserved, as without this call
  }
}

// The Python code that streamtrace_torch_python_enter announced returns (`entered`: what that returned): the op
// it ran in runs unobserved again.
void streamtrace_torch_python_exit(int entered) {
  if (entered == 0) {
    return;
  }
  ThreadState* thread = this_thread();
  ThreadOp* op = thread != nullptr ? thread->running() : nullptr;
  if (op != nullptr && op->python_regions > 0) {
    --op->python_regions;
  }
  if (entered == 2) {
    at::enableRecordFunction(false);
  }
}

// What observing has cost so far, kept with STREAMTRACE_COST_DETAIL: for each part (op starts, the Python
// lines inside them, op ends, allocator block events, the lines of blocks freed outside ops), its count and
// nanoseconds in `out[2 * part]` and `out[2 * part + 1]`. Returns the number of parts, or 0 without the detail.
int streamtrace_torch_costs(uint64_t* out, size_t out_len) {
  if (!cost_detail || out_len < 2 * kCostParts) {
    return 0;
  }
  for (int part = 0; part < kCostParts; ++part) {
    out[2 * part] = cost_calls[part].load(std::memory_order_relaxed);
    out[2 * part + 1] = cost_ns[part].load(std::memory_order_relaxed);
  }
  return kCostParts;
}

// Which way Python lines are read: the CPython version (Py_Version's major and minor, 0x030C0000 for 3.12) whose
// frame layout is read without the GIL (python_frames.h), or 0: through the API, under the GIL.
unsigned long streamtrace_torch_python_frames() {
  return frame_layout != nullptr ? frame_layout->version : 0;
}

// Counts files under `prefix` as library code: the Python line of an op is the innermost frame outside them.
// Called with the GIL held.
void streamtrace_torch_library_files(const char* prefix) {
  PythonFiles& files = python_files();
  files.library_prefixes.emplace_back(prefix);
  files.code_facts.clear();  // their code objects stay alive (facts_of): the threads' caches are keyed by them
  published_prefixes.store(new std::vector<std::string>(files.library_prefixes), std::memory_order_release);
  files_generation.fetch_add(1, std::memory_order_release);
}

}  // extern "C"
