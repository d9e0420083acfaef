"""Mutation runs of the real binary, every output on: what tests/mutation.rs does in process for reading and
analysis, done here through the command line, so that the reports (text, JSON, HTML, Perfetto, PNG), `stats` (every
format) and `convert` see the mutants too, each in a process of its own under an address-space limit (a mutant
that makes the tool allocate without bound fails here instead of taking the machine).

    python3 benches/fuzz_cli.py json|binary|nsys [RUNS] [SEED]     (defaults: 1000 runs, seed 1)

Uses target/debug/streamtrace (`cargo build`: overflow checks on) or STREAMTRACE naming another build. A failure
is an exit status other than 0-3, a panic message, or a timeout; each failing input is kept under OUT (default
/tmp/streamtrace-fuzz) and named on standard output. docs/fuzzing.md has the figures of the runs made with it.
"""
import glob
import os
import random
import re
import shutil
import sqlite3
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TOOL = os.environ.get("STREAMTRACE", os.path.join(REPO, "target/debug/streamtrace"))
OUT = os.environ.get("OUT", "/tmp/streamtrace-fuzz")
ADDRESS_SPACE = 8 << 30
TIMEOUT_S = 180
EXTREMES = [b"18446744073709551615", b"9223372036854775807", b"4294967296", b"4000000000", b"0", b"1"]


def json_samples():
    captures = glob.glob(os.path.join(REPO, "samples/capture/**/*.json"), recursive=True)
    small = sorted(p for p in captures if os.path.getsize(p) < 60_000)
    return sorted(glob.glob(os.path.join(REPO, "samples/json/*.json"))) + small[::6]


def mutate_json(text):
    """Numbers made extreme (times, sizes, depths, ids), lines repeated or swapped, a byte overwritten, or the
    header made a recording's (read tolerantly)."""
    lines = text.split(b"\n")
    kind = random.randrange(5)
    if kind == 0:
        for _ in range(random.randint(1, 4)):
            numbers = list(re.finditer(rb"(?<=[:\[,])\s*\d+", text))
            if numbers:
                n = random.choice(numbers)
                text = text[: n.start()] + random.choice(EXTREMES) + text[n.end() :]
        return text
    if kind in (1, 2):
        a, b = random.randrange(len(lines)), random.randrange(len(lines))
        if kind == 1:
            lines.insert(a, lines[b])
        else:
            lines[a], lines[b] = lines[b], lines[a]
        return b"\n".join(lines)
    if kind == 3:
        at = random.randrange(len(text))
        return text[:at] + bytes([random.randrange(256)]) + text[at + 1 :]
    lines[0] = b'{"type":"streamtrace","version":1,"producer":"capture"}'
    return b"\n".join(lines)


def frames(trace):
    """(start, end) of each whole frame after the 16-byte preamble."""
    found, at = [], 16
    while at + 8 <= len(trace):
        end = at + 8 + struct.unpack_from("<I", trace, at + 4)[0]
        if end > len(trace):
            break
        found.append((at, end))
        at = end
    return found


def mutate_binary(trace):
    """A byte overwritten, a u64 or u32 in a body made extreme, a frame repeated, dropped or given another
    record kind's tag, or the file cut."""
    found = frames(trace)
    if not found:
        return trace
    out = bytearray(trace)
    start, end = random.choice(found)
    kind = random.randrange(7)
    if kind == 0:
        for _ in range(random.randint(1, 4)):
            out[random.randrange(len(out))] = random.randrange(256)
    elif kind == 1 and end - start > 16:
        at = random.randrange(start + 8, end - 8)
        out[at : at + 8] = struct.pack("<Q", random.choice([2**64 - 1, 2**63, 2**32, 0, 1]))
    elif kind == 2 and end - start > 12:
        at = random.randrange(start + 8, end - 4)
        out[at : at + 4] = struct.pack("<I", random.choice([2**32 - 1, 2**31, 0, 1]))
    elif kind == 3:
        other = random.choice(found)
        out = out[:start] + trace[other[0] : other[1]] + out[start:]
    elif kind == 4:
        out = out[:start] + out[end:]
    elif kind == 5:
        out[start : start + 2] = struct.pack("<H", random.choice([16, 17, 18, 19, 20, 21, 24, 28, 30, 40, 61]))
    else:
        out = out[: random.randrange(len(out))]
    return bytes(out)


NSYS_SQL = [
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = end, end = start",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -9223372036854775808, end = 9223372036854775807 WHERE rowid % 3 = 0",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = NULL WHERE rowid % 2 = 0",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 4294967296 WHERE rowid % 2 = 0",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = -5, demangledName = NULL",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'text'",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 1.5e300",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = -1, blockX = 0, registersPerThread = NULL",
    "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = 99, bytes = -1",
    "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 9223372036854775807",
    "UPDATE CUPTI_ACTIVITY_KIND_MEMSET SET bytes = NULL",
    "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = end + 1000000",
    "UPDATE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION SET syncType = 999",
    "UPDATE TARGET_INFO_CUDA_STREAM SET flag = 77, priority = NULL",
    "UPDATE TARGET_INFO_CUDA_STREAM SET streamId = streamId + 4294967296",
    "DELETE FROM StringIds WHERE id % 2 = 0",
    "UPDATE StringIds SET value = char(27) || '[2J' || value",
    "DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY",
    "DROP TABLE TARGET_INFO_CUDA_STREAM",
    "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN streamId",
    "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL",
    "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL",
]


def nsys_mutant(export, path, run):
    """The export changed by one to three of the statements above, and every fourth run 8 bytes overwritten."""
    shutil.copy(export, path)
    os.chmod(path, 0o644)
    db = sqlite3.connect(path)
    for statement in random.sample(NSYS_SQL, random.randint(1, 3)):
        try:
            db.executescript(statement)
        except sqlite3.Error:
            pass  # a table or column the export does not have
    db.commit()
    db.close()
    if run % 4 == 0:
        data = bytearray(open(path, "rb").read())
        for _ in range(8):
            data[random.randrange(len(data))] = random.randrange(256)
        open(path, "wb").write(bytes(data))


def commands(path, run, nsys):
    """The commands one mutant goes through: analyze with every report, stats in one format, convert."""
    report = [TOOL, "analyze", path, "--format", "json", "-o", f"{OUT}/r.json", "--html", f"{OUT}/r.html"]
    report += ["--perfetto", f"{OUT}/r.perfetto.json", "-v"]
    runs = [report, [TOOL, "analyze", path, "-v", "-o", f"{OUT}/r.txt"]]
    if run % 4 == 0:
        runs.append([TOOL, "analyze", path, "--png", f"{OUT}/r.png", "-o", "/dev/null"])
    fmt = random.choice(["table", "csv", "json", "parquet"])
    shutil.rmtree(f"{OUT}/stats", ignore_errors=True)
    stats = [TOOL, "stats", path, "--format", fmt, "-o", f"{OUT}/stats" if fmt != "table" else f"{OUT}/stats.txt"]
    runs.append(stats + (["--png", f"{OUT}/stats.png"] if run % 5 == 0 else []))
    if not nsys:
        runs.append([TOOL, "convert", path, f"{OUT}/converted.out", "--to", "json" if path.endswith("stbin") else "binary"])
    return runs


def main():
    mode = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    random.seed(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    os.makedirs(OUT, exist_ok=True)
    if mode == "nsys":
        exports = glob.glob(os.path.join(REPO, "samples/nsys/**/*.sqlite"), recursive=True)
        exports += glob.glob(os.path.join(REPO, "../shared/nsys-*/*.sqlite"))
        bases = sorted(e for e in exports if os.path.getsize(e) < 3_000_000)
    elif mode == "binary":
        bases, target = [], f"{OUT}/base.stbin"
        for sample in json_samples():
            # A hostile sample that does not convert is left out.
            if subprocess.run([TOOL, "convert", sample, target], capture_output=True).returncode == 0:
                bases.append(open(target, "rb").read())
    else:
        bases = [open(p, "rb").read() for p in json_samples()]
    failures = 0
    for run in range(runs):
        if mode == "nsys":
            path = f"{OUT}/mutant.sqlite"
            nsys_mutant(random.choice(bases), path, run)
        else:
            path = f"{OUT}/mutant." + ("stbin" if mode == "binary" else "json")
            mutate = mutate_binary if mode == "binary" else mutate_json
            open(path, "wb").write(mutate(random.choice(bases)))
        for command in commands(path, run, mode == "nsys"):
            limited = ["prlimit", f"--as={ADDRESS_SPACE}"] + command
            try:
                done = subprocess.run(limited, capture_output=True, timeout=TIMEOUT_S)
                failed = done.returncode not in (0, 1, 2, 3) or b"panicked" in done.stderr
                why = f"exit {done.returncode}: {done.stderr[-400:].decode(errors='replace')}"
            except subprocess.TimeoutExpired:
                failed, why = True, f"no end within {TIMEOUT_S} s"
            if failed:
                failures += 1
                kept = f"{OUT}/failed-{run}" + os.path.splitext(path)[1]
                shutil.copy(path, kept)
                print(f"FAILED {command[1]} on {kept}: {why}", flush=True)
                break
    print(f"{mode}: {runs} mutants, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
