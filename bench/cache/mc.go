package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"
)

// mcConn is one memcached text-protocol connection, used by one goroutine,
// one request at a time (no pipelining).
type mcConn struct {
	nc  net.Conn
	r   *bufio.Reader
	hdr []byte
	buf []byte
}

var (
	crlf = []byte("\r\n")
	// errServer marks a SERVER_ERROR answer: the request failed but the
	// connection is still usable.
	errServer = errors.New("server error")
)

func dialMC(addr string) (*mcConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &mcConn{nc: nc, r: bufio.NewReaderSize(nc, 64<<10), hdr: make([]byte, 0, 128)}, nil
}

func (m *mcConn) close() { m.nc.Close() }

// line reads one reply line without its CRLF. The slice is valid until the
// next read.
func (m *mcConn) line() ([]byte, error) {
	l, err := m.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(l, "\r\n"), nil
}

// set stores val under key (flags 0, no expiry).
func (m *mcConn) set(key string, val []byte) error {
	m.hdr = append(m.hdr[:0], "set "...)
	m.hdr = append(m.hdr, key...)
	m.hdr = append(m.hdr, " 0 0 "...)
	m.hdr = strconv.AppendInt(m.hdr, int64(len(val)), 10)
	m.hdr = append(m.hdr, "\r\n"...)
	bufs := net.Buffers{m.hdr, val, crlf}
	if _, err := bufs.WriteTo(m.nc); err != nil {
		return err
	}
	l, err := m.line()
	if err != nil {
		return err
	}
	switch {
	case string(l) == "STORED":
		return nil
	case bytes.HasPrefix(l, []byte("SERVER_ERROR")):
		return fmt.Errorf("%w: %s", errServer, l)
	}
	return fmt.Errorf("set %s: unexpected reply %q", key, l)
}

// get fetches key. The value is valid until the next call.
func (m *mcConn) get(key string) (bool, []byte, error) {
	m.hdr = append(m.hdr[:0], "get "...)
	m.hdr = append(m.hdr, key...)
	m.hdr = append(m.hdr, "\r\n"...)
	if _, err := m.nc.Write(m.hdr); err != nil {
		return false, nil, err
	}
	l, err := m.line()
	if err != nil {
		return false, nil, err
	}
	if string(l) == "END" {
		return false, nil, nil
	}
	if !bytes.HasPrefix(l, []byte("VALUE ")) {
		if bytes.HasPrefix(l, []byte("SERVER_ERROR")) {
			return false, nil, fmt.Errorf("%w: %s", errServer, l)
		}
		return false, nil, fmt.Errorf("get %s: unexpected reply %q", key, l)
	}
	f := bytes.Fields(l)
	if len(f) < 4 {
		return false, nil, fmt.Errorf("get %s: bad VALUE line %q", key, l)
	}
	n, err := strconv.Atoi(string(f[3]))
	if err != nil || n < 0 {
		return false, nil, fmt.Errorf("get %s: bad VALUE line %q", key, l)
	}
	if cap(m.buf) < n+2 {
		m.buf = make([]byte, n+2)
	}
	b := m.buf[:n+2]
	if _, err := io.ReadFull(m.r, b); err != nil {
		return false, nil, err
	}
	if b[n] != '\r' || b[n+1] != '\n' {
		return false, nil, fmt.Errorf("get %s: value not followed by CRLF", key)
	}
	l, err = m.line()
	if err != nil {
		return false, nil, err
	}
	if string(l) != "END" {
		return false, nil, fmt.Errorf("get %s: expected END, got %q", key, l)
	}
	return true, b[:n], nil
}

// stats returns the server's general statistics.
func (m *mcConn) stats() (map[string]string, error) {
	if _, err := m.nc.Write([]byte("stats\r\n")); err != nil {
		return nil, err
	}
	st := map[string]string{}
	for {
		l, err := m.line()
		if err != nil {
			return nil, err
		}
		s := string(l)
		if s == "END" {
			return st, nil
		}
		f := strings.Fields(s)
		if len(f) >= 3 && f[0] == "STAT" {
			st[f[1]] = strings.Join(f[2:], " ")
		} else if strings.HasPrefix(s, "ERROR") || strings.HasPrefix(s, "SERVER_ERROR") || strings.HasPrefix(s, "CLIENT_ERROR") {
			return st, fmt.Errorf("stats: %s", s)
		}
	}
}

// values derives every value from its key number, so a reader can check a
// value without remembering what was written: value i of a size is a window
// of a fixed random buffer starting at an offset derived from i, with i
// (xor a constant) in its first 8 bytes.
type values struct {
	base []byte
	max  int
}

const valueMagic = 0x5ac4e0b1d2f3a597

func newValues(seed uint64, maxSize int) *values {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	b := make([]byte, 2*maxSize+64)
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return &values{base: b, max: maxSize}
}

func (v *values) off(i int) int { return (i*4099 + 17) % (v.max + 1) }

// fill writes value i into dst (len(dst) is the value size, >= 8).
func (v *values) fill(dst []byte, i int) {
	o := v.off(i)
	copy(dst, v.base[o:o+len(dst)])
	binary.LittleEndian.PutUint64(dst, uint64(i)^valueMagic)
}

// check reports whether got is value i of the given size.
func (v *values) check(got []byte, i, size int) bool {
	if len(got) != size || binary.LittleEndian.Uint64(got) != uint64(i)^valueMagic {
		return false
	}
	o := v.off(i)
	return bytes.Equal(got[8:], v.base[o+8:o+size])
}

func keyName(i int) string { return fmt.Sprintf("key:%08d", i) }

// ioReadFull and be32 are used by the echo server.
func ioReadFull(r io.Reader, b []byte) (int, error) { return io.ReadFull(r, b) }
func be32(b []byte) uint32                          { return binary.BigEndian.Uint32(b) }
