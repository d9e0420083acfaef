use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let reader = streamtrace::ingest::open(std::path::Path::new(&path)).unwrap();
    let records: Vec<_> = reader.map(|r| r.unwrap()).collect();
    let t = Instant::now();
    let mut engine = streamtrace::hb::Engine::new(Default::default());
    let n = records.len();
    for r in records { engine.apply(r).unwrap(); }
    let (f, _) = engine.finish();
    eprintln!("{n} records in {:?}, {} races", t.elapsed(), f.races.len());
}
