//! cuBLAS's and cuBLASLt's routines, stood in front of when the capture library is preloaded: what each call
//! reads and writes by BLAS's definition of it, handed to the kernels that carry it out.
//!
//! A cuBLAS kernel takes the program's matrices inside a struct of parameters, where tier T1 cannot tell a read
//! from a write: two gemms on two streams that only read one shared weight matrix would look like two writes of
//! it. Each call here works out its operands' byte ranges (dimensions, leading dimensions, transposes, element
//! sizes, batch strides) and passes the call on; every kernel the calling thread launches meanwhile takes those
//! ranges as its reads and writes, and its pointer words into them count no more (process_state.rs). Pointer
//! words elsewhere (the handle's workspace, a bias) still count as at tier T1. A call whose operands cannot be
//! described (a data type or a matrix order this file does not know, arrays of pointers) names nothing, and its
//! kernels stay at tier T1.
//!
//! Inside a framework op (PyTorch's matmuls) the op's extents already stand for its kernels' accesses: nothing
//! is named there. cuBLAS calling cuBLASLt's exported functions (a gemm runs through `cublasLtMatmul`) comes
//! back here inside the program's call and is passed straight on. Calls to a cuBLAS linked into the program statically never reach
//! these functions. Touches libc's dynamic loader functions, the framework's open ops and a thread-local.

use std::cell::Cell;
use std::ffi::{c_int, c_void};

use streamtrace_format::ByteRuns;

use crate::call_buffers::Buffers;
use crate::library_call::{self, OpenCall};
use crate::stand_in::{quietly, say_missing};
use crate::unwind::Start;

/// cuBLAS's `cublasStatus_t` values this file returns.
const CUBLAS_STATUS_SUCCESS: c_int = 0;
const CUBLAS_STATUS_NOT_INITIALIZED: c_int = 1;

/// Batches of a strided batched call named one by one when their matrices have gaps (a leading dimension past the
/// rows); more are named as one run from the first to the last.
const BATCHES_NAMED_APART: i64 = 64;

/// The bytes of one element of a `cudaDataType` (library_types.h); None for one this table does not know or one
/// smaller than a byte (the 4-bit types).
pub fn data_type_bytes(data_type: c_int) -> Option<u64> {
    Some(match data_type {
        3 | 8 | 28 | 29 => 1,                // R_8I, R_8U, R_8F_E4M3, R_8F_E5M2
        2 | 7 | 9 | 14 | 20 | 22 => 2,       // R_16F, C_8I, C_8U, R_16BF, R_16I, R_16U
        0 | 6 | 10 | 12 | 15 | 21 | 23 => 4, // R_32F, C_16F, R_32I, R_32U, C_16BF, C_16I, C_16U
        1 | 4 | 11 | 13 | 24 | 26 => 8,      // R_64F, C_32F, C_32I, C_32U, R_64I, R_64U
        5 | 25 | 27 => 16,                   // C_64F, C_64I, C_64U
        _ => return None,
    })
}

/// Whether a `cudaDataType` is complex (its scalars are pairs).
fn is_complex(data_type: c_int) -> bool {
    matches!(data_type, 4 | 5 | 6 | 7 | 9 | 11 | 13 | 15 | 21 | 23 | 25 | 27)
}

/// The bytes of the scalars (alpha, beta) of a `cublasGemmEx`-style call: of its compute type
/// (`cublasComputeType_t`, or a `cudaDataType` as older code passes), complex where C is.
pub fn scalar_bytes(compute_type: c_int, c_type: c_int) -> Option<u64> {
    let real = match compute_type {
        64 | 65 => 2,                               // COMPUTE_16F, _PEDANTIC
        68 | 69 | 72 | 73 | 74 | 75 | 77 | 78 => 4, // COMPUTE_32F and its fast and emulated forms, COMPUTE_32I
        70 | 71 | 79 => 8,                          // COMPUTE_64F, _PEDANTIC, _EMULATED_FIXEDPOINT
        legacy => return data_type_bytes(legacy),
    };
    Some(if is_complex(c_type) { real * 2 } else { real })
}

/// How a BLAS routine takes a matrix operand (`cublasOperation_t`): as stored or transposed; None for a value
/// this file does not know.
fn transposed(op: c_int) -> Option<bool> {
    match op {
        0 | 3 => Some(false), // OP_N, OP_CONJG (conjugated, not transposed)
        1 | 2 => Some(true),  // OP_T, OP_C
        _ => None,
    }
}

/// A matrix as it is stored: `rows` x `cols` elements of `element` bytes, column-major with leading dimension
/// `ld` (for a row-major matrix, swap rows and cols), `batch` of them `stride` elements apart.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Matrix {
    pub address: u64,
    pub rows: i64,
    pub cols: i64,
    pub ld: i64,
    pub element: u64,
    pub batch: i64,
    pub stride: i64,
}

impl Matrix {
    /// One matrix, not batched.
    pub fn single(address: u64, rows: i64, cols: i64, ld: i64, element: u64) -> Matrix {
        Matrix { address, rows, cols, ld, element, batch: 1, stride: 0 }
    }

    /// The byte runs the matrix occupies: none for an empty or null one; None where its description is not one
    /// cuBLAS accepts (negative sizes, a leading dimension short of the rows) or its bytes overflow.
    pub fn runs(&self) -> Option<Vec<ByteRuns>> {
        if self.rows < 0 || self.cols < 0 || self.batch < 0 || self.stride < 0 || self.ld < self.rows.max(1) {
            return None;
        }
        if self.address == 0 || self.rows == 0 || self.cols == 0 || self.batch == 0 {
            return Some(Vec::new());
        }
        let bytes = |elements: i64| u64::try_from(elements).ok()?.checked_mul(self.element);
        let column = bytes(self.rows)?;
        let one = if self.ld == self.rows {
            ByteRuns { first: self.address, len: bytes(self.rows.checked_mul(self.cols)?)?, step: 0, count: 1 }
        } else {
            ByteRuns { first: self.address, len: column, step: bytes(self.ld)?, count: u64::try_from(self.cols).ok()? }
        };
        let extent = one.extent();
        self.address.checked_add(extent)?;
        if self.batch == 1 || self.stride == 0 {
            return Some(vec![one]);
        }
        let stride = bytes(self.stride)?;
        let batches = u64::try_from(self.batch).ok()?;
        let whole = stride.checked_mul(batches - 1)?.checked_add(extent)?;
        self.address.checked_add(whole)?;
        Some(if stride < extent {
            // Batches that overlap (a stride shorter than a matrix): their union is one run.
            vec![ByteRuns { first: self.address, len: whole, step: 0, count: 1 }]
        } else if one.count == 1 {
            vec![ByteRuns { first: self.address, len: one.len, step: stride, count: batches }]
        } else if self.batch <= BATCHES_NAMED_APART {
            (0..batches).map(|i| ByteRuns { first: self.address + i * stride, ..one }).collect()
        } else {
            vec![ByteRuns { first: self.address, len: whole, step: 0, count: 1 }]
        })
    }
}

/// A vector of `n` elements of `element` bytes, `inc` elements apart (BLAS's negative increments walk the same
/// elements backwards from the same base).
fn vector(address: u64, n: i64, inc: i64, element: u64) -> Option<Vec<ByteRuns>> {
    if n < 0 {
        return None;
    }
    let step = inc.unsigned_abs().max(1);
    let contiguous = step == 1 || n == 1;
    let (rows, cols, ld) = if contiguous { (n, 1, n.max(1)) } else { (1, n, i64::try_from(step).ok()?) };
    Matrix::single(address, rows, cols, ld, element).runs()
}

/// What one call reads and writes, by BLAS's definition of the routine.
#[derive(Copy, Clone, Debug)]
pub enum Routine {
    /// `C = alpha op(A) op(B) + beta C`: op(A) is m x k, op(B) k x n, C m x n; `batch` times, each operand
    /// `stride_*` elements on from the last (strided batched forms).
    Gemm {
        trans_a: c_int,
        trans_b: c_int,
        m: i64,
        n: i64,
        k: i64,
        a: (u64, i64, u64, i64),
        b: (u64, i64, u64, i64),
        c: (u64, i64, u64, i64),
        batch: i64,
    },
    /// `y = alpha op(A) x + beta y`, A m x n.
    Gemv { trans: c_int, m: i64, n: i64, a: (u64, i64), x: (u64, i64), y: (u64, i64), element: u64 },
    /// `y = alpha x + y`, or `y = x` (copy).
    Axpy { n: i64, x: (u64, i64), y: (u64, i64), element: u64 },
    /// `x = alpha x`.
    Scal { n: i64, x: (u64, i64), element: u64 },
    /// `result = x . y`, the result written where the pointer mode says (the host's copy is no device access).
    Dot { n: i64, x: (u64, i64), y: (u64, i64), result: u64, element: u64 },
    /// One vector reduced to one value (nrm2, asum, the index of its largest or smallest element), written to
    /// `result` (`result_bytes`) where the pointer mode says, as for a dot product.
    Reduce { n: i64, x: (u64, i64), result: u64, element: u64, result_bytes: u64 },
    /// `x <-> y`: both read and written.
    Swap { n: i64, x: (u64, i64), y: (u64, i64), element: u64 },
    /// `C = alpha op(A) + beta op(B)`, C m x n (a transpose or a matrix sum; C may be A or B).
    Geam { trans_a: c_int, trans_b: c_int, m: i64, n: i64, a: (u64, i64), b: (u64, i64), c: (u64, i64), element: u64 },
}

impl Routine {
    /// A gemm of one element type: each operand as (address, leading dimension, element bytes, batch stride).
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        trans_a: c_int,
        trans_b: c_int,
        m: i64,
        n: i64,
        k: i64,
        (a, lda, sa): (u64, i64, i64),
        (b, ldb, sb): (u64, i64, i64),
        (c, ldc, sc): (u64, i64, i64),
        element: u64,
        batch: i64,
    ) -> Routine {
        Routine::Gemm {
            trans_a,
            trans_b,
            m,
            n,
            k,
            a: (a, lda, element, sa),
            b: (b, ldb, element, sb),
            c: (c, ldc, element, sc),
            batch,
        }
    }

    /// The call's ranges, with `device_scalars` (alpha, beta: address and bytes) read where the handle takes
    /// scalars from device memory; None where an operand cannot be described.
    pub fn buffers(self, device_scalars: &[(u64, u64)], device_result: bool) -> Option<Buffers> {
        let mut b = Buffers::default();
        match self {
            Routine::Gemm { trans_a, trans_b, m, n, k, a, b: bm, c, batch } => {
                let (ta, tb) = (transposed(trans_a)?, transposed(trans_b)?);
                let stored = |(address, ld, element, stride): (u64, i64, u64, i64), rows, cols| Matrix {
                    address,
                    rows,
                    cols,
                    ld,
                    element,
                    batch,
                    stride,
                };
                if m == 0 || n == 0 {
                    return Some(b);
                }
                let a = if ta { stored(a, k, m) } else { stored(a, m, k) };
                let bm = if tb { stored(bm, n, k) } else { stored(bm, k, n) };
                let c = stored(c, m, n);
                b.reads.extend(a.runs()?);
                b.reads.extend(bm.runs()?);
                // beta C is read unless beta is 0, which only the values say: C is written either way.
                b.writes.extend(c.runs()?);
            }
            Routine::Gemv { trans, m, n, a, x, y, element } => {
                let (x_len, y_len) = if transposed(trans)? { (m, n) } else { (n, m) };
                b.reads.extend(Matrix::single(a.0, m, n, a.1, element).runs()?);
                b.reads.extend(vector(x.0, x_len, x.1, element)?);
                b.writes.extend(vector(y.0, y_len, y.1, element)?);
            }
            Routine::Axpy { n, x, y, element } => {
                b.reads.extend(vector(x.0, n, x.1, element)?);
                b.writes.extend(vector(y.0, n, y.1, element)?);
            }
            Routine::Scal { n, x, element } => b.writes.extend(vector(x.0, n, x.1, element)?),
            Routine::Dot { n, x, y, result, element } => {
                b.reads.extend(vector(x.0, n, x.1, element)?);
                b.reads.extend(vector(y.0, n, y.1, element)?);
                if device_result {
                    b.write(result, element);
                }
            }
            Routine::Reduce { n, x, result, element, result_bytes } => {
                b.reads.extend(vector(x.0, n, x.1, element)?);
                if device_result {
                    b.write(result, result_bytes);
                }
            }
            Routine::Swap { n, x, y, element } => {
                b.writes.extend(vector(x.0, n, x.1, element)?);
                b.writes.extend(vector(y.0, n, y.1, element)?);
            }
            Routine::Geam { trans_a, trans_b, m, n, a, b: bm, c, element } => {
                // op(A) and op(B) are m x n: stored n x m where transposed. A null B (beta 0) is not read.
                let stored = |(address, ld): (u64, i64), transposed: bool| {
                    let (rows, cols) = if transposed { (n, m) } else { (m, n) };
                    Matrix::single(address, rows, cols, ld, element).runs()
                };
                b.reads.extend(stored(a, transposed(trans_a)?)?);
                b.reads.extend(stored(bm, transposed(trans_b)?)?);
                b.writes.extend(stored(c, false)?);
            }
        }
        for &(address, bytes) in device_scalars {
            b.read(address, bytes);
        }
        Some(b)
    }
}

thread_local! {
    /// Set while the thread is inside one of these stand-ins: cuBLAS calls cuBLASLt's exported functions through
    /// its PLT, which must neither name the call twice nor replace the outer call's ranges.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// What [`leave`] needs of a stand-in's entry: whether it was the outermost, and whether it opened a call.
type Entered = (bool, bool);

/// Enters a stand-in called from `start` (its own frame); for the program's own call outside a framework op,
/// opens the call for the kernels it launches: the ranges `describe` gives, and the program's call site.
/// Nothing is described where nothing is recorded (the capture off, outside a capture range), nor inside a
/// framework op, whose extents stand for its kernels.
fn enter(start: Start, describe: impl FnOnce() -> Option<Buffers>) -> Entered {
    let wanted = || crate::recording::recording_here() && !crate::framework::inside_op();
    enter_as(wanted, || crate::recording::site_of_library_call(start), describe)
}

/// [`enter`], asking `wanted` whether the outermost call is described and `site` for its call site.
fn enter_as(
    wanted: impl FnOnce() -> bool,
    site: impl FnOnce() -> u32,
    describe: impl FnOnce() -> Option<Buffers>,
) -> Entered {
    let outermost = !INSIDE.try_with(|inside| inside.replace(true)).unwrap_or(true);
    if !outermost || !wanted() {
        return (outermost, false);
    }
    let buffers = quietly(|| describe().filter(|b| !b.is_empty()));
    let site = quietly(site);
    if buffers.is_none() && site == 0 {
        return (outermost, false);
    }
    (outermost, library_call::open(OpenCall { buffers, site }))
}

fn leave((outermost, opened): Entered) {
    library_call::close(opened);
    if outermost {
        let _ = INSIDE.try_with(|inside| inside.set(false));
    }
}

/// The handle's alpha and beta, as (address, bytes) reads, where it takes them from device memory; empty where
/// it takes them from the host (their values are passed by value to the kernels).
fn device_scalars(handle: Handle, alpha: *const c_void, beta: *const c_void, bytes: u64) -> Vec<(u64, u64)> {
    if takes_device_pointers(handle) {
        vec![(alpha as u64, bytes), (beta as u64, bytes)]
    } else {
        Vec::new()
    }
}

/// Whether the handle's pointer mode is device (`CUBLAS_POINTER_MODE_DEVICE`).
fn takes_device_pointers(handle: Handle) -> bool {
    let mut mode: c_int = 0;
    // Safety: cuBLAS's own getter, given the program's handle and a local to fill.
    let asked = real::cublasGetPointerMode_v2().map(|get| unsafe { get(handle, &mut mode) });
    asked == Some(CUBLAS_STATUS_SUCCESS) && mode == 1
}

/// The attributes of one cuBLASLt object (a matrix layout, a matmul descriptor) through `get`, its getter, as
/// `(attribute, value, size) -> answered`.
fn lt_attributes(
    get: unsafe extern "C-unwind" fn(*mut c_void, c_int, *mut c_void, usize, *mut usize) -> c_int,
    object: *mut c_void,
) -> impl Fn(c_int, *mut c_void, usize) -> bool {
    move |attr, value, size| {
        let mut written = 0usize;
        // Safety: cuBLASLt's getter, given the program's object and the caller's local of `size` bytes.
        unsafe { get(object, attr, value, size, &mut written) == CUBLAS_STATUS_SUCCESS }
    }
}

/// One attribute read as a `T` of the attribute's size; None where it is not answered.
fn attribute<T: Copy + Default>(attributes: &impl Fn(c_int, *mut c_void, usize) -> bool, attr: c_int) -> Option<T> {
    let mut value = T::default();
    attributes(attr, (&mut value as *mut T).cast(), std::mem::size_of::<T>()).then_some(value)
}

/// cuBLASLt's matrix layout, as [`Matrix`], with its rows and columns as the layout names them (a row-major
/// matrix is stored as its transpose); None where it is not one this file can describe (an order other than
/// column- or row-major, planar complex, arrays of pointers, a data type it does not know).
fn lt_layout(address: *const c_void, layout: *mut c_void) -> Option<(Matrix, (i64, i64))> {
    const TYPE: c_int = 0;
    const ORDER: c_int = 1;
    const ROWS: c_int = 2;
    const COLS: c_int = 3;
    const LD: c_int = 4;
    const BATCH_COUNT: c_int = 5;
    const STRIDED_BATCH_OFFSET: c_int = 6;
    const PLANE_OFFSET: c_int = 7;
    const BATCH_MODE: c_int = 8;
    if layout.is_null() {
        return None;
    }
    let attributes = lt_attributes(real_lt::cublasLtMatrixLayoutGetAttribute()?, layout);
    // Planar complex: the imaginary parts lie a plane's offset away, and the batch stride counts real parts.
    if attribute::<i64>(&attributes, PLANE_OFFSET).unwrap_or(0) != 0 {
        return None;
    }
    let element = data_type_bytes(attribute::<c_int>(&attributes, TYPE)?)?;
    let rows = i64::try_from(attribute::<u64>(&attributes, ROWS)?).ok()?;
    let cols = i64::try_from(attribute::<u64>(&attributes, COLS)?).ok()?;
    let ld = attribute::<i64>(&attributes, LD)?;
    let batch = i64::from(attribute::<c_int>(&attributes, BATCH_COUNT).unwrap_or(1));
    let stride = attribute::<i64>(&attributes, STRIDED_BATCH_OFFSET).unwrap_or(0);
    // Arrays of pointers (CUBLASLT_BATCH_MODE_POINTER_ARRAY); a cuBLASLt before CUDA 12.9 has no such mode.
    if attribute::<c_int>(&attributes, BATCH_MODE).unwrap_or(0) != 0 {
        return None;
    }
    let address = address as u64;
    let stored = match attribute::<c_int>(&attributes, ORDER).unwrap_or(0) {
        0 => Matrix { address, rows, cols, ld, element, batch, stride },
        1 => Matrix { address, rows: cols, cols: rows, ld, element, batch, stride },
        _ => return None,
    };
    Some((stored, (rows, cols)))
}

/// `cublasLtMatmul`'s ranges: A, B and C read, D and the workspace written, and what its epilogue reads or
/// writes beside them; alpha and beta read where the operation takes them from device memory.
#[allow(clippy::too_many_arguments)]
fn lt_matmul_buffers(
    desc: *mut c_void,
    alpha: *const c_void,
    operands: [(*const c_void, *mut c_void); 4],
    beta: *const c_void,
    workspace: *mut c_void,
    workspace_bytes: usize,
) -> Option<Buffers> {
    const SCALE_TYPE: c_int = 1;
    const POINTER_MODE: c_int = 2;
    let mut b = Buffers::default();
    let [a, bm, c, d] = operands;
    for (address, layout) in [a, bm, c] {
        if !address.is_null() {
            b.reads.extend(lt_layout(address, layout)?.0.runs()?);
        }
    }
    let (d_stored, d_shape) = lt_layout(d.0, d.1)?;
    b.writes.extend(d_stored.runs()?);
    b.write(workspace as u64, workspace_bytes as u64);
    let attributes = lt_attributes(real_lt::cublasLtMatmulDescGetAttribute()?, desc);
    match attribute::<c_int>(&attributes, POINTER_MODE) {
        Some(0) => {}
        Some(1) => {
            let bytes = data_type_bytes(attribute(&attributes, SCALE_TYPE)?)?;
            b.read(alpha as u64, bytes);
            b.read(beta as u64, bytes);
        }
        // Vectors of alpha (one per row) and the modes this file does not know.
        _ => return None,
    }
    Epilogue::of(attributes, d_stored.element)?.buffers(d_shape, d_stored.batch, &mut b)?;
    Some(b)
}

/// A cuBLASLt epilogue's operands beside D (`cublasLtEpilogue_t`, and the descriptor's attributes for them): a
/// bias vector read (BIAS), or written as a bias gradient (BGRAD with DRELU or DGELU, BGRADA, BGRADB); an
/// auxiliary matrix written in a forward pass (RELU_AUX, GELU_AUX) or read in a backward one (DRELU, DGELU), a
/// bit-mask for ReLU. Their pointer words are then named like the operands'; an epilogue with bits this file
/// does not know names neither, and its words stay at tier T1.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct Epilogue {
    bits: u32,
    bias: u64,
    bias_element: u64,
    /// Elements from one batch's bias to the next's (0: one bias for every batch).
    bias_stride: i64,
    aux: u64,
    /// In elements (bits for the ReLU mask).
    aux_ld: i64,
    aux_element: u64,
    aux_stride: i64,
}

impl Epilogue {
    const RELU: u32 = 2;
    const BIAS: u32 = 4;
    const DRELU: u32 = 8;
    const BGRAD: u32 = 16;
    const DGELU: u32 = 64;
    const AUX: u32 = 128;
    const BGRADA: u32 = 256;
    const BGRADB: u32 = 512;
    const KNOWN: u32 = 1023;

    /// The descriptor's epilogue, asked through `attributes` ([`lt_attributes`]); types left unset (-1) are D's
    /// (`d_element` bytes). None where a type is one this file does not know.
    fn of(attributes: impl Fn(c_int, *mut c_void, usize) -> bool, d_element: u64) -> Option<Epilogue> {
        const EPILOGUE: c_int = 7;
        const BIAS_POINTER: c_int = 8;
        const BIAS_BATCH_STRIDE: c_int = 10;
        const AUX_POINTER: c_int = 11;
        const AUX_LD: c_int = 12;
        const AUX_BATCH_STRIDE: c_int = 13;
        const AUX_DATA_TYPE: c_int = 22;
        const BIAS_DATA_TYPE: c_int = 26;
        let bits: u32 = attribute(&attributes, EPILOGUE).unwrap_or(1);
        if bits <= 1 {
            return Some(Epilogue::default());
        }
        // A type attribute is -1 until set: then it is D's.
        let element = |attr| match attribute::<c_int>(&attributes, attr).unwrap_or(-1) {
            -1 => Some(d_element),
            data_type => data_type_bytes(data_type),
        };
        Some(Epilogue {
            bits,
            bias: attribute::<usize>(&attributes, BIAS_POINTER).unwrap_or(0) as u64,
            bias_element: element(BIAS_DATA_TYPE)?,
            bias_stride: attribute(&attributes, BIAS_BATCH_STRIDE).unwrap_or(0),
            aux: attribute::<usize>(&attributes, AUX_POINTER).unwrap_or(0) as u64,
            aux_ld: attribute(&attributes, AUX_LD).unwrap_or(0),
            aux_element: element(AUX_DATA_TYPE)?,
            aux_stride: attribute(&attributes, AUX_BATCH_STRIDE).unwrap_or(0),
        })
    }

    /// Adds the epilogue's ranges to `b`, for D of `(rows, cols)` as its layout names them, `batch` times.
    fn buffers(&self, (rows, cols): (i64, i64), batch: i64, b: &mut Buffers) -> Option<()> {
        if self.bits & !Self::KNOWN != 0 {
            return Some(());
        }
        let vector = |address, len, element, stride| Matrix {
            address,
            rows: len,
            cols: 1,
            ld: len.max(1),
            element,
            batch,
            stride,
        };
        if self.bits & Self::BIAS != 0 {
            b.reads.extend(vector(self.bias, rows, self.bias_element, self.bias_stride).runs()?);
        }
        let gradient_rows = self.bits & (Self::BGRAD | Self::BGRADA) != 0;
        if gradient_rows || self.bits & Self::BGRADB != 0 {
            let len = if gradient_rows { rows } else { cols };
            b.writes.extend(vector(self.bias, len, self.bias_element, self.bias_stride).runs()?);
        }
        if self.bits & Self::AUX != 0 {
            let aux = if self.bits & (Self::RELU | Self::DRELU) != 0 {
                // One bit an element: a column is ld bits.
                let bytes = |bits: i64| bits.checked_add(7).map(|b| b / 8);
                Matrix {
                    address: self.aux,
                    rows: bytes(rows)?,
                    cols,
                    ld: bytes(self.aux_ld)?,
                    element: 1,
                    batch,
                    stride: bytes(self.aux_stride)?,
                }
            } else {
                Matrix {
                    address: self.aux,
                    rows,
                    cols,
                    ld: self.aux_ld,
                    element: self.aux_element,
                    batch,
                    stride: self.aux_stride,
                }
            };
            let runs = aux.runs()?;
            if self.bits & (Self::DRELU | Self::DGELU) != 0 {
                b.reads.extend(runs);
            } else {
                b.writes.extend(runs);
            }
        }
        Some(())
    }
}

type Handle = *mut c_void;
type Scalar = *const c_void;
type In = *const c_void;
type Out = *mut c_void;

/// cuBLAS's and cuBLASLt's own functions the bookkeeping calls.
mod real {
    use super::*;
    crate::next_symbol::real_functions! { found anywhere:
        cublasGetPointerMode_v2: fn(Handle, *mut c_int) -> c_int;
    }
}

mod real_lt {
    use super::*;
    crate::next_symbol::real_functions! { found anywhere:
        cublasLtMatrixLayoutGetAttribute: fn(*mut c_void, c_int, *mut c_void, usize, *mut usize) -> c_int;
        cublasLtMatmulDescGetAttribute: fn(*mut c_void, c_int, *mut c_void, usize, *mut usize) -> c_int;
    }
}

/// What a call of `name` returns where no cuBLAS defines it: "not initialized", said once.
fn missing(name: &str) -> c_int {
    static SAID: std::sync::Once = std::sync::Once::new();
    say_missing(&SAID, "cuBLAS", name, "not initialized");
    CUBLAS_STATUS_NOT_INITIALIZED
}

/// Exports each call in front of cuBLAS's: its ranges are worked out by the expression after `=>` (an
/// `Option<Buffers>`, evaluated only for the program's own call outside a framework op), then the call is passed
/// on to the function of the same name (`real_calls::NAME`). A gemm of one element type is written
/// `gemm NAME(INTEGER TYPE, ELEMENT BYTES);`, its strided batched form `strided NAME(...)`: they take cuBLAS's
/// one signature of each; a reduction of one vector to one value `reduce NAME(ELEMENT BYTES, RESULT BYTES);`.
macro_rules! stand_in_front {
    (@munch [$($done:tt)*]) => { stand_in_front!(@emit $($done)*); };
    (@munch [$($done:tt)*] gemm $name:ident($int:ty, $element:expr); $($rest:tt)*) => {
        stand_in_front!(@munch [$($done)*
            $name(h: Handle, ta: c_int, tb: c_int, m: $int, n: $int, k: $int, alpha: Scalar, a: In, lda: $int, b: In,
                ldb: $int, beta: Scalar, c: Out, ldc: $int)
                => Routine::gemm(ta, tb, m.into(), n.into(), k.into(), (a as u64, lda.into(), 0),
                    (b as u64, ldb.into(), 0), (c as u64, ldc.into(), 0), $element, 1)
                    .buffers(&device_scalars(h, alpha, beta, $element), false);
        ] $($rest)*);
    };
    (@munch [$($done:tt)*] strided $name:ident($int:ty, $element:expr); $($rest:tt)*) => {
        stand_in_front!(@munch [$($done)*
            $name(h: Handle, ta: c_int, tb: c_int, m: $int, n: $int, k: $int, alpha: Scalar, a: In, lda: $int,
                sa: i64, b: In, ldb: $int, sb: i64, beta: Scalar, c: Out, ldc: $int, sc: i64, batch: $int)
                => Routine::gemm(ta, tb, m.into(), n.into(), k.into(), (a as u64, lda.into(), sa),
                    (b as u64, ldb.into(), sb), (c as u64, ldc.into(), sc), $element, batch.into())
                    .buffers(&device_scalars(h, alpha, beta, $element), false);
        ] $($rest)*);
    };
    (@munch [$($done:tt)*] reduce $name:ident($element:expr, $result:expr); $($rest:tt)*) => {
        stand_in_front!(@munch [$($done)*
            $name(h: Handle, n: c_int, x: In, incx: c_int, result: Out)
                => Routine::Reduce { n: n.into(), x: (x as u64, incx.into()), result: result as u64,
                    element: $element, result_bytes: $result }.buffers(&[], takes_device_pointers(h));
        ] $($rest)*);
    };
    (@munch [$($done:tt)*] $name:ident($($arg:ident: $ty:ty),*) => $describe:expr; $($rest:tt)*) => {
        stand_in_front!(@munch [$($done)* $name($($arg: $ty),*) => $describe;] $($rest)*);
    };
    (@emit $($name:ident($($arg:ident: $ty:ty),*) => $describe:expr;)*) => {
        mod real_calls {
            use super::*;
            crate::next_symbol::real_functions! { found anywhere: $($name: fn($($ty),*) -> c_int;)* }
        }
        $(
            #[doc = concat!("`", stringify!($name), "`, in front of cuBLAS's.")]
            #[no_mangle]
            #[allow(clippy::too_many_arguments, non_snake_case)]
            pub extern "C-unwind" fn $name($($arg: $ty),*) -> c_int {
                let entered = enter(Start::here(), || $describe);
                let result = match real_calls::$name() {
                    // Safety: cuBLAS's function of this name, given the program's own arguments.
                    Some(real) => unsafe { real($($arg),*) },
                    None => missing(stringify!($name)),
                };
                leave(entered);
                result
            }
        )*
    };
    ($($input:tt)*) => { stand_in_front!(@munch [] $($input)*); };
}

/// A gemm whose operands have data types of their own (`cublasGemmEx`): each operand's element size.
#[allow(clippy::too_many_arguments)]
fn gemm_ex(
    handle: Handle,
    (trans_a, trans_b): (c_int, c_int),
    (m, n, k): (i64, i64, i64),
    (alpha, beta): (Scalar, Scalar),
    a: (In, c_int, i64, i64),
    b: (In, c_int, i64, i64),
    c: (Out, c_int, i64, i64),
    scalar: Option<u64>,
    batch: i64,
) -> Option<Buffers> {
    let operand = |(address, data_type, ld, stride): (u64, c_int, i64, i64)| -> Option<(u64, i64, u64, i64)> {
        Some((address, ld, data_type_bytes(data_type)?, stride))
    };
    let routine = Routine::Gemm {
        trans_a,
        trans_b,
        m,
        n,
        k,
        a: operand((a.0 as u64, a.1, a.2, a.3))?,
        b: operand((b.0 as u64, b.1, b.2, b.3))?,
        c: operand((c.0 as u64, c.1, c.2, c.3))?,
        batch,
    };
    routine.buffers(&device_scalars(handle, alpha, beta, scalar?), false)
}

// The signatures of cublas_api.h and cublasLt.h (CUDA 12 and 13); the element sizes of the routines' types.
stand_in_front! {
    gemm cublasSgemm_v2(c_int, 4);
    gemm cublasDgemm_v2(c_int, 8);
    gemm cublasCgemm_v2(c_int, 8);
    gemm cublasZgemm_v2(c_int, 16);
    gemm cublasHgemm(c_int, 2);
    gemm cublasSgemm_v2_64(i64, 4);
    gemm cublasDgemm_v2_64(i64, 8);
    strided cublasSgemmStridedBatched(c_int, 4);
    strided cublasDgemmStridedBatched(c_int, 8);
    strided cublasHgemmStridedBatched(c_int, 2);
    cublasGemmEx(h: Handle, ta: c_int, tb: c_int, m: c_int, n: c_int, k: c_int, alpha: Scalar, a: In, at: c_int,
        lda: c_int, b: In, bt: c_int, ldb: c_int, beta: Scalar, c: Out, ct: c_int, ldc: c_int, compute: c_int,
        algo: c_int)
        => gemm_ex(h, (ta, tb), (m.into(), n.into(), k.into()), (alpha, beta), (a, at, lda.into(), 0),
            (b, bt, ldb.into(), 0), (c, ct, ldc.into(), 0), scalar_bytes(compute, ct), 1);
    cublasGemmEx_64(h: Handle, ta: c_int, tb: c_int, m: i64, n: i64, k: i64, alpha: Scalar, a: In, at: c_int,
        lda: i64, b: In, bt: c_int, ldb: i64, beta: Scalar, c: Out, ct: c_int, ldc: i64, compute: c_int, algo: c_int)
        => gemm_ex(h, (ta, tb), (m, n, k), (alpha, beta), (a, at, lda, 0), (b, bt, ldb, 0), (c, ct, ldc, 0),
            scalar_bytes(compute, ct), 1);
    cublasGemmStridedBatchedEx(h: Handle, ta: c_int, tb: c_int, m: c_int, n: c_int, k: c_int, alpha: Scalar, a: In,
        at: c_int, lda: c_int, sa: i64, b: In, bt: c_int, ldb: c_int, sb: i64, beta: Scalar, c: Out, ct: c_int,
        ldc: c_int, sc: i64, batch: c_int, compute: c_int, algo: c_int)
        => gemm_ex(h, (ta, tb), (m.into(), n.into(), k.into()), (alpha, beta), (a, at, lda.into(), sa),
            (b, bt, ldb.into(), sb), (c, ct, ldc.into(), sc), scalar_bytes(compute, ct), batch.into());
    cublasGemmStridedBatchedEx_64(h: Handle, ta: c_int, tb: c_int, m: i64, n: i64, k: i64, alpha: Scalar, a: In,
        at: c_int, lda: i64, sa: i64, b: In, bt: c_int, ldb: i64, sb: i64, beta: Scalar, c: Out, ct: c_int,
        ldc: i64, sc: i64, batch: i64, compute: c_int, algo: c_int)
        => gemm_ex(h, (ta, tb), (m, n, k), (alpha, beta), (a, at, lda, sa), (b, bt, ldb, sb), (c, ct, ldc, sc),
            scalar_bytes(compute, ct), batch);
    // The scalars of cublasSgemmEx are floats whatever the operands' types.
    cublasSgemmEx(h: Handle, ta: c_int, tb: c_int, m: c_int, n: c_int, k: c_int, alpha: Scalar, a: In, at: c_int,
        lda: c_int, b: In, bt: c_int, ldb: c_int, beta: Scalar, c: Out, ct: c_int, ldc: c_int)
        => gemm_ex(h, (ta, tb), (m.into(), n.into(), k.into()), (alpha, beta), (a, at, lda.into(), 0),
            (b, bt, ldb.into(), 0), (c, ct, ldc.into(), 0), Some(4), 1);
    cublasSgemv_v2(h: Handle, trans: c_int, m: c_int, n: c_int, alpha: Scalar, a: In, lda: c_int, x: In, incx: c_int,
        beta: Scalar, y: Out, incy: c_int)
        => Routine::Gemv { trans, m: m.into(), n: n.into(), a: (a as u64, lda.into()), x: (x as u64, incx.into()),
            y: (y as u64, incy.into()), element: 4 }.buffers(&device_scalars(h, alpha, beta, 4), false);
    cublasDgemv_v2(h: Handle, trans: c_int, m: c_int, n: c_int, alpha: Scalar, a: In, lda: c_int, x: In, incx: c_int,
        beta: Scalar, y: Out, incy: c_int)
        => Routine::Gemv { trans, m: m.into(), n: n.into(), a: (a as u64, lda.into()), x: (x as u64, incx.into()),
            y: (y as u64, incy.into()), element: 8 }.buffers(&device_scalars(h, alpha, beta, 8), false);
    cublasSaxpy_v2(h: Handle, n: c_int, alpha: Scalar, x: In, incx: c_int, y: Out, incy: c_int)
        => Routine::Axpy { n: n.into(), x: (x as u64, incx.into()), y: (y as u64, incy.into()), element: 4 }
            .buffers(&device_scalars(h, alpha, std::ptr::null(), 4), false);
    cublasDaxpy_v2(h: Handle, n: c_int, alpha: Scalar, x: In, incx: c_int, y: Out, incy: c_int)
        => Routine::Axpy { n: n.into(), x: (x as u64, incx.into()), y: (y as u64, incy.into()), element: 8 }
            .buffers(&device_scalars(h, alpha, std::ptr::null(), 8), false);
    cublasScopy_v2(h: Handle, n: c_int, x: In, incx: c_int, y: Out, incy: c_int)
        => Routine::Axpy { n: n.into(), x: (x as u64, incx.into()), y: (y as u64, incy.into()), element: 4 }
            .buffers(&[], false);
    cublasDcopy_v2(h: Handle, n: c_int, x: In, incx: c_int, y: Out, incy: c_int)
        => Routine::Axpy { n: n.into(), x: (x as u64, incx.into()), y: (y as u64, incy.into()), element: 8 }
            .buffers(&[], false);
    cublasSscal_v2(h: Handle, n: c_int, alpha: Scalar, x: Out, incx: c_int)
        => Routine::Scal { n: n.into(), x: (x as u64, incx.into()), element: 4 }
            .buffers(&device_scalars(h, alpha, std::ptr::null(), 4), false);
    cublasDscal_v2(h: Handle, n: c_int, alpha: Scalar, x: Out, incx: c_int)
        => Routine::Scal { n: n.into(), x: (x as u64, incx.into()), element: 8 }
            .buffers(&device_scalars(h, alpha, std::ptr::null(), 8), false);
    cublasSdot_v2(h: Handle, n: c_int, x: In, incx: c_int, y: In, incy: c_int, result: Out)
        => Routine::Dot { n: n.into(), x: (x as u64, incx.into()), y: (y as u64, incy.into()), result: result as u64,
            element: 4 }.buffers(&[], takes_device_pointers(h));
    cublasDdot_v2(h: Handle, n: c_int, x: In, incx: c_int, y: In, incy: c_int, result: Out)
        => Routine::Dot { n: n.into(), x: (x as u64, incx.into()), y: (y as u64, incy.into()), result: result as u64,
            element: 8 }.buffers(&[], takes_device_pointers(h));
    reduce cublasSnrm2_v2(4, 4);
    reduce cublasDnrm2_v2(8, 8);
    reduce cublasSasum_v2(4, 4);
    reduce cublasDasum_v2(8, 8);
    reduce cublasIsamax_v2(4, 4);
    reduce cublasIdamax_v2(8, 4);
    reduce cublasIsamin_v2(4, 4);
    reduce cublasIdamin_v2(8, 4);
    cublasSswap_v2(h: Handle, n: c_int, x: Out, incx: c_int, y: Out, incy: c_int)
        => Routine::Swap { n: n.into(), x: (x as u64, incx.into()), y: (y as u64, incy.into()), element: 4 }
            .buffers(&[], false);
    cublasDswap_v2(h: Handle, n: c_int, x: Out, incx: c_int, y: Out, incy: c_int)
        => Routine::Swap { n: n.into(), x: (x as u64, incx.into()), y: (y as u64, incy.into()), element: 8 }
            .buffers(&[], false);
    cublasSgeam(h: Handle, ta: c_int, tb: c_int, m: c_int, n: c_int, alpha: Scalar, a: In, lda: c_int, beta: Scalar,
        b: In, ldb: c_int, c: Out, ldc: c_int)
        => Routine::Geam { trans_a: ta, trans_b: tb, m: m.into(), n: n.into(), a: (a as u64, lda.into()),
            b: (b as u64, ldb.into()), c: (c as u64, ldc.into()), element: 4 }
            .buffers(&device_scalars(h, alpha, beta, 4), false);
    cublasDgeam(h: Handle, ta: c_int, tb: c_int, m: c_int, n: c_int, alpha: Scalar, a: In, lda: c_int, beta: Scalar,
        b: In, ldb: c_int, c: Out, ldc: c_int)
        => Routine::Geam { trans_a: ta, trans_b: tb, m: m.into(), n: n.into(), a: (a as u64, lda.into()),
            b: (b as u64, ldb.into()), c: (c as u64, ldc.into()), element: 8 }
            .buffers(&device_scalars(h, alpha, beta, 8), false);
    cublasLtMatmul(lt: Handle, desc: *mut c_void, alpha: Scalar, a: In, ad: *mut c_void, b: In, bd: *mut c_void,
        beta: Scalar, c: In, cd: *mut c_void, d: Out, dd: *mut c_void, algo: *const c_void, workspace: Out,
        workspace_bytes: usize, stream: *mut c_void)
        => lt_matmul_buffers(desc, alpha, [(a, ad), (b, bd), (c, cd), (d.cast_const(), dd)], beta, workspace, workspace_bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first: u64, len: u64, step: u64, count: u64) -> ByteRuns {
        ByteRuns { first, len, step, count }
    }

    #[test]
    fn a_gemm_reads_its_stored_operands_and_writes_c() {
        // m=4, n=3, k=2, floats, tightly packed: A 4x2, B 2x3, C 4x3.
        let g = Routine::gemm(0, 0, 4, 3, 2, (0x1000, 4, 0), (0x2000, 2, 0), (0x3000, 4, 0), 4, 1);
        let b = g.buffers(&[], false).unwrap();
        assert_eq!(b.reads, vec![run(0x1000, 32, 0, 1), run(0x2000, 24, 0, 1)]);
        assert_eq!(b.writes, vec![run(0x3000, 48, 0, 1)]);
        // Transposed A is stored k x m (lda 2 holds its 2 rows), transposed B n x k.
        let g = Routine::gemm(1, 2, 4, 3, 2, (0x1000, 2, 0), (0x2000, 3, 0), (0x3000, 4, 0), 4, 1);
        let b = g.buffers(&[], false).unwrap();
        assert_eq!(b.reads, vec![run(0x1000, 32, 0, 1), run(0x2000, 24, 0, 1)]);
        // A leading dimension past the rows (a sub-matrix): one run per column, the gap between left out.
        let g = Routine::gemm(0, 0, 4, 3, 2, (0x1000, 10, 0), (0x2000, 2, 0), (0x3000, 8, 0), 4, 1);
        let b = g.buffers(&[], false).unwrap();
        assert_eq!(b.reads[0], run(0x1000, 16, 40, 2));
        assert_eq!(b.writes, vec![run(0x3000, 16, 32, 3)]);
        // Device scalars are read; a transpose value cuBLAS does not define names nothing.
        let g = Routine::gemm(0, 0, 4, 3, 2, (0x1000, 4, 0), (0x2000, 2, 0), (0x3000, 4, 0), 4, 1);
        assert_eq!(g.buffers(&[(0x9000, 4), (0x9004, 4)], false).unwrap().reads.len(), 4);
        let g = Routine::gemm(7, 0, 4, 3, 2, (0x1000, 4, 0), (0x2000, 2, 0), (0x3000, 4, 0), 4, 1);
        assert!(g.buffers(&[], false).is_none());
    }

    #[test]
    fn an_empty_gemm_names_nothing_and_one_of_k_zero_still_writes_c() {
        let g = Routine::gemm(0, 0, 0, 3, 2, (0x1000, 1, 0), (0x2000, 2, 0), (0x3000, 1, 0), 4, 1);
        assert!(g.buffers(&[], false).unwrap().is_empty());
        let g = Routine::gemm(0, 0, 4, 3, 0, (0x1000, 4, 0), (0x2000, 1, 0), (0x3000, 4, 0), 4, 1);
        let b = g.buffers(&[], false).unwrap();
        assert!(b.reads.is_empty());
        assert_eq!(b.writes, vec![run(0x3000, 48, 0, 1)]);
        // A leading dimension short of the rows is an invalid call: nothing is described.
        let g = Routine::gemm(0, 0, 4, 3, 2, (0x1000, 3, 0), (0x2000, 2, 0), (0x3000, 4, 0), 4, 1);
        assert!(g.buffers(&[], false).is_none());
    }

    #[test]
    fn strided_batches_are_one_strided_run_or_their_union() {
        // 3 packed 2x2 float matrices 64 bytes apart: one run of 16 bytes, 64 apart, 3 times.
        let m = Matrix { address: 0x1000, rows: 2, cols: 2, ld: 2, element: 4, batch: 3, stride: 16 };
        assert_eq!(m.runs().unwrap(), vec![run(0x1000, 16, 64, 3)]);
        // A stride of 0 (one A for every batch) is that one matrix.
        assert_eq!(Matrix { stride: 0, ..m }.runs().unwrap(), vec![run(0x1000, 16, 0, 1)]);
        // Overlapping batches: their union.
        assert_eq!(Matrix { stride: 2, ..m }.runs().unwrap(), vec![run(0x1000, 32, 0, 1)]);
        // Padded matrices: each batch's columns, or past 64 batches one run over them all.
        let padded = Matrix { ld: 4, stride: 16, ..m };
        assert_eq!(padded.runs().unwrap(), vec![run(0x1000, 8, 16, 2), run(0x1040, 8, 16, 2), run(0x1080, 8, 16, 2)]);
        let many = Matrix { batch: 100, ..padded };
        assert_eq!(many.runs().unwrap(), vec![run(0x1000, 99 * 64 + 24, 0, 1)]);
    }

    #[test]
    fn overflowing_or_negative_descriptions_name_nothing() {
        let m = Matrix::single(u64::MAX - 8, 4, 4, 4, 4);
        assert_eq!(m.runs(), None);
        assert_eq!(Matrix::single(0x1000, -1, 4, 4, 4).runs(), None);
        assert_eq!(Matrix { batch: 2, stride: -16, ..Matrix::single(0x1000, 2, 2, 2, 4) }.runs(), None);
        assert_eq!(Matrix::single(0, 4, 4, 4, 4).runs(), Some(vec![]), "a null matrix");
    }

    #[test]
    fn vectors_follow_their_increment_either_way() {
        assert_eq!(vector(0x1000, 8, 1, 4).unwrap(), vec![run(0x1000, 32, 0, 1)]);
        assert_eq!(vector(0x1000, 8, 3, 4).unwrap(), vec![run(0x1000, 4, 12, 8)]);
        assert_eq!(vector(0x1000, 8, -3, 4).unwrap(), vec![run(0x1000, 4, 12, 8)]);
        assert_eq!(vector(0x1000, 1, 5, 8).unwrap(), vec![run(0x1000, 8, 0, 1)]);
        assert!(vector(0x1000, -1, 1, 4).is_none());
    }

    #[test]
    fn level_one_and_two_routines_read_and_write_by_their_definitions() {
        let gemv = Routine::Gemv { trans: 1, m: 4, n: 3, a: (0x1000, 4), x: (0x2000, 1), y: (0x3000, 1), element: 4 };
        let b = gemv.buffers(&[], false).unwrap();
        // Transposed: x has m elements, y n.
        assert_eq!(b.reads, vec![run(0x1000, 48, 0, 1), run(0x2000, 16, 0, 1)]);
        assert_eq!(b.writes, vec![run(0x3000, 12, 0, 1)]);
        let dot = Routine::Dot { n: 4, x: (0x1000, 1), y: (0x2000, 1), result: 0x3000, element: 8 };
        assert!(dot.buffers(&[], false).unwrap().writes.is_empty(), "the result goes to the host");
        assert_eq!(dot.buffers(&[], true).unwrap().writes, vec![run(0x3000, 8, 0, 1)]);
        let scal = Routine::Scal { n: 4, x: (0x1000, 2), element: 4 };
        assert_eq!(scal.buffers(&[], false).unwrap().writes, vec![run(0x1000, 4, 8, 4)]);
        // An index of the largest element: doubles read, a 4-byte int written in device pointer mode only.
        let amax = Routine::Reduce { n: 5, x: (0x1000, 1), result: 0x3000, element: 8, result_bytes: 4 };
        let b = amax.buffers(&[], true).unwrap();
        assert_eq!((b.reads, b.writes), (vec![run(0x1000, 40, 0, 1)], vec![run(0x3000, 4, 0, 1)]));
        assert!(amax.buffers(&[], false).unwrap().writes.is_empty());
        let swap = Routine::Swap { n: 3, x: (0x1000, 1), y: (0x2000, 3), element: 4 };
        assert_eq!(swap.buffers(&[], false).unwrap().writes, vec![run(0x1000, 12, 0, 1), run(0x2000, 4, 12, 3)]);
    }

    #[test]
    fn a_matrix_sum_reads_its_operands_as_stored_and_writes_c() {
        // C (4 x 3, ld 4) = A^T (A stored 3 x 4, ld 3) + B (4 x 3, ld 8: a sub-matrix).
        let geam = |a: (u64, i64), b: (u64, i64)| Routine::Geam {
            trans_a: 1,
            trans_b: 0,
            m: 4,
            n: 3,
            a,
            b,
            c: (0x3000, 4),
            element: 4,
        };
        let b = geam((0x1000, 3), (0x2000, 8)).buffers(&[], false).unwrap();
        assert_eq!(b.reads, vec![run(0x1000, 48, 0, 1), run(0x2000, 16, 32, 3)]);
        assert_eq!(b.writes, vec![run(0x3000, 48, 0, 1)]);
        // A transpose alone: B null (beta 0) is not read.
        let transpose = geam((0x1000, 3), (0, 4)).buffers(&[], false).unwrap();
        assert_eq!(transpose.reads, vec![run(0x1000, 48, 0, 1)]);
        // A leading dimension short of A's stored rows is an invalid call: nothing is named.
        assert!(geam((0x1000, 2), (0x2000, 8)).buffers(&[], false).is_none());
    }

    /// A descriptor's attributes as cuBLASLt's getter would answer them: (attribute, value bytes).
    fn descriptor(set: &[(c_int, Vec<u8>)]) -> impl Fn(c_int, *mut c_void, usize) -> bool + '_ {
        move |attr, value, size| match set.iter().find(|(a, _)| *a == attr) {
            Some((_, bytes)) if bytes.len() == size => {
                // Safety: the test's own local of `size` bytes.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), value.cast::<u8>(), size) };
                true
            }
            _ => false,
        }
    }

    #[test]
    fn an_epilogue_reads_its_bias_and_writes_its_auxiliary_matrix() {
        // GELU_AUX_BIAS (32 | 128 | 4) on a 64 x 8 D of floats: bias (64 elements, D's type) read, the GELU input
        // (ld 64, bf16) written.
        let set = vec![
            (7, (32u32 | 128 | 4).to_ne_bytes().to_vec()),
            (8, 0x9000usize.to_ne_bytes().to_vec()),
            (11, 0xa000usize.to_ne_bytes().to_vec()),
            (12, 64i64.to_ne_bytes().to_vec()),
            (22, 14i32.to_ne_bytes().to_vec()),
            (26, (-1i32).to_ne_bytes().to_vec()),
        ];
        let epilogue = Epilogue::of(descriptor(&set), 4).unwrap();
        let mut b = Buffers::default();
        epilogue.buffers((64, 8), 1, &mut b).unwrap();
        assert_eq!(b.reads, vec![run(0x9000, 256, 0, 1)]);
        assert_eq!(b.writes, vec![run(0xa000, 64 * 8 * 2, 0, 1)]);
        // The backward pass, DGELU_BGRAD (64 | 128 | 16): the GELU input read, the bias gradient written.
        let mut set = set;
        set[0].1 = (64u32 | 128 | 16).to_ne_bytes().to_vec();
        let mut b = Buffers::default();
        Epilogue::of(descriptor(&set), 4).unwrap().buffers((64, 8), 1, &mut b).unwrap();
        assert_eq!((b.reads, b.writes), (vec![run(0xa000, 1024, 0, 1)], vec![run(0x9000, 256, 0, 1)]));
    }

    #[test]
    fn bias_gradients_relu_masks_and_unknown_epilogues() {
        let with = |bits: u32, aux_ld: i64| Epilogue {
            bits,
            bias: 0x9000,
            bias_element: 2,
            aux: 0xa000,
            aux_ld,
            ..Default::default()
        };
        // BGRADB: one bias element per column of D.
        let mut b = Buffers::default();
        with(512, 0).buffers((64, 8), 1, &mut b).unwrap();
        assert_eq!(b.writes, vec![run(0x9000, 16, 0, 1)]);
        // RELU_AUX_BIAS: the mask, one bit an element, ld 128 bits: 8 bytes of each 16-byte column.
        let mut b = Buffers::default();
        with(2 | 128 | 4, 128).buffers((64, 8), 1, &mut b).unwrap();
        assert_eq!(b.writes, vec![run(0xa000, 8, 16, 8)]);
        assert_eq!(b.reads, vec![run(0x9000, 128, 0, 1)]);
        // A bias per batch, 64 elements apart.
        let mut b = Buffers::default();
        Epilogue { bias_stride: 64, ..with(4, 0) }.buffers((64, 8), 3, &mut b).unwrap();
        assert_eq!(b.reads, vec![run(0x9000, 128, 128, 3)]);
        // Bits this file does not know: nothing named (the words stay the kernel's own).
        let mut b = Buffers::default();
        with(4 | 4096, 0).buffers((64, 8), 1, &mut b).unwrap();
        assert!(b.is_empty());
        // No epilogue attribute answered: the default, nothing beside D.
        assert_eq!(Epilogue::of(descriptor(&[]), 4), Some(Epilogue::default()));
    }

    #[test]
    fn data_types_and_compute_types_give_their_sizes() {
        assert_eq!([0, 1, 2, 3, 4, 5, 14, 28].map(data_type_bytes), [4, 8, 2, 1, 8, 16, 2, 1].map(Some));
        assert_eq!(data_type_bytes(16), None, "4-bit integers are packed");
        // COMPUTE_32F with real and complex C; COMPUTE_64F; a legacy cudaDataType as the compute type.
        assert_eq!(scalar_bytes(68, 0), Some(4));
        assert_eq!(scalar_bytes(68, 4), Some(8));
        assert_eq!(scalar_bytes(70, 1), Some(8));
        assert_eq!(scalar_bytes(2, 2), Some(2));
        assert_eq!(scalar_bytes(99, 0), None);
    }

    #[test]
    fn a_launch_takes_the_ranges_and_site_of_the_call_its_thread_is_inside_and_nested_calls_name_nothing() {
        // The site is given: finding one would write into a capture another test of this binary may be running.
        let mut named = Buffers::default();
        named.read(0x1000, 64);
        let outer = enter_as(|| true, || 7, || Some(named.clone()));
        assert_eq!(outer, (true, true));
        // cuBLAS's call of cuBLASLt's exported function inside the program's.
        let inner = enter_as(|| true, || panic!("an inner call has no site of its own"), || panic!("nor ranges"));
        assert_eq!(inner, (false, false));
        assert_eq!((library_call::buffers_for_launch(), library_call::site_for_call()), (Some(named.clone()), Some(7)));
        leave(inner);
        assert_eq!(library_call::buffers_for_launch(), Some(named.clone()));
        leave(outer);
        assert_eq!((library_call::buffers_for_launch(), library_call::site_for_call()), (None, None));
        // A call not wanted (nothing recorded, inside a framework op) is not described.
        let unwanted = enter_as(|| false, || panic!("no site"), || panic!("not described"));
        assert_eq!(unwanted, (true, false));
        leave(unwanted);
        // A description that panics loses the ranges, not the call, nor its site.
        let failed = enter_as(|| true, || 9, || panic!("a bug in a description"));
        assert_eq!(failed, (true, true));
        assert_eq!((library_call::buffers_for_launch(), library_call::site_for_call()), (None, Some(9)));
        leave(failed);
        // Without ranges or a site nothing is opened.
        let bare = enter_as(|| true, || 0, || None);
        assert_eq!(bare, (true, false));
        leave(bare);
    }
}
