//! The device memory behind the launches' tables: a pool per context, each table used by one launch at a time
//! (its launch is read back before it is used again), sized from what the kernel touched before and grown when
//! a launch overflowed it. A table is never cleared: each launch tags its slots with a new generation.
//! Touches the Sanitizer API's memory functions.

use std::ffi::c_void;

use rustc_hash::FxHashMap as HashMap;

use super::api::{CUcontext, Sanitizer, StreamHandle, SANITIZER_SUCCESS};
use super::table::{ChunkEntry, LaunchTable, SAW_OVERFLOW};

/// Chunks a kernel's first table holds (4 KiB each: 256 MiB touched) and the most any holds (8 GiB).
const FIRST_CAPACITY: u32 = 1 << 16;
const MAX_CAPACITY: u32 = 1 << 21;
/// Generations fit 24 bits of a slot's key; a table that used them all is cleared and starts again.
const LAST_GENERATION: u32 = (1 << 24) - 1;

/// One table on the device.
pub struct DeviceTable {
    context: usize,
    /// The header's device address, which the patches get as their user data.
    pub header: *mut c_void,
    /// The header as the host last wrote it.
    host: LaunchTable,
    slots_bytes: usize,
}

// Safety: the table's device memory belongs to the capture, used by one launch at a time under the pool's lock.
unsafe impl Send for DeviceTable {}

impl DeviceTable {
    pub fn capacity(&self) -> u32 {
        self.host.capacity
    }
}

/// What the launch on `stream` left in `table`, once the launch is done. Waits for it: called without the
/// pool's lock, so that other threads' launches go on meanwhile.
pub fn read_back(api: &Sanitizer, table: &DeviceTable, stream: StreamHandle) -> Option<Readback> {
    let mut header = LaunchTable::default();
    // Safety: waits for the launch, then reads the header and the entries it counted into host memory of that
    // size.
    unsafe {
        if (api.stream_synchronize)(stream) != SANITIZER_SUCCESS {
            return None;
        }
        let header_bytes = std::mem::size_of::<LaunchTable>();
        if (api.memcpy_device_to_host)((&mut header as *mut LaunchTable).cast(), table.header, header_bytes, stream)
            != SANITIZER_SUCCESS
        {
            return None;
        }
        let count = header.count.min(table.capacity()) as usize;
        let mut entries = vec![ChunkEntry::default(); count];
        let entries_bytes = count * std::mem::size_of::<ChunkEntry>();
        let entries_at = table.host.entries as *mut c_void;
        if count > 0
            && (api.memcpy_device_to_host)(entries.as_mut_ptr().cast(), entries_at, entries_bytes, stream)
                != SANITIZER_SUCCESS
        {
            return None;
        }
        Some(Readback { flags: header.flags, entries })
    }
}

/// What a launch left in its table.
pub struct Readback {
    pub flags: u32,
    pub entries: Vec<ChunkEntry>,
}

/// Free tables by context, and the capacity each kernel wants.
#[derive(Default)]
pub struct TablePool {
    free: Vec<DeviceTable>,
    wanted: HashMap<usize, u32>,
    /// Device bytes the tables hold, for the report of what `--exact` cost.
    pub device_bytes: u64,
}

// Safety: see DeviceTable.
unsafe impl Send for TablePool {}

impl TablePool {
    /// A table for a launch of `function` in `context`, its header written for the launch on `stream` (ordered
    /// before the kernel). None when the device has no memory for one.
    pub fn take(
        &mut self,
        api: &Sanitizer,
        context: CUcontext,
        function: usize,
        stream: StreamHandle,
    ) -> Option<DeviceTable> {
        let wanted = *self.wanted.get(&function).unwrap_or(&FIRST_CAPACITY);
        let position = self.free.iter().position(|t| t.context == context as usize && t.capacity() >= wanted);
        let mut table = match position {
            Some(i) => self.free.swap_remove(i),
            None => self.allocate(api, context, wanted, stream)?,
        };
        if table.host.generation >= LAST_GENERATION {
            table.host.generation = 0;
            // Safety: the table's own slot arrays, `slots_bytes` each, which no launch uses now.
            unsafe {
                (api.memset)(table.host.slot_keys as *mut c_void, 0, table.slots_bytes, stream);
                (api.memset)(table.host.slot_entry as *mut c_void, 0, table.slots_bytes, stream);
            }
        }
        table.host.generation += 1;
        table.host.count = 0;
        table.host.flags = 0;
        // Safety: copies the header (a local of the table's, staged before the call returns) into its device copy.
        let written = unsafe {
            (api.memcpy_host_to_device_async)(
                table.header,
                (&mut table.host as *mut LaunchTable).cast(),
                std::mem::size_of::<LaunchTable>(),
                stream,
            )
        };
        if written != SANITIZER_SUCCESS {
            self.free.push(table);
            return None;
        }
        Some(table)
    }

    /// Takes `table` back after its launch was read; a launch that overflowed its table (`flags`) makes the
    /// next launch of its kernel get one four times larger.
    pub fn give_back(&mut self, table: DeviceTable, function: usize, flags: u32) {
        if flags & SAW_OVERFLOW != 0 {
            let grown = table.capacity().saturating_mul(4).min(MAX_CAPACITY);
            self.wanted.insert(function, grown);
        }
        self.free.push(table);
    }

    fn allocate(
        &mut self,
        api: &Sanitizer,
        context: CUcontext,
        capacity: u32,
        stream: StreamHandle,
    ) -> Option<DeviceTable> {
        // Twice as many slots as entries, a power of two, so that probes stay short.
        let slots = (capacity as usize * 2).next_power_of_two();
        let slots_bytes = slots * 8;
        let entries_bytes = capacity as usize * std::mem::size_of::<ChunkEntry>();
        let header_bytes = std::mem::size_of::<LaunchTable>().next_multiple_of(256);
        let total = header_bytes + 2 * slots_bytes + entries_bytes;
        let mut base: *mut c_void = std::ptr::null_mut();
        // Safety: allocates device memory of the capture's own in the launch's context.
        if unsafe { (api.alloc)(context, &mut base, total) } != SANITIZER_SUCCESS || base.is_null() {
            return None;
        }
        let at = |offset: usize| (base as u64) + offset as u64;
        let host = LaunchTable {
            generation: 0,
            count: 0,
            capacity,
            flags: 0,
            slot_mask: slots as u32 - 1,
            pad: 0,
            slot_keys: at(header_bytes),
            slot_entry: at(header_bytes + slots_bytes),
            entries: at(header_bytes + 2 * slots_bytes),
        };
        // Safety: the new allocation's slot arrays: generation 0 marks every slot free.
        unsafe { (api.memset)(host.slot_keys as *mut c_void, 0, 2 * slots_bytes, stream) };
        self.device_bytes += total as u64;
        Some(DeviceTable { context: context as usize, header: base, host, slots_bytes })
    }
}
