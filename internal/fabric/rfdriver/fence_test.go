package rfdriver

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"rackpool/internal/fabric"
)

// TestFencing: two control planes drive one fabric manager, each carrying
// its leadership epoch. Once the manager has seen epoch 2, a change with
// epoch 1 is refused with ErrFenced and changes nothing; the newer leader
// goes on, and a change without an epoch is not fenced.
func TestFencing(t *testing.T) {
	d, srv := rackDriver(t, 10*time.Second, nil)
	ctx := context.Background()
	old, cur := fabric.WithEpoch(ctx, fabric.Epoch{N: 1}), fabric.WithEpoch(ctx, fabric.Epoch{N: 2})
	gpu2 := fabric.Attachment{Block: "gpu2", Device: "gpu2", Host: "host2", HostPort: "pcie"}
	if _, err := d.Attach(old, gpu1); err != nil {
		t.Fatalf("attach with epoch 1 before any other: %v", err)
	}
	if _, err := d.Attach(cur, gpu2); err != nil {
		t.Fatalf("attach with epoch 2: %v", err)
	}
	before := truth(t, srv)
	if _, err := d.Detach(old, gpu1); !errors.Is(err, fabric.ErrFenced) {
		t.Errorf("detach with epoch 1 after epoch 2 = %v, want ErrFenced", err)
	}
	gpu3 := fabric.Attachment{Block: "gpu3", Device: "gpu3", Host: "host3", HostPort: "pcie"}
	if _, err := d.Attach(old, gpu3); !errors.Is(err, fabric.ErrFenced) {
		t.Errorf("attach with epoch 1 after epoch 2 = %v, want ErrFenced", err)
	}
	if after := truth(t, srv); !slices.Equal(after, before) {
		t.Errorf("fenced changes changed the fabric: %v -> %v", before, after)
	}
	if _, err := d.Detach(cur, gpu1); err != nil {
		t.Errorf("detach with epoch 2: %v", err)
	}
	if _, err := d.Detach(ctx, gpu2); err != nil {
		t.Errorf("detach without an epoch: %v", err)
	}
	wantOnly(t, d, srv)
}
