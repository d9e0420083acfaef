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
/// (`Stream.wait_event`, `torch.cuda.synchronize`, `triton scale_kernel`) stay whole.
pub fn short_op_name(name: &str) -> &str {
    let name = name.rsplit_once("::").map_or(name, |(_, bare)| bare);
    let identifier = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    match name.split_once('.') {
        Some((op, overload))
            if identifier(op)
                && identifier(overload)
                && op.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') =>
        {
            op
        }
        _ => name,
    }
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
    fn ops_lose_their_namespace_and_overload() {
        assert_eq!(short_op_name("aten::sum"), "sum");
        assert_eq!(short_op_name("sum.dim_IntList"), "sum");
        assert_eq!(short_op_name("fill_.Scalar"), "fill_");
        assert_eq!(short_op_name("_foreach_add_.List"), "_foreach_add_");
        assert_eq!(short_op_name("aten::mul.Tensor"), "mul");
        assert_eq!(short_op_name("Stream.wait_event"), "Stream.wait_event");
        assert_eq!(short_op_name("torch.cuda.synchronize"), "torch.cuda.synchronize");
        assert_eq!(short_op_name("triton scale_kernel"), "triton scale_kernel");
    }
}
