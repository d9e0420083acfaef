//! What an API call's name says: its base name without the version suffix, which synchronization a
//! SYNCHRONIZATION row made by it is, and whether it waits for the whole device.

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

/// Classifies a synchronization row by its API's name; by `syncType` only when the name says nothing.
pub(super) fn classify_sync(api: &str, sync_type: i64) -> SyncClass {
    let by_name = if api.contains("StreamWaitEvent") {
        Some(SyncKind::StreamWait)
    } else if api.contains("StreamSynchronize") || api.contains("StreamQuery") {
        Some(SyncKind::Stream)
    } else if api.contains("EventSynchronize") || api.contains("EventQuery") {
        Some(SyncKind::Event)
    } else if api.contains("DeviceSynchronize") || api.contains("CtxSynchronize") || api.contains("ThreadSynchronize") {
        Some(SyncKind::Context)
    } else {
        None
    };
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
        assert!(matches!(classify_sync("cudaStreamSynchronize", 2).kind, SyncKind::Stream));
        assert!(matches!(classify_sync("cudaStreamWaitEvent", 0).kind, SyncKind::StreamWait));
        assert!(matches!(classify_sync("", 2).kind, SyncKind::StreamWait));
        assert!(classify_sync("", 2).by_type);
    }
}
