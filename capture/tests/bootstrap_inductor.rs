//! The PyTorch bootstrap's recording of torch.compile's Triton launches (capture/python/sitecustomize.py): each
//! launch an op that reads the buffers Inductor names as inputs and writes the others, tested in Python
//! (bootstrap_inductor_test.py beside this file) with stand-ins for Inductor and torch: no torch, no GPU.

#[path = "common/python_test.rs"]
mod common_python_test;

#[test]
fn inductor_launches_read_their_inputs_and_write_every_other_buffer() {
    common_python_test::run_python_test("bootstrap_inductor_test.py");
}
