// Reading the calling thread's Python frames without the GIL, for the native PyTorch observer (torch_observer.cpp)
// and, apart from it, for a test without torch (capture/tests/python_frames.rs runs it under each CPython it finds).
//
// An op's Python line is the innermost frame of the user's code on the calling thread's stack. PyTorch releases
// the GIL before it dispatches, and CPython's API reads frames only under the GIL and materializes a frame object
// for each frame it walks: a GIL round trip and an allocation per frame on every op (1.1 us an op on the H200).
// But while this thread is inside the op its own frames cannot change (only this thread runs them), so they
// can be read as they lie, from the thread state's current interpreter frame through each frame's `previous`.
// Those are CPython's internal layouts, one per minor version (3.11, 3.12, 3.13 below, taken from each version's
// Include/internal/pycore_frame.h and cpython/pystate.h). A layout is used only after it was checked against the
// public API on a live stack (checked_layout): every frame the API walks must be found, in order, with the same
// code object and instruction, and the check reads memory through a pipe, so that a layout that does not fit
// (another patch release, a debug or free-threaded build) fails the check instead of crashing the program. Where
// no layout fits, the observer reads lines through the API, as before.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

// The CPython functions used, declared here (all exported by every CPython 3.10 and later) so that building
// needs no Python headers; they resolve against the running interpreter.
extern "C" {
struct _object;
struct _frame;
struct _ts;
int PyGILState_Ensure(void);
void PyGILState_Release(int);
struct _ts* PyGILState_GetThisThreadState(void);
struct _frame* PyEval_GetFrame(void);
struct _frame* PyFrame_GetBack(struct _frame*);
struct _object* PyFrame_GetCode(struct _frame*);
int PyFrame_GetLineNumber(struct _frame*);
void Py_IncRef(struct _object*);
void Py_DecRef(struct _object*);
}

namespace streamtrace_python {

// Where one minor version keeps what the walk reads (byte offsets).
struct FrameLayout {
  unsigned long version;     // Py_Version's major and minor (0x030B0000: 3.11)
  size_t thread_frame;       // PyThreadState: the current _PyInterpreterFrame (3.13), or the _PyCFrame holding it
  ptrdiff_t cframe_frame;    // _PyCFrame: its current_frame; -1 where the thread state holds the frame itself
  size_t code;               // _PyInterpreterFrame: f_code (f_executable in 3.13)
  size_t previous;           // _PyInterpreterFrame: the frame that called it
  size_t instruction;        // _PyInterpreterFrame: prev_instr (instr_ptr in 3.13)
  size_t owner;              // _PyInterpreterFrame: owner (char)
  size_t code_units;         // PyCodeObject: co_code_adaptive, its first code unit
  size_t first_traceable;    // PyCodeObject: _co_firsttraceable (int)
};

constexpr char kOwnedByGenerator = 1;
constexpr char kOwnedByCStack = 3;  // 3.12 and later: the interpreter's entry frame, no code of its own
constexpr size_t kObjectType = 8;          // PyObject: ob_type (a build with Py_TRACE_REFS fails the check)
constexpr size_t kFrameObjectFrame = 24;   // PyFrameObject: f_frame (3.11 to 3.13)
constexpr int kMostFrames = 100000;        // a longer chain is not believed: the slow path answers

constexpr FrameLayout kLayouts[] = {
    {0x030B0000, 56, 8, 32, 48, 56, 69, 184, 168},
    {0x030C0000, 56, 0, 0, 8, 56, 70, 192, 176},
    {0x030D0000, 72, -1, 0, 8, 56, 70, 200, 184},
};

template <typename T>
T read_at(const void* base, size_t offset) {
  T value;
  std::memcpy(&value, static_cast<const char*>(base) + offset, sizeof value);
  return value;
}

// The innermost interpreter frame of a thread state (may be null: no Python running).
inline const void* current_frame(const FrameLayout& layout, const void* thread) {
  const void* frame = read_at<const void*>(thread, layout.thread_frame);
  if (layout.cframe_frame >= 0 && frame != nullptr) {
    frame = read_at<const void*>(frame, static_cast<size_t>(layout.cframe_frame));
  }
  return frame;
}

// Calls `visit(code, lasti)` (lasti: the instruction's offset in bytes) for each complete frame of the thread state `thread`, innermost first, until it
// returns true; skips what PyFrame_GetBack skips (entry frames, frames not started yet). Returns false where the
// stack cannot be read (a frame without a code object: the caller asks the API instead). Without the GIL: only
// for the calling thread's own state, whose frames cannot change while it is here.
template <typename Visit>
bool walk_frames(const FrameLayout& layout, const void* code_type, const void* thread, Visit&& visit) {
  const void* frame = current_frame(layout, thread);
  for (int walked = 0; frame != nullptr; ++walked) {
    if (walked == kMostFrames) {
      return false;
    }
    const void* previous = read_at<const void*>(frame, layout.previous);
    char owner = read_at<char>(frame, layout.owner);
    if (owner == kOwnedByCStack && layout.version >= 0x030C0000) {
      frame = previous;
      continue;
    }
    const void* code = read_at<const void*>(frame, layout.code);
    if (code == nullptr || read_at<const void*>(code, kObjectType) != code_type) {
      return false;
    }
    const char* first = static_cast<const char*>(code) + layout.code_units;
    const char* instruction = read_at<const char*>(frame, layout.instruction);
    int lasti = static_cast<int>(instruction - first);  // in bytes, as PyFrame_GetLasti says it
    if (owner != kOwnedByGenerator && lasti / 2 < read_at<int>(code, layout.first_traceable)) {  // code units
      frame = previous;  // pushed, not started: PyFrame_GetBack passes over it too
      continue;
    }
    if (visit(code, lasti)) {
      return true;
    }
    frame = previous;
  }
  return true;
}

// Copies `length` bytes from `address` unless they cannot be read (the kernel says so through a pipe, rather
// than this process faulting). For checking a layout only: two system calls a read.
class CarefulReader {
 public:
  CarefulReader() {
    if (pipe(fds_) != 0) {
      fds_[0] = fds_[1] = -1;
    }
  }
  ~CarefulReader() {
    if (fds_[0] >= 0) {
      close(fds_[0]);
      close(fds_[1]);
    }
  }
  CarefulReader(const CarefulReader&) = delete;
  CarefulReader& operator=(const CarefulReader&) = delete;

  template <typename T>
  bool read(const void* base, size_t offset, T& out) {
    if (fds_[0] < 0 || base == nullptr) {
      return false;
    }
    const char* address = static_cast<const char*>(base) + offset;
    if (write(fds_[1], address, sizeof out) != static_cast<ssize_t>(sizeof out)) {
      return false;
    }
    return ::read(fds_[0], &out, sizeof out) == static_cast<ssize_t>(sizeof out);
  }

 private:
  int fds_[2];
};

// Whether `layout` reads the calling thread's stack as the API does: each frame PyFrame_GetBack walks from
// PyEval_GetFrame is found in order with the same code object and instruction, and what lies between them is
// what the walk skips. Needs the GIL; `thread` is the calling thread's state; `lasti` is PyFrame_GetLasti.
inline bool layout_fits(const FrameLayout& layout, const void* code_type, const void* thread,
                        int (*lasti_of)(struct _frame*)) {
  CarefulReader memory;
  const void* raw = nullptr;
  if (!memory.read(thread, layout.thread_frame, raw)) {
    return false;
  }
  if (layout.cframe_frame >= 0 && !memory.read(raw, static_cast<size_t>(layout.cframe_frame), raw)) {
    return false;
  }
  struct _frame* frame = PyEval_GetFrame();
  if (frame == nullptr) {
    return false;  // nothing to check against
  }
  Py_IncRef(reinterpret_cast<struct _object*>(frame));
  bool fits = true;
  int skipped = 0;
  while (fits && frame != nullptr) {
    const void* expected = nullptr;
    fits = memory.read(frame, kFrameObjectFrame, expected) && expected != nullptr;
    // Frames the walk skips may lie between two the API returns.
    while (fits && raw != expected) {
      char owner = 0;
      const void* code = nullptr;
      const void* previous = nullptr;
      fits = ++skipped < 64 && memory.read(raw, layout.owner, owner) && memory.read(raw, layout.previous, previous);
      if (fits && !(owner == kOwnedByCStack && layout.version >= 0x030C0000)) {
        const char* instruction = nullptr;
        int first_traceable = 0;
        const void* type = nullptr;
        fits = memory.read(raw, layout.code, code) && memory.read(code, kObjectType, type) && type == code_type &&
               memory.read(raw, layout.instruction, instruction) &&
               memory.read(code, layout.first_traceable, first_traceable) && owner != kOwnedByGenerator &&
               (instruction - (static_cast<const char*>(code) + layout.code_units)) / 2 < first_traceable;
      }
      raw = previous;
    }
    if (fits) {
      struct _object* code = PyFrame_GetCode(frame);
      const void* raw_code = nullptr;
      const char* instruction = nullptr;
      fits = memory.read(raw, layout.code, raw_code) && raw_code == code &&
             memory.read(raw, layout.instruction, instruction) &&
             instruction - (static_cast<const char*>(raw_code) + layout.code_units) == lasti_of(frame);
      // The walk's skip rule must keep every frame the API returns: their owner and their code's first
      // traceable instruction, read where the walk reads them, say so (a layout wrong there alone would pass
      // the check above and then skip real frames).
      char owner = 0;
      int first_traceable = 0;
      fits = fits && memory.read(raw, layout.owner, owner) &&
             memory.read(raw_code, layout.first_traceable, first_traceable) &&
             !(owner == kOwnedByCStack && layout.version >= 0x030C0000) &&
             (owner == kOwnedByGenerator ||
              (instruction - (static_cast<const char*>(raw_code) + layout.code_units)) / 2 >= first_traceable);
      Py_DecRef(code);
      fits = fits && memory.read(raw, layout.previous, raw);
    }
    struct _frame* back = PyFrame_GetBack(frame);
    Py_DecRef(reinterpret_cast<struct _object*>(frame));
    frame = back;
  }
  if (frame != nullptr) {
    Py_DecRef(reinterpret_cast<struct _object*>(frame));
  }
  // Past the outermost frame, only skipped frames remain.
  while (fits && raw != nullptr) {
    char owner = 0;
    fits = ++skipped < 64 && memory.read(raw, layout.owner, owner) && owner == kOwnedByCStack &&
           layout.version >= 0x030C0000 && memory.read(raw, layout.previous, raw);
  }
  return fits;
}

// Where a code object holds its file name (co_filename) and where a compact ASCII string holds its characters.
// Both are found under the GIL on a live code object (find_code_file_layout), so that a thread that let the GIL
// go can read the file of code running on its own stack (code_file): such a code object lives while its frame
// runs, and its file name with it.
struct CodeFileLayout {
  size_t filename = 0;  // PyCodeObject: co_filename
  size_t ascii = 0;     // PyASCIIObject: the characters, NUL-terminated
};

constexpr size_t kUnicodeLength = 16;  // PyASCIIObject: length (after ob_refcnt and ob_type), 3.11 to 3.13
constexpr size_t kUnicodeState = 32;   // PyASCIIObject: the state bit field (after length and hash)
// state's `compact` and `ascii` bits, after `interned` (2 bits) and `kind` (3), 3.11 to 3.13: set together, the
// characters are one byte each right after the PyASCIIObject.
constexpr uint32_t kCompactAscii = (1u << 5) | (1u << 6);
constexpr ptrdiff_t kMostFileChars = 4096;

// The offset of the first pointer-aligned word past the object header of `object`'s first 256 bytes that holds
// `target`, or 0.
inline size_t offset_of_pointer(CarefulReader& memory, const void* object, const void* target) {
  for (size_t offset = 2 * sizeof(void*); offset < 256; offset += sizeof(void*)) {
    const void* word = nullptr;
    if (!memory.read(object, offset, word)) {
      return 0;
    }
    if (word == target) {
      return offset;
    }
  }
  return 0;
}

// The first pointer-aligned offset from `from` to `to` at which `object` holds the `length` bytes `bytes`, or 0.
inline size_t offset_of_bytes(CarefulReader& memory, const void* object, size_t from, size_t to, const char* bytes,
                              size_t length) {
  for (size_t offset = from; offset <= to; offset += sizeof(void*)) {
    bool same = true;
    for (size_t index = 0; same && index < length; ++index) {
      char c = 0;
      same = memory.read(object, offset + index, c) && c == bytes[index];
    }
    if (same) {
      return offset;
    }
  }
  return 0;
}

// Finds `out` from `code`, a code object whose co_filename is `filename`, of the ASCII text `text` (`length`
// bytes). Reads through CarefulReader. Needs the GIL (the caller holds references to both objects).
inline bool find_code_file_layout(const void* code, const void* filename, const char* text, size_t length,
                                  CodeFileLayout& out) {
  CarefulReader memory;
  out.filename = offset_of_pointer(memory, code, filename);
  ptrdiff_t stated = 0;
  uint32_t state = 0;
  if (out.filename == 0 || length == 0 || !memory.read(filename, kUnicodeLength, stated) ||
      stated != static_cast<ptrdiff_t>(length) || !memory.read(filename, kUnicodeState, state) ||
      (state & kCompactAscii) != kCompactAscii) {
    return false;
  }
  // The characters with their terminator (`text` is a C string).
  out.ascii = offset_of_bytes(memory, filename, kUnicodeLength + sizeof(ptrdiff_t), 64, text, length + 1);
  return out.ascii != 0;
}

// The file name of `code`, a code object running on the calling thread's stack, into `out`, where it is a compact
// ASCII string (a file name with other characters is not read: false). The characters are checked too: nonzero
// bytes below 0x80 up to a terminator where the length says. `unicode_type`: &PyUnicode_Type. No GIL.
inline bool code_file(const CodeFileLayout& layout, const void* code, const void* unicode_type, std::string& out) {
  const void* name = read_at<const void*>(code, layout.filename);
  if (name == nullptr || read_at<const void*>(name, kObjectType) != unicode_type) {
    return false;
  }
  ptrdiff_t length = read_at<ptrdiff_t>(name, kUnicodeLength);
  if (length <= 0 || length > kMostFileChars ||
      (read_at<uint32_t>(name, kUnicodeState) & kCompactAscii) != kCompactAscii) {
    return false;  // not one byte a character right after the header
  }
  const char* chars = static_cast<const char*>(name) + layout.ascii;
  for (ptrdiff_t index = 0; index < length; ++index) {
    unsigned char c = static_cast<unsigned char>(chars[index]);
    if (c == 0 || c >= 0x80) {
      return false;
    }
  }
  if (chars[length] != '\0') {
    return false;
  }
  out.assign(chars, static_cast<size_t>(length));
  return true;
}

// Where a code object holds its line table (co_linetable, a bytes object) and its first line, and where a bytes
// object holds its bytes: found under the GIL on live code objects (find_line_table_layout), so that a thread that
// let the GIL go can find the line of an instruction of code running on its own stack (line_without_gil) from the
// table itself. CPython's own PyCode_Addr2Line may read tables that another thread builds meanwhile (3.11's line
// array, the line table of sys.monitoring in later releases); co_linetable is immutable.
struct LineTableLayout {
  size_t linetable = 0;    // PyCodeObject: co_linetable
  size_t first_line = 0;   // PyCodeObject: co_firstlineno (int)
  size_t bytes_data = 0;   // PyBytesObject: ob_sval
};

constexpr size_t kVarSize = 16;  // PyVarObject: ob_size (after ob_refcnt and ob_type)
constexpr ptrdiff_t kMostLineTableBytes = ptrdiff_t{1} << 24;

// The line of the instruction `offset` bytes into the code whose location table (3.11 to 3.13, Objects/locations.md)
// is `table` (`size` bytes) and whose first line is `first_line`; -1 for none or a table that does not parse.
// Each entry starts with a byte of its top bit set: 4 bits of kind, 3 bits of length in code units less one. The
// kinds' line deltas: 15 no line, 14 and 13 a signed varint after the first byte, 12 to 10 two, one, none, the
// others none; what follows up to the next entry's first byte (columns) is passed over.
inline int line_from_table(const uint8_t* table, size_t size, int first_line, int offset) {
  int line = first_line;
  long start = 0;
  size_t at = 0;
  while (at < size) {
    uint8_t first = table[at];
    if ((first & 0x80) == 0) {
      return -1;
    }
    int kind = (first >> 3) & 15;
    long end = start + 2 * ((first & 7) + 1);  // bytes: a code unit is two
    int delta = 0;
    if (kind == 13 || kind == 14) {
      size_t next = at + 1;
      if (next >= size) {
        return -1;
      }
      unsigned int read = table[next], value = read & 63, shift = 0;
      while ((read & 64) != 0 && shift < 24) {
        if (++next >= size) {
          return -1;
        }
        read = table[next];
        shift += 6;
        value |= (read & 63) << shift;
      }
      delta = (value & 1) != 0 ? -static_cast<int>(value >> 1) : static_cast<int>(value >> 1);
    } else if (kind >= 10 && kind <= 12) {
      delta = kind - 10;
    }
    line += delta;
    if (offset < end) {
      return kind == 15 ? -1 : line;
    }
    start = end;
    do {
      ++at;
    } while (at < size && (table[at] & 0x80) == 0);
  }
  return -1;
}

// Finds `out` from two live code objects of different first lines: `code_a`, whose co_linetable is `table_a`
// (its `size_a` bytes `bytes_a`), and `code_b`. Reads through CarefulReader. Needs the GIL (the caller holds
// references to the objects).
inline bool find_line_table_layout(const void* code_a, const void* table_a, const char* bytes_a, size_t size_a,
                                   int first_a, const void* code_b, int first_b, LineTableLayout& out) {
  CarefulReader memory;
  if (first_a == first_b || size_a == 0) {
    return false;
  }
  out.linetable = offset_of_pointer(memory, code_a, table_a);
  int found = 0;
  for (size_t offset = 2 * sizeof(void*); offset < 256; offset += sizeof(int)) {
    int a = 0, b = 0;
    if (memory.read(code_a, offset, a) && memory.read(code_b, offset, b) && a == first_a && b == first_b) {
      out.first_line = offset;
      ++found;
    }
  }
  ptrdiff_t stated = 0;
  if (out.linetable == 0 || found != 1 || !memory.read(table_a, kVarSize, stated) ||
      stated != static_cast<ptrdiff_t>(size_a)) {
    return false;
  }
  out.bytes_data = offset_of_bytes(memory, table_a, kVarSize + sizeof(ptrdiff_t), 48, bytes_a, size_a);
  return out.bytes_data != 0;
}

// The line of the instruction `offset` bytes into `code`, a code object running on the calling thread's stack,
// from its own line table (line_from_table); -1 for none. `bytes_type`: &PyBytes_Type. No GIL.
inline int line_without_gil(const LineTableLayout& layout, const void* code, const void* bytes_type, int offset) {
  const void* table = read_at<const void*>(code, layout.linetable);
  if (table == nullptr || read_at<const void*>(table, kObjectType) != bytes_type) {
    return -1;
  }
  ptrdiff_t size = read_at<ptrdiff_t>(table, kVarSize);
  if (size <= 0 || size > kMostLineTableBytes) {
    return -1;
  }
  const auto* bytes = static_cast<const uint8_t*>(table) + layout.bytes_data;
  return line_from_table(bytes, static_cast<size_t>(size), read_at<int>(code, layout.first_line), offset);
}

// The layout of the running CPython, checked on the calling thread's stack (layout_fits), or null where none
// fits. Needs the GIL. `version`: Py_Version; `code_type`: &PyCode_Type; `lasti_of`: PyFrame_GetLasti.
inline const FrameLayout* checked_layout(unsigned long version, const void* code_type, const void* thread,
                                         int (*lasti_of)(struct _frame*)) {
  if (code_type == nullptr || thread == nullptr || lasti_of == nullptr) {
    return nullptr;
  }
  for (const FrameLayout& layout : kLayouts) {
    if ((version & 0xFFFF0000ul) == layout.version) {
      return layout_fits(layout, code_type, thread, lasti_of) ? &layout : nullptr;
    }
  }
  return nullptr;
}

}  // namespace streamtrace_python
