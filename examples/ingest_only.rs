use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let t = Instant::now();
    let reader = streamtrace::ingest::open(std::path::Path::new(&path)).unwrap();
    let mut n = 0u64;
    for r in reader { r.unwrap(); n += 1; }
    eprintln!("{n} records in {:?}", t.elapsed());
}
