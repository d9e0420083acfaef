//! The NVTX injection, the trigger of `--capture-range=nvtx` (ranges.rs). NVTX (the header-only NVTX 3 every
//! client compiles in: PyTorch's `torch.cuda.nvtx`, NCCL, the program's own) loads the library named in
//! `NVTX_INJECTION64_PATH` at a client's first NVTX call and calls its `InitializeInjectionNvtx2`, which fills
//! that client's function tables with the library's own functions. The capture command names the capture
//! library there, so this works without CUPTI (the `--exact` backend has none) and without a profiler: only the
//! range calls are taken (push and pop, start and end, in the default domain and named ones, with ASCII or
//! registered messages), and each only tells ranges.rs when the capture range begins and ends; every other NVTX
//! call stays a no-op, as NVTX makes the functions an injection leaves unset.
//!
//! Nesting is per thread and per domain (NVTX's rule): a thread's pushes are a stack, and a pop ends its
//! innermost range of the domain. Start/end ranges end by id: the capture range's ids carry a mark.
//!
//! Touches NVTX's tables (at initialization), a thread-local stack, and ranges.rs; nothing panics into the
//! program.

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use streamtrace_format::RangeTrigger;

use crate::ranges;

/// NVTX hands the injection its export tables through this (nvtxDetail/nvtxTypes.h).
type GetExportTable = unsafe extern "C" fn(table: u32) -> *const c_void;
/// A slot of a client's function table: NVTX casts it to the function's own type.
type Slot = Option<unsafe extern "C" fn()>;
type GetModuleFunctionTable = unsafe extern "C" fn(module: u32, table: *mut *mut *mut Slot, size: *mut u32) -> i32;

#[repr(C)]
struct ExportTableCallbacks {
    struct_size: usize,
    get_module_function_table: Option<GetModuleFunctionTable>,
}

/// NvtxExportTableID's NVTX_ETID_CALLBACKS.
const EXPORT_TABLE_CALLBACKS: u32 = 1;
/// NvtxCallbackModule: the core calls, and the domain calls (CORE2).
const MODULE_CORE: u32 = 1;
const MODULE_CORE2: u32 = 5;

/// nvtxEventAttributes_t (version 2, 48 bytes), laid out whole though only its size and message are read.
#[repr(C)]
#[allow(dead_code)]
struct EventAttributes {
    version: u16,
    size: u16,
    category: u32,
    color_type: i32,
    color: u32,
    payload_type: i32,
    reserved0: i32,
    payload: u64,
    message_type: i32,
    message: *const c_void,
}

/// NVTX_MESSAGE_TYPE_ASCII and _REGISTERED.
const MESSAGE_ASCII: i32 = 1;
const MESSAGE_REGISTERED: i32 = 3;

/// Domains and registered strings made so far, kept for the life of the process: a handle is an entry's
/// position plus one (NVTX only hands handles back; 0 is the default domain, or none). Asked again for the
/// same name, the same handle is given back.
static DOMAINS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static REGISTERED: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());

/// The ids of start/end ranges; the capture range's carry this mark.
static NEXT_RANGE_ID: AtomicU64 = AtomicU64::new(1);
const CAPTURE_RANGE_MARK: u64 = 1 << 63;

thread_local! {
    /// This thread's pushed ranges, innermost last: their domain (0: the default) and whether each is the
    /// capture range.
    static PUSHED: RefCell<Vec<(usize, bool)>> = const { RefCell::new(Vec::new()) };
}

/// NVTX's entry point in an injection library. Returns 1 when the tables were filled, 0 (NVTX then stays a
/// no-op) when NVTX ranges are not the capture's trigger or the tables cannot be had.
///
/// # Safety
/// Called by NVTX, with its export table getter.
#[no_mangle]
pub unsafe extern "C" fn InitializeInjectionNvtx2(get_export_table: Option<GetExportTable>) -> i32 {
    let filled = std::panic::catch_unwind(|| {
        ranges::configure();
        if !ranges::triggered_by(RangeTrigger::Nvtx) {
            return false;
        }
        let Some(get) = get_export_table else { return false };
        // Safety: NVTX's getter, asked for its callbacks table (null when it has none).
        let callbacks = unsafe { get(EXPORT_TABLE_CALLBACKS) }.cast::<ExportTableCallbacks>();
        // Safety: a table NVTX gives stays valid for the life of the process.
        let Some(get_table) = (unsafe { callbacks.as_ref() }).and_then(|c| c.get_module_function_table) else {
            return false;
        };
        let core: [(u32, Slot); 6] = [
            (4, slot(range_start_ex as unsafe extern "C" fn(*const EventAttributes) -> u64)),
            (5, slot(range_start_a as unsafe extern "C" fn(*const c_char) -> u64)),
            (7, slot(range_end as unsafe extern "C" fn(u64))),
            (8, slot(range_push_ex as unsafe extern "C" fn(*const EventAttributes) -> i32)),
            (9, slot(range_push_a as unsafe extern "C" fn(*const c_char) -> i32)),
            (11, slot(range_pop as unsafe extern "C" fn() -> i32)),
        ];
        let core2: [(u32, Slot); 6] = [
            (2, slot(domain_range_start_ex as unsafe extern "C" fn(usize, *const EventAttributes) -> u64)),
            (3, slot(domain_range_end as unsafe extern "C" fn(usize, u64))),
            (4, slot(domain_range_push_ex as unsafe extern "C" fn(usize, *const EventAttributes) -> i32)),
            (5, slot(domain_range_pop as unsafe extern "C" fn(usize) -> i32)),
            (10, slot(domain_register_string_a as unsafe extern "C" fn(usize, *const c_char) -> usize)),
            (12, slot(domain_create_a as unsafe extern "C" fn(*const c_char) -> usize)),
        ];
        // Safety: NVTX's own getter of its tables.
        unsafe { fill(get_table, MODULE_CORE, &core) && fill(get_table, MODULE_CORE2, &core2) }
    });
    matches!(filled, Ok(true)) as i32
}

/// A function as a table slot (NVTX calls it through its own type again).
fn slot<F: Copy>(function: F) -> Slot {
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<unsafe extern "C" fn()>());
    // Safety: `F` is an `extern "C"` function pointer (every caller passes one), of a function pointer's size.
    Some(unsafe { std::mem::transmute_copy::<F, unsafe extern "C" fn()>(&function) })
}

/// Puts `functions` (by callback id) into the client's table of `module`; false when NVTX gives no table.
///
/// # Safety
/// `get_table` is NVTX's GetModuleFunctionTable.
unsafe fn fill(get_table: GetModuleFunctionTable, module: u32, functions: &[(u32, Slot)]) -> bool {
    let mut table: *mut *mut Slot = std::ptr::null_mut();
    let mut size = 0u32;
    // Safety: out-pointers to locals.
    if unsafe { get_table(module, &mut table, &mut size) } == 0 || table.is_null() {
        return false;
    }
    for &(id, function) in functions {
        if id < size {
            // Safety: the table holds `size` pointers to the client's slots (some null).
            let entry = unsafe { *table.add(id as usize) };
            if !entry.is_null() {
                // Safety: a slot of the client's table, which an injection fills at initialization.
                unsafe { *entry = function };
            }
        }
    }
    true
}

/// The text of an NVTX message, when it is ASCII or a string registered here.
///
/// # Safety
/// `attributes` is null or NVTX event attributes of at least `size` bytes, whose message is of its type.
unsafe fn message_of(attributes: *const EventAttributes) -> Option<String> {
    // Safety: the caller's promise; `size` says how much of the structure the program filled.
    let attributes = unsafe { attributes.as_ref() }?;
    if (attributes.size as usize) < std::mem::size_of::<EventAttributes>() || attributes.message.is_null() {
        return None;
    }
    match attributes.message_type {
        // Safety: an ASCII message is a C string the program passed.
        MESSAGE_ASCII => Some(unsafe { CStr::from_ptr(attributes.message.cast()) }.to_string_lossy().into_owned()),
        MESSAGE_REGISTERED => {
            let handle = attributes.message as usize;
            let registered = REGISTERED.lock().ok()?;
            registered.get(handle.checked_sub(1)?).map(|(_, text)| text.clone())
        }
        _ => None,
    }
}

/// The name of a domain made here (None: the default domain).
fn domain_name(domain: usize) -> Option<String> {
    if domain == 0 {
        return None;
    }
    let domains = DOMAINS.lock().ok()?;
    domains.get(domain - 1).cloned()
}

/// Whether a range of `message` in `domain` is the capture range.
fn is_capture(message: Option<String>, domain: usize) -> bool {
    message.is_some_and(|message| ranges::is_capture_range(&message, domain_name(domain).as_deref()))
}

/// A range pushed on this thread; its level in its domain.
fn pushed(domain: usize, capture: bool) -> i32 {
    // `try_with`: ranges pushed while the thread exits (a static destructor's) find the stack gone.
    let level = PUSHED
        .try_with(|stack| {
            let Ok(mut stack) = stack.try_borrow_mut() else { return -1 };
            let level = stack.iter().filter(|(d, _)| *d == domain).count() as i32;
            stack.push((domain, capture));
            level
        })
        .unwrap_or(-1);
    // Counted only once kept: a range whose pop cannot find it would hold the capture range open.
    if capture && level >= 0 {
        ranges::nvtx_range_began();
    }
    level
}

/// The innermost range of `domain` on this thread ends; its level, or -1 when none was open.
fn popped(domain: usize) -> i32 {
    let ended = PUSHED
        .try_with(|stack| {
            let Ok(mut stack) = stack.try_borrow_mut() else { return None };
            let at = stack.iter().rposition(|(d, _)| *d == domain)?;
            let (_, capture) = stack.remove(at);
            Some((stack.iter().filter(|(d, _)| *d == domain).count() as i32, capture))
        })
        .ok()
        .flatten();
    match ended {
        Some((level, capture)) => {
            if capture {
                ranges::nvtx_range_ended();
            }
            level
        }
        None => -1,
    }
}

/// A start/end range begins: its id, marked when it is the capture range.
fn started(capture: bool) -> u64 {
    let id = NEXT_RANGE_ID.fetch_add(1, Ordering::Relaxed) & !CAPTURE_RANGE_MARK;
    if capture {
        ranges::nvtx_range_began();
        id | CAPTURE_RANGE_MARK
    } else {
        id
    }
}

fn ended(id: u64) {
    if id & CAPTURE_RANGE_MARK != 0 {
        ranges::nvtx_range_ended();
    }
}

/// Runs an NVTX function's body, catching: the caller is the program.
fn guarded<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// The C string at `text`, if any.
///
/// # Safety
/// `text` is null or a C string.
unsafe fn c_text(text: *const c_char) -> Option<String> {
    // Safety: the caller's promise.
    (!text.is_null()).then(|| unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned())
}

/// nvtxRangePushA.
///
/// # Safety
/// Called by NVTX with the program's message, null or a C string.
unsafe extern "C" fn range_push_a(message: *const c_char) -> i32 {
    // Safety: passed on from NVTX.
    guarded(-1, || pushed(0, is_capture(unsafe { c_text(message) }, 0)))
}

/// nvtxRangePushEx.
///
/// # Safety
/// Called by NVTX with the program's event attributes.
unsafe extern "C" fn range_push_ex(attributes: *const EventAttributes) -> i32 {
    // Safety: passed on from NVTX.
    guarded(-1, || pushed(0, is_capture(unsafe { message_of(attributes) }, 0)))
}

/// nvtxRangePop.
unsafe extern "C" fn range_pop() -> i32 {
    guarded(-1, || popped(0))
}

/// nvtxRangeStartA.
///
/// # Safety
/// Called by NVTX with the program's message.
unsafe extern "C" fn range_start_a(message: *const c_char) -> u64 {
    // Safety: passed on from NVTX.
    guarded(0, || started(is_capture(unsafe { c_text(message) }, 0)))
}

/// nvtxRangeStartEx.
///
/// # Safety
/// Called by NVTX with the program's event attributes.
unsafe extern "C" fn range_start_ex(attributes: *const EventAttributes) -> u64 {
    // Safety: passed on from NVTX.
    guarded(0, || started(is_capture(unsafe { message_of(attributes) }, 0)))
}

/// nvtxRangeEnd.
unsafe extern "C" fn range_end(id: u64) {
    guarded((), || ended(id))
}

/// nvtxDomainRangePushEx.
///
/// # Safety
/// Called by NVTX with a domain made here (or null) and the program's event attributes.
unsafe extern "C" fn domain_range_push_ex(domain: usize, attributes: *const EventAttributes) -> i32 {
    // Safety: passed on from NVTX.
    guarded(-1, || pushed(domain, is_capture(unsafe { message_of(attributes) }, domain)))
}

/// nvtxDomainRangePop.
unsafe extern "C" fn domain_range_pop(domain: usize) -> i32 {
    guarded(-1, || popped(domain))
}

/// nvtxDomainRangeStartEx.
///
/// # Safety
/// Called by NVTX with a domain made here (or null) and the program's event attributes.
unsafe extern "C" fn domain_range_start_ex(domain: usize, attributes: *const EventAttributes) -> u64 {
    // Safety: passed on from NVTX.
    guarded(0, || started(is_capture(unsafe { message_of(attributes) }, domain)))
}

/// nvtxDomainRangeEnd.
unsafe extern "C" fn domain_range_end(_domain: usize, id: u64) {
    guarded((), || ended(id))
}

/// nvtxDomainCreateA: a handle for the domain `name`, the same for the same name.
///
/// # Safety
/// Called by NVTX with the program's domain name, a C string.
unsafe extern "C" fn domain_create_a(name: *const c_char) -> usize {
    // Safety: passed on from NVTX.
    let Some(name) = (unsafe { c_text(name) }) else { return 0 };
    guarded(0, || {
        let Ok(mut domains) = DOMAINS.lock() else { return 0 };
        let at = domains.iter().position(|known| *known == name).unwrap_or_else(|| {
            domains.push(name);
            domains.len() - 1
        });
        at + 1
    })
}

/// nvtxDomainRegisterStringA: a handle for `text` in `domain`, the same for the same text.
///
/// # Safety
/// Called by NVTX with a domain made here (or null) and the program's string, a C string.
unsafe extern "C" fn domain_register_string_a(domain: usize, text: *const c_char) -> usize {
    // Safety: passed on from NVTX.
    let Some(text) = (unsafe { c_text(text) }) else { return 0 };
    guarded(0, || {
        let Ok(mut registered) = REGISTERED.lock() else { return 0 };
        let at = registered.iter().position(|(d, known)| *d == domain && *known == text).unwrap_or_else(|| {
            registered.push((domain, text));
            registered.len() - 1
        });
        at + 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_attributes_are_laid_out_as_nvtx_lays_them_out() {
        assert_eq!(std::mem::size_of::<EventAttributes>(), 48);
        assert_eq!(std::mem::offset_of!(EventAttributes, message_type), 32);
        assert_eq!(std::mem::offset_of!(EventAttributes, message), 40);
    }

    #[test]
    fn pushes_and_pops_nest_per_domain() {
        assert_eq!(pushed(0, false), 0);
        assert_eq!(pushed(7, false), 0, "levels are counted per domain");
        assert_eq!(pushed(0, false), 1);
        assert_eq!(popped(7), 0);
        assert_eq!(popped(7), -1, "nothing of that domain open");
        assert_eq!(popped(0), 1);
        assert_eq!(popped(0), 0);
        assert_eq!(popped(0), -1);
    }

    #[test]
    fn messages_are_read_from_ascii_and_registered_strings() {
        let name = c"train_step";
        let mut attributes = EventAttributes {
            version: 3,
            size: 48,
            category: 0,
            color_type: 0,
            color: 0,
            payload_type: 0,
            reserved0: 0,
            payload: 0,
            message_type: MESSAGE_ASCII,
            message: name.as_ptr().cast(),
        };
        // Safety: attributes built above.
        assert_eq!(unsafe { message_of(&attributes) }.as_deref(), Some("train_step"));
        // Safety: a C string.
        let handle = unsafe { domain_register_string_a(0, c"registered".as_ptr()) };
        // Safety: a C string.
        assert_eq!(unsafe { domain_register_string_a(0, c"registered".as_ptr()) }, handle, "the same handle");
        attributes.message_type = MESSAGE_REGISTERED;
        attributes.message = handle as *const c_void;
        // Safety: as above.
        assert_eq!(unsafe { message_of(&attributes) }.as_deref(), Some("registered"));
        attributes.size = 40;
        // Safety: as above.
        assert_eq!(unsafe { message_of(&attributes) }, None, "a structure too short to hold a message");
        // Safety: a C string.
        let domain = unsafe { domain_create_a(c"trainer".as_ptr()) };
        assert_eq!(domain_name(domain).as_deref(), Some("trainer"));
        assert_eq!(domain_name(0), None);
    }
}
