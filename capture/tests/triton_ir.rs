//! The PyTorch bootstrap's reading of what a compiled Triton kernel loads and stores, from its Triton IR
//! (capture/python/streamtrace_triton_ir.py). Tested in Python (triton_ir_test.py beside this file): on IR text
//! without torch or Triton, and on real kernels where both are installed.

#[path = "common/python_test.rs"]
mod common_python_test;

#[test]
fn kernel_arguments_reaching_loads_and_stores_are_read_from_triton_ir() {
    common_python_test::run_python_test("triton_ir_test.py");
}
