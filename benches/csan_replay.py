#!/usr/bin/env python3
"""Replays a streamtrace JSON trace through PyTorch's CUDA sanitizer core (torch.cuda._sanitizer.EventHandler)
and prints its throughput, for a side-by-side ratio with `streamtrace analyze --timing` on the same trace.

CSAN keys its shadow state on tensor data pointers, not byte ranges: each access is given to it as the start
address of its range. CSAN has no notion of stream-ordered frees, graphs or stream queries; those records are
replayed as the nearest thing it has (deallocation, nothing, event synchronization) or skipped.

Usage: csan_replay.py TRACE [--limit N]   (needs torch; the CPU-only import is enough)
"""
import argparse
import json
import logging
import sys
import time

from torch.cuda._sanitizer import EventHandler


def parse_address(value):
    if isinstance(value, str):
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    return int(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--limit", type=int, default=200_000, help="operations to replay (default 200000)")
    args = parser.parse_args()
    # CSAN logs every race it finds; the benchmark measures detection, not logging.
    logging.disable(logging.CRITICAL)

    handler = EventHandler()
    operations = 0
    races = 0
    started = time.perf_counter()
    with open(args.trace) as f:
        for line in f:
            if not line.strip():
                continue
            record = json.loads(line)
            kind = record["type"]
            if kind == "stream":
                handler._handle_stream_creation(record["id"])
                continue
            if kind == "event":
                handler._handle_event_creation(record["id"])
                continue
            if kind in ("streamtrace", "thread", "process"):
                continue
            operations += 1
            if kind == "kernel" or kind == "memcpy" or kind == "memset":
                reads = {parse_address(r[0]) for r in record.get("reads", [])}
                writes = {parse_address(r[0]) for r in record.get("writes", [])}
                if "from" in record:
                    reads.add(parse_address(record["from"][0]))
                if "to" in record:
                    writes.add(parse_address(record["to"][0]))
                reads -= writes
                aliases = {ptr: [] for ptr in reads | writes}
                errors = handler._handle_kernel_launch(
                    record["stream"], reads, writes, set(), record.get("name", kind), aliases
                )
                races += len(errors)
            elif kind == "record":
                handler._handle_event_record(record["event"], record["stream"])
            elif kind == "wait":
                handler._handle_event_wait(record["event"], record["stream"])
            elif kind == "sync":
                if "stream" in record:
                    handler._handle_stream_synchronization(record["stream"])
                elif "event" in record:
                    handler._handle_event_synchronization(record["event"])
                else:
                    handler._handle_device_synchronization()
            elif kind == "query":
                if record["ready"] and "event" in record:
                    handler._handle_event_synchronization(record["event"])
                elif record["ready"]:
                    handler._handle_stream_synchronization(record["stream"])
            elif kind == "alloc":
                handler._handle_memory_allocation(parse_address(record["addr"]))
            elif kind == "free":
                pass  # CSAN deallocates by pointer; the trace frees by id, and the next alloc re-creates the pointer
            if operations >= args.limit:
                break
    elapsed = time.perf_counter() - started
    print(
        f"csan: {operations} operations in {elapsed:.3f} s = {operations / elapsed:.0f} operations/s; "
        f"{races} race reports",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
