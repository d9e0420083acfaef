//! The exact-access backend (`streamtrace capture --exact`, tier T3), on the Compute Sanitizer API: CUPTI and
//! the Sanitizer API cannot both subscribe in one process, so this backend takes the same driver calls from the
//! Sanitizer API's driver-API domain (its ids and parameter blocks are CUPTI's) and records them through the
//! same handlers, and besides patches every loaded module so that each launch marks the bytes it reads and
//! writes in a table of its own (patches.rs, tables.rs). A launch is held at entry; when its call returns the
//! backend waits for it, reads its table back and writes the launch with what it touched (docs/capture.md).
//! Touches the Sanitizer API, the state and a thread-local of the launch in progress.

mod api;
mod patches;
mod table;
mod tables;

use std::cell::RefCell;
use std::ffi::{c_void, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use cudarc::driver::sys as cu;
use streamtrace_format::{launch, Coverage, Unseen};

use crate::calls::{self, spec_of, CALLS};
use crate::control::{disable, ENABLED, NOOP};
use crate::driver_call::ContextKey;
use crate::driver_call::DriverCall;
use crate::origin::thread_id;
use crate::process_state::SeenAccesses;
use crate::recording::{self, CallOrigin, ReentryGuard};
use crate::state::{state_for_this_process, STATE};
use crate::unwind::Start;
use api::*;
use patches::KernelSelection;
use table::{accesses_of, SAW_ASYNC_BARRIER, SAW_BLOCK, SAW_OVERFLOW};
use tables::{read_back, DeviceTable, TablePool};

/// The Sanitizer API, loaded once.
static API: OnceLock<Sanitizer> = OnceLock::new();
/// The launches' tables.
static TABLES: Mutex<Option<TablePool>> = Mutex::new(None);
/// Contexts the patches were loaded into.
static PATCHED_CONTEXTS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// Which kernels are instrumented (`--exact-kernels`).
static SELECTION: OnceLock<KernelSelection> = OnceLock::new();

/// The launch this thread is in, between the Sanitizer API's launch callback and the call's return.
enum InFlight {
    Traced { table: DeviceTable, stream: StreamHandle, function: usize },
    Skipped(Unseen),
}

thread_local! {
    static LAUNCH: RefCell<Option<InFlight>> = const { RefCell::new(None) };
}

/// Where libsanitizer-public.so may be: the path the command found, then the toolkit's places.
fn library_candidates() -> Vec<PathBuf> {
    let named = std::env::var_os(launch::ENV_SANITIZER).map(PathBuf::from);
    named.into_iter().chain(launch::sanitizer_candidates(launch::toolkit_roots_from_env())).collect()
}

/// Loads the Sanitizer API, subscribes, and enables the driver calls of calls.rs, module loads and launches.
/// An error says why capture cannot run.
pub fn subscribe() -> Result<(), String> {
    let path = library_candidates().into_iter().find(|p| p.exists()).ok_or_else(|| {
        format!(
            "the Compute Sanitizer library ({}) was not found (set {})",
            launch::SANITIZER_NAME,
            launch::ENV_SANITIZER
        )
    })?;
    let api = Sanitizer::load(&path)?;
    let mut subscriber: SubscriberHandle = std::ptr::null_mut();
    // Safety: registers a callback with the signature the Sanitizer API expects; no user data.
    let result = unsafe { (api.subscribe)(&mut subscriber, on_callback, std::ptr::null_mut()) };
    if result != SANITIZER_SUCCESS {
        return Err(format!(
            "sanitizerSubscribe failed ({result}): another tool (compute-sanitizer, a CUPTI profiler) may be attached"
        ));
    }
    // Safety (each): a subscriber just returned; domain and callback ids from the Sanitizer API's headers.
    unsafe {
        for spec in CALLS {
            (api.enable_callback)(1, subscriber, DOMAIN_DRIVER_API, spec.id);
        }
        (api.enable_callback)(1, subscriber, DOMAIN_RESOURCE, RESOURCE_MODULE_LOADED);
        (api.enable_callback)(1, subscriber, DOMAIN_LAUNCH, LAUNCH_BEGIN);
        (api.enable_callback)(1, subscriber, DOMAIN_GRAPHS, GRAPHS_NODE_LAUNCH_BEGIN);
    }
    let _ = SELECTION.set(KernelSelection::from_list(std::env::var(launch::ENV_EXACT_KERNELS).ok().as_deref()));
    let _ = API.set(api);
    Ok(())
}

/// The Sanitizer API's callback for every enabled domain and id.
///
/// # Safety
/// Called by the Sanitizer API only: `data` is the callback data of `domain`'s callback `cbid`.
unsafe extern "C" fn on_callback(_user: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    if data.is_null() || !ENABLED.load(Ordering::Relaxed) || NOOP.load(Ordering::Relaxed) {
        return;
    }
    let Some(api) = API.get() else { return };
    let outcome = std::panic::catch_unwind(|| match domain {
        // Safety (each arm): the callback data of that domain's callbacks, valid until this returns.
        DOMAIN_DRIVER_API => unsafe { driver_call(api, cbid, &*(data as *const CallbackData)) },
        DOMAIN_RESOURCE if cbid == RESOURCE_MODULE_LOADED => {
            module_loaded(api, unsafe { &*(data as *const ResourceModuleData) })
        }
        DOMAIN_LAUNCH if cbid == LAUNCH_BEGIN => launch_begins(api, unsafe { &*(data as *const LaunchData) }),
        DOMAIN_GRAPHS if cbid == GRAPHS_NODE_LAUNCH_BEGIN => {
            graph_node_launches(api, unsafe { &*(data as *const GraphNodeLaunchData) })
        }
        _ => {}
    });
    if outcome.is_err() {
        disable("an internal error in the exact-access capture");
    }
}

/// A driver call: recorded as the CUPTI backend records it; the return of a launch also completes the launch
/// held since its entry.
fn driver_call(api: &Sanitizer, cbid: u32, data: &CallbackData) {
    let Some(spec) = spec_of(cbid) else { return };
    let at_exit = data.callbackSite == API_EXIT;
    // The host watch follows every call in and out (the driver's own accesses, guards armed at exit).
    crate::host_watch::passing(at_exit);
    if at_exit && calls::is_graph_launch(cbid) {
        // Safety: the Sanitizer API's result of the call, valid at exit.
        unsafe { crate::host_watch::graph_host_nodes::launch_exited(data.functionReturnValue as *const i32) };
    }
    let Some(_inside) = ReentryGuard::enter() else { return };
    // Safety: the Sanitizer API's parameter block and result of the call `cbid`, valid until the callback
    // returns.
    let call =
        unsafe { DriverCall::new(spec.detail, data.functionParams, at_exit, data.functionReturnValue as *const i32) };
    if at_exit && is_launch(cbid) {
        launch_returns(api, call.succeeded());
        return;
    }
    if at_exit != spec.at_exit() {
        return;
    }
    // The call site's walk starts here: the capture's frames below this one are never walked.
    let walk_from = Start::here();
    let origin = CallOrigin { correlation: 0, context: ContextKey::Handle(data.context), device_of };
    recording::record(spec, &call, origin, walk_from);
}

fn is_launch(cbid: u32) -> bool {
    matches!(
        cbid,
        calls::CU_LAUNCH_KERNEL
            | calls::CU_LAUNCH_KERNEL_PTSZ
            | calls::CU_LAUNCH_KERNEL_EX
            | calls::CU_LAUNCH_KERNEL_EX_PTSZ
            | calls::CU_LAUNCH_COOPERATIVE_KERNEL
            | calls::CU_LAUNCH_COOPERATIVE_KERNEL_PTSZ
    )
}

/// The device of a context, as the driver says.
fn device_of(context: *mut c_void) -> Option<u32> {
    if context.is_null() {
        return None;
    }
    let mut device: cu::CUdevice = 0;
    // Safety: asks the driver about the context of a call being traced; out-pointer to a local.
    let known = unsafe { cu::cuCtxGetDevice_v2(&mut device, context as cu::CUcontext) } == cu::CUresult::CUDA_SUCCESS;
    known.then_some(device as u32)
}

/// A module loaded: its kernels get the patches.
fn module_loaded(api: &Sanitizer, data: &ResourceModuleData) {
    let first_in_context = {
        let Ok(mut contexts) = PATCHED_CONTEXTS.lock() else { return };
        let first = !contexts.contains(&(data.context as usize));
        if first {
            contexts.push(data.context as usize);
        }
        first
    };
    if let Err(reason) = patches::patch_module(api, data.context, data.module, first_in_context) {
        static SAID: AtomicBool = AtomicBool::new(false);
        if !SAID.swap(true, Ordering::SeqCst) {
            eprintln!("streamtrace: {reason}; the kernels it left unpatched keep tier T1 (the report says which)");
        }
    }
}

/// A launch begins (inside its call, before the kernel is queued): it gets a table, and the patches its
/// address, unless `--exact-kernels` leaves it out.
fn launch_begins(api: &Sanitizer, data: &LaunchData) {
    let selected = SELECTION.get().is_none_or(|selection| {
        // Safety: the launch's kernel name, a C string the Sanitizer API owns for the callback's duration.
        let mangled = if data.functionName.is_null() {
            String::new()
        } else {
            unsafe { CStr::from_ptr(data.functionName) }.to_string_lossy().into_owned()
        };
        let demangled = cpp_demangle::Symbol::new(mangled.as_bytes()).map(|s| s.to_string()).unwrap_or_default();
        selection.selects(&mangled, &demangled)
    });
    let in_flight = if selected {
        let taken = TABLES.lock().ok().and_then(|mut pool| {
            pool.get_or_insert_with(TablePool::default).take(api, data.context, data.function as usize, data.hStream)
        });
        match taken {
            Some(table) => InFlight::Traced { table, stream: data.hStream, function: data.function as usize },
            None => InFlight::Skipped(Unseen::NotReadBack),
        }
    } else {
        InFlight::Skipped(Unseen::NotSelected)
    };
    let user_data = match &in_flight {
        InFlight::Traced { table, .. } => table.header as *const c_void,
        InFlight::Skipped(_) => std::ptr::null(),
    };
    // Safety: the launch the callback reports, and the device address of its table (or none: the patches
    // then record nothing).
    unsafe { (api.set_launch_callback_data)(data.hLaunch, data.function, data.hStream, user_data) };
    // A launch made while the thread exits finds the slot gone: its table is left to the kernel (never freed
    // under it), and the launch returns as one the callback did not trace, keeping its arguments.
    let _ = LAUNCH.try_with(|launch| *launch.borrow_mut() = Some(in_flight));
}

/// A kernel node of a graph launch: graph launches keep tier T1 (docs/capture.md), and a patched kernel must
/// not run with stale user data, so its patches get none.
fn graph_node_launches(api: &Sanitizer, data: &GraphNodeLaunchData) {
    if data.nodeType == GRAPH_NODE_KERNEL {
        let launch = &data.launchData;
        // Safety: the node's launch, as the callback reports it.
        unsafe { (api.set_launch_callback_data)(launch.hLaunch, launch.function, launch.hStream, std::ptr::null()) };
    }
}

/// A launch call returns: wait for the kernel, read its table, and write the launch held since its entry with
/// what it touched. A launch with no launch callback (captured into a graph, or failed) keeps its arguments.
fn launch_returns(api: &Sanitizer, succeeded: bool) {
    let in_flight = LAUNCH.try_with(|launch| launch.borrow_mut().take()).ok().flatten();
    let seen = match in_flight {
        Some(InFlight::Traced { table, stream, function }) => {
            let readback = read_back(api, &table, stream);
            if let Ok(mut pool) = TABLES.lock() {
                if let Some(pool) = pool.as_mut() {
                    pool.give_back(table, function, readback.as_ref().map_or(0, |r| r.flags));
                }
            }
            match readback {
                Some(mut readback) => seen_accesses(readback.flags, &mut readback.entries),
                None => arguments_only(Unseen::NotReadBack),
            }
        }
        Some(InFlight::Skipped(reason)) => arguments_only(reason),
        None => arguments_only(if succeeded { Unseen::GraphNode } else { Unseen::NotReadBack }),
    };
    let Ok(mut slot) = STATE.lock() else { return };
    if let Some(state) = state_for_this_process(&mut slot) {
        state.complete_launch(thread_id(), Some(seen));
    }
}

/// At exit: what the launches' tables took of device memory (docs/performance.md reports it).
pub fn say_device_memory() {
    let bytes = TABLES.lock().ok().and_then(|pool| pool.as_ref().map(|p| p.device_bytes)).unwrap_or(0);
    if bytes > 0 {
        eprintln!(
            "streamtrace: --exact took {:.1} MiB of device memory for its launch tables",
            bytes as f64 / 1048576.0
        );
    }
}

fn arguments_only(unseen: Unseen) -> SeenAccesses {
    SeenAccesses { coverage: Coverage::Arguments, unseen: Some(unseen), reads: Vec::new(), writes: Vec::new() }
}

/// What a launch's table says it touched, and how much of what it touched that is.
fn seen_accesses(flags: u32, entries: &mut [table::ChunkEntry]) -> SeenAccesses {
    if flags & SAW_BLOCK == 0 {
        return arguments_only(Unseen::NotInstrumented);
    }
    let accesses = accesses_of(entries);
    let (coverage, unseen) = if flags & SAW_OVERFLOW != 0 {
        (Coverage::ExactAndArguments, Some(Unseen::TableFull))
    } else if flags & SAW_ASYNC_BARRIER != 0 {
        (Coverage::ExactAndArguments, Some(Unseen::AsyncCopies))
    } else {
        (Coverage::Exact, None)
    };
    SeenAccesses { coverage, unseen, reads: accesses.reads, writes: accesses.writes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use table::ChunkEntry;

    #[test]
    fn a_launch_whose_blocks_never_reported_keeps_its_arguments() {
        let seen = seen_accesses(0, &mut []);
        assert_eq!((seen.coverage, seen.unseen), (Coverage::Arguments, Some(Unseen::NotInstrumented)));
    }

    #[test]
    fn what_the_patches_could_not_see_keeps_the_arguments_beside_the_ranges() {
        let mut entries = vec![ChunkEntry { chunk: 9, read: [1, 0, 0, 0], write: [0; 4] }];
        let seen = seen_accesses(SAW_BLOCK | SAW_ASYNC_BARRIER, &mut entries);
        assert_eq!((seen.coverage, seen.unseen), (Coverage::ExactAndArguments, Some(Unseen::AsyncCopies)));
        assert_eq!(seen.reads.len(), 1);
        let seen = seen_accesses(SAW_BLOCK | SAW_OVERFLOW, &mut entries);
        assert_eq!(seen.unseen, Some(Unseen::TableFull));
        let seen = seen_accesses(SAW_BLOCK, &mut entries);
        assert_eq!((seen.coverage, seen.unseen), (Coverage::Exact, None));
    }
}
