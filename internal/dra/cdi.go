package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"rackpool/api"
)

// The node plugin's CDI names (the Container Device Interface): a spec
// file per prepared claim, of kind CDIKind, in the CDI directory the
// container runtime reads, of the lowest CDI version its contents need.
const (
	CDIKind = DriverName + "/device"
	// DefaultCDIDir is where container runtimes look for dynamic specs.
	DefaultCDIDir = "/var/run/cdi"
	// cdiDevicesAnnotation records, in each spec, the devices it prepared
	// (JSON api.HostDevice list): the plugin reads them back after a
	// restart to know what this node holds.
	cdiDevicesAnnotation = DriverName + "/devices"
)

// cdiFile is the spec file of a claim.
func cdiFile(dir string, claim types.UID) string {
	return filepath.Join(dir, DriverName+"-"+string(claim)+".json")
}

// cdiName is a prepared device's CDI name: the claim's UID and the DRA
// device's name, so a name is never reused for another claim (runtimes
// may cache specs).
func cdiName(claim types.UID, device string) string { return string(claim) + "-" + device }

// CDIDeviceID is the fully qualified CDI device ID the kubelet hands the
// runtime.
func CDIDeviceID(claim types.UID, device string) string {
	return CDIKind + "=" + cdiName(claim, device)
}

// envName turns a DRA device name into the suffix of its variables:
// RACKPOOL_DEVICE_GPU_0_1 for gpu-0-1.
func envName(device string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(device))
}

// writeSpec writes spec to path atomically (a temporary file renamed into
// place): a runtime never reads half a spec.
func writeSpec(path string, spec *cdispec.Spec) error {
	v, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return fmt.Errorf("CDI spec: %w", err)
	}
	spec.Version = v
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("CDI directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rackpool-cdi-*")
	if err != nil {
		return fmt.Errorf("CDI spec: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("CDI spec: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("CDI spec: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("CDI spec: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("CDI spec: %w", err)
	}
	return nil
}

// readPrepared reads back the devices of every claim this driver has a
// spec for in dir, by claim UID. A spec that cannot be read is skipped
// and reported in the error.
func readPrepared(dir string) (map[types.UID][]api.HostDevice, error) {
	out := map[types.UID][]api.HostDevice{}
	matches, err := filepath.Glob(filepath.Join(dir, DriverName+"-*.json"))
	if err != nil {
		return out, err
	}
	sort.Strings(matches)
	var errs []error
	for _, m := range matches {
		uid := types.UID(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m), DriverName+"-"), ".json"))
		b, err := os.ReadFile(m)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var spec cdispec.Spec
		if err == nil {
			err = json.Unmarshal(b, &spec)
		}
		var devs []api.HostDevice
		if err == nil {
			err = json.Unmarshal([]byte(spec.Annotations[cdiDevicesAnnotation]), &devs)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("CDI spec %s: %w", filepath.Base(m), err))
			continue
		}
		out[uid] = devs
	}
	return out, errors.Join(errs...)
}
