#!/usr/bin/env python3
"""SQL for bench/engines.sh's sqlite workload: ROWS single-row INSERTs in one transaction
(each statement parsed and prepared anew, as a client would send them), then selects, an
update and a delete, ending with one "checksum=" line. Deterministic.
Usage: sqlite_workload.py ROWS > workload.sql; then: sqlite3 :memory: '.read workload.sql'"""
import sys

rows = int(sys.argv[1])
out = sys.stdout
out.write("CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);\n")
out.write("CREATE INDEX t_k ON t(k);\nBEGIN;\n")
for i in range(rows):
    k = (i * 7919) % 100003
    out.write(f"INSERT INTO t(k, v) VALUES({k}, 'row-{i}-{k:x}');\n")
out.write("COMMIT;\n")
out.write("SELECT count(*), sum(k) FROM t WHERE k BETWEEN 1000 AND 50000;\n")
out.write("SELECT k % 10, count(*), max(length(v)) FROM t GROUP BY k % 10 ORDER BY 1;\n")
out.write("UPDATE t SET v = v || '-u' WHERE k % 5 = 0;\n")
out.write("DELETE FROM t WHERE k % 3 = 0;\n")
out.write("SELECT 'checksum=' || (count(*) * 1000003 + sum(k) + sum(length(v))) FROM t;\n")
