//! A reader that parses on a background thread and hands records over in batches, so that reading a large
//! trace overlaps with analyzing it while memory stays bounded by the queue. Every input format uses it.
//!
//! The hand-over allocates nothing once it runs: the analysis gives each batch back when it has read it
//! ([`RecordSource::recycle`]), and the worker empties it and fills it again. So the records are dropped on the
//! thread that made them (their accesses, names, sources: no frees across threads, none of that work on the
//! analysis thread), and the batches' memory stays warm instead of being freed and faulted in again. What the
//! analysis only takes note of (`RecordObserver`) is taken there too, as each batch comes back: once the trace
//! is read, the worker waits for the last batches to come back before it ends. What the analysis hands to the
//! reader's thread to do before a batch goes out (`RecordPreparer`) is done there, just before it is sent.

use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender, TrySendError};
use std::thread::JoinHandle;

use super::counters::ImportCounters;
use super::record_source::{IngestError, RecordObserver, RecordPreparer, RecordSource, BATCH};
use crate::model::{Access, OpKind, Operation, PointerArg, TraceRecord};

/// Records as the worker hands them over; an error ends the stream.
pub type Batch = Vec<Result<TraceRecord, IngestError>>;

/// Batches a worker may queue ahead of the analysis. Few and small (with `BATCH`): the records in flight (a few
/// hundred bytes each) stay in the shared cache between the thread that writes them and the one that reads them;
/// 16 batches of 4,096 (20 MB) went to memory and back: 5-10% more CPU on each thread (2 M-record binary trace).
const QUEUED_BATCHES: usize = 4;

/// How long a reader that finds the queue full sleeps before it looks again: a batch is some hundreds of
/// microseconds of analysis.
const ROOM_POLL: std::time::Duration = std::time::Duration::from_micros(50);

/// What the analysis sends the worker: a batch it has read, who takes note of the batches from now on, or who
/// goes over them before they are sent.
pub(super) enum GivenBack {
    Batch(Batch),
    Observer(Box<dyn RecordObserver>),
    Preparer(Box<dyn RecordPreparer>),
}

/// The worker's end of the hand-over: full batches go to the analysis, which gives each back once read.
pub struct BatchSender {
    full: SyncSender<Batch>,
    given_back: Receiver<GivenBack>,
    observing: Observing,
}

/// Who takes note of the batches given back, and who goes over those sent, once the analysis has said.
#[derive(Default)]
struct Observing {
    observer: Option<Box<dyn RecordObserver>>,
    preparer: Option<Box<dyn RecordPreparer>>,
}

impl Observing {
    /// Takes what came back: an observer or a preparer is kept (for the batches after it), a batch observed and
    /// returned.
    fn take(&mut self, returned: GivenBack) -> Option<Batch> {
        match returned {
            GivenBack::Observer(observer) => {
                self.observer = Some(observer);
                None
            }
            GivenBack::Preparer(preparer) => {
                self.preparer = Some(preparer);
                None
            }
            GivenBack::Batch(batch) => {
                if let Some(observer) = self.observer.as_mut() {
                    observer.observe(&batch);
                }
                Some(batch)
            }
        }
    }

    /// A batch about to be sent, prepared.
    fn prepare(&mut self, batch: &mut Batch) {
        if let Some(preparer) = self.preparer.as_mut() {
            preparer.prepare(batch);
        }
    }
}

impl BatchSender {
    /// A sender and the two ends the analysis holds: the full batches, and where it gives them back.
    pub(super) fn new() -> (BatchSender, Receiver<Batch>, Sender<GivenBack>) {
        let (full, batches) = sync_channel(QUEUED_BATCHES);
        let (give_back, given_back) = channel();
        (BatchSender { full, given_back, observing: Observing::default() }, batches, give_back)
    }

    /// A batch given back, observed (an observer sent before it installed on the way), or None while none has
    /// come back.
    fn try_given_back(&mut self) -> Option<Batch> {
        loop {
            let returned = self.given_back.try_recv().ok()?;
            if let Some(batch) = self.observing.take(returned) {
                return Some(batch);
            }
        }
    }

    /// Hands `batch` over and leaves an empty one in its place: one the analysis gave back, emptied here, or a
    /// new one while none has come back (at most the queue's length and the two being filled and read exist).
    /// False when the analysis stopped reading.
    pub fn send(&mut self, batch: &mut Batch) -> bool {
        self.send_keeping(batch, &mut SpareVecs::default())
    }

    /// [`BatchSender::send`], keeping the kernels' access and pointer lists of a batch given back in `spare`
    /// for the records read next.
    pub fn send_keeping(&mut self, batch: &mut Batch, spare: &mut SpareVecs) -> bool {
        let empty = match self.try_given_back() {
            Some(mut spent) => {
                spare.empty(&mut spent);
                spent
            }
            None => Vec::with_capacity(BATCH),
        };
        let mut full = std::mem::replace(batch, empty);
        self.observing.prepare(&mut full);
        // A reader ahead of the analysis waits for room by polling, not blocked in the channel: a blocked sender
        // makes each of the analysis' receives a wake-up system call on the analysis' thread (3-5% of it on a
        // binary trace, where the reader is the faster one). Its own core is idle meanwhile; the queue holds
        // milliseconds of work, far more than a poll's sleep.
        loop {
            match self.full.try_send(full) {
                Ok(()) => return true,
                Err(TrySendError::Full(back)) => {
                    full = back;
                    std::thread::sleep(ROOM_POLL);
                }
                Err(TrySendError::Disconnected(_)) => return false,
            }
        }
    }

    /// Hands over the last batch, then takes the batches still out back as they come, observing them, until the
    /// analysis is done with the trace (it drops its end).
    pub fn send_last(mut self, mut batch: Batch) {
        // A preparer sent lately is still in the channel: taken here, so that no batch after it goes unprepared.
        while let Ok(returned) = self.given_back.try_recv() {
            drop(self.observing.take(returned));
        }
        self.observing.prepare(&mut batch);
        let BatchSender { full, given_back, mut observing } = self;
        // A closed receiver means the consumer stopped early (an error downstream): nothing left to do.
        if full.send(batch).is_err() {
            return;
        }
        // The end of the trace, for the analysis.
        drop(full);
        while let Ok(returned) = given_back.recv() {
            drop(observing.take(returned));
        }
    }
}

/// The lists of kernels' accesses and pointer arguments that batches given back held, emptied, for a reader to
/// fill again: so that a kernel's record allocates nothing once reading runs.
#[derive(Default)]
pub struct SpareVecs {
    accesses: Vec<Vec<Access>>,
    pointers: Vec<Vec<PointerArg>>,
}

/// Lists kept at most of each kind (two batches' worth): what a batch takes, a batch gives back.
const SPARE_KEPT: usize = 2 * BATCH;

impl SpareVecs {
    /// An empty list for `len` accesses.
    pub fn accesses(&mut self, len: usize) -> Vec<Access> {
        let mut list = self.accesses.pop().unwrap_or_default();
        list.reserve(len);
        list
    }

    /// An empty list for `len` pointer arguments (none kept is taken for none: most kernels of a hand-written or
    /// generated trace have no pointer list).
    pub fn pointers(&mut self, len: usize) -> Vec<PointerArg> {
        if len == 0 {
            return Vec::new();
        }
        let mut list = self.pointers.pop().unwrap_or_default();
        list.reserve(len);
        list
    }

    /// Empties `batch`, keeping its kernels' lists, emptied: in one pass, each record dropped once its lists
    /// are taken (the batch comes back from the other thread's cache; a second pass read it all again).
    fn empty(&mut self, batch: &mut Batch) {
        // `retain_mut` that keeps nothing: each record dropped where it lies (a drain would move each out first).
        batch.retain_mut(|record| {
            if let Ok(TraceRecord::Op(Operation { kind: OpKind::Kernel { accesses, pointers, .. }, .. })) = record {
                if accesses.capacity() > 0 && self.accesses.len() < SPARE_KEPT {
                    let mut list = std::mem::take(accesses);
                    list.clear();
                    self.accesses.push(list);
                }
                if pointers.capacity() > 0 && self.pointers.len() < SPARE_KEPT {
                    let mut list = std::mem::take(pointers);
                    list.clear();
                    self.pointers.push(list);
                }
            }
            false
        });
    }
}

pub struct BackgroundReader {
    format: &'static str,
    batches: Receiver<Batch>,
    /// Where read batches go back to the worker; they are dropped here once it has stopped.
    give_back: Sender<GivenBack>,
    current: std::vec::IntoIter<Result<TraceRecord, IngestError>>,
    worker: Option<JoinHandle<ImportCounters>>,
    failed: bool,
    /// Whether the worker takes an observer and a preparer ([`BackgroundReader::observing_given_back`]).
    takes_work: bool,
}

impl BackgroundReader {
    /// Runs `work` on a thread named `name`; it sends batches and returns its import counters.
    pub fn spawn(
        name: &str,
        format: &'static str,
        work: impl FnOnce(BatchSender) -> ImportCounters + Send + 'static,
    ) -> Result<BackgroundReader, IngestError> {
        let (tx, rx, give_back) = BatchSender::new();
        let worker =
            std::thread::Builder::new().name(name.to_string()).spawn(move || work(tx)).map_err(|e| IngestError {
                path: name.to_string(),
                location: None,
                message: format!("cannot start the reader thread: {e}"),
            })?;
        Ok(BackgroundReader {
            format,
            batches: rx,
            give_back,
            current: Vec::new().into_iter(),
            worker: Some(worker),
            failed: false,
            takes_work: false,
        })
    }

    /// Lets the worker take an observer and a preparer ([`RecordSource::observe_given_back`],
    /// [`RecordSource::prepare_before_hand_over`]): for a reader that keeps ahead of the analysis (the binary
    /// one), so that the work moves to the core with time to spare. A reader that is the slower of the two (JSON,
    /// whose parse is most of a run; nsys) leaves it where it is.
    pub fn observing_given_back(mut self) -> BackgroundReader {
        self.takes_work = true;
        self
    }

    /// Sends the worker `work` (`given` wraps it), where it takes any; else, or when the worker has stopped (at
    /// an error), gives it back (`back` unwraps it) for the caller to do.
    fn hand_to_worker<T>(
        &mut self,
        work: T,
        given: fn(T) -> GivenBack,
        back: fn(GivenBack) -> Option<T>,
    ) -> Result<(), T> {
        if !self.takes_work {
            return Err(work);
        }
        self.give_back.send(given(work)).map_err(|std::sync::mpsc::SendError(sent)| match back(sent) {
            Some(work) => work,
            None => unreachable!("what comes back is what was sent"),
        })
    }
}

impl Iterator for BackgroundReader {
    type Item = Result<TraceRecord, IngestError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            if let Some(item) = self.current.next() {
                self.failed = item.is_err();
                return Some(item);
            }
            self.current = self.batches.recv().ok()?.into_iter();
        }
    }
}

impl RecordSource for BackgroundReader {
    fn format(&self) -> &'static str {
        self.format
    }

    fn next_batch(&mut self) -> Option<Batch> {
        if self.failed {
            return None;
        }
        let rest: Batch = self.current.by_ref().collect();
        let batch = if rest.is_empty() { self.batches.recv().ok()? } else { rest };
        // An error ends the stream, as it does for the iterator.
        self.failed = batch.iter().any(Result::is_err);
        Some(batch)
    }

    fn recycle(&mut self, batch: Batch) {
        // Once the worker has stopped, the batch comes back here and is dropped with the channel.
        let _ = self.give_back.send(GivenBack::Batch(batch));
    }

    fn observe_given_back(&mut self, observer: Box<dyn RecordObserver>) -> Result<(), Box<dyn RecordObserver>> {
        self.hand_to_worker(observer, GivenBack::Observer, |sent| match sent {
            GivenBack::Observer(observer) => Some(observer),
            _ => None,
        })
    }

    fn prepare_before_hand_over(&mut self, preparer: Box<dyn RecordPreparer>) -> Result<(), Box<dyn RecordPreparer>> {
        self.hand_to_worker(preparer, GivenBack::Preparer, |sent| match sent {
            GivenBack::Preparer(preparer) => Some(preparer),
            _ => None,
        })
    }

    fn finish(mut self: Box<Self>) -> ImportCounters {
        // Dropping the receiver first lets a worker blocked on a full queue see the hang-up and stop.
        let worker = self.worker.take();
        drop(self);
        worker.and_then(|w| w.join().ok()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AccessMode, AccessRange, StreamId};

    fn kernel(accesses: Vec<Access>) -> Result<TraceRecord, IngestError> {
        Ok(TraceRecord::Op(Operation::plain(OpKind::Kernel {
            stream: StreamId(0),
            name: "k".into(),
            accesses,
            pointers: vec![],
            exact: None,
        })))
    }

    /// Takes note of the operations' `seq`s.
    struct SeenSeqs(std::sync::Arc<std::sync::Mutex<Vec<u64>>>);

    impl RecordObserver for SeenSeqs {
        fn observe(&mut self, batch: &[Result<TraceRecord, IngestError>]) {
            let mut seen = self.0.lock().expect("not poisoned");
            seen.extend(batch.iter().flatten().filter_map(|r| {
                if let TraceRecord::Op(op) = r {
                    Some(op.seq)
                } else {
                    None
                }
            }));
        }
    }

    /// Every batch given back is observed once, in order, the last ones too (after the worker read its last
    /// record): by the time the reader is finished, the observer has seen the whole trace.
    #[test]
    fn an_observer_sees_every_batch_given_back_in_order() {
        let op = |seq| Ok(TraceRecord::Op(Operation { seq, ..Operation::plain(OpKind::HostRelease { object: 1 }) }));
        let mut reader = BackgroundReader::spawn("test-ingest", "test", move |mut tx| {
            for seq in 0..40 {
                let mut batch = vec![op(2 * seq), op(2 * seq + 1)];
                assert!(tx.send(&mut batch));
            }
            tx.send_last(vec![op(80)]);
            ImportCounters::default()
        })
        .expect("a reader")
        .observing_given_back();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        assert!(reader.observe_given_back(Box::new(SeenSeqs(seen.clone()))).is_ok());
        while let Some(batch) = reader.next_batch() {
            reader.recycle(batch);
        }
        Box::new(reader).finish();
        assert_eq!(*seen.lock().expect("not poisoned"), (0..=80).collect::<Vec<u64>>());
    }

    #[test]
    fn a_batch_given_back_is_filled_again_and_its_kernels_lists_reused() {
        let (mut sender, batches, give_back) = BatchSender::new();
        let mut spare = SpareVecs::default();
        let range = AccessRange::new(0x1000, 64).expect("a range");
        let mut batch = vec![kernel(vec![Access::plain(range, AccessMode::Write)])];
        let first_list = match &batch[0] {
            Ok(TraceRecord::Op(Operation { kind: OpKind::Kernel { accesses, .. }, .. })) => accesses.as_ptr(),
            _ => unreachable!(),
        };
        assert!(sender.send_keeping(&mut batch, &mut spare));
        // None has come back yet: a new one to fill.
        assert!(batch.is_empty());
        let read = batches.recv().expect("the batch sent");
        let read_at = read.as_ptr();
        give_back.send(GivenBack::Batch(read)).expect("the sender holds the other end");
        batch.push(kernel(Vec::new()));
        assert!(sender.send_keeping(&mut batch, &mut spare));
        assert_eq!(batch.as_ptr(), read_at, "the batch given back, to fill again");
        assert!(batch.is_empty(), "emptied here");
        let list = spare.accesses(1);
        assert_eq!(list.as_ptr(), first_list, "its kernel's access list, kept for the next kernel");
        assert!(list.is_empty());
        assert!(spare.accesses(1).capacity() >= 1, "and then new ones");
        drop(batches);
        assert!(!sender.send(&mut batch), "the analysis stopped reading");
    }
}
