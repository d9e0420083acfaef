//! The interposers in this test binary stand in front of the C library's for the test's own pthread calls (the
//! library's symbols are linked into it), and the capture is switched on as InitializeInjection would, so what
//! they write reaches a real trace file. Other tests of this binary run meanwhile; only this test's threads'
//! lines are looked at.

use std::ffi::c_void;
use std::sync::mpsc;

use crate::live_capture_tests::{alone, capture_on, trace_lines_of};
use crate::origin::thread_id;
use crate::record::{Record, SyncTarget};

use super::with_state;

/// Records one call of the calling thread, as the CUPTI callback does.
fn record(record: Record) {
    with_state(|state, call| state.emit(call, record)).expect("capture is on");
}

fn synchronize() {
    record(Record::Sync { target: SyncTarget::Context(1), api: "cuCtxSynchronize" });
}

fn launch() {
    record(Record::EventRecord { event: 9, stream: 5, api: "cuEventRecord" });
}

/// A pthread mutex (Rust's own mutexes are futexes, which the interposers do not see).
struct PthreadMutex(Box<libc::pthread_mutex_t>);

// Safety: a pthread mutex is made to be shared between threads.
unsafe impl Sync for PthreadMutex {}

impl PthreadMutex {
    fn new() -> PthreadMutex {
        PthreadMutex(Box::new(libc::PTHREAD_MUTEX_INITIALIZER))
    }

    fn lock_and_unlock(&self) {
        let mutex = &*self.0 as *const libc::pthread_mutex_t as *mut libc::pthread_mutex_t;
        // Safety: an initialized mutex that outlives the calls.
        unsafe {
            assert_eq!(libc::pthread_mutex_lock(mutex), 0);
            assert_eq!(libc::pthread_mutex_unlock(mutex), 0);
        }
    }
}

/// This test's lines of the trace: (type, thread, object) of its threads' records (the object of a host sync
/// record, else 0). Acquires of snapshots that no thread of the test released are left out: the test
/// harness's threads hand their knowledge to the threads they start, as they should.
fn lines_of(threads: &[u64]) -> Vec<(String, u64, u64)> {
    let lines = trace_lines_of(threads)
        .into_iter()
        .map(|v| {
            let kind = v["type"].as_str().unwrap_or("").to_string();
            (kind, v["thread"].as_u64().unwrap_or(0), v["object"].as_u64().unwrap_or(0))
        })
        .collect::<Vec<_>>();
    let released: Vec<u64> = lines.iter().filter(|(k, _, _)| k == "host_release").map(|l| l.2).collect();
    lines.into_iter().filter(|(k, _, object)| k != "host_acquire" || released.contains(object)).collect()
}

#[test]
fn releases_and_acquires_are_written_only_where_a_thread_learns_from_another() {
    capture_on();

    let mutex = std::sync::Arc::new(PthreadMutex::new());
    let main = thread_id();
    // The worker is started before the main thread knows anything: its creation passes nothing on.
    let (go, wait) = mpsc::channel::<()>();
    let (done, finished) = mpsc::channel::<u64>();
    let worker = {
        let mutex = mutex.clone();
        std::thread::spawn(move || {
            let me = thread_id();
            mutex.lock_and_unlock(); // nothing released into it yet
            wait.recv().unwrap();
            mutex.lock_and_unlock(); // acquires the main thread's snapshot...
            launch(); // ...written before this record
            mutex.lock_and_unlock(); // the same snapshot again: nothing
            launch();
            done.send(me).unwrap();
        })
    };
    mutex.lock_and_unlock(); // the main thread knows nothing yet: releases nothing
    synchronize();
    mutex.lock_and_unlock(); // now it does: one release
    mutex.lock_and_unlock(); // and nothing new since: the same mark, no line
    go.send(()).unwrap();
    let worker_id = finished.recv().unwrap();
    worker.join().unwrap(); // the worker learned something: its end releases, the join acquires
    launch();

    let lines = lines_of(&[main, worker_id]);
    let kinds: Vec<(&str, u64)> = lines.iter().map(|(k, t, _)| (k.as_str(), *t)).collect();
    assert_eq!(
        kinds,
        [
            ("sync", main),
            ("host_release", main),
            ("host_acquire", worker_id),
            ("record", worker_id),
            ("record", worker_id),
            // The worker learned nothing of its own: its unlocks and its end pass the main thread's snapshot
            // on, which the join finds to be the main thread's own.
            ("record", main),
        ],
        "{lines:?}"
    );
    assert_eq!(lines[1].2, lines[2].2, "the worker acquires the main thread's snapshot");
}

#[test]
fn a_thread_started_after_its_creator_learned_something_acquires_it() {
    capture_on();
    let parent = thread_id();
    // A thread of its own, so that nothing else this test binary does on its thread comes in between.
    let child = std::thread::spawn(move || {
        synchronize();
        let mut child: libc::pthread_t = 0;
        extern "C" fn start(out: *mut c_void) -> *mut c_void {
            // Safety: the creator passes a u64 it reads after the join.
            unsafe { *out.cast::<u64>() = thread_id() };
            launch();
            synchronize();
            std::ptr::null_mut()
        }
        let mut id = 0u64;
        // Safety: a plain pthread_create and join of a routine that writes `id`, read after the join.
        unsafe {
            assert_eq!(libc::pthread_create(&mut child, std::ptr::null(), start, (&mut id as *mut u64).cast()), 0);
            assert_eq!(libc::pthread_join(child, std::ptr::null_mut()), 0);
        }
        launch();
        (thread_id(), id)
    });
    let (creator, created) = child.join().unwrap();
    let lines = lines_of(&[creator, created]);
    let kinds: Vec<(&str, u64)> = lines.iter().map(|(k, t, _)| (k.as_str(), *t)).collect();
    assert_eq!(
        kinds,
        [
            ("sync", creator),
            ("host_release", creator),
            ("host_acquire", created),
            ("record", created),
            ("sync", created),
            ("host_release", created),
            ("host_acquire", creator),
            ("record", creator),
        ],
        "{lines:?} (parent {parent})"
    );
    assert_eq!(lines[1].2, lines[2].2, "the created thread acquires its creator's snapshot");
    assert_eq!(lines[5].2, lines[6].2, "the join acquires what the thread knew at its end");
}

#[test]
fn two_threads_that_know_the_same_take_turns_with_a_mutex_without_changing_it() {
    capture_on();
    let mutex = std::sync::Arc::new(PthreadMutex::new());
    let object = &*mutex.0 as *const libc::pthread_mutex_t as usize;
    synchronize();
    mutex.lock_and_unlock(); // the main thread's snapshot goes into the mutex
    let (to_worker, worker_turn) = mpsc::channel::<()>();
    let (to_main, main_turn) = mpsc::channel::<()>();
    const TURNS: u64 = 200;
    let worker = {
        let mutex = mutex.clone();
        std::thread::spawn(move || {
            for _ in 0..TURNS {
                worker_turn.recv().unwrap();
                mutex.lock_and_unlock(); // acquires the main thread's snapshot once, then knows what the mutex holds
                to_main.send(()).unwrap();
            }
        })
    };
    let before = super::objects::version_of(object);
    for _ in 0..TURNS {
        to_worker.send(()).unwrap();
        main_turn.recv().unwrap();
        mutex.lock_and_unlock();
    }
    worker.join().unwrap();
    // The shard's version counts every change of its objects; other tests' objects may share the shard, but
    // not hundreds of times. Each unlock putting the same marks again would change it 2 x TURNS times.
    let changes = super::objects::version_of(object) - before;
    assert!(changes < TURNS / 4, "{changes} changes in {} unlocks", 2 * TURNS);
}

#[test]
fn a_thread_that_unlocks_what_it_just_acquired_and_knows_nothing_more_puts_nothing() {
    capture_on();
    let main = thread_id();
    let mutex = std::sync::Arc::new(PthreadMutex::new());
    let other = std::sync::Arc::new(PthreadMutex::new());
    synchronize();
    mutex.lock_and_unlock(); // the main thread's snapshot goes into the mutex
    let puts = || super::objects::PUTS.with(std::cell::Cell::get);
    let worker = std::thread::spawn(move || {
        let me = thread_id();
        let before = puts();
        mutex.lock_and_unlock(); // acquires the snapshot; storing it back would change nothing
        let into_the_same = puts() - before;
        other.lock_and_unlock(); // the snapshot is news to this one: stored
        let into_another = puts() - before - into_the_same;
        launch(); // the acquire is written all the same
        (me, into_the_same, into_another)
    });
    let (worker_id, into_the_same, into_another) = worker.join().unwrap();
    assert_eq!((into_the_same, into_another), (0, 1));
    let lines = lines_of(&[main, worker_id]);
    let kinds: Vec<(&str, u64)> = lines.iter().map(|(k, t, _)| (k.as_str(), *t)).collect();
    assert_eq!(
        kinds,
        [("sync", main), ("host_release", main), ("host_acquire", worker_id), ("record", worker_id)],
        "{lines:?}"
    );
}

/// The mutex the case's fork handler locks, as OpenBLAS's handler locks its own to join its threads.
fn fork_handler_mutex() -> &'static PthreadMutex {
    static MUTEX: std::sync::OnceLock<PthreadMutex> = std::sync::OnceLock::new();
    MUTEX.get_or_init(PthreadMutex::new)
}

extern "C" fn fork_handler_locking_a_mutex() {
    fork_handler_mutex().lock_and_unlock();
}

#[test]
fn a_fork_handler_run_after_the_librarys_may_lock_a_mutex() {
    // A process of its own, so that the case's handler is registered before the library's.
    if !alone("host_sync::tests::a_fork_handler_run_after_the_librarys_may_lock_a_mutex") {
        return;
    }
    // Registered before any handler the library registers later (the one that held the table of objects
    // across fork was registered at the first release), so run after them: fork() runs the prepare handlers
    // last registered first. (fork.rs's handler, registered at subscription, would have the calls pass.)
    // Safety: registers a plain extern "C" function.
    unsafe { libc::pthread_atfork(Some(fork_handler_locking_a_mutex), None, None) };
    capture_on();
    synchronize(); // this thread knows something...
    let released = PthreadMutex::new(); // kept: the handler's mutex is another object
    released.lock_and_unlock(); // ...and releases it: the table of objects is in use
    fork_handler_mutex();
    // Safety: a fork whose child only exits.
    let child = unsafe { libc::fork() };
    if child == 0 {
        // Safety: ends the child without running the test harness's exit.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // Safety: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status}");
    fork_handler_mutex().lock_and_unlock(); // the parent goes on locking
}

#[test]
fn a_child_forked_while_another_thread_reads_the_mappings_decides_callers_all_the_same() {
    if !alone("host_sync::tests::a_child_forked_while_another_thread_reads_the_mappings_decides_callers_all_the_same") {
        return;
    }
    // Another thread holds the table of mappings (as while it reads /proc/self/maps) when this one forks.
    let (held, hold) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        super::caller::while_mappings_held(|| {
            held.send(()).unwrap();
            released.recv().unwrap();
        })
    });
    hold.recv().unwrap();
    // Safety: a fork whose child decides one caller, then exits.
    let child = unsafe { libc::fork() };
    if child == 0 {
        let code = i32::from(!super::caller::is_programs(fork_handler_locking_a_mutex as *const () as usize));
        // Safety: ends the child without running the test harness's exit.
        unsafe { libc::_exit(code) };
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut status = 0;
    // Safety: polls the child just forked, and kills it if it hangs.
    let waited = loop {
        let waited = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
        if waited != 0 || std::time::Instant::now() > deadline {
            break waited;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    if waited == 0 {
        // Safety: the child is ours.
        unsafe { libc::kill(child, libc::SIGKILL) };
    }
    release.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(waited, child, "the child hung deciding a caller");
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status}");
}

/// GCC's OpenMP runtime, loaded into the global scope, where the OpenMP stand-ins find it as the real one; with
/// its `omp_get_thread_num`.
fn libgomp_thread_num() -> extern "C" fn() -> libc::c_int {
    // Safety: loads the C compiler's OpenMP runtime and looks one function up in it.
    unsafe {
        let gomp = libc::dlopen(c"libgomp.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL);
        assert!(!gomp.is_null(), "libgomp.so.1 (GCC's OpenMP runtime, installed with gcc) is needed by this test");
        let found = libc::dlsym(gomp, c"omp_get_thread_num".as_ptr());
        assert!(!found.is_null());
        std::mem::transmute::<*mut c_void, extern "C" fn() -> libc::c_int>(found)
    }
}

/// Runs `work` on each thread of an OpenMP team of two (given its thread number and a flag the two share, which
/// the capture does not see), started through the OpenMP stand-in by a thread of its own (libgomp keeps a pool
/// per starting thread, which then has a team of its own) that runs `before` and `after` around the region. The
/// team's thread ids, by thread number.
fn in_a_team_of_two(before: fn(), work: fn(usize, &std::sync::atomic::AtomicU64), after: fn()) -> [u64; 2] {
    use std::sync::atomic::{AtomicU64, Ordering};
    struct Team {
        thread_num: extern "C" fn() -> libc::c_int,
        work: fn(usize, &AtomicU64),
        ids: [AtomicU64; 2],
        flag: AtomicU64,
    }
    extern "C-unwind" fn body(team: *mut c_void) {
        // Safety: the Team the region was started with, alive until it ends.
        let team = unsafe { &*team.cast::<Team>() };
        let me = usize::try_from((team.thread_num)()).expect("a thread number");
        team.ids[me].store(thread_id(), Ordering::Relaxed);
        (team.work)(me, &team.flag);
    }
    let team = Team {
        thread_num: libgomp_thread_num(),
        work,
        ids: [AtomicU64::new(0), AtomicU64::new(0)],
        flag: AtomicU64::new(0),
    };
    let started = std::thread::spawn(move || {
        before();
        super::interpose::openmp::GOMP_parallel(body, &team as *const Team as *mut c_void, 2, 0);
        after();
        [team.ids[0].load(Ordering::Relaxed), team.ids[1].load(Ordering::Relaxed)]
    });
    let ids = started.join().unwrap();
    assert_ne!(ids[1], 0, "the region ran on two threads");
    ids
}

#[test]
fn an_openmp_region_forks_and_joins_its_team_and_a_barrier_orders_it() {
    use super::interpose::openmp::GOMP_barrier;

    capture_on();
    // Thread 1 launches (after the fork), synchronizes and meets the barrier; thread 0 (the one that started the
    // region, which synchronized before it) launches after the barrier, and again after the region.
    let work = |me: usize, _: &std::sync::atomic::AtomicU64| {
        if me == 1 {
            launch();
            synchronize();
        }
        GOMP_barrier();
        if me == 0 {
            launch();
        }
    };
    let [master, worker] = in_a_team_of_two(synchronize, work, launch);
    let lines = lines_of(&[master, worker]);
    let of = |thread: u64| -> Vec<(&str, u64)> {
        lines.iter().filter(|(_, t, _)| *t == thread).map(|(k, _, object)| (k.as_str(), *object)).collect()
    };
    let (master_lines, worker_lines) = (of(master), of(worker));
    fn kinds<'a>(lines: &[(&'a str, u64)]) -> Vec<&'a str> {
        lines.iter().map(|(k, _)| *k).collect()
    }
    assert_eq!(kinds(&master_lines), ["sync", "host_release", "host_acquire", "record", "record"], "{lines:?}");
    assert_eq!(kinds(&worker_lines), ["host_acquire", "record", "sync", "host_release"], "{lines:?}");
    assert_eq!(master_lines[1].1, worker_lines[0].1, "the team acquires its master's snapshot at the fork");
    assert_eq!(worker_lines[3].1, master_lines[2].1, "the barrier hands the worker's snapshot to the master");
}

/// A futex call of `syscall`'s stand-in on `word` (futex(2)'s `operation`, `value`), made from `caller`.
fn futex(word: &std::sync::atomic::AtomicU32, operation: i32, value: u32, caller: usize) -> i64 {
    let word = word.as_ptr() as usize;
    // Safety: a futex call on a live word, with no timeout and no second word.
    unsafe {
        super::interpose::futex::syscall_body(
            libc::SYS_futex,
            word,
            operation as usize,
            value as usize,
            0,
            0,
            0,
            caller,
        )
    }
}

/// A waiter sleeps on a futex word until a setter, which synchronized first, stores 1 and wakes it (as a
/// C++20 latch or semaphore, or a future, does), each calling from the place given; the lines of both.
fn futex_hand_over(waker_at: usize, waiter_at: usize) -> (u64, u64, Vec<(String, u64, u64)>) {
    use std::sync::atomic::{AtomicU32, Ordering};

    capture_on();
    let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
    let (going_to_sleep, asleep) = mpsc::channel::<()>();
    let waiter = std::thread::spawn(move || {
        going_to_sleep.send(()).unwrap();
        let mut waits = 0;
        while word.load(Ordering::Acquire) == 0 {
            futex(word, libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, 0, waiter_at);
            waits += 1;
        }
        // It slept until woken: the stand-in passed the call on as it came.
        assert!(waits <= 2, "{waits} waits");
        launch();
        thread_id()
    });
    let setter = std::thread::spawn(move || {
        synchronize();
        asleep.recv().unwrap();
        // Long enough for the waiter to be asleep on the futex: the wake, not a look at the word, lets it go on.
        std::thread::sleep(std::time::Duration::from_millis(100));
        word.store(1, Ordering::Release);
        futex(word, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX as u32, waker_at);
        thread_id()
    });
    let (setter, waiter) = (setter.join().unwrap(), waiter.join().unwrap());
    (setter, waiter, lines_of(&[setter, waiter]))
}

/// A call site the caller table takes for the program's (a test binary's own code is this library's).
const PROGRAMS_PLACE: usize = 0x5eed_0000;

#[test]
fn a_futex_waiter_that_slept_acquires_what_its_waker_released() {
    super::caller::decide_as(PROGRAMS_PLACE, true);
    let (setter, waiter, lines) = futex_hand_over(PROGRAMS_PLACE, PROGRAMS_PLACE);
    let kinds: Vec<(&str, u64)> = lines.iter().map(|(k, t, _)| (k.as_str(), *t)).collect();
    assert_eq!(
        kinds,
        [("sync", setter), ("host_release", setter), ("host_acquire", waiter), ("record", waiter)],
        "{lines:?}"
    );
    assert_eq!(lines[1].2, lines[2].2, "the waiter acquires the setter's snapshot");
}

#[test]
fn futex_calls_of_this_librarys_own_code_order_nothing() {
    // Rust's mutexes, channels and thread parking in this library are futexes: calls from its own code (here,
    // this test binary's) pass straight on, and the same hand-over orders nothing.
    let own = futex_calls_of_this_librarys_own_code_order_nothing as fn() as usize + 1;
    let (setter, waiter, lines) = futex_hand_over(own, own);
    // (The setter's end releases its snapshot into its thread, which nobody joins here.)
    assert!(lines.iter().all(|(kind, thread, _)| kind != "host_acquire" || *thread != waiter), "{lines:?}");
    assert!(lines.iter().any(|(kind, thread, _)| kind == "record" && *thread == waiter), "{lines:?}");
    assert!(lines.iter().any(|(kind, thread, _)| kind == "sync" && *thread == setter), "{lines:?}");
    assert_eq!(super::caller::decided_already(own), Some(false), "noted for the shim's fast path");
}

#[test]
fn an_openmp_critical_section_hands_what_its_last_holder_knew_to_the_next() {
    use super::interpose::openmp::{GOMP_critical_end, GOMP_critical_start};
    use std::sync::atomic::{AtomicU64, Ordering};

    capture_on();
    // Thread 1 synchronizes, takes the section and then sets the flag, so that thread 0 takes the section second
    // and learns of thread 1 only through it.
    let work = |me: usize, done: &AtomicU64| {
        if me == 1 {
            synchronize();
            GOMP_critical_start();
            GOMP_critical_end();
            done.store(1, Ordering::Release);
        } else {
            while done.load(Ordering::Acquire) == 0 {
                std::hint::spin_loop();
            }
            GOMP_critical_start();
            GOMP_critical_end();
            launch();
        }
    };
    let [first, worker] = in_a_team_of_two(|| {}, work, || {});
    let lines = lines_of(&[first, worker]);
    let kinds: Vec<(&str, u64)> = lines.iter().map(|(k, t, _)| (k.as_str(), *t)).collect();
    assert_eq!(
        kinds,
        [("sync", worker), ("host_release", worker), ("host_acquire", first), ("record", first)],
        "{lines:?}"
    );
}
