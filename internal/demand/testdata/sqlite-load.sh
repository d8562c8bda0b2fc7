#!/bin/sh
# A database load in three phases, each its own sqlite3 process with a
# 256 MiB page cache: bulk insert, index builds, analytic queries.
set -e
db=${1:-${TMPDIR:-/tmp}/demand-db.sqlite}
rm -f "$db" "$db-wal" "$db-shm"
sqlite3 "$db" >/dev/null <<'SQL'
PRAGMA cache_size=-262144; PRAGMA temp_store=MEMORY; PRAGMA journal_mode=WAL;
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer TEXT, region INTEGER, amount REAL, note BLOB);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 1500000)
INSERT INTO orders SELECT x, hex(randomblob(6)), abs(random()) % 50, abs(random()) % 100000 / 100.0, randomblob(120) FROM c;
SQL
sleep 3
sqlite3 "$db" >/dev/null <<'SQL'
PRAGMA cache_size=-262144; PRAGMA temp_store=MEMORY;
CREATE INDEX orders_customer ON orders(customer);
CREATE INDEX orders_region_amount ON orders(region, amount);
SQL
sleep 3
sqlite3 "$db" >/dev/null <<'SQL'
PRAGMA cache_size=-262144; PRAGMA temp_store=MEMORY;
SELECT region, count(*), sum(amount), avg(length(note)) FROM orders GROUP BY region;
SELECT customer, amount FROM orders ORDER BY note LIMIT 10;
SELECT substr(customer, 1, 3) AS p, count(*), max(amount) FROM orders GROUP BY p ORDER BY 2 DESC LIMIT 5;
DELETE FROM orders WHERE id % 4 = 0;
SQL
rm -f "$db" "$db-wal" "$db-shm"
