// The frame walk of the native PyTorch observer (capture/python/python_frames.h) in a library of its own, for
// capture/tests/python_frames.rs: a Python program loads it with ctypes and compares what it reads of the
// calling thread's frames, with and without the GIL, with what Python says of them.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "../python/python_frames.h"

namespace {
const streamtrace_python::FrameLayout* layout = nullptr;
const void* code_type = nullptr;
streamtrace_python::CodeFileLayout code_files;
const void* unicode_type = nullptr;
streamtrace_python::LineTableLayout line_tables;
const void* bytes_type = nullptr;

// Writes what `describe` says of each of the calling thread's frames (its code and instruction), innermost first,
// one a line, into `out`. Returns the number of frames, or -1 where the walk could not read the stack.
template <typename Describe>
int frame_lines(char* out, size_t out_len, Describe describe) {
  if (layout == nullptr) {
    return -1;
  }
  std::string text;
  int frames = 0;
  bool read = streamtrace_python::walk_frames(*layout, code_type, PyGILState_GetThisThreadState(),
                                              [&](const void* code, int lasti) {
                                                text += describe(code, lasti);
                                                text += '\n';
                                                ++frames;
                                                return false;
                                              });
  std::snprintf(out, out_len, "%s", text.c_str());
  return read ? frames : -1;
}
}  // namespace

extern "C" {

// Chooses and checks the layout (called with the GIL: ctypes.PyDLL). Returns its version, or 0.
unsigned long probe_check() {
  code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
  auto lasti = reinterpret_cast<int (*)(struct _frame*)>(dlsym(RTLD_DEFAULT, "PyFrame_GetLasti"));
  const auto* version = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));
  if (version == nullptr) {
    return 0;
  }
  layout = streamtrace_python::checked_layout(*version, code_type, PyGILState_GetThisThreadState(), lasti);
  return layout != nullptr ? layout->version : 0;
}

// Writes the calling thread's frames, innermost first, as "CODE_ADDRESS LASTI" lines into `out` (called
// without the GIL: ctypes.CDLL). Returns the number of frames, or -1 where the walk could not read the stack.
int probe_walk(char* out, size_t out_len) {
  return frame_lines(out, out_len, [](const void* code, int lasti) {
    return std::to_string(reinterpret_cast<size_t>(code)) + " " + std::to_string(lasti);
  });
}

// Finds where code objects keep their file name, on `code` (whose co_filename is `filename`, the ASCII `text`),
// as the observer does at its start (called with the GIL). Returns 1 when found.
int probe_find_code_files(const void* code, const void* filename, const char* text) {
  unicode_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
  return streamtrace_python::find_code_file_layout(code, filename, text, std::strlen(text), code_files) ? 1 : 0;
}

// Finds where code objects keep their line table and first line, on `code_a` (whose co_linetable is `table_a`,
// the `size_a` bytes `bytes_a`, first line `first_a`) and `code_b` (first line `first_b`), as the observer does at
// its start (called with the GIL). Returns 1 when found.
int probe_find_line_tables(const void* code_a, const void* table_a, const char* bytes_a, size_t size_a, int first_a,
                           const void* code_b, int first_b) {
  bytes_type = dlsym(RTLD_DEFAULT, "PyBytes_Type");
  return streamtrace_python::find_line_table_layout(code_a, table_a, bytes_a, size_a, first_a, code_b, first_b,
                                                    line_tables)
             ? 1
             : 0;
}

// The line of the instruction `offset` bytes into code of location table `table` (`size` bytes), first line
// `first_line`, as the observer decodes it.
int probe_line_from_table(const unsigned char* table, size_t size, int first_line, int offset) {
  return streamtrace_python::line_from_table(table, size, first_line, offset);
}

// Writes "LASTI LINE" for each of the calling thread's frames, innermost first, the line read from the code's own
// line table (-1: none), into `out` (called without the GIL). Returns the number of frames, or -1.
int probe_lines(char* out, size_t out_len) {
  if (line_tables.linetable == 0) {
    return -1;
  }
  return frame_lines(out, out_len, [](const void* code, int lasti) {
    return std::to_string(lasti) + " " +
           std::to_string(streamtrace_python::line_without_gil(line_tables, code, bytes_type, lasti));
  });
}

// Writes the file of each of the calling thread's frames, innermost first, one a line ("?" where it cannot be
// read), into `out` (called without the GIL). Returns the number of frames, or -1.
int probe_files(char* out, size_t out_len) {
  if (code_files.filename == 0) {
    return -1;
  }
  return frame_lines(out, out_len, [](const void* code, int) {
    std::string file;
    return streamtrace_python::code_file(code_files, code, unicode_type, file) ? file : std::string("?");
  });
}
}
