package metrics

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Merged serves the exposition of regs with every sample labelled
// label=value (an active replica's own: replica="3f9a1c02de"), together
// with others: expositions in the text format that other processes served
// (the other replicas' own, which they labelled themselves), as one
// exposition in whichever format the scraper negotiates. With no others it
// is regs' exposition, labelled.
//
// A family of others whose help differs from regs' takes regs' help (two
// versions side by side during an upgrade). A sample that repeats one
// already gathered, or a family of two types, fails the scrape (500), as
// an inconsistent collector does in Handler. An exposition of others that
// does not parse is an error.
func Merged(label, value string, regs []*Registry, others [][]byte) (http.Handler, error) {
	var parsed []map[string]*dto.MetricFamily
	for i, o := range others {
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(bytes.NewReader(o))
		if err != nil {
			return nil, fmt.Errorf("exposition %d of %d: %w", i+1, len(others), err)
		}
		parsed = append(parsed, mfs)
	}
	local := make(prometheus.Gatherers, len(regs))
	for i, r := range regs {
		local[i] = r.reg
	}
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := local.Gather()
		if err != nil {
			return nil, err
		}
		help := make(map[string]string, len(mfs))
		for _, mf := range mfs {
			help[mf.GetName()] = mf.GetHelp()
			for _, m := range mf.Metric {
				m.Label = withLabel(m.Label, label, value)
			}
		}
		all := prometheus.Gatherers{gathered(mfs)}
		for _, p := range parsed {
			fams := make([]*dto.MetricFamily, 0, len(p))
			for name, mf := range p {
				if h, ok := help[name]; ok && h != mf.GetHelp() {
					mf.Help = &h
				}
				fams = append(fams, mf)
			}
			all = append(all, gathered(fams))
		}
		return all.Gather()
	})
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{}), nil
}

// gathered is a Gatherer of families gathered already.
func gathered(mfs []*dto.MetricFamily) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, nil })
}

// withLabel returns labels with name=value among them, in name order (a
// label of that name already there takes the value).
func withLabel(labels []*dto.LabelPair, name, value string) []*dto.LabelPair {
	out := slices.DeleteFunc(slices.Clone(labels), func(l *dto.LabelPair) bool { return l.GetName() == name })
	out = append(out, &dto.LabelPair{Name: &name, Value: &value})
	slices.SortFunc(out, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}
