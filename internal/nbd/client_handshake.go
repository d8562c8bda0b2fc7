package nbd

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
)

// List returns the exports the server at addr lists (NBD_OPT_LIST).
func List(ctx context.Context, network, addr string) ([]ExportInfo, error) {
	var d Dialer
	return d.List(ctx, network, addr)
}

// listExports lists the exports of the server on nc, over TLS when tlsCfg
// is set. It closes a TLS session it started, not nc.
func listExports(nc net.Conn, tlsCfg *tls.Config) ([]ExportInfo, error) {
	c := &Client{nc: nc, br: bufio.NewReaderSize(nc, 4096)}
	fixed, _, err := c.greet()
	if err != nil {
		return nil, err
	}
	if !fixed {
		if tlsCfg != nil {
			return nil, fmt.Errorf("%w: the server does not negotiate options (no fixed newstyle)", ErrTLSNotOffered)
		}
		return nil, errors.New("server does not take options (no fixed newstyle)")
	}
	if tlsCfg != nil {
		if err := c.startTLS(tlsCfg); err != nil {
			return nil, err
		}
		defer c.nc.Close()
	}
	var infos []ExportInfo
	final, msg, err := c.option(optList, nil, func(typ uint32, d []byte) error {
		if typ != repServer {
			return nil
		}
		if len(d) < 4 || uint64(binary.BigEndian.Uint32(d)) > uint64(len(d)-4) {
			return protoErr("malformed NBD_REP_SERVER")
		}
		n := binary.BigEndian.Uint32(d)
		infos = append(infos, ExportInfo{Name: string(d[4 : 4+n]), Description: string(d[4+n:])})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if final != repAck {
		return nil, optError(final, msg)
	}
	// A polite goodbye; the answer does not matter.
	c.option(optAbort, nil, nil)
	return infos, nil
}

// greet reads the server's greeting and sends the client flags. fixed
// reports fixed newstyle negotiation.
func (c *Client) greet() (fixed, noZeroes bool, err error) {
	var b [18]byte
	if _, err := io.ReadFull(c.br, b[:16]); err != nil {
		return false, false, fmt.Errorf("read greeting: %w", err)
	}
	if binary.BigEndian.Uint64(b[:]) != nbdMagic {
		return false, false, protoErr("not an NBD server")
	}
	switch binary.BigEndian.Uint64(b[8:]) {
	case optMagic:
	case oldstyleMagic:
		return false, false, errors.New("oldstyle negotiation is not supported")
	default:
		return false, false, protoErr("bad greeting magic")
	}
	if _, err := io.ReadFull(c.br, b[16:18]); err != nil {
		return false, false, fmt.Errorf("read greeting: %w", err)
	}
	hf := binary.BigEndian.Uint16(b[16:])
	fixed, noZeroes = hf&flagFixedNewstyle != 0, hf&flagNoZeroes != 0
	var cf uint32
	if fixed {
		cf |= clientFixedNewstyle
	}
	if noZeroes {
		cf |= clientNoZeroes
	}
	binary.BigEndian.PutUint32(b[:4], cf)
	if _, err := c.nc.Write(b[:4]); err != nil {
		return false, false, fmt.Errorf("send client flags: %w", err)
	}
	return fixed, noZeroes, nil
}

// handshake negotiates export, over TLS when tlsCfg is set; see NewClient.
func (c *Client) handshake(export string, tlsCfg *tls.Config) error {
	fixed, noZeroes, err := c.greet()
	if err != nil {
		return err
	}
	if tlsCfg != nil {
		if !fixed {
			return fmt.Errorf("%w: the server does not negotiate options (no fixed newstyle)", ErrTLSNotOffered)
		}
		if err := c.startTLS(tlsCfg); err != nil {
			return err
		}
	}
	if !fixed {
		return c.exportName(export, noZeroes, false)
	}

	final, msg, err := c.option(optStructuredReply, nil, nil)
	if err != nil {
		return err
	}
	if final == repErrTLSReqd {
		// No option will succeed: say so now rather than at NBD_OPT_GO.
		return optError(final, msg)
	}
	c.structured = final == repAck

	hasMeta := false
	if c.structured {
		d := binary.BigEndian.AppendUint32(nil, uint32(len(export)))
		d = append(d, export...)
		d = binary.BigEndian.AppendUint32(d, 1)
		d = binary.BigEndian.AppendUint32(d, uint32(len(metaBaseAllocation)))
		d = append(d, metaBaseAllocation...)
		final, _, err := c.option(optSetMetaContext, d, func(typ uint32, d []byte) error {
			if typ == repMetaContext && len(d) >= 4 && string(d[4:]) == metaBaseAllocation {
				c.metaID = binary.BigEndian.Uint32(d)
				hasMeta = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		hasMeta = hasMeta && final == repAck
	}

	d := binary.BigEndian.AppendUint32(nil, uint32(len(export)))
	d = append(d, export...)
	d = binary.BigEndian.AppendUint16(d, 2)
	d = binary.BigEndian.AppendUint16(d, infoExport)
	d = binary.BigEndian.AppendUint16(d, infoBlockSize)
	var gotExport bool
	var tflags uint16
	var maxBlock uint32
	final, msg, err = c.option(optGo, d, func(typ uint32, d []byte) error {
		if typ != repInfo || len(d) < 2 {
			return nil
		}
		switch binary.BigEndian.Uint16(d) {
		case infoExport:
			if len(d) != 12 {
				return protoErr("NBD_INFO_EXPORT of %d bytes", len(d))
			}
			c.size = binary.BigEndian.Uint64(d[2:])
			tflags = binary.BigEndian.Uint16(d[10:])
			gotExport = true
		case infoBlockSize:
			if len(d) != 14 {
				return protoErr("NBD_INFO_BLOCK_SIZE of %d bytes", len(d))
			}
			c.minBlock = binary.BigEndian.Uint32(d[2:])
			maxBlock = binary.BigEndian.Uint32(d[10:])
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case final == repErrUnsup:
		// A server without NBD_OPT_GO.
		return c.exportName(export, noZeroes, hasMeta)
	case final != repAck:
		return optError(final, msg)
	case !gotExport:
		return protoErr("NBD_OPT_GO succeeded without NBD_INFO_EXPORT")
	}
	c.setExport(tflags, maxBlock, hasMeta)
	return nil
}

// exportName enters transmission with NBD_OPT_EXPORT_NAME, the fallback
// for servers without NBD_OPT_GO.
func (c *Client) exportName(export string, noZeroes, hasMeta bool) error {
	if _, err := c.nc.Write(appendOption(nil, optExportName, []byte(export))); err != nil {
		return fmt.Errorf("send NBD_OPT_EXPORT_NAME: %w", err)
	}
	n := 10
	if !noZeroes {
		n += zeroPadLen
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c.br, b); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("server closed the connection: %w", ErrUnknownExport)
		}
		return fmt.Errorf("read export: %w", err)
	}
	c.size = binary.BigEndian.Uint64(b)
	c.setExport(binary.BigEndian.Uint16(b[8:]), 0, hasMeta)
	return nil
}

// setExport records the transmission flags and sizes.
func (c *Client) setExport(tflags uint16, maxBlock uint32, hasMeta bool) {
	if tflags&tflagHasFlags == 0 {
		tflags = 0
	}
	c.flags = flagsFromWire(tflags)
	c.flags.CanBlockStatus = hasMeta
	if c.minBlock == 0 || c.minBlock&(c.minBlock-1) != 0 || c.minBlock > 64<<10 {
		c.minBlock = 1
	}
	c.maxIO = defaultMaxIO
	c.maxZero = maxEffect
	if maxBlock >= c.minBlock && maxBlock > 0 {
		c.maxIO = min(c.maxIO, maxBlock)
		c.maxZero = min(c.maxZero, uint64(maxBlock))
	}
	c.maxIO -= c.maxIO % c.minBlock
	c.maxZero -= c.maxZero % uint64(c.minBlock)
	if c.maxIO == 0 {
		c.maxIO = c.minBlock
	}
	if c.maxZero == 0 {
		c.maxZero = uint64(c.minBlock)
	}
}

// option sends an option and reads its replies up to the final one (an
// ACK or an error), passing the others to each; it returns the final
// reply type and, for errors, the server's message.
func (c *Client) option(opt uint32, data []byte, each func(typ uint32, d []byte) error) (final uint32, msg string, err error) {
	if _, err := c.nc.Write(appendOption(nil, opt, data)); err != nil {
		if c.tls {
			// A TLS 1.3 server refuses a client's certificate after the
			// client's side of the handshake: its alert, already received,
			// says why the write failed better than EPIPE does.
			if _, rerr := c.br.Peek(1); rerr != nil && !errors.Is(rerr, io.EOF) && !errors.Is(rerr, os.ErrDeadlineExceeded) {
				err = rerr
			}
		}
		return 0, "", fmt.Errorf("send option %d: %w", opt, err)
	}
	var hdr [optReplyHdrLen]byte
	var d []byte
	for {
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			return 0, "", fmt.Errorf("read reply to option %d: %w", opt, err)
		}
		if binary.BigEndian.Uint64(hdr[:]) != optReplyMagic {
			return 0, "", protoErr("bad option reply magic")
		}
		if got := binary.BigEndian.Uint32(hdr[8:]); got != opt {
			return 0, "", protoErr("reply to option %d while %d was sent", got, opt)
		}
		typ := binary.BigEndian.Uint32(hdr[12:])
		n := binary.BigEndian.Uint32(hdr[16:])
		if n > maxOptReply {
			return 0, "", protoErr("option reply of %d bytes", n)
		}
		d = growTo(d, int(n))
		if _, err := io.ReadFull(c.br, d); err != nil {
			return 0, "", fmt.Errorf("read reply to option %d: %w", opt, err)
		}
		if typ == repAck || typ&repErrBit != 0 {
			return typ, truncateUTF8(string(d), maxString), nil
		}
		if each != nil {
			if err := each(typ, d); err != nil {
				return 0, "", err
			}
		}
	}
}

// optError is the error for a refused NBD_OPT_GO or NBD_OPT_LIST.
func optError(typ uint32, msg string) error {
	var err error
	switch typ {
	case repErrUnknown:
		err = ErrUnknownExport
	case repErrPolicy:
		err = ErrPolicy
	case repErrUnsup:
		err = ErrNotSupported
	case repErrTLSReqd:
		err = ErrTLSRequired
	case repErrShutdown:
		err = ErrShutdown
	default:
		err = fmt.Errorf("nbd: server refused with reply %#x", typ)
	}
	if msg != "" {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}
