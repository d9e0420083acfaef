//! Parts of the PyTorch bootstrap (capture/python/sitecustomize.py) tested in Python (bootstrap_test.py beside
//! this file) with stand-ins for torch: no torch, no GPU.

#[path = "common/python_test.rs"]
mod common_python_test;

#[test]
fn the_bootstraps_parts_work_without_torch() {
    common_python_test::run_python_test("bootstrap_test.py");
}
