// Package api is the Go client of rackpool's Redfish API, with the wire
// types the CLI needs. Inside the project it depends only on
// internal/jsonlimit, which depends on nothing, so other programs can
// import it.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"rackpool/internal/jsonlimit"
)

// Client talks to one rackpool service.
type Client struct {
	URL      string // e.g. https://127.0.0.1:8080
	User     string
	Password string
	HTTP     *http.Client
}

// New returns a client using HTTP Basic authentication. It trusts the
// system's roots and the CA file CAFile names ($RACKPOOL_CA_FILE, or the
// service's CA in ./data/tls); a CA file that cannot be read makes every
// request fail with the reason. Set HTTP (see HTTPClient) to trust
// another CA.
func New(url, user, password string) *Client {
	hc, err := HTTPClient(CAFile())
	if err != nil {
		hc = &http.Client{Transport: failing{err}}
	}
	return &Client{URL: strings.TrimRight(url, "/"), User: user, Password: password, HTTP: hc}
}

// Error is a Redfish error response.
type Error struct {
	Status     int
	MessageID  string
	Message    string
	Resolution string
	Oem        json.RawMessage // Oem.Rackpool of the first message, if any
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.MessageID)
	if e.Resolution != "" {
		msg += ": " + e.Resolution
	}
	return msg
}

// Do sends a request with a JSON body (nil for none) and decodes a JSON
// answer into out (nil to discard). It returns the response headers. A 202
// Accepted with a task monitor (long compositions run as Redfish tasks) is
// followed until the task finishes, and its final response is the answer.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) (http.Header, error) {
	h, status, data, err := c.send(ctx, method, path, body)
	for err == nil && status == http.StatusAccepted && h.Get("Location") != "" {
		monitor := h.Get("Location")
		wait := time.Second
		if s, perr := strconv.Atoi(h.Get("Retry-After")); perr == nil && s >= 0 {
			wait = min(time.Duration(s)*time.Second, 10*time.Second)
		}
		select {
		case <-ctx.Done():
			return h, fmt.Errorf("waiting for task %s: %w", monitor, ctx.Err())
		case <-time.After(min(wait, 250*time.Millisecond)):
		}
		h, status, data, err = c.send(ctx, http.MethodGet, monitor, nil)
	}
	if err != nil {
		return h, err
	}
	if status >= 400 {
		return h, parseError(status, data)
	}
	if out != nil && len(data) > 0 {
		if err := jsonlimit.Check(data, jsonlimit.MaxDepth); err != nil {
			return h, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
		if err := json.Unmarshal(data, out); err != nil {
			return h, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return h, nil
}

// send makes one request and reads the whole answer.
func (c *Client) send(ctx context.Context, method, path string, body any) (http.Header, int, []byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, 0, nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, rd)
	if err != nil {
		return nil, 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.URL.Scheme != "https" {
		return nil, 0, nil, fmt.Errorf("refusing to send credentials to %s over plain %s: use an https:// URL (rackpool serve speaks HTTPS by default)",
			req.URL.Host, req.URL.Scheme)
	}
	req.SetBasicAuth(c.User, c.Password)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, 0, nil, err
	}
	return resp.Header, resp.StatusCode, data, nil
}

func parseError(status int, data []byte) error {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Info    []struct {
				MessageID  string          `json:"MessageId"`
				Message    string          `json:"Message"`
				Resolution string          `json:"Resolution"`
				Oem        json.RawMessage `json:"Oem"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	e := &Error{Status: status}
	if jsonlimit.Check(data, jsonlimit.MaxDepth) != nil || json.Unmarshal(data, &body) != nil || body.Error.Code == "" {
		e.Message = strings.TrimSpace(string(data))
		if e.Message == "" {
			e.Message = http.StatusText(status)
		}
		return e
	}
	e.MessageID, e.Message = body.Error.Code, body.Error.Message
	if len(body.Error.Info) > 0 {
		i := body.Error.Info[0]
		e.Resolution = i.Resolution
		var oem struct{ Rackpool json.RawMessage }
		if json.Unmarshal(i.Oem, &oem) == nil {
			e.Oem = oem.Rackpool
		}
	}
	return e
}

// Ref is a Redfish link.
type Ref struct {
	ID string `json:"@odata.id"`
}

// Last returns the last path segment of the link (the resource's Id).
func (r Ref) Last() string { return r.ID[strings.LastIndex(r.ID, "/")+1:] }

// Collection is a Redfish collection.
type Collection struct {
	Members []Ref
}

// Block is a resource block as the API shows it.
type Block struct {
	ID                string `json:"Id"`
	ResourceBlockType []string
	Status            struct{ State, Health string }
	CompositionStatus struct {
		CompositionState     string
		SharingCapable       bool
		MaxCompositions      int
		NumberOfCompositions int
	}
	Links struct {
		ComputerSystems []Ref
	}
	Oem struct {
		Rackpool struct {
			Kind, Model, Fabric, Drawer, Device string
			// HeldBy names the holder of an Unavailable block outside
			// compositions (leases-NODE: the memory leases of a node).
			HeldBy                string
			CapacityBytes         int64
			Slot                  int
			Cores, LocalMemoryGiB int
		}
	}
}

// System is a composed (or physical) system.
type System struct {
	ID            string `json:"Id"`
	Name          string
	SystemType    string
	Description   string
	Status        struct{ State, Health string }
	Links         struct{ ResourceBlocks []Ref }
	MemorySummary struct {
		TotalSystemMemoryGiB float64
	}
	Oem struct {
		Rackpool struct {
			CompositionState string
			Version          int64
			Host             string
			Blocks           []struct {
				ID          string `json:"Id"`
				Kind        string
				HostPort    string
				Fabric      string
				RoundTripNs float64
				Hops        int
			}
			Created string
		}
	}
}

// Zone is a resource zone.
type Zone struct {
	ID          string `json:"Id"`
	Description string
	Links       struct{ ResourceBlocks []Ref }
}

// Need asks for blocks of one kind (Oem.Rackpool form).
type Need struct {
	Kind         string
	Count        int               `json:",omitempty"`
	Capacity     string            `json:",omitempty"`
	Model        string            `json:",omitempty"`
	Attributes   map[string]string `json:",omitempty"`
	MaxLatencyNS float64           `json:",omitempty"`
}

// ComposeRequest is what Compose and Explain send.
type ComposeRequest struct {
	Name         string
	Host         string
	Zone         string
	Affinity     string
	MinCores     int
	MinMemoryGiB int
	Blocks       []string // specific resource block IDs
	Needs        []Need
}

func (r ComposeRequest) body() map[string]any {
	links := []Ref{}
	for _, b := range r.Blocks {
		links = append(links, Ref{ID: "/redfish/v1/CompositionService/ResourceBlocks/" + b})
	}
	body := map[string]any{"Links": map[string]any{"ResourceBlocks": links}}
	if r.Name != "" {
		body["Name"] = r.Name
	}
	oem := map[string]any{}
	if r.Host != "" {
		oem["Host"] = r.Host
	}
	if r.Zone != "" {
		oem["Zone"] = r.Zone
	}
	if r.Affinity != "" {
		oem["Affinity"] = r.Affinity
	}
	if r.MinCores > 0 {
		oem["MinCores"] = r.MinCores
	}
	if r.MinMemoryGiB > 0 {
		oem["MinMemoryGiB"] = r.MinMemoryGiB
	}
	if len(r.Needs) > 0 {
		oem["Needs"] = r.Needs
	}
	if len(oem) > 0 {
		body["Oem"] = map[string]any{"Rackpool": oem}
	}
	return body
}

// Compose creates a composed system.
func (c *Client) Compose(ctx context.Context, r ComposeRequest) (*System, error) {
	var s System
	_, err := c.Do(ctx, "POST", "/redfish/v1/Systems", r.body(), &s)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// Stanza is one change of a manifest for ApplyManifest: Compose or
// Decompose.
type Stanza struct {
	// ID is the StanzaId; a composed system is named after it.
	ID        string
	Compose   *ComposeRequest
	Decompose string // the ID of a system to tear down
}

// ApplyManifest runs the CompositionService Compose action (RequestType
// Apply): every stanza is applied or none is. It returns the composed
// systems in stanza order.
func (c *Client) ApplyManifest(ctx context.Context, stanzas []Stanza) ([]System, error) {
	type stanza struct {
		StanzaType string
		StanzaId   string
		Request    any
	}
	var body struct {
		RequestFormat, RequestType string
		Manifest                   struct{ Stanzas []stanza }
	}
	body.RequestFormat, body.RequestType = "Manifest", "Apply"
	for _, st := range stanzas {
		switch {
		case st.Compose != nil:
			req := st.Compose.body()
			if _, ok := req["Name"]; !ok {
				req["Name"] = st.ID
			}
			body.Manifest.Stanzas = append(body.Manifest.Stanzas, stanza{"ComposeSystem", st.ID, req})
		default:
			body.Manifest.Stanzas = append(body.Manifest.Stanzas, stanza{"DecomposeSystem", st.ID,
				map[string]string{"@odata.id": "/redfish/v1/Systems/" + st.Decompose}})
		}
	}
	var out struct {
		Manifest struct {
			Stanzas []struct {
				StanzaType string
				Response   *System
			}
		}
	}
	if _, err := c.Do(ctx, "POST", "/redfish/v1/CompositionService/Actions/CompositionService.Compose", body, &out); err != nil {
		return nil, err
	}
	var systems []System
	for _, st := range out.Manifest.Stanzas {
		if st.StanzaType == "ComposeSystem" && st.Response != nil {
			systems = append(systems, *st.Response)
		}
	}
	return systems, nil
}

// Explanation is the answer of Explain.
type Explanation struct {
	Fits   bool
	Host   string
	Reason string
	Blocks []struct {
		ID          string `json:"Id"`
		Kind        string
		HostPort    string
		RoundTripNs float64
		Hops        int
	}
	TotalRoundTripNs float64
	Details          struct {
		CanNeverFit bool
		Rejections  []struct {
			Host, Block, Reason, Detail string
			Need                        int
		}
	}
}

// Explain asks whether a request fits, without composing.
func (c *Client) Explain(ctx context.Context, r ComposeRequest) (*Explanation, error) {
	var e Explanation
	_, err := c.Do(ctx, "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.Explain", r.body(), &e)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// Decompose deletes a composed system.
func (c *Client) Decompose(ctx context.Context, id string) error {
	_, err := c.Do(ctx, "DELETE", "/redfish/v1/Systems/"+id, nil, nil)
	return err
}

// Expand adds blocks (specific or by need) and removes blocks.
func (c *Client) Expand(ctx context.Context, id string, add []string, needs []Need, remove []string) (*System, error) {
	body := map[string]any{}
	if len(add) > 0 {
		body["Blocks"] = add
	}
	if len(needs) > 0 {
		body["Needs"] = needs
	}
	if len(remove) > 0 {
		body["Remove"] = remove
	}
	var s System
	if _, err := c.Do(ctx, "POST", "/redfish/v1/Systems/"+id+"/Actions/Oem/Rackpool.Expand", body, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// System fetches one system.
func (c *Client) System(ctx context.Context, id string) (*System, error) {
	var s System
	if _, err := c.Do(ctx, "GET", "/redfish/v1/Systems/"+id, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// fetchAll returns every member of a collection, in order. It reads the
// collection a page at a time with the members inlined ($expand, $top),
// so a pod's 245,760 resource blocks take a few hundred requests, not one
// per block; a member the service left as a reference (it inlines at most
// a few MB per response) is fetched on its own, 8 at a time.
func fetchAll[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	var out []T
	var refs []int // members left as references, by index in out
	var refIDs []string
	next := path + "?$expand=.&$top=" + strconv.Itoa(pageSize)
	for next != "" {
		var page struct {
			Members  []json.RawMessage
			NextLink string `json:"Members@odata.nextLink"`
		}
		if _, err := c.Do(ctx, "GET", next, nil, &page); err != nil {
			return nil, err
		}
		for _, m := range page.Members {
			var probe map[string]json.RawMessage
			if err := json.Unmarshal(m, &probe); err != nil {
				return nil, fmt.Errorf("%s: member %d: %w", path, len(out), err)
			}
			var v T
			if id, ok := probe["@odata.id"]; ok && len(probe) == 1 {
				var ref string
				_ = json.Unmarshal(id, &ref)
				refs, refIDs = append(refs, len(out)), append(refIDs, ref)
			} else if err := json.Unmarshal(m, &v); err != nil {
				return nil, fmt.Errorf("%s: member %d: %w", path, len(out), err)
			}
			out = append(out, v)
		}
		if page.NextLink != "" && len(page.Members) == 0 {
			return nil, fmt.Errorf("%s: empty page with a next link %s", path, page.NextLink)
		}
		next = page.NextLink
	}
	errs := make([]error, len(refs))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for k, i := range refs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, errs[k] = c.Do(ctx, "GET", refIDs[k], nil, &out[i])
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// pageSize is how many members fetchAll asks for per page.
const pageSize = 1000

// Systems lists composed and physical systems.
func (c *Client) Systems(ctx context.Context) ([]System, error) {
	return fetchAll[System](ctx, c, "/redfish/v1/Systems")
}

// Blocks lists every resource block.
func (c *Client) Blocks(ctx context.Context) ([]Block, error) {
	return fetchAll[Block](ctx, c, "/redfish/v1/CompositionService/ResourceBlocks")
}

// Zones lists every resource zone.
func (c *Client) Zones(ctx context.Context) ([]Zone, error) {
	return fetchAll[Zone](ctx, c, "/redfish/v1/CompositionService/ResourceZones")
}

// Topology fetches the topology document.
func (c *Client) Topology(ctx context.Context) (*TopologyView, error) {
	var v TopologyView
	_, err := c.Do(ctx, "GET", "/redfish/v1/Oem/Rackpool/Topology", nil, &v)
	return &v, err
}

// TopologyView is the body of GET /redfish/v1/Oem/Rackpool/Topology: the
// whole shape of the rack in one document, for the CLI's topology view.
type TopologyView struct {
	ODataID   string `json:"@odata.id,omitempty"`
	ODataType string `json:"@odata.type,omitempty"`
	Name      string
	Hosts     []HostView
	Fabrics   []FabricView
	Zones     []ZoneView
}

// HostView is one host.
type HostView struct {
	ID, Rack  string
	Cores     int
	MemoryGiB int
	Ports     []PortView
}

// PortView is one host port.
type PortView struct {
	ID, Fabric, Switch, Port string
	Metres                   float64
}

// FabricView is one fabric.
type FabricView struct {
	ID, Kind          string
	ReconfigurationMs float64
	Switches          []SwitchView
	Drawers           []DrawerView `json:",omitempty"`
	Devices           []DeviceView
}

// SwitchView is one switch.
type SwitchView struct {
	ID        string
	Ports     int
	LatencyNs float64
}

// DrawerView is one chassis drawer.
type DrawerView struct {
	ID, Mode  string
	Slots     int
	HostPorts []string
}

// DeviceView is one device.
type DeviceView struct {
	ID, Kind, Model, Switch string
	Ports                   []string
	Drawer                  string `json:",omitempty"`
	Slot                    int    `json:",omitempty"`
	CapacityBytes           int64
	Blocks                  int
}

// ZoneView is one topology zone.
type ZoneView struct {
	ID      string
	Hosts   []string
	Devices []string
}
