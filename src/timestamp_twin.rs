//! The timestamp-order engine of an analysis, on a thread of its own. A trace that records its host
//! synchronization is analyzed in the per-thread order and, beside it, in the timestamp order, to set apart the
//! races that only timing orders (analysis.rs). The two engines read the same records and share nothing, so
//! the second runs on the other core: each batch goes to it once the first engine is done with it, and comes
//! back to be given to the reader once the second is done too. It sees the same records in the same order as
//! it would on the analysis's own thread ([`TimestampTwin::inline`], which the tests compare it with), so its
//! findings are the same.

use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

use crate::findings::Findings;
use crate::hb::{CheckThread, Engine, EngineError, EngineOptions, HostOrder};
use crate::ingest::IngestError;
use crate::model::TraceRecord;

type Batch = Vec<Result<TraceRecord, IngestError>>;

/// Batches handed to the twin's thread and not yet applied: enough to ride out a slow stretch of either engine,
/// few enough that the records in flight stay a few megabytes.
const IN_FLIGHT: usize = 4;

/// What the twin found: each capture range's findings as the range ended, then the rest of the trace's.
pub struct TwinFindings {
    pub ranges: Vec<Findings>,
    pub rest: Findings,
}

/// The timestamp-order engine: on its own thread, or applied in turn on the caller's.
pub enum TimestampTwin {
    OwnThread(Threaded),
    Inline(Box<TwinEngine>),
}

/// The twin's thread: batches go to it, and come back once applied.
pub struct Threaded {
    batches: Option<SyncSender<(Batch, usize)>>,
    done: Receiver<Batch>,
    worker: Option<JoinHandle<Result<TwinFindings, EngineError>>>,
}

/// The engine itself, with the findings of the capture ranges it has ended.
pub struct TwinEngine {
    engine: Engine,
    ranges: Vec<Findings>,
}

impl TimestampTwin {
    /// The twin on a thread of its own; on the caller's thread if none can be started.
    pub fn start() -> TimestampTwin {
        let (batches, todo) = mpsc::sync_channel::<(Batch, usize)>(IN_FLIGHT);
        let (give_back, done) = mpsc::channel();
        let spawned = std::thread::Builder::new().name("timestamp-order".to_string()).spawn(move || {
            let mut twin = TwinEngine::new();
            apply_all(&mut twin, todo, give_back)?;
            Ok(twin.finish())
        });
        match spawned {
            Ok(worker) => TimestampTwin::OwnThread(Threaded { batches: Some(batches), done, worker: Some(worker) }),
            Err(_) => TimestampTwin::inline(),
        }
    }

    /// The twin applied on the caller's thread, batch by batch.
    pub fn inline() -> TimestampTwin {
        TimestampTwin::Inline(Box::new(TwinEngine::new()))
    }

    /// Hands over `batch`, whose records from `from` on the twin applies (those before came before it
    /// started). Batches the twin is done with go to `recycle` (the reader takes them back).
    pub fn hand_over(&mut self, batch: Batch, from: usize, recycle: &mut dyn FnMut(Batch)) -> Result<(), EngineError> {
        match self {
            TimestampTwin::Inline(twin) => {
                twin.apply(&batch, from)?;
                recycle(batch);
            }
            TimestampTwin::OwnThread(threaded) => {
                threaded.done.try_iter().for_each(&mut *recycle);
                let sent = threaded.batches.as_ref().is_some_and(|batches| batches.send((batch, from)).is_ok());
                if !sent {
                    // The thread stopped at an error of its own: that error ends the analysis, where it would
                    // have ended it on this thread.
                    return Err(threaded.join().err().unwrap_or_else(|| EngineError {
                        origin: 0,
                        message: "the timestamp-order engine stopped early".to_string(),
                    }));
                }
            }
        }
        Ok(())
    }

    /// Waits for the twin to apply every batch handed over, giving each back to `recycle`; its findings, or the
    /// error that stopped it.
    pub fn finish(self, recycle: &mut dyn FnMut(Batch)) -> Result<TwinFindings, EngineError> {
        match self {
            TimestampTwin::Inline(twin) => Ok(twin.finish()),
            TimestampTwin::OwnThread(mut threaded) => {
                let found = threaded.join();
                threaded.done.try_iter().for_each(recycle);
                found
            }
        }
    }
}

impl Threaded {
    fn join(&mut self) -> Result<TwinFindings, EngineError> {
        drop(self.batches.take());
        let Some(worker) = self.worker.take() else {
            return Err(EngineError {
                origin: 0,
                message: "the timestamp-order engine was already joined".to_string(),
            });
        };
        match worker.join() {
            Ok(outcome) => outcome,
            // A panic of the engine is a bug: it goes on as it would have on this thread.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl TwinEngine {
    fn new() -> TwinEngine {
        TwinEngine {
            engine: Engine::new(EngineOptions { host_order: HostOrder::Global, check_thread: CheckThread::Off }),
            ranges: Vec::new(),
        }
    }

    fn apply(&mut self, batch: &[Result<TraceRecord, IngestError>], from: usize) -> Result<(), EngineError> {
        let records = batch.get(from..).unwrap_or_default();
        for (i, record) in records.iter().enumerate() {
            let Ok(record) = record else { continue };
            // As on the analysis's thread (engine.rs): the next operations' memory starts loading now.
            self.engine.prefetch(|k| records.get(i + k).and_then(|r| r.as_ref().ok()));
            self.engine.apply(record)?;
            if let TraceRecord::RangeEnd { .. } = record {
                self.ranges.push(self.engine.finish_range());
            }
        }
        Ok(())
    }

    fn finish(self) -> TwinFindings {
        TwinFindings { ranges: self.ranges, rest: self.engine.finish().0 }
    }
}

fn apply_all(
    twin: &mut TwinEngine,
    todo: Receiver<(Batch, usize)>,
    give_back: Sender<Batch>,
) -> Result<(), EngineError> {
    for (batch, from) in todo {
        twin.apply(&batch, from)?;
        // Once the analysis has ended (at an error of its own) nobody takes it: it is dropped here.
        let _ = give_back.send(batch);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Both twins applied to every batch of a committed trace, as the analysis hands them over.
    fn both_ways(trace: &str) -> (TwinFindings, TwinFindings) {
        let mut source = crate::ingest::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join(trace)).expect("trace opens");
        let (mut threaded, mut inline) = (TimestampTwin::start(), TimestampTwin::inline());
        assert!(matches!(threaded, TimestampTwin::OwnThread(_)));
        let (mut batches, mut given_back) = (0, 0);
        while let Some(batch) = source.next_batch() {
            batches += 1;
            inline.hand_over(batch.iter().map(copy).collect(), 0, &mut drop).expect("applies inline");
            threaded.hand_over(batch, 0, &mut |_| given_back += 1).expect("applies on its thread");
        }
        assert!(batches > 0);
        let threaded = threaded.finish(&mut |_| given_back += 1).expect("threaded twin finishes");
        assert_eq!(given_back, batches, "every batch handed over comes back");
        (threaded, inline.finish(&mut drop).expect("inline twin finishes"))
    }

    fn copy(record: &Result<TraceRecord, IngestError>) -> Result<TraceRecord, IngestError> {
        match record {
            Ok(record) => Ok(record.clone()),
            Err(e) => {
                Err(IngestError { path: e.path.clone(), location: e.location.clone(), message: e.message.clone() })
            }
        }
    }

    fn same(a: &Findings, b: &Findings) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    /// The findings on the twin's own thread are those applied on the caller's, range by range, on captures
    /// with timing-only races, capture ranges and a PyTorch training loop.
    #[test]
    fn on_its_own_thread_the_twin_finds_what_it_finds_inline() {
        for trace in [
            "samples/json/host_sync_no_handover_apart.json",
            "samples/capture/ranges/nvtx_torch_repeat.json",
            "samples/capture/torch-t2/train_loop.json",
        ] {
            let (threaded, inline) = both_ways(trace);
            assert!(same(&threaded.rest, &inline.rest), "{trace}");
            assert_eq!(threaded.ranges.len(), inline.ranges.len(), "{trace}");
            assert!(threaded.ranges.iter().zip(&inline.ranges).all(|(a, b)| same(a, b)), "{trace}");
        }
        let (with_ranges, _) = both_ways("samples/capture/ranges/nvtx_torch_repeat.json");
        assert!(with_ranges.ranges.len() > 1, "the repeating capture's ranges were ended");
        let (timing, _) = both_ways("samples/json/host_sync_no_handover_apart.json");
        assert!(timing.rest.races.is_empty(), "in the timestamp order nothing races there");
    }

    /// An engine error on the twin's thread ends the analysis with that error.
    #[test]
    fn an_error_on_the_twins_thread_is_returned() {
        let mut source = crate::ingest::open(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/json/host_sync_no_handover_apart.json"),
        )
        .expect("trace opens");
        let mut batch = source.next_batch().expect("a batch");
        // Thread 0's declaration left out: the engine refuses its first operation.
        batch.retain(|record| !matches!(record, Ok(TraceRecord::Thread(info)) if info.id.index() == 0));
        let mut twin = TimestampTwin::start();
        let handed = twin.hand_over(batch, 0, &mut drop);
        let error = match handed {
            Err(error) => error,
            Ok(()) => twin.finish(&mut drop).err().expect("the twin stops at the unknown thread"),
        };
        assert!(error.message.contains("thread 0 unknown"), "{}", error.message);
    }
}
