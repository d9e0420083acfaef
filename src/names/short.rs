//! Short forms for places where a whole name does not fit (a bar or lane of a timeline, a finding's title): a
//! kernel's function name without its namespaces, template arguments and parameters, a framework op without
//! its namespace and overload, a source line without its folders, a handle as people read it. Sentences keep
//! the longer forms (crate::report::kernel_name); the JSON report keeps every name whole.

use std::borrow::Cow;

use crate::model::SourceLocation;

/// A stream's or event's number for people: in hex when it is a handle (a pointer) rather than a small id.
pub fn stream_number(handle: u64) -> String {
    if handle > 0xF_FFFF {
        format!("{handle:#x}")
    } else {
        handle.to_string()
    }
}

/// `file:line` with the file's folders left out: names are read beside the full paths of the operations' lines.
pub fn short_place(place: &SourceLocation) -> String {
    let file = place.file.rsplit('/').next().unwrap_or(&place.file);
    match place.line {
        Some(line) => format!("{file}:{line}"),
        None => file.to_string(),
    }
}

/// A kernel's bare function name: `void at::native::reduce_kernel<512, 1, at::native::ReduceOp<...>>(...)` ->
/// `reduce_kernel`, `write_kernel(float*, int)` -> `write_kernel`. A name with no template or parameter list
/// (`scale`, `memcpy HtoD`) stays as it is, but for its namespaces.
pub fn short_name(name: &str) -> Cow<'_, str> {
    let text = name.strip_prefix("void ").unwrap_or(name);
    // `(anonymous namespace)` is part of a qualified name, not a parameter list.
    let text: Cow<str> = if text.contains("(anonymous namespace)") {
        text.replace("(anonymous namespace)", "anonymous").into()
    } else {
        text.into()
    };
    let end = text.find(['<', '(']).unwrap_or(text.len());
    let qualified = text[..end].trim_end();
    let bare = match qualified.rfind("::") {
        Some(at) => &qualified[at + 2..],
        None => qualified,
    };
    if bare.is_empty() {
        return name.into();
    }
    if bare.len() == name.len() {
        name.into()
    } else {
        bare.to_string().into()
    }
}

/// A framework op's short name: `aten::sum` -> `sum`, `sum.dim_IntList` -> `sum`, `fill_.Scalar` -> `fill_`.
/// Only an op's `name.overload` loses its part after the dot (a lower-case identifier, one dot); other names
/// (`Stream.wait_event`, `torch.cuda.synchronize`, `torch.save`, `triton scale_kernel`) stay whole: a Python
/// function the capture names by its module (`torch.save`'s host reads) is no op with an overload.
pub fn short_op_name(name: &str) -> &str {
    let name = name.rsplit_once("::").map_or(name, |(_, bare)| bare);
    let identifier = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    match name.split_once('.') {
        Some((op, overload))
            if identifier(op)
                && op != "torch"
                && identifier(overload)
                && op.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') =>
        {
            op
        }
        _ => name,
    }
}

/// Short names that tell apart every distinct name of `names` (a chart's or a list's labels): each kernel's
/// [`short_name`], except where two different kernels share one (three cuBLAS GEMMs all `Kernel2`, three
/// `vectorized_elementwise_kernel`s): those add the words of their template arguments that the others sharing
/// the short name lack (`vectorized_elementwise_kernel<FillFunctor>`), else keep their template arguments, cut
/// in the middle to `max` characters, and should that still not tell them apart, a number.
pub fn distinct_short_names(names: &[&str], max: usize) -> Vec<String> {
    let mut labels: Vec<String> = names.iter().map(|n| short_name(n).into_owned()).collect();
    let clashing = |labels: &[String], i: usize| -> Vec<usize> {
        (0..names.len()).filter(|&j| j != i && labels[j] == labels[i] && names[j] != names[i]).collect()
    };
    let longer: Vec<Option<String>> = (0..names.len())
        .map(|i| {
            let others = clashing(&labels, i);
            if others.is_empty() {
                return None;
            }
            let words = template_words(names[i]);
            let theirs: Vec<Vec<String>> = others.iter().map(|&j| template_words(names[j])).collect();
            let own: Vec<String> = words.into_iter().filter(|w| theirs.iter().any(|t| !t.contains(w))).collect();
            let label =
                if own.is_empty() { with_templates(names[i]) } else { format!("{}<{}>", labels[i], own.join(", ")) };
            Some(cut_middle(&label, max))
        })
        .collect();
    for (label, longer) in labels.iter_mut().zip(longer) {
        if let Some(longer) = longer {
            *label = longer;
        }
    }
    let numbered: Vec<bool> = (0..names.len()).map(|i| !clashing(&labels, i).is_empty()).collect();
    let mut seen: std::collections::HashMap<String, Vec<&str>> = std::collections::HashMap::new();
    for (i, label) in labels.iter_mut().enumerate() {
        if numbered[i] {
            let distinct = seen.entry(label.clone()).or_default();
            if !distinct.contains(&names[i]) {
                distinct.push(names[i]);
            }
            let k = distinct.iter().position(|n| *n == names[i]).unwrap_or(0) + 1;
            label.push_str(&format!(" #{k}"));
        }
    }
    labels
}

/// The words of a kernel's template arguments, in order, once each, without namespaces, C++ keywords, types
/// every kernel has, and bare numbers: `vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,
/// std::array<char*, 1>>(...)` -> `FillFunctor`.
fn template_words(name: &str) -> Vec<String> {
    const COMMON: &[&str] = &[
        "float", "double", "int", "long", "unsigned", "char", "bool", "void", "const", "array", "std", "at", "native",
    ];
    let text = with_templates(name);
    let Some(open) = text.find('<') else { return Vec::new() };
    let mut words: Vec<String> = Vec::new();
    for word in text[open..].split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if word.is_empty() || word.chars().all(|c| c.is_ascii_digit()) || COMMON.contains(&word) {
            continue;
        }
        if !words.iter().any(|w| w == word) {
            words.push(word.to_string());
        }
    }
    words
}

/// The part of a kernel's name before its parameter list, without `void`.
fn with_templates_str(name: &str) -> &str {
    let text = name.strip_prefix("void ").unwrap_or(name);
    // A name that is all parameter list keeps it.
    match parameter_list(text).filter(|open| *open > 0) {
        Some(open) => &text[..open],
        None => text,
    }
}

/// Where the parameter list of a kernel's name opens: the parenthesis matching its last one; None when the name
/// does not end in one.
pub fn parameter_list(text: &str) -> Option<usize> {
    if !text.ends_with(')') {
        return None;
    }
    let mut depth = 0usize;
    let open = text.char_indices().rev().find(|&(_, c)| {
        match c {
            ')' => depth += 1,
            '(' => depth = depth.saturating_sub(1),
            _ => {}
        }
        c == '(' && depth == 0
    });
    open.map(|(at, _)| at)
}

/// A kernel's name without `void`, namespaces and its parameter list, its template arguments kept:
/// `void cutlass::Kernel2<cutlass_80_gemm_64x64>(Params)` -> `Kernel2<cutlass_80_gemm_64x64>`.
fn with_templates(name: &str) -> String {
    let text = with_templates_str(name);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("::") {
        let before = &rest[..at];
        let keep = before.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
        out.push_str(&before[..keep]);
        rest = &rest[at + 2..];
    }
    out.push_str(rest);
    out
}

/// `text` in at most `max` characters, its middle left out (names differ at their ends as often as at their
/// starts: tile sizes, element types).
fn cut_middle(text: &str, max: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max || max < 3 {
        return text.to_string();
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_keep_their_function_name() {
        assert_eq!(short_name("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator &)::{lambda(float, float)#1}>, unsigned int, float, 4, 4>>(T3)"), "reduce_kernel");
        assert_eq!(short_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, (unsigned long)1> >(int, at::native::FillFunctor<float>, std::array<char*, (unsigned long)1>)"), "vectorized_elementwise_kernel");
        assert_eq!(short_name("write_kernel(float*, int, float)"), "write_kernel");
        assert_eq!(short_name("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(T2 *, const T1 *, int, int, int, const bool *, int, bool)"), "softmax_warp_forward");
        assert_eq!(
            short_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
        );
        assert_eq!(short_name("scale"), "scale");
        assert_eq!(short_name("memcpy HtoD"), "memcpy HtoD");
        assert_eq!(short_name("<script>"), "<script>", "nothing left: the name stays whole");
    }

    #[test]
    fn distinct_kernels_get_distinct_labels() {
        let names = [
            "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(Params)",
            "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1> >(int, at::native::FillFunctor<float>, std::array<char*, 1>)",
            "write_kernel(float*, int, float)",
            "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(Params)",
        ];
        let labels = distinct_short_names(&names, 60);
        assert_eq!(labels[0], "Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>");
        let pytorch = [
            "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, std::array<char *, (unsigned long)1>>(int, T2, T3)",
            "void at::native::vectorized_elementwise_kernel<(int)4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>, std::array<char *, (unsigned long)2>>(int, T2, T3)",
        ];
        assert_eq!(
            distinct_short_names(&pytorch, 60),
            ["vectorized_elementwise_kernel<FillFunctor>", "vectorized_elementwise_kernel<AUnaryFunctor, MulFunctor>",]
        );
        assert_eq!(labels[1], "Kernel2<cutlass_80_tensorop_s…88gemm_128x128_32x3_nn_align4>");
        assert_eq!(labels[2], "vectorized_elementwise_kernel", "no other kernel shares it");
        assert_eq!(labels[3], "write_kernel");
        assert_eq!(labels[4], labels[0], "the same name, the same label");
        // Names that differ only where the cut drops them are numbered.
        let long = |k: u32| format!("void k<{}{k}{}>(int)", "a".repeat(40), "b".repeat(40));
        let (a, b) = (long(1), long(2));
        let labels = distinct_short_names(&[&a, &b], 20);
        assert_ne!(labels[0], labels[1]);
        assert!(labels[0].ends_with(" #1") && labels[1].ends_with(" #2"), "{labels:?}");
    }

    #[test]
    fn ops_lose_their_namespace_and_overload() {
        assert_eq!(short_op_name("aten::sum"), "sum");
        assert_eq!(short_op_name("sum.dim_IntList"), "sum");
        assert_eq!(short_op_name("fill_.Scalar"), "fill_");
        assert_eq!(short_op_name("_foreach_add_.List"), "_foreach_add_");
        assert_eq!(short_op_name("aten::mul.Tensor"), "mul");
        assert_eq!(short_op_name("Stream.wait_event"), "Stream.wait_event");
        assert_eq!(short_op_name("torch.cuda.synchronize"), "torch.cuda.synchronize");
        assert_eq!(short_op_name("torch.save"), "torch.save", "a module's function, not an op's overload");
        assert_eq!(short_op_name("triton scale_kernel"), "triton scale_kernel");
    }
}
