//! Host nodes of executable graphs (DESIGN.md, host functions): while host functions are wrapped (host_funcs.rs), each
//! host node of a graph being instantiated gets, in the executable graph only, the capture's trampoline and a
//! box of its own holding the program's function and data (cuGraphExecHostNodeSetParams; the graph keeps the
//! program's). A launch gives every wrapped node of its executable graph a fresh host-function id, announced by
//! a `host_func` record on the launch's stream just before the launch, and queues it in the node's box; the
//! trampoline takes the oldest, since launches of one executable graph run in launch order. A fault inside that
//! run is then that host function's access, as for `cuLaunchHostFunc`. A launch that fails takes its runs back
//! at its exit (`launch_returned`).
//!
//! Left unwrapped: host nodes inside child graphs (the executable-graph setter cannot name them) and every node
//! of an executable graph after cuGraphExecUpdate (the update puts the program's parameters back). A box lives
//! as long as the process: a destroyed executable graph may still be running. Touches the driver's graph
//! objects through the calls named above, and this file's table.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys as cu;
use rustc_hash::FxHashMap as HashMap;

use super::host_funcs::{self, HostFn};
use crate::params::Handle;

/// A wrapped host node: what the trampoline runs, and the ids of the launches that have not run it yet.
struct WrappedNode {
    /// The program's function and data (the program may set them again on the executable graph).
    target: Mutex<(HostFn, usize)>,
    name: Mutex<Arc<str>>,
    runs: Mutex<VecDeque<u64>>,
}

/// An executable graph's wrapped nodes: (the graph's node handle, its box).
type ExecNodes = Vec<(u64, &'static WrappedNode)>;

/// Wrapped nodes by executable graph.
static EXECS: Mutex<Option<HashMap<u64, ExecNodes>>> = Mutex::new(None);
/// Whether any node was ever wrapped (until then a launch asks nothing).
static ANY: AtomicBool = AtomicBool::new(false);
thread_local! {
    /// The runs the calling thread's last graph launch queued, (box, id): taken back if the launch fails.
    static LAST_LAUNCH: RefCell<Vec<(&'static WrappedNode, u64)>> = const { RefCell::new(Vec::new()) };
}
/// More nodes than this in one graph are not looked at (a malformed count must not make the library allocate
/// without bound).
const MAX_NODES: usize = 1 << 20;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the driver runs for a wrapped node.
///
/// # Safety
/// `boxed` is a `WrappedNode` leaked by [`instantiated`] (never freed).
unsafe extern "C" fn run_graph_host_node(boxed: *mut c_void) {
    // Safety: the box lives as long as the process.
    let node = unsafe { &*(boxed as *const WrappedNode) };
    let id = lock(&node.runs).pop_front().unwrap_or(0);
    let (function, data) = *lock(&node.target);
    // Safety: the program's function with the program's data, as it set them.
    host_funcs::run_as(id, || unsafe { function(data as *mut c_void) });
}

/// The host nodes of `graph`, which the driver has just instantiated as `exec`: each gets the trampoline in
/// `exec`.
///
/// # Safety
/// Called in the exit callback of a successful instantiation of `graph` into `exec`.
pub unsafe fn instantiated(graph: Handle, exec: Handle) {
    let mut count = 0usize;
    // Safety: asks for the node count only (null array); writes a local. Unrecorded: the re-entry guard.
    if unsafe { cu::cuGraphGetNodes(graph as _, std::ptr::null_mut(), &mut count) } != cu::CUresult::CUDA_SUCCESS
        || count == 0
        || count > MAX_NODES
    {
        return;
    }
    let mut nodes: Vec<cu::CUgraphNode> = vec![std::ptr::null_mut(); count];
    // Safety: `nodes` holds `count` handles.
    if unsafe { cu::cuGraphGetNodes(graph as _, nodes.as_mut_ptr(), &mut count) } != cu::CUresult::CUDA_SUCCESS {
        return;
    }
    nodes.truncate(count);
    let mut wrapped = Vec::new();
    for node in nodes {
        let mut kind = cu::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
        // Safety: a node of the graph; writes a local.
        let typed = unsafe { cu::cuGraphNodeGetType(node, &mut kind) } == cu::CUresult::CUDA_SUCCESS;
        if !typed || kind != cu::CUgraphNodeType::CU_GRAPH_NODE_TYPE_HOST {
            continue;
        }
        let mut params = cu::CUDA_HOST_NODE_PARAMS { fn_: None, userData: std::ptr::null_mut() };
        // Safety: a host node of the graph; writes a local.
        if unsafe { cu::cuGraphHostNodeGetParams(node, &mut params) } != cu::CUresult::CUDA_SUCCESS {
            continue;
        }
        let Some(function) = params.fn_ else { continue };
        let name = host_funcs::name_of(function as usize);
        let boxed: &'static WrappedNode = Box::leak(Box::new(WrappedNode {
            target: Mutex::new((function, params.userData as usize)),
            name: Mutex::new(name),
            runs: Mutex::new(VecDeque::new()),
        }));
        // Safety: the executable graph just made from this node's graph; the block is read during the call.
        if unsafe { set_trampoline(exec, node as Handle, boxed) } {
            wrapped.push((node as u64, boxed));
        }
    }
    if !wrapped.is_empty() {
        ANY.store(true, Ordering::Release);
        lock(&EXECS).get_or_insert_with(HashMap::default).insert(exec as u64, wrapped);
    }
}

/// Points `node` of `exec` at the trampoline with `boxed`; whether the driver took it.
///
/// # Safety
/// `node` is a host node of the graph `exec` was instantiated from.
unsafe fn set_trampoline(exec: Handle, node: Handle, boxed: &'static WrappedNode) -> bool {
    let params = cu::CUDA_HOST_NODE_PARAMS {
        fn_: Some(run_graph_host_node),
        userData: boxed as *const WrappedNode as *mut c_void,
    };
    // Safety: as the caller promises; the driver copies the parameters.
    unsafe { cu::cuGraphExecHostNodeSetParams(exec as _, node as _, &params) == cu::CUresult::CUDA_SUCCESS }
}

/// The program set a host node's parameters on `exec` (cuGraphExecHostNodeSetParams, after the call): the
/// box takes the new function and data, and the node the trampoline again.
///
/// # Safety
/// Called in the exit callback of the program's successful call with these arguments.
pub unsafe fn exec_node_set(exec: Handle, node: Handle, function: Option<HostFn>, data: *mut c_void) {
    if !ANY.load(Ordering::Acquire) {
        return;
    }
    let boxed = lock(&EXECS)
        .as_ref()
        .and_then(|execs| execs.get(&(exec as u64)))
        .and_then(|nodes| nodes.iter().find(|(n, _)| *n == node as u64).map(|(_, boxed)| *boxed));
    let (Some(boxed), Some(function)) = (boxed, function) else { return };
    *lock(&boxed.target) = (function, data as usize);
    *lock(&boxed.name) = host_funcs::name_of(function as usize);
    // Safety: the node the program just set on this executable graph.
    if !unsafe { set_trampoline(exec, node, boxed) } {
        forget(exec as u64);
    }
}

/// `exec` was updated or destroyed: its nodes are no longer wrapped (their boxes stay, for runs in flight).
pub fn forget(exec: u64) {
    if ANY.load(Ordering::Acquire) {
        if let Some(execs) = lock(&EXECS).as_mut() {
            execs.remove(&exec);
        }
    }
}

/// A launch of `exec` on `stream` (at the call's entry): the id, name and node handle of each wrapped host node's
/// run in it. None when the stream is capturing (the nodes run at the enclosing graph's launches, unannounced).
pub fn launched(exec: u64, stream: Handle, per_thread: bool) -> Vec<(u64, Arc<str>, u64)> {
    if !ANY.load(Ordering::Acquire) {
        return Vec::new();
    }
    let nodes = match lock(&EXECS).as_ref().and_then(|execs| execs.get(&exec)) {
        Some(nodes) => nodes.clone(),
        None => return Vec::new(),
    };
    if host_funcs::capturing(stream, per_thread) {
        return Vec::new();
    }
    let mut queued = Vec::with_capacity(nodes.len());
    let runs = nodes
        .into_iter()
        .map(|(node, boxed)| {
            let id = host_funcs::next_id();
            host_funcs::host_func_wrapped(id);
            lock(&boxed.runs).push_back(id);
            queued.push((boxed, id));
            (id, lock(&boxed.name).clone(), node)
        })
        .collect();
    // `try_with`: a launch made while the thread exits cannot be taken back.
    let _ = LAST_LAUNCH.try_with(|last| *last.borrow_mut() = queued);
    runs
}

/// A graph launch's exit callback, in either backend: [`launch_returned`] with the call's result.
///
/// # Safety
/// `result` is null or the call's `CUresult`, valid at its exit.
pub unsafe fn launch_exited(result: *const i32) {
    // Safety: as the caller promises; null-checked.
    let succeeded = unsafe { result.as_ref() }.is_none_or(|&r| r == 0);
    // The driver's callback: nothing may unwind into it.
    let _ = std::panic::catch_unwind(|| launch_returned(succeeded));
}

/// A graph launch returns on the calling thread (at the call's exit). When it failed, the runs it queued never
/// come: they leave their nodes' queues, where the next launch's runs would otherwise take their ids, and are
/// counted done. Either way the launch is forgotten, so that a later launch's exit never takes back its runs.
pub fn launch_returned(succeeded: bool) {
    if !ANY.load(Ordering::Acquire) {
        return;
    }
    let queued = LAST_LAUNCH.try_with(|last| std::mem::take(&mut *last.borrow_mut())).unwrap_or_default();
    if succeeded {
        return;
    }
    for (boxed, id) in queued {
        lock(&boxed.runs).retain(|&queued| queued != id);
        host_funcs::host_func_finished(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    static SEEN: AtomicU64 = AtomicU64::new(0);

    unsafe extern "C" fn program_node(data: *mut c_void) {
        SEEN.store(data as u64 * 1000 + host_funcs::running(), Ordering::SeqCst);
    }

    #[test]
    fn each_run_of_a_wrapped_node_is_the_host_function_its_launch_announced_in_launch_order() {
        let boxed: &'static WrappedNode = Box::leak(Box::new(WrappedNode {
            target: Mutex::new((program_node as HostFn, 5)),
            name: Mutex::new(Arc::from("program_node")),
            runs: Mutex::new(VecDeque::new()),
        }));
        ANY.store(true, Ordering::Release);
        lock(&EXECS).get_or_insert_with(HashMap::default).insert(0xe0, vec![(0xa0, boxed)]);
        // No driver here: the null stream of a test is not asked about, so the launches are taken directly.
        let first = host_funcs::next_id();
        lock(&boxed.runs).extend([first, first + 1]);
        let data = boxed as *const WrappedNode as *mut c_void;
        // Safety: the driver's part: the trampoline with its box.
        unsafe { run_graph_host_node(data) };
        assert_eq!(SEEN.load(Ordering::SeqCst), 5000 + first, "the first launch's run");
        unsafe { run_graph_host_node(data) };
        assert_eq!(SEEN.load(Ordering::SeqCst), 5000 + first + 1, "then the second's");
        unsafe { run_graph_host_node(data) };
        assert_eq!(SEEN.load(Ordering::SeqCst), 5000, "a run no launch announced runs unmarked");
        assert_eq!(host_funcs::running(), 0);
        forget(0xe0);
        assert!(lock(&EXECS).as_ref().is_some_and(|execs| !execs.contains_key(&0xe0)));
    }

    #[test]
    fn a_failed_launch_takes_back_the_runs_it_queued_and_a_later_launch_never_takes_back_earlier_ones() {
        let boxed: &'static WrappedNode = Box::leak(Box::new(WrappedNode {
            target: Mutex::new((program_node as HostFn, 6)),
            name: Mutex::new(Arc::from("program_node")),
            runs: Mutex::new(VecDeque::new()),
        }));
        ANY.store(true, Ordering::Release);
        // An earlier launch's run waits to be run; the failed launch queued the next one (as `launched` does).
        let (earlier, failed) = (host_funcs::next_id(), host_funcs::next_id());
        for id in [earlier, failed] {
            host_funcs::host_func_wrapped(id);
            lock(&boxed.runs).push_back(id);
        }
        LAST_LAUNCH.with(|last| *last.borrow_mut() = vec![(boxed, failed)]);
        launch_returned(false);
        assert_eq!(lock(&boxed.runs).iter().copied().collect::<Vec<_>>(), [earlier], "the failed launch's run left");
        assert!(!host_funcs::unfinished().contains(&failed), "and is not waited for");
        assert!(host_funcs::unfinished().contains(&earlier));
        // The earlier launch succeeded; a later launch whose exit comes without its entry takes nothing back.
        LAST_LAUNCH.with(|last| *last.borrow_mut() = vec![(boxed, earlier)]);
        launch_returned(true);
        launch_returned(false);
        assert_eq!(lock(&boxed.runs).iter().copied().collect::<Vec<_>>(), [earlier]);
    }
}
