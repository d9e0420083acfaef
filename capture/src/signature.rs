//! Which kernel parameters are read-only: a parameter declared `const T*` in the kernel's demangled signature
//! is a read; any other pointer may write (DESIGN.md tier T1). String work only; touches nothing.

/// The top-level parameter types of a demangled function signature such as
/// `void scale<float>(float const*, float*, int)` or `add(const float *, float *, int)`.
pub fn parameter_types(demangled: &str) -> Vec<&str> {
    let Some(open) = top_level_parameter_list(demangled) else { return Vec::new() };
    let inner = &demangled[open + 1..demangled.len() - 1];
    if inner.trim().is_empty() || inner.trim() == "void" {
        return Vec::new();
    }
    let mut params = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                params.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    params.push(inner[start..].trim());
    params
}

/// Index of the `(` opening the outermost parameter list, which ends the string.
fn top_level_parameter_list(demangled: &str) -> Option<usize> {
    let trimmed = demangled.trim_end();
    if !trimmed.ends_with(')') || trimmed.len() != demangled.len() {
        return None;
    }
    let mut depth = 0i32;
    for (i, c) in demangled.char_indices().rev() {
        match c {
            ')' | '>' | ']' => depth += 1,
            '(' | '<' | '[' => {
                depth -= 1;
                if depth == 0 && c == '(' {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether a parameter type is a pointer to const data: `const float*`, `float const*`, `const T* __restrict__`.
/// A const pointer to mutable data (`float* const`) may still write.
pub fn is_pointer_to_const(ty: &str) -> bool {
    let Some(star) = ty.find('*') else { return false };
    let pointee = &ty[..star];
    pointee.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|word| word == "const")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_top_level_parameters_only() {
        let sig = "void k<(int)4, F<float, 2>>(int, std::array<char*, 2>, float const*)";
        assert_eq!(parameter_types(sig), vec!["int", "std::array<char*, 2>", "float const*"]);
        assert_eq!(parameter_types("add(const float *, float *, int)"), vec!["const float *", "float *", "int"]);
        assert!(parameter_types("no_params()").is_empty());
        assert!(parameter_types("_Z3fooPf").is_empty(), "a mangled name has no parameter list");
    }

    #[test]
    fn const_pointee_is_a_read() {
        assert!(is_pointer_to_const("const float *"));
        assert!(is_pointer_to_const("float const*"));
        assert!(is_pointer_to_const("const __half* __restrict__"));
        assert!(!is_pointer_to_const("float *"));
        assert!(!is_pointer_to_const("float* const"));
        assert!(!is_pointer_to_const("int"));
        assert!(!is_pointer_to_const("constant_t*"));
    }
}
