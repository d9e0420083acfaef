// Device-side patches of the exact-access capture backend (tier T3, docs/capture.md): the Compute Sanitizer
// API calls these functions before every global-memory load, store and atomic, and before every asynchronous
// and bulk copy between global and shared memory, of every kernel of every loaded module. They mark, in a hash
// table of 4 KiB chunks that the capture library gives each launch, which 32-byte granules the launch read and
// which it wrote. The table stays small (a few bytes per chunk touched), and the host reads back only the
// chunks in use.
//
// Built into exact_access.fatbin by build_patches.sh with `nvcc --fatbin --compile-as-tools-patch`; the
// library embeds the fatbin. Its layout of `LaunchTable` and `ChunkEntry` is mirrored in
// capture/src/sanitizer/table.rs: change both together (the test there checks the sizes).

#include <sanitizer_patching.h>
#include <stdint.h>

// 4 KiB chunks of 128 granules of 32 bytes: one bit per granule, four 32-bit words a direction.
#define CHUNK_SHIFT 12
#define GRANULE_SHIFT 5
#define WORDS_PER_CHUNK 4
// Slots looked at before a chunk is given up as overflow (the table has twice as many slots as entries).
#define MAX_PROBES 64

// Flags of a launch's table, set by the patches: what the launch did that its ranges do not show.
#define SAW_OVERFLOW 0x1u       // more chunks than the table holds: the ranges are incomplete
#define SAW_ASYNC_BARRIER 0x2u  // an mbarrier operation: the launch may use tensor-map (TMA) copies, unseen
#define SAW_BLOCK 0x4u          // a block entered: the kernel was instrumented

struct ChunkEntry {
    uint64_t chunk;                  // address >> CHUNK_SHIFT
    uint32_t read[WORDS_PER_CHUNK];  // granules read
    uint32_t write[WORDS_PER_CHUNK]; // granules written (atomics count as both)
};

struct LaunchTable {
    uint32_t generation;  // tags the slots this launch filled: no clearing between launches
    uint32_t count;       // entries taken
    uint32_t capacity;    // entries there are room for
    uint32_t flags;       // SAW_*
    uint32_t slot_mask;   // slots - 1 (slots: a power of two, twice the capacity)
    uint32_t pad;
    uint64_t* slot_keys;  // (generation << 40) | (chunk + 1); a key of an older generation is free
    uint64_t* slot_entry; // (generation << 32) | (entry index + 1), published after the entry is zeroed
    ChunkEntry* entries;
};

static __device__ __forceinline__ uint32_t lane_id() {
    uint32_t lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

static __device__ __forceinline__ uint32_t hash_chunk(uint64_t chunk) {
    uint64_t h = chunk * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

// The entry of `chunk`, inserting it when new; null when the table is full.
static __device__ ChunkEntry* entry_of(LaunchTable* table, uint64_t chunk) {
    const uint64_t generation = table->generation;
    const uint64_t key = (generation << 40) | (chunk + 1);
    uint32_t slot = hash_chunk(chunk) & table->slot_mask;
    // Probes are bounded, and a full table takes no new chunk: a patch must cost the same however full it is.
    for (uint32_t probe = 0; probe < MAX_PROBES; ++probe) {
        volatile uint64_t* keys = table->slot_keys;
        uint64_t seen = keys[slot];
        if ((seen >> 40) != generation) {
            if (*(volatile uint32_t*)&table->count >= table->capacity) {
                atomicOr(&table->flags, SAW_OVERFLOW);
                return nullptr;
            }
            uint64_t before = atomicCAS((unsigned long long*)&table->slot_keys[slot], seen, key);
            if (before == seen) {
                uint32_t index = atomicAdd(&table->count, 1u);
                if (index >= table->capacity) {
                    atomicOr(&table->flags, SAW_OVERFLOW);
                    atomicExch((unsigned long long*)&table->slot_entry[slot], (generation << 32) | 0xFFFFFFFFull);
                    return nullptr;
                }
                ChunkEntry* entry = &table->entries[index];
                entry->chunk = chunk;
                for (int w = 0; w < WORDS_PER_CHUNK; ++w) {
                    entry->read[w] = 0;
                    entry->write[w] = 0;
                }
                __threadfence();
                atomicExch((unsigned long long*)&table->slot_entry[slot], (generation << 32) | (index + 1ull));
                return entry;
            }
            seen = before;
        }
        if (seen == key) {
            // Another warp is inserting this chunk: wait for its entry (independent thread scheduling lets it
            // finish; only one lane of a warp ever inserts).
            // The wait is bounded: a patch must never hang the program's kernel, whatever the table holds.
            volatile uint64_t* published = table->slot_entry;
            uint64_t value;
            uint32_t spins = 0;
            do {
                value = published[slot];
                if (++spins == (1u << 24)) {
                    atomicOr(&table->flags, SAW_OVERFLOW);
                    return nullptr;
                }
            } while ((value >> 32) != generation);
            uint32_t index = (uint32_t)value;
            if (index == 0xFFFFFFFFu) return nullptr;
            return &table->entries[index - 1];
        }
        slot = (slot + 1) & table->slot_mask;
    }
    atomicOr(&table->flags, SAW_OVERFLOW);
    return nullptr;
}

// Marks granules [first, last] (absolute granule numbers, within one chunk) in `bits`.
static __device__ __forceinline__ void granule_mask(uint64_t first, uint64_t last, uint32_t mask[WORDS_PER_CHUNK]) {
    const uint32_t lo = (uint32_t)(first & 127), hi = (uint32_t)(last & 127);
    for (int w = 0; w < WORDS_PER_CHUNK; ++w) {
        const uint32_t word_lo = w * 32, word_hi = word_lo + 31;
        if (hi < word_lo || lo > word_hi) {
            mask[w] = 0;
            continue;
        }
        const uint32_t a = lo > word_lo ? lo - word_lo : 0;
        const uint32_t b = hi < word_hi ? hi - word_lo : 31;
        const uint32_t width = b - a + 1;
        mask[w] = (width == 32 ? 0xFFFFFFFFu : ((1u << width) - 1u)) << a;
    }
}

static __device__ void mark(ChunkEntry* entry, const uint32_t read[WORDS_PER_CHUNK],
                            const uint32_t write[WORDS_PER_CHUNK]) {
    // A plain read first: most granules are marked already (every lane of a loop touches its chunk again).
    volatile uint32_t* seen_read = entry->read;
    volatile uint32_t* seen_write = entry->write;
    for (int w = 0; w < WORDS_PER_CHUNK; ++w) {
        if (read[w] && (seen_read[w] & read[w]) != read[w]) atomicOr(&entry->read[w], read[w]);
        if (write[w] && (seen_write[w] & write[w]) != write[w]) atomicOr(&entry->write[w], write[w]);
    }
}

// Marks [address, address + bytes) read and/or written, one lane doing the whole range (bulk copies: every
// active lane of the warp has the same operands, so only the first one records).
static __device__ void mark_range(LaunchTable* table, uint64_t address, uint64_t bytes, bool reads, bool writes) {
    if (bytes == 0) return;
    const uint64_t first = address >> GRANULE_SHIFT, last = (address + bytes - 1) >> GRANULE_SHIFT;
    for (uint64_t chunk = first >> 7; chunk <= (last >> 7); ++chunk) {
        const uint64_t lo = chunk << 7 > first ? chunk << 7 : first;
        const uint64_t hi = ((chunk << 7) | 127) < last ? ((chunk << 7) | 127) : last;
        uint32_t mask[WORDS_PER_CHUNK], none[WORDS_PER_CHUNK] = {0, 0, 0, 0};
        granule_mask(lo, hi, mask);
        ChunkEntry* entry = entry_of(table, chunk);
        if (entry == nullptr) return;
        mark(entry, reads ? mask : none, writes ? mask : none);
    }
}

// One lane's access of at most 16 bytes. When the whole (full) warp touches one chunk in one direction (a warp reading
// 128 contiguous bytes), the lanes OR their granules together and one of them marks the chunk: one atomic per
// word instead of 32. Otherwise each lane marks its own granules.
static __device__ void mark_access(LaunchTable* table, uint64_t address, uint32_t size, bool reads, bool writes) {
    const uint64_t first = address >> GRANULE_SHIFT, last = (address + (size ? size : 1) - 1) >> GRANULE_SHIFT;
    const uint64_t chunk = first >> 7;
    const uint32_t active = __activemask();
    if ((last >> 7) != chunk) {
        // Straddles two chunks (an unaligned access): rare, marked alone.
        mark_range(table, address, size, reads, writes);
        return;
    }
    const uint64_t key = (chunk << 2) | (reads ? 1 : 0) | (writes ? 2 : 0);
    const uint32_t peers = __match_any_sync(active, key);
    uint32_t mask[WORDS_PER_CHUNK];
    granule_mask(first, last, mask);
    if (active == 0xFFFFFFFFu && peers == active) {
        // A butterfly over the full warp (a shuffle from an inactive lane is undefined, so partial warps mark
        // lane by lane).
        for (int step = 1; step < 32; step <<= 1) {
            for (int w = 0; w < WORDS_PER_CHUNK; ++w) mask[w] |= __shfl_xor_sync(active, mask[w], step);
        }
        if (lane_id() != (uint32_t)(__ffs(active) - 1)) return;
    }
    ChunkEntry* entry = entry_of(table, chunk);
    if (entry == nullptr) return;
    uint32_t none[WORDS_PER_CHUNK] = {0, 0, 0, 0};
    mark(entry, reads ? mask : none, writes ? mask : none);
}

extern "C" __device__ __noinline__ SanitizerPatchResult streamtrace_global_access(void* userdata, uint64_t pc,
                                                                                  void* ptr, uint32_t accessSize,
                                                                                  uint32_t flags, const void* pData) {
    LaunchTable* table = (LaunchTable*)userdata;
    if (table == nullptr || (flags & SANITIZER_MEMORY_DEVICE_FLAG_PREFETCH)) return SANITIZER_PATCH_SUCCESS;
    const bool reads = flags & SANITIZER_MEMORY_DEVICE_FLAG_READ;
    const bool writes = flags & SANITIZER_MEMORY_DEVICE_FLAG_WRITE;
    if (!reads && !writes) return SANITIZER_PATCH_SUCCESS;
    mark_access(table, (uint64_t)(uintptr_t)ptr, accessSize, reads, writes);
    return SANITIZER_PATCH_SUCCESS;
}

// cp.async (global to shared): reads the global source.
extern "C" __device__ __noinline__ SanitizerPatchResult streamtrace_memcpy_async(void* userdata, uint64_t pc,
                                                                                 void* src, uint32_t dst,
                                                                                 uint32_t accessSize) {
    LaunchTable* table = (LaunchTable*)userdata;
    if (table != nullptr && src != nullptr) mark_access(table, (uint64_t)(uintptr_t)src, accessSize, true, false);
    return SANITIZER_PATCH_SUCCESS;
}

static __device__ __forceinline__ bool first_active_lane() {
    return lane_id() == (uint32_t)(__ffs(__activemask()) - 1);
}

// cp.async.bulk global -> shared: `data` bits 0:15 are the number of 16-byte blocks.
extern "C" __device__ __noinline__ SanitizerPatchResult streamtrace_bulk_global_to_shared(
    void* userdata, uint64_t pc, uint64_t src, uint32_t dst, uint32_t barrier, uint32_t data, uint32_t isMulticast) {
    LaunchTable* table = (LaunchTable*)userdata;
    if (table != nullptr && first_active_lane()) mark_range(table, src, (uint64_t)(data & 0xFFFF) * 16, true, false);
    return SANITIZER_PATCH_SUCCESS;
}

// cp.async.bulk shared -> global: writes `numBlocks` 16-byte blocks at `dst`.
extern "C" __device__ __noinline__ SanitizerPatchResult streamtrace_bulk_shared_to_global(void* userdata,
                                                                                          uint64_t pc, uint64_t dst,
                                                                                          uint32_t src,
                                                                                          uint32_t numBlocks) {
    LaunchTable* table = (LaunchTable*)userdata;
    if (table != nullptr && first_active_lane()) mark_range(table, dst, (uint64_t)numBlocks * 16, false, true);
    return SANITIZER_PATCH_SUCCESS;
}

// cp.reduce.async.bulk shared -> global: a read-modify-write of the destination.
extern "C" __device__ __noinline__ SanitizerPatchResult streamtrace_bulk_reduce_to_global(void* userdata,
                                                                                          uint64_t pc, uint64_t dst,
                                                                                          uint32_t src,
                                                                                          uint32_t numBlocks) {
    LaunchTable* table = (LaunchTable*)userdata;
    if (table != nullptr && first_active_lane()) mark_range(table, dst, (uint64_t)numBlocks * 16, true, true);
    return SANITIZER_PATCH_SUCCESS;
}

// An mbarrier operation: tensor-map copies (cp.async.bulk.tensor), which no patch sees, complete through
// mbarriers, so a launch that uses one keeps its argument blocks (tier T1) beside its exact ranges.
extern "C" __device__ __noinline__ SanitizerPatchResult streamtrace_cuda_barrier(void* userdata, uint64_t pc,
                                                                                 void* barrier, uint32_t kind,
                                                                                 uint32_t data) {
    LaunchTable* table = (LaunchTable*)userdata;
    if (table != nullptr && !(table->flags & SAW_ASYNC_BARRIER)) atomicOr(&table->flags, SAW_ASYNC_BARRIER);
    return SANITIZER_PATCH_SUCCESS;
}

// A block starts: the kernel was instrumented (a launch with no block entered keeps its argument blocks).
extern "C" __device__ __noinline__ SanitizerPatchResult streamtrace_block_enter(void* userdata, uint64_t pc) {
    LaunchTable* table = (LaunchTable*)userdata;
    if (table != nullptr && !(*(volatile uint32_t*)&table->flags & SAW_BLOCK)) atomicOr(&table->flags, SAW_BLOCK);
    return SANITIZER_PATCH_SUCCESS;
}
