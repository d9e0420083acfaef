//! What an API call's name says: its base name without the version suffix, which synchronization a
//! SYNCHRONIZATION row made by it is, whether it waits for the whole device, and what GPU work it can make;
//! worked out once per name ([`ApiCalls`]), not for each of the millions of calls an export holds.

use std::sync::Arc;

use rustc_hash::FxHashMap;

/// What each API function's name says, by its StringIds id.
#[derive(Default)]
pub(super) struct ApiCalls {
    by_name: FxHashMap<i64, ApiCall>,
}

impl ApiCalls {
    /// The call named by StringIds id `id`, its name looked up in `strings`.
    pub(super) fn get(&mut self, id: i64, strings: &FxHashMap<i64, Arc<str>>) -> &ApiCall {
        self.by_name.entry(id).or_insert_with(|| ApiCall::new(strings.get(&id)))
    }
}

/// One API function.
pub(super) struct ApiCall {
    /// Without its version suffix; "unknown API" when the export does not name it.
    pub(super) name: Arc<str>,
    /// Whether the export names it.
    pub(super) named: bool,
    pub(super) says: CallName,
}

impl ApiCall {
    fn new(full: Option<&Arc<str>>) -> ApiCall {
        let name: Arc<str> = Arc::from(base_name(full.map_or("unknown API", |full| full)));
        // What work it makes is asked of the full name, as the exports spell it.
        let says = CallName::of(&name, full.map_or("", |full| full));
        ApiCall { name, named: full.is_some(), says }
    }
}

/// What a call's name says. [`CallName::of`] of empty names is what a group without an API call is taken as.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct CallName {
    /// The synchronization its SYNCHRONIZATION rows are, where the name says.
    pub(super) sync: Option<SyncKind>,
    pub(super) synchronous_memcpy: bool,
    pub(super) synchronous_memset: bool,
    pub(super) blocks_device: bool,
    pub(super) launch: bool,
    pub(super) graph_launch: bool,
    pub(super) memcpy: bool,
    pub(super) memset: bool,
}

impl CallName {
    /// From the base name and the full name.
    pub(super) fn of(name: &str, full: &str) -> CallName {
        CallName {
            sync: sync_by_name(name),
            synchronous_memcpy: name.starts_with("cudaMemcpy") && !name.contains("Async")
                || name.starts_with("cuMemcpy") && !name.contains("Async"),
            synchronous_memset: name.starts_with("cudaMemset") && !name.contains("Async"),
            blocks_device: blocks_device(name),
            launch: full.contains("Launch"),
            graph_launch: full.contains("GraphLaunch"),
            memcpy: full.contains("Memcpy"),
            memset: full.contains("Memset"),
        }
    }
}

/// `cudaStreamWaitEvent_v3020` -> `cudaStreamWaitEvent`.
pub(super) fn base_name(api: &str) -> &str {
    match api.rfind("_v") {
        Some(i) if api[i + 2..].chars().all(|c| c.is_ascii_digit()) && i + 2 < api.len() => &api[..i],
        _ => api,
    }
}

/// Whether an API call waits for all work of the device or context: a device synchronization, or a free, which
/// synchronizes the device (DESIGN.md's host-synchronization and blocking-API rules; the engine applies them).
pub(super) fn blocks_device(api: &str) -> bool {
    matches!(
        api,
        "cudaDeviceSynchronize"
            | "cuCtxSynchronize"
            | "cudaFree"
            | "cuMemFree"
            | "cudaFreeHost"
            | "cuMemFreeHost"
            | "cudaThreadSynchronize"
    )
}

/// What a synchronization row synchronizes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum SyncKind {
    /// A stream waits for an event (`cudaStreamWaitEvent`).
    StreamWait,
    /// The host waits for a stream.
    Stream,
    /// The host waits for an event.
    Event,
    /// The host waits for the whole context or device.
    Context,
}

pub(super) struct SyncClass {
    pub(super) kind: SyncKind,
    /// Classified by `syncType`, the API name saying nothing: worth a counter, since `syncType` is unreliable.
    pub(super) by_type: bool,
}

/// The synchronization an API's SYNCHRONIZATION rows are, where its name says.
fn sync_by_name(api: &str) -> Option<SyncKind> {
    if api.contains("StreamWaitEvent") {
        Some(SyncKind::StreamWait)
    } else if api.contains("StreamSynchronize") || api.contains("StreamQuery") {
        Some(SyncKind::Stream)
    } else if api.contains("EventSynchronize") || api.contains("EventQuery") {
        Some(SyncKind::Event)
    } else if api.contains("DeviceSynchronize") || api.contains("CtxSynchronize") || api.contains("ThreadSynchronize") {
        Some(SyncKind::Context)
    } else {
        None
    }
}

/// Classifies a synchronization row by what its API's name says; by `syncType` only when the name says nothing.
pub(super) fn classify_sync(by_name: Option<SyncKind>, sync_type: i64) -> SyncClass {
    match by_name {
        Some(kind) => SyncClass { kind, by_type: false },
        None => SyncClass {
            kind: match sync_type {
                1 => SyncKind::Event,
                2 => SyncKind::StreamWait,
                3 => SyncKind::Stream,
                _ => SyncKind::Context,
            },
            by_type: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_name_strips_version_suffix() {
        assert_eq!(base_name("cudaStreamWaitEvent_v3020"), "cudaStreamWaitEvent");
        assert_eq!(base_name("cudaLaunchKernel"), "cudaLaunchKernel");
        assert_eq!(base_name("cuMemcpy_v2x"), "cuMemcpy_v2x");
    }

    #[test]
    fn sync_rows_are_classified_by_api_name_first() {
        // 2025.3 stores cudaStreamSynchronize with syncType 2, the label of a stream wait.
        let classify = |name, sync_type| classify_sync(sync_by_name(name), sync_type);
        assert!(matches!(classify("cudaStreamSynchronize", 2).kind, SyncKind::Stream));
        assert!(matches!(classify("cudaStreamWaitEvent", 0).kind, SyncKind::StreamWait));
        assert!(matches!(classify("", 2).kind, SyncKind::StreamWait));
        assert!(classify("", 2).by_type);
    }

    #[test]
    fn a_name_is_looked_at_once_and_says_the_same_as_looking_every_time() {
        let strings: FxHashMap<i64, Arc<str>> =
            [(1, Arc::from("cudaMemcpy_v3020")), (2, Arc::from("cudaGraphLaunch_v10000"))].into_iter().collect();
        let mut calls = ApiCalls::default();
        let copy = calls.get(1, &strings);
        assert_eq!((&*copy.name, copy.named), ("cudaMemcpy", true));
        assert!(copy.says.synchronous_memcpy && copy.says.memcpy && !copy.says.launch);
        let graph = calls.get(2, &strings).says;
        assert!(graph.launch && graph.graph_launch && !graph.memcpy);
        let unknown = calls.get(3, &strings);
        assert_eq!((&*unknown.name, unknown.named), ("unknown API", false));
        assert_eq!(unknown.says, CallName::of("", ""), "says nothing");
    }
}
