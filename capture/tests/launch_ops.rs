//! The PyTorch bootstrap's recording of Triton's launches as ops (capture/python/streamtrace_launch_ops.py):
//! torch.compile's, whose reads are the buffers Inductor names as inputs, and hand-written kernels', whose reads
//! and writes PyTorch's analysis of their Triton IR says. Tested in Python (launch_ops_test.py beside this file)
//! with stand-ins for Inductor, Triton and torch: no torch, no GPU.

#[path = "common/python_test.rs"]
mod common_python_test;

#[test]
fn triton_launches_are_ops_reading_what_their_kernels_load_and_writing_what_they_store_to() {
    common_python_test::run_python_test("launch_ops_test.py");
}
