//! The PyTorch bootstrap records ops two ways: the native observer (torch_observer.cpp) and, where no compiler
//! is at hand, a Python dispatch mode (sitecustomize.py). Each keeps its own lists of ops whose arguments do not
//! stand for the bytes they read or write; the two must name the same ops, or one way of recording gives races
//! the other does not.

use std::collections::BTreeSet;

const OBSERVER: &str = include_str!("../python/torch_observer.cpp");
const BOOTSTRAP: &str = include_str!("../python/sitecustomize.py");

/// The quoted op names (`"aten::..."`) in `text`.
fn op_names(text: &str) -> BTreeSet<&str> {
    text.split('"').skip(1).step_by(2).filter(|name| name.contains("::")).collect()
}

/// The op names in the body of the C++ function that starts with `signature`.
fn observer_set(signature: &str) -> BTreeSet<&'static str> {
    let start = OBSERVER.find(signature).unwrap_or_else(|| panic!("{signature} in torch_observer.cpp"));
    let body = &OBSERVER[start..];
    let end = body.find("\n}\n").expect("the function's end");
    op_names(&body[..end])
}

/// The op names of the Python frozenset assigned to `name`.
fn bootstrap_set(name: &str) -> BTreeSet<&'static str> {
    let start = BOOTSTRAP.find(&format!("\n{name} = frozenset((")).unwrap_or_else(|| panic!("{name} in sitecustomize"));
    let body = &BOOTSTRAP[start..];
    let end = body.find("))").expect("the set's end");
    op_names(&body[..end])
}

#[test]
fn both_observers_leave_out_the_same_ops() {
    for (function, set) in [
        ("bool is_metadata_only(", "_METADATA_ONLY_OPS"),
        ("bool is_like_factory(", "_LIKE_FACTORY_OPS"),
        ("bool is_resize(", "_RESIZE_OPS"),
    ] {
        let native = observer_set(function);
        assert!(!native.is_empty(), "{function} names no op");
        assert_eq!(native, bootstrap_set(set), "{function} against {set}");
    }
}

#[test]
fn factories_like_a_tensor_are_not_taken_as_reading_it() {
    for op in ["aten::ones_like", "aten::zeros_like", "aten::empty_like", "aten::new_zeros"] {
        assert!(observer_set("bool is_like_factory(").contains(op), "{op}");
    }
}
