package client

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/redfish"
	"rackpool/internal/topology"
)

// TopologyCmd is `rackpool topology`: the service's topology as text, or
// a topology file's, validated locally.
func TopologyCmd() *cobra.Command {
	cf := &Flags{}
	var file string
	cmd := &cobra.Command{
		Use:   "topology [--file FILE] [--json]",
		Short: "show the topology as text (from the server, or a file validated locally)",
		Long:  "Shows the service's topology, or with --file validates a topology file locally and shows it.",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var v *api.TopologyView
			if file != "" {
				top, err := topology.LoadFile(file)
				if err != nil {
					return err
				}
				v = redfish.TopologyView(top)
			} else {
				c, err := cf.Client()
				if err != nil {
					return err
				}
				if v, err = c.Topology(cmd.Context()); err != nil {
					return err
				}
			}
			if cf.JSON {
				return cli.PrintJSON(v)
			}
			printTopology(v)
			return nil
		},
	}
	cf.Register(cmd.Flags())
	cmd.Flags().StringVar(&file, "file", "", "validate and show this topology file instead of asking the server")
	return cmd
}

func printTopology(v *api.TopologyView) {
	w := os.Stdout
	fmt.Fprintf(w, "%s: %d hosts, %d fabrics\n\n", v.Name, len(v.Hosts), len(v.Fabrics))
	fmt.Fprintln(w, "hosts")
	for _, h := range v.Hosts {
		var ports []string
		for _, p := range h.Ports {
			ports = append(ports, fmt.Sprintf("%s→%s:%s/%s", p.ID, p.Fabric, p.Switch, p.Port))
		}
		fmt.Fprintf(w, "  %-10s %-8s %3d cores %5d GiB   %s\n", h.ID, h.Rack, h.Cores, h.MemoryGiB, strings.Join(ports, "  "))
	}
	for _, f := range v.Fabrics {
		fmt.Fprintf(w, "\n%s (%s, reconfiguration %.3g ms)\n", f.ID, f.Kind, f.ReconfigurationMs)
		for _, s := range f.Switches {
			fmt.Fprintf(w, "  switch %s: %d ports, %.0f ns port to port\n", s.ID, s.Ports, s.LatencyNs)
		}
		drawers := map[string][]api.DeviceView{}
		var loose []api.DeviceView
		for _, d := range f.Devices {
			if d.Drawer != "" {
				drawers[d.Drawer] = append(drawers[d.Drawer], d)
			} else {
				loose = append(loose, d)
			}
		}
		for _, dr := range f.Drawers {
			fmt.Fprintf(w, "  drawer %s: %s, host ports %s\n", dr.ID, dr.Mode, strings.Join(dr.HostPorts, ","))
			for _, d := range drawers[dr.ID] {
				fmt.Fprintf(w, "    slot %-2d %-6s %-6s %-12s %s\n", d.Slot, d.ID, d.Kind, d.Model, cli.Human(d.CapacityBytes))
			}
		}
		for _, d := range groupDevices(loose) {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
	if len(v.Zones) > 0 {
		fmt.Fprintln(w, "\nzones")
		for _, z := range v.Zones {
			fmt.Fprintf(w, "  %s: hosts %s; devices %s\n", z.ID, strings.Join(z.Hosts, ","), strings.Join(z.Devices, ","))
		}
	}
}

// groupDevices folds runs of alike devices into one line.
func groupDevices(ds []api.DeviceView) []string {
	var out []string
	for i := 0; i < len(ds); {
		j := i
		for j+1 < len(ds) && ds[j+1].Kind == ds[i].Kind && ds[j+1].Model == ds[i].Model && ds[j+1].CapacityBytes == ds[i].CapacityBytes && ds[j+1].Switch == ds[i].Switch {
			j++
		}
		d := ds[i]
		line := fmt.Sprintf("%-6s %-14s %-12s %-8s switch %s port %s", d.Kind, d.ID, d.Model, cli.Human(d.CapacityBytes), d.Switch, strings.Join(d.Ports, ","))
		if j > i {
			line = fmt.Sprintf("%-6s %-14s %-12s %-8s switch %s ports %s..%s (%d devices)", d.Kind, d.ID+".."+ds[j].ID, d.Model, cli.Human(d.CapacityBytes), d.Switch, d.Ports[0], ds[j].Ports[len(ds[j].Ports)-1], j-i+1)
		}
		if d.Blocks > 1 {
			line += fmt.Sprintf(", %d blocks", d.Blocks)
		}
		out = append(out, line)
		i = j + 1
	}
	return out
}
