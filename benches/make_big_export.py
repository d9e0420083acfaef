#!/usr/bin/env python3
"""Makes a large nsys export for the loading benchmark by replicating the rows of a real one.

Every row of the kernel, memcpy, memset, synchronization and CUDA event tables, and the API calls they belong to,
is copied REPS times with its times shifted by one capture span and its correlation ids shifted past the
original's, so that the copies stay in host order and still join. Other tables are kept as they are.

Usage: make_big_export.py SOURCE.sqlite OUT.sqlite KERNELS   (KERNELS: kernel rows wanted, e.g. 2000000)
"""
import shutil
import sqlite3
import sys

ACTIVITY = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
]


def main():
    source, out, kernels_wanted = sys.argv[1], sys.argv[2], int(sys.argv[3])
    shutil.copyfile(source, out)
    db = sqlite3.connect(out)
    tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
    kernels = db.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    reps = max(1, -(-kernels_wanted // kernels) - 1)
    lo, hi = db.execute("select min(start), max(end) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    span = hi - lo + 1
    corr_span = db.execute("select max(correlationId) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] + 1
    db.execute("create temp table reps(i integer primary key)")
    db.executemany("insert into reps values (?)", [(i,) for i in range(1, reps + 1)])
    used = " union ".join(f"select correlationId from {t}" for t in ACTIVITY if t in tables)
    db.execute(f"create temp table used as {used}")
    for table in ACTIVITY + ["CUPTI_ACTIVITY_KIND_RUNTIME"]:
        if table not in tables:
            continue
        cols = [r[1] for r in db.execute(f"pragma table_info({table})")]
        shifted = []
        for c in cols:
            if c in ("start", "end", "timestamp"):
                shifted.append(f"{c} + i * {span}")
            elif c == "correlationId":
                shifted.append(f"correlationId + i * {corr_span}")
            elif c == "eventSyncId":
                shifted.append(f"case when eventSyncId = 4294967295 then eventSyncId else eventSyncId + i * {corr_span} end")
            else:
                shifted.append(c)
        where = "where correlationId in (select correlationId from used)" if table.endswith("RUNTIME") else ""
        db.execute(f"insert into {table} ({', '.join(cols)}) select {', '.join(shifted)} from {table}, reps {where}")
    db.commit()
    total = db.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    print(f"{out}: {total} kernel rows ({reps} copies)")


if __name__ == "__main__":
    main()
