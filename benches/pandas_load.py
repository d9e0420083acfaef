#!/usr/bin/env python3
"""The reference for the nsys loading benchmark: a plain Python sqlite3 + pandas load of the tables streamtrace
reads (API calls with their names, kernels with their names, copies, sets, synchronizations, event records).

Usage: pandas_load.py EXPORT.sqlite
"""
import sqlite3
import sys
import time

import pandas as pd

QUERIES = {
    "runtime": "select r.*, s.value as name from CUPTI_ACTIVITY_KIND_RUNTIME r left join StringIds s on s.id = r.nameId",
    "kernel": "select k.*, s.value as name from CUPTI_ACTIVITY_KIND_KERNEL k left join StringIds s on s.id = k.demangledName",
    "memcpy": "select * from CUPTI_ACTIVITY_KIND_MEMCPY",
    "memset": "select * from CUPTI_ACTIVITY_KIND_MEMSET",
    "sync": "select * from CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "event": "select * from CUPTI_ACTIVITY_KIND_CUDA_EVENT",
}


def main():
    db = sqlite3.connect(sys.argv[1])
    tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
    started = time.perf_counter()
    rows = 0
    for name, sql in QUERIES.items():
        table = sql.split(" from ")[1].split()[0]
        if table not in tables:
            continue
        frame = pd.read_sql_query(sql, db)
        rows += len(frame)
    elapsed = time.perf_counter() - started
    print(f"pandas: {rows} rows in {elapsed:.2f} s = {rows / elapsed:.0f} rows/s")


if __name__ == "__main__":
    main()
