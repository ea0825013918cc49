-- A sqlite workload for profile sizes (BENCHMARKS.md, format 4): 200,000 rows inserted into an
-- indexed table in memory, then two queries over them.
-- sqlite3 :memory: -init /dev/null < bench/sqlite_rows.sql
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, value REAL);
CREATE INDEX t_name ON t(name);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
INSERT INTO t SELECT x, printf('name-%d', x * 7919 % 200000), x * 0.5 FROM c;
SELECT count(*), sum(value) FROM t WHERE name LIKE 'name-1%';
SELECT name, count(*) FROM t GROUP BY substr(name, 1, 7) ORDER BY 2 DESC LIMIT 3;
