//! How fast the writer thread formats records: 125,000 kernel launches (two pointer words each, the shape of
//! benches/capture_launches.cu's) and their event hand-overs, formatted into binary frames and into JSON lines, best of five rounds each.
//!
//!     cargo bench -p streamtrace-capture --bench format
use std::sync::Arc;
use std::time::Instant;

use streamtrace_capture::args::PointerArg;
use streamtrace_capture::record::{Batch, Call, Record};
use streamtrace_format::{TraceEncoding, TraceWriter};

fn main() {
    let mut batch = Batch::with_capacity(130_000);
    let name: Arc<str> = Arc::from("step(float*, float const*, int)");
    let call = |i: u64| Call { tid: 4242, time_ns: 1_000_000_000 + i * 4000, correlation: i as u32, site: 0 };
    batch.push(call(0), Record::Function { index: 0, name });
    for i in 0..100_000u64 {
        if i % 8 == 0 {
            batch.push(
                call(i),
                Record::EventRecord { event: 0x5555_0000_1000 + i % 4, stream: 0x5555_0000_2000, api: "cuEventRecord" },
            );
            batch.push(
                call(i),
                Record::Wait { event: 0x5555_0000_1000 + i % 4, stream: 0x5555_0000_3000, api: "cuStreamWaitEvent" },
            );
        }
        let first_pointer = batch.pointers.len() as u32;
        batch.pointers.push(PointerArg { address: 0x7f00_1234_0000 + (i % 4) * 0x4000, writes: true });
        batch.pointers.push(PointerArg { address: 0x7f00_1234_4000, writes: false });
        batch.push(
            call(i),
            Record::Kernel {
                stream: 0x5555_0000_3000,
                function: 0,
                first_pointer,
                pointer_count: 2,
                api: "cuLaunchKernel",
                known: None,
            },
        );
    }
    let records = batch.entries.len();
    for encoding in TraceEncoding::ALL {
        let mut best = f64::MAX;
        let mut bytes = 0;
        for _ in 0..5 {
            let start = Instant::now();
            let (mut names, mut out, mut scratch) = (Vec::new(), TraceWriter::new(encoding), String::new());
            batch.write_records(&mut names, &mut out, &mut scratch);
            bytes = out.len();
            best = best.min(start.elapsed().as_secs_f64());
        }
        println!(
            "{records} records, {:.1} MB of {}: best {:.1} ms, {:.0} ns a record, {:.2} M records/s",
            bytes as f64 / 1e6,
            encoding.as_str(),
            best * 1e3,
            best * 1e9 / records as f64,
            records as f64 / best / 1e6
        );
    }
}
