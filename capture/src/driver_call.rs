//! One driver call as both capture backends hand it to the handlers: what its handler needs to know of it, its
//! parameter block and result (CUPTI's and the Sanitizer API's callback data point at the same blocks, laid out
//! as generated_cuda_meta.h declares them), and the [`CallContext`] every record of it shares: when and where it
//! was made, in which context and on which device. Declarations and the one unchecked step (naming a block's
//! layout); touches nothing.

use std::ffi::c_void;
use std::marker::PhantomData;

use crate::call_kinds::Detail;
use crate::record::Call;

/// The parameter block and result of one driver call. Making one vouches that the pointers are the callback
/// data's for that call (the only unchecked step), so what reads them needs only say which block the call has.
pub struct DriverCall<'a> {
    /// What a handler shared by several calls needs to know of this one (calls.rs says it of each).
    pub detail: Detail,
    params: *const c_void,
    at_exit: bool,
    result: *const i32,
    _callback: PhantomData<&'a ()>,
}

impl<'a> DriverCall<'a> {
    /// # Safety
    /// `params` is null or the parameter block of the call the callback is for (whose table entry gave
    /// `detail`), and `result` null or its CUresult (meaningful at exit), both valid for `'a`.
    pub unsafe fn new(detail: Detail, params: *const c_void, at_exit: bool, result: *const i32) -> DriverCall<'a> {
        DriverCall { detail, params, at_exit, result, _callback: PhantomData }
    }

    /// The call's parameter block as `T`; None when the backend passed none.
    ///
    /// # Safety
    /// `T` is the layout of the parameter block of this call, or a prefix of it (params.rs).
    pub unsafe fn params<T>(&self) -> Option<&'a T> {
        // Safety: `params` is null or points to the call's block (`new`), which `T` describes (the caller),
        // valid for 'a.
        unsafe { (self.params as *const T).as_ref() }
    }

    /// The call's parameter block as `T`, to change at the call's entry; null when the backend passed none.
    /// Both backends pass it as `const`: only host_watch/host_funcs.rs writes through it.
    ///
    /// # Safety
    /// As for [`DriverCall::params`].
    pub unsafe fn params_mut<T>(&self) -> *mut T {
        self.params as *mut T
    }

    /// Whether the call returned CUDA_SUCCESS: only known at exit.
    pub fn succeeded(&self) -> bool {
        if !self.at_exit || self.result.is_null() {
            return false;
        }
        // Safety: at exit the backend points `result` at the call's CUresult (`new`).
        unsafe { self.result.read() == 0 }
    }
}

/// What every record of one call shares: the call (thread, time, correlation, native site), the trace's id of
/// its context, the context's device, and whether a null stream is the calling thread's default stream.
#[derive(Copy, Clone, Debug)]
pub struct CallContext {
    pub call: Call,
    pub context: u32,
    pub device: Option<u32>,
    pub per_thread: bool,
}

impl CallContext {
    pub fn new(call: Call, context: u32, device: Option<u32>, per_thread: bool) -> CallContext {
        CallContext { call, context, device, per_thread }
    }
}

/// How a backend names the call's context: CUPTI gives each a unique id, the Sanitizer API only its handle.
#[derive(Copy, Clone, Debug)]
pub enum ContextKey {
    Uid { uid: u32, handle: *mut c_void },
    Handle(*mut c_void),
}
