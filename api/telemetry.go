package api

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// Usage telemetry (docs/telemetry.md): what composed hosts, memory leases
// and caches really use, pushed by rackpool agent and rackpool cache, read
// back as Redfish MetricReports or one series at a time.

// MaxUsageSamples is the most samples one push may carry.
const MaxUsageSamples = 4096

// UsageSample is one value of one metric.
type UsageSample struct {
	MetricId  string
	Timestamp time.Time
	Value     float64
}

// usagePush is the body of a SubmitUsage action.
type usagePush struct {
	Samples []UsageSample
}

const (
	systemsPath   = "/redfish/v1/Systems"
	telemetryPath = "/redfish/v1/TelemetryService"
)

// SubmitSystemUsage pushes samples of what system uses (an agent on the
// composed host; metric names in docs/telemetry.md). The push is stored
// whole or not at all; samples it repeats exactly (a retry) are skipped.
func (c *Client) SubmitSystemUsage(ctx context.Context, system string, samples []UsageSample) error {
	_, err := c.Do(ctx, "POST", systemsPath+"/"+url.PathEscape(system)+"/Actions/Oem/Rackpool.SubmitUsage", usagePush{Samples: samples}, nil)
	return err
}

// SubmitLeaseUsage pushes samples of how the holder of lease uses it (a
// cache's remote tier: telemetry kind Cache).
func (c *Client) SubmitLeaseUsage(ctx context.Context, lease string, samples []UsageSample) error {
	_, err := c.Do(ctx, "POST", memoryLeasesPath+"/"+url.PathEscape(lease)+"/Actions/Oem/Rackpool.SubmitUsage", usagePush{Samples: samples}, nil)
	return err
}

// LeaseUsage is a memnode's report of one lease in its heartbeat.
type LeaseUsage struct {
	Lease      string
	BytesInUse uint64
}

// MetricValue is one value of a MetricReport.
type MetricValue struct {
	MetricId       string
	MetricProperty string // the source's @odata.id
	MetricValue    string
	Timestamp      time.Time
}

// MetricReport is the newest value of every series of one kind the
// account may see.
type MetricReport struct {
	ID           string `json:"Id"`
	Timestamp    time.Time
	MetricValues []MetricValue
}

// MetricReport reads report id: SystemUsage, MemoryLeaseUsage or
// CacheUsage.
func (c *Client) MetricReport(ctx context.Context, id string) (*MetricReport, error) {
	var m MetricReport
	if _, err := c.Do(ctx, "GET", telemetryPath+"/MetricReports/"+url.PathEscape(id), nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// UsageSeries is a window of one series.
type UsageSeries struct {
	ID       string `json:"Id"`
	Kind     string
	Source   Ref
	MetricId string
	Units    string
	Samples  []UsageSample
}

// UsageSeries reads the samples of one series since a time (zero: all
// that are retained), at most limit of the newest (0: no limit). kind is
// System, MemoryLease or Cache.
func (c *Client) UsageSeries(ctx context.Context, kind, source, metric string, since time.Time, limit int) (*UsageSeries, error) {
	q := url.Values{}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := telemetryPath + "/Oem/Rackpool/Series/" + url.PathEscape(kind) + "/" + url.PathEscape(source) + "/" + url.PathEscape(metric)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var s UsageSeries
	if _, err := c.Do(ctx, "GET", path, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
