//! The PyTorch bootstrap records ops two ways: the native observer (torch_observer.cpp) and, where no compiler
//! is at hand, a Python dispatch mode (sitecustomize.py). Each keeps its own lists of ops whose arguments do not
//! stand for the bytes they read or write as their schemas say (metadata-only ops, shape-only arguments, resizes,
//! schema corrections, c10d's readers); the two must name the same ops, or one way of recording gives races the
//! other does not.

use std::collections::BTreeSet;

const OBSERVER: &str = include_str!("../python/torch_observer.cpp");
const BOOTSTRAP: &str = include_str!("../python/sitecustomize.py");

/// The quoted op names (`"aten::..."`; not a bare namespace prefix) in `text`.
fn op_names(text: &str) -> BTreeSet<&str> {
    text.split('"').skip(1).step_by(2).filter(|name| name.contains("::") && !name.ends_with("::")).collect()
}

/// The op names in the body of the C++ function that starts with `signature`.
fn observer_set(signature: &str) -> BTreeSet<&'static str> {
    let start = OBSERVER.find(signature).unwrap_or_else(|| panic!("{signature} in torch_observer.cpp"));
    let body = &OBSERVER[start..];
    let end = body.find("\n}\n").expect("the function's end");
    op_names(&body[..end])
}

/// The op names of the Python value (a set, tuple or dict) assigned to `name`, up to the next blank line.
fn bootstrap_set(name: &str) -> BTreeSet<&'static str> {
    let start = BOOTSTRAP.find(&format!("\n{name} = ")).unwrap_or_else(|| panic!("{name} in sitecustomize"));
    let body = &BOOTSTRAP[start + 1..];
    let end = body.find("\n\n").expect("the value's end");
    op_names(&body[..end])
}

#[test]
fn both_observers_leave_out_the_same_ops() {
    for (function, set) in [
        ("bool is_metadata_only(", "_METADATA_ONLY_OPS"),
        ("shape_only_arguments(const std::string& schema_name) {", "_SHAPE_ONLY_ARGUMENTS"),
        ("bool is_resize(", "_RESIZE_OPS"),
        ("schema_corrections(const std::string& schema_name) {", "_SCHEMA_CORRECTIONS"),
        ("bool c10d_writes_first_argument(", "_C10D_READERS"),
    ] {
        let native = observer_set(function);
        assert!(!native.is_empty(), "{function} names no op");
        assert_eq!(native, bootstrap_set(set), "{function} against {set}");
    }
}

#[test]
fn batch_norm_and_the_fused_optimizers_are_corrected() {
    let corrected = observer_set("schema_corrections(const std::string& schema_name) {");
    for op in ["aten::batch_norm", "aten::native_batch_norm", "aten::cudnn_batch_norm", "aten::_fused_adamw_"] {
        assert!(corrected.contains(op), "{op}");
    }
}

#[test]
fn factories_like_a_tensor_are_not_taken_as_reading_it() {
    for op in ["aten::ones_like", "aten::zeros_like", "aten::empty_like", "aten::new_zeros"] {
        assert!(observer_set("shape_only_arguments(const std::string& schema_name) {").contains(op), "{op}");
    }
}
