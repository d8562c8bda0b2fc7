package store

import (
	"context"
	"fmt"
)

// Settings naming the topology a database is served with: every replica
// of one database must describe the same datacenter.
const (
	TopologyDigestKey = "topology/digest"
	TopologyNameKey   = "topology/name"
)

// TopologyMismatch is the error of a replica whose topology is not the
// one the database is served with.
type TopologyMismatch struct {
	Name, Digest             string // this replica's
	StoredName, StoredDigest string // the database's
}

func (e *TopologyMismatch) Error() string {
	return fmt.Sprintf("this replica's topology %q (digest %s) is not the one the database is served with, %q (digest %s): replicas of one database must describe the same datacenter",
		e.Name, e.Digest, e.StoredName, e.StoredDigest)
}

// CheckTopology fails with a *TopologyMismatch unless st records no
// topology or the one named name with digest.
func CheckTopology(ctx context.Context, st Store, name, digest string) error {
	stored, ok, err := st.Setting(ctx, TopologyDigestKey)
	if err != nil {
		return fmt.Errorf("read the topology digest: %w", err)
	}
	if !ok || stored == digest {
		return nil
	}
	storedName, _, _ := st.Setting(ctx, TopologyNameKey)
	return &TopologyMismatch{Name: name, Digest: digest, StoredName: storedName, StoredDigest: stored}
}

// RecordTopology records the topology of the replica that leads. With
// keep (a standby taking over, an active replica joining) it refuses
// another one than st records, as CheckTopology; otherwise it takes the
// topology as changed (an operator edited it) and records it, returning
// the digest it replaced ("" when st recorded none or this one): the
// composition manager then refuses stored compositions it cannot hold.
func RecordTopology(ctx context.Context, st Store, name, digest string, keep bool) (replaced string, err error) {
	stored, ok, err := st.Setting(ctx, TopologyDigestKey)
	if err != nil {
		return "", fmt.Errorf("read the topology digest: %w", err)
	}
	if ok && stored == digest {
		return "", nil
	}
	if ok && keep {
		return "", CheckTopology(ctx, st, name, digest)
	}
	if err := st.PutSetting(ctx, TopologyNameKey, name); err != nil {
		return "", fmt.Errorf("record the topology: %w", err)
	}
	if err := st.PutSetting(ctx, TopologyDigestKey, digest); err != nil {
		return "", fmt.Errorf("record the topology: %w", err)
	}
	return stored, nil
}
