package nbd

import "io"

// reader is a connection's buffered reader. Unlike bufio.Reader it reads
// payloads that are not yet buffered straight from the socket into the
// caller's buffer, and it can be told to take no more than a request
// header from the socket, so that a large WRITE payload is copied once,
// not through the buffer.
type reader struct {
	rd   io.Reader
	buf  []byte
	r, w int
}

func newReader(rd io.Reader, size int) *reader {
	return &reader{rd: rd, buf: make([]byte, size)}
}

// Buffered returns the number of bytes that can be read without a read
// from the socket.
func (b *reader) Buffered() int { return b.w - b.r }

// fill reads from the socket until at least n bytes are buffered, asking
// for at most max bytes beyond what is buffered in each read (max >= n).
func (b *reader) fill(n, max int) error {
	if b.r > 0 && len(b.buf)-b.r < n {
		copy(b.buf, b.buf[b.r:b.w])
		b.w -= b.r
		b.r = 0
	}
	for b.w-b.r < n {
		end := min(len(b.buf), b.r+max)
		m, err := b.rd.Read(b.buf[b.w:end])
		b.w += m
		if err != nil {
			if b.w-b.r >= n {
				return nil
			}
			if err == io.EOF && b.w > b.r {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// next returns the next n bytes (n <= len(buf)), reading at most max
// bytes from the socket at a time; the slice is valid until the next
// call.
func (b *reader) next(n, max int) ([]byte, error) {
	if b.w-b.r < n {
		if err := b.fill(n, max); err != nil {
			return nil, err
		}
	}
	p := b.buf[b.r : b.r+n]
	b.r += n
	return p, nil
}

// Read reads into p: buffered bytes first, and when none are buffered,
// straight from the socket.
func (b *reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.r == b.w {
		b.r, b.w = 0, 0
		if len(p) >= len(b.buf)/2 {
			return b.rd.Read(p)
		}
		m, err := b.rd.Read(b.buf)
		b.w = m
		if m == 0 {
			return 0, err
		}
	}
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	return n, nil
}

// ReadFull fills p, reading what is not buffered straight from the socket.
func (b *reader) ReadFull(p []byte) error {
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	if n == len(p) {
		return nil
	}
	if _, err := io.ReadFull(b.rd, p[n:]); err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// Discard skips n bytes.
func (b *reader) Discard(n int) (int, error) {
	done := 0
	for done < n {
		if b.r == b.w {
			b.r, b.w = 0, 0
			m, err := b.rd.Read(b.buf[:min(len(b.buf), n-done)])
			b.w = m
			if m == 0 {
				if err == nil {
					continue
				}
				return done, err
			}
		}
		k := min(b.w-b.r, n-done)
		b.r += k
		done += k
	}
	return done, nil
}
