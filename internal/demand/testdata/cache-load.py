"""Bounded memcached-protocol load for `rackpool cache`: sets with a growing
key count, a hold with reads, deletes, churn of short-lived items (whose
allocations run the Go collector, freeing the deleted items), an idle spell and
a smaller refill.
At most 110,000 sets and 98,000 deletes of 8 KiB values, about 125 s."""
import socket, sys, time

addr = (sys.argv[1], int(sys.argv[2]))
s = socket.create_connection(addr)
f = s.makefile("rb")
val = b"x" * 8192

def expect(n, prefix):
    for _ in range(n):
        line = f.readline()
        if not line.startswith(prefix):
            raise SystemExit("unexpected reply %r" % line)

def sets(keys):
    buf = b"".join(b"set k%d 0 0 %d\r\n%s\r\n" % (k, len(val), val) for k in keys)
    s.sendall(buf)
    expect(len(keys), b"STORED")

def deletes(keys):
    s.sendall(b"".join(b"delete k%d\r\n" % k for k in keys))
    expect(len(keys), b"DELETED")

def gets(keys):
    s.sendall(b"".join(b"get k%d\r\n" % k for k in keys))
    for _ in keys:
        hdr = f.readline()
        if hdr.startswith(b"VALUE"):
            f.read(int(hdr.split()[3]) + 2)
            hdr = f.readline()
        if hdr != b"END\r\n":
            raise SystemExit("unexpected reply %r" % hdr)

def every_second(n, step):
    t0 = time.monotonic()
    for i in range(n):
        step(i)
        time.sleep(max(0, t0 + i + 1 - time.monotonic()))

time.sleep(3)                                                 # idle start
every_second(40, lambda i: sets(range(i * 1200, (i + 1) * 1200)))  # grow to 48,000 keys
every_second(10, lambda i: gets(range(i * 4800, i * 4800 + 2000)))  # hold, reading
every_second(20, lambda i: deletes(range(i * 2400, (i + 1) * 2400)))  # delete all

def churn(i):  # short-lived items: the allocations run the collector, which frees the deleted ones
    keys = range(100000 + i * 2000, 100000 + (i + 1) * 2000)
    sets(keys)
    deletes(keys)

every_second(25, churn)
time.sleep(10)                                                # idle
every_second(10, lambda i: sets(range(i * 1200, (i + 1) * 1200)))  # refill 12,000 keys
time.sleep(5)
