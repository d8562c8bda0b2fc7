package rf

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"rackpool/internal/fabric"
)

func TestFabricRegistry(t *testing.T) {
	for _, err := range []error{fabric.ErrUnknown, fabric.ErrUnreachable, fabric.ErrDrawerHosts, fabric.ErrPortBusy,
		fabric.ErrInUse, fabric.ErrFailed, fabric.ErrInjected, fabric.ErrFenced} {
		id := FabricMessageID(fmt.Errorf("attach x: %w", err))
		if !strings.HasPrefix(id, RackpoolRegistry) || !errors.Is(FabricErrors[id], err) {
			t.Fatalf("%v -> %q -> %v", err, id, FabricErrors[id])
		}
	}
	if FabricMessageID(errors.New("other")) != "" {
		t.Fatal("an unrelated error has a MessageId")
	}
	if len(fabricOrder) != len(FabricErrors) {
		t.Fatalf("fabricOrder has %d ids, FabricErrors %d", len(fabricOrder), len(FabricErrors))
	}
}
