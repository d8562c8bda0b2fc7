package hoststep

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// readAttr reads a sysfs attribute, trimmed of surrounding white space.
func readAttr(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// writeAttr writes value to a sysfs attribute in one write(2), as
// `echo value > path` does: O_WRONLY|O_TRUNC, never O_CREAT (an attribute
// that is missing is an error, not a file to make). sysfs ignores the
// truncation; a test tree on tmpfs needs it so that a shorter value does
// not leave the tail of a longer one.
func writeAttr(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte(value))
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// resolved returns p with every symbolic link resolved, or p when it
// cannot be (it is gone).
func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// classDevicesUnder lists the devices of sysfs class (block, net, drm)
// whose device directory lies under dir (a PCI function's), by resolving
// the class's links: /sys/class/block/nvme0n1 links into the function's
// directory on every kernel, whatever lies between.
func classDevicesUnder(sysfs, class, dir string) []string {
	entries, err := os.ReadDir(filepath.Join(sysfs, "class", class))
	if err != nil {
		return nil
	}
	dir = resolved(dir) + string(filepath.Separator)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(resolved(filepath.Join(sysfs, "class", class, e.Name())), dir) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// mount is one line of mounts or mountinfo.
type mount struct {
	dev    string // major:minor (mountinfo only)
	source string
	point  string
}

// parseMounts reads /proc/mounts (fstab format: source point type ...).
func parseMounts(data []byte) []mount {
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		out = append(out, mount{source: unescape(f[0]), point: unescape(f[1])})
	}
	return out
}

// parseMountinfo reads /proc/self/mountinfo: id parent major:minor root
// point options [optional...] - type source super-options.
func parseMountinfo(data []byte) []mount {
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		m := mount{dev: f[2], point: unescape(f[4])}
		for i := 5; i+2 < len(f); i++ {
			if f[i] == "-" {
				m.source = unescape(f[i+2])
				break
			}
		}
		out = append(out, m)
	}
	return out
}

// parseSwaps returns the file names of /proc/swaps (after its header).
func parseSwaps(data []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		if first || len(f) == 0 {
			continue
		}
		out = append(out, unescape(f[0]))
	}
	return out
}

// unescape undoes the octal escapes of /proc/mounts and /proc/swaps
// (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseAERFatal reads TOTAL_ERR_FATAL from an aer_dev_fatal attribute
// ("Undefined 0\n...\nTOTAL_ERR_FATAL 0\n"); ok is false without one.
func parseAERFatal(s string) (n uint64, ok bool) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "TOTAL_ERR_FATAL" {
			v, err := strconv.ParseUint(f[1], 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// parseHex reads a hexadecimal attribute such as block_size_bytes
// ("8000000", with or without 0x).
func parseHex(s string) (uint64, error) {
	s = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "0x")
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("not a hexadecimal number: %q", s)
	}
	return v, nil
}

// normID turns a PCI ID into the form sysfs writes: lower case, 0x and
// four digits ("10DE" → "0x10de"). It returns "" for what is not one.
func normID(s string) string {
	s = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "0x")
	v, err := strconv.ParseUint(s, 16, 16)
	if err != nil || s == "" {
		return ""
	}
	return fmt.Sprintf("0x%04x", v)
}
